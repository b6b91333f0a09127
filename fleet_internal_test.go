package polite

import (
	"context"
	"math"
	"net/http"
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

// The law's shared state fits Redis's compact hash encoding (values of
// at most 64 bytes, hash-max-listpack-value): at 82 bytes the law's key
// took 392 B of Redis per idle scope instead of 200. It travels through
// the float32s and milliseconds without losing what the law uses.
func TestSharedEncodingCompact(t *testing.T) {
	require.LessOrEqual(t, sharedLen, 64)
	in := law.Shared{Rate: 19.97, Estimate: 20.59, Step: 0.06, DownStep: 0.09, Limit: 13, Top: 24.5, Proven: 19.3,
		Epoch: 7, CEpoch: 2, Phase: law.Probing, NextProbe: 49*time.Second + 500*time.Millisecond, SinceDecrease: -3 * time.Millisecond}
	b := encodeShared(in)
	require.Len(t, b, sharedLen)
	out, ok := decodeShared(b)
	require.True(t, ok)
	assert.Equal(t, in.Rate, out.Rate)
	assert.Equal(t, in.Estimate, out.Estimate)
	assert.Equal(t, in.Top, out.Top)
	assert.Equal(t, in.Proven, out.Proven)
	assert.InDelta(t, in.Step, out.Step, 1e-7)
	assert.InDelta(t, in.DownStep, out.DownStep, 1e-7)
	assert.Equal(t, in.Limit, out.Limit)
	assert.Equal(t, in.Epoch, out.Epoch)
	assert.Equal(t, in.CEpoch, out.CEpoch)
	assert.Equal(t, in.Phase, out.Phase)
	assert.Equal(t, in.NextProbe, out.NextProbe)
	assert.Equal(t, in.SinceDecrease, out.SinceDecrease)
	// a decrease a moment ago is one, not none (0)
	out, ok = decodeShared(encodeShared(law.Shared{SinceDecrease: time.Nanosecond, NextProbe: 300 * time.Microsecond}))
	require.True(t, ok)
	assert.Equal(t, time.Millisecond, out.SinceDecrease)
	assert.Equal(t, time.Millisecond, out.NextProbe)
	// durations saturate rather than wrap
	out, ok = decodeShared(encodeShared(law.Shared{NextProbe: 1000 * time.Hour, SinceDecrease: -1000 * time.Hour}))
	require.True(t, ok)
	assert.Equal(t, time.Duration(math.MaxInt32)*time.Millisecond, out.NextProbe)
	assert.Equal(t, time.Duration(math.MinInt32)*time.Millisecond, out.SinceDecrease)
	// an older version's state is refused, not misread
	old := append([]byte{3}, make([]byte, 81)...)
	_, ok = decodeShared(old)
	assert.False(t, ok)
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

// A decrease the fleet has not seen, because another process committed
// first a state decided before that evidence (a doubling), is not
// dropped, whether the fleet's state comes back with the return that
// carried the decrease (its commit refused) or with another send's lease
// before that return: the throttle is applied to the fleet's state, at the
// fleet's rate, and committed at once on the fleet's version. (Adopted as
// it was, a 429 at 8/s was lost to the doubling to 16 and the fleet's slow
// start went on to 32/s on a window of 5; kept as it was, the cut read the
// capacity from the rate the fleet had left, 3.88/s.)
func TestRefusedDecreaseIsKept(t *testing.T) {
	base := law.Shared{Rate: 8, Estimate: 0, Step: 0.03, DownStep: 0.03, Limit: 4, Epoch: 3, CEpoch: 1, Phase: law.SlowStart}
	doubled := base
	doubled.Rate = 16
	cut := base
	cut.Rate, cut.Estimate, cut.Epoch, cut.Phase = 3.88, 3.88, 4, law.Steady
	last := encodeShared(base)
	assert.True(t, unseenDecrease(cut, last, doubled), "a cut the fleet has not seen")
	assert.True(t, unseenDecrease(cut, nil, doubled), "with no state shared before")
	assert.False(t, unseenDecrease(doubled, last, cut), "an increase refused: the fleet's cut wins")
	same := cut
	same.Rate = 3.5
	assert.False(t, unseenDecrease(cut, last, same), "the same epoch's cut, by another: adopted")
	refusal := base
	refusal.Epoch++ // a lockout's refusal starts an epoch, and cuts nothing
	assert.False(t, unseenDecrease(refusal, last, doubled), "no decrease: the fleet's doubling adopted")

	for _, granted := range []bool{false, true} {
		t.Run(map[bool]string{false: "settled", true: "granted"}[granted], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := NewTransport(tenMillis(new(atomic.Int64)), Config{Store: &fleet.MemoryStore{}, JitterSeed: 1})
				c := tr.Controller()
				req, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
				require.NoError(t, err)
				res, err := tr.RoundTrip(req)
				require.NoError(t, err)
				require.NoError(t, res.Body.Close())
				c.mu.RLock()
				s := c.scopes["a.test"]
				c.mu.RUnlock()
				require.NotNil(t, s)
				s.mu.Lock()
				s.core.adoptShared(0, cut) // the law decided the cut
				sf := s.fleetView()
				// the fleet's state before it, and the cut sent to be
				// committed on it
				sf.version, sf.seed, sf.shared = 7, encodeShared(base), cut
				s.mu.Unlock()
				fs := fleetScope{s: s, c: c, key: "a.test"}
				if granted {
					// another send's lease, before the cut's return
					fs.Granted(encodeShared(doubled), 8, 2, 0, false)
				}
				// the cut's return, refused
				again, version := fs.Settled(fleet.Settlement{State: encodeShared(doubled), Version: 8}, encodeShared(cut))
				require.NotNil(t, again, "committed again at once")
				assert.Equal(t, uint64(8), version, "on the fleet's version")
				kept, _ := decodeShared(again)
				assert.InDelta(t, 16/2*0.97, kept.Rate, 0.01, "slow start's end at the fleet's rate, 16/s")
				assert.Greater(t, kept.Epoch, doubled.Epoch, "a decrease the fleet will see")
				s.mu.Lock()
				rate := s.core.shared(time.Second).Rate
				s.mu.Unlock()
				assert.InDelta(t, 16/2*0.97, rate, 0.01, "the law's own")

				// that commit refused too: another process doubled again
				// within its round trip. The law still holds the
				// decrease, to commit again (fleetclient's put)
				redoubled := doubled
				redoubled.Rate = 32
				again, version = fs.Settled(fleet.Settlement{State: encodeShared(redoubled), Version: 9}, again)
				require.NotNil(t, again, "what the fleet has not seen, still")
				assert.Equal(t, uint64(9), version)
				kept, _ = decodeShared(again)
				assert.Less(t, kept.Rate, redoubled.Rate, "a decrease, not the doubling")
				assert.Greater(t, kept.Epoch, redoubled.Epoch, "a decrease the fleet will see")
				require.NoError(t, c.Close())
			})
		})
	}
}

// panicOnce is a Store whose first Lease panics: a user's Store is the
// user's code.
type panicOnce struct {
	fleet.MemoryStore
	done atomic.Bool
}

func (p *panicOnce) Lease(ctx context.Context, r fleet.LeaseRequest) (fleet.Lease, error) {
	if p.done.CompareAndSwap(false, true) {
		panic("store: boom")
	}
	return p.MemoryStore.Lease(ctx, r)
}

// A Store that panics in a send's lease lets the panic go on to the caller,
// and leaves the scope as it was: the send no longer counted as waiting
// for the fleet (which held the scope open for a frontier's hand-out) nor
// as in flight (a slot short for good), and the next send goes.
func TestStorePanicLeavesTheScopeWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends atomic.Int64
		c, err := New(Config{Store: &panicOnce{}, JitterSeed: 1})
		require.NoError(t, err)
		req := func() *http.Request {
			r, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
			require.NoError(t, err)
			return r
		}
		func() {
			defer func() { assert.Equal(t, "store: boom", recover()) }()
			_, _ = c.Acquire(context.Background(), req())
			t.Error("Acquire returned: the store's panic was lost")
		}()
		c.mu.RLock()
		s := c.scopes["a.test"]
		c.mu.RUnlock()
		require.NotNil(t, s)
		s.mu.Lock()
		atFleet := s.atFleet
		s.mu.Unlock()
		assert.Zero(t, atFleet, "the send still counted as waiting for the fleet")
		snap, ok := c.Snapshot("a.test")
		require.True(t, ok)
		assert.Zero(t, snap.InFlight, "the panicked send's slot still taken")
		p, err := c.Acquire(context.Background(), req())
		require.NoError(t, err)
		resp, err := tenMillis(&sends).RoundTrip(req())
		p.Record(resp, err)
		require.NoError(t, c.Close())
	})
}
