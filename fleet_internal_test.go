package polite

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/law"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// A law state in the fleet's store is untrusted too: a rate of 1e308
// there is taken as law.MaxRate at most (it gave 3,201 sends a second
// against a 10-ms origin). That the store never raises this process's
// concurrency limit is TestSharedAndAdopt's, in package law.
func TestAbsurdSharedStateBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		evil := encodeShared(law.Shared{Rate: 1e308, Estimate: 1e308, Step: 0.03, DownStep: 0.03, Limit: 1e300, Epoch: 1, CEpoch: 1, Phase: law.Steady})
		_, err := store.Lease(context.Background(), fleet.LeaseRequest{Scope: "a.test", Process: "evil", Rate: 1e6, TTL: time.Minute, Seed: evil})
		require.NoError(t, err)
		var sends atomic.Int64
		tr := NewTransport(tenMillis(&sends), Config{Store: store, JitterSeed: 1})
		n := sendsInFirstSecond(t, tr, &sends)
		s, _ := tr.Controller().Snapshot("a.test")
		t.Logf("%d sends in the first second; rate %.1f, limit %v", n, s.Rate, s.Limit)
		assert.LessOrEqual(t, n, int64(law.MaxRate+1), "a send at either end of the closed second")
		require.NoError(t, tr.Controller().Close())
	})
}
