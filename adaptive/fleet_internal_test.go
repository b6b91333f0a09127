package adaptive

import (
	"math"
	"testing"
	"time"

	"github.com/colly-polite/polite/adaptive/internal/law"
)

// A law state read from a shared store (anyone may write there) is refused
// or adopted within bounds: a finite, positive rate, a limit within the
// configured range. Never a panic.
func FuzzDecodeShared(f *testing.F) {
	f.Add(encodeShared(law.Shared{Rate: 20, Estimate: 21, Step: 0.03, DownStep: 0.03, Limit: 8, Epoch: 3, CEpoch: 1, Phase: law.Steady, NextProbe: time.Minute}))
	f.Add(encodeShared(law.Shared{Rate: math.Inf(1), Limit: math.NaN()}))
	f.Add(encodeShared(law.Shared{Rate: 1e308, Estimate: math.Inf(1), Limit: 1e9, Phase: 200, NextProbe: -1}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, ok := decodeShared(b)
		if !ok {
			return
		}
		if b2 := encodeShared(sh); string(b2) != string(b) {
			t.Fatalf("decode is not encode's inverse: %x -> %x", b, b2)
		}
		cfg := &law.Config{InitialRate: 2, MinRate: 0.05, StartConcurrency: 4, MinConcurrency: 1, MaxConcurrency: 64}
		var l law.Law
		l.Init(cfg, 0)
		l.Adopt(time.Second, sh)
		if r := l.Rate(); !(r > 0) || math.IsInf(r, 0) {
			t.Fatalf("rate %v after adopting %+v", r, sh)
		}
		if lim := l.Limit(); !(lim >= 1 && lim <= 64) {
			t.Fatalf("limit %v after adopting %+v", lim, sh)
		}
		if e := l.Estimate(); !(e >= 0) || math.IsInf(e, 0) {
			t.Fatalf("estimate %v after adopting %+v", e, sh)
		}
	})
}
