package tokenbucket_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  tokenbucket.Config
		ok   bool
	}{
		{"minimal", tokenbucket.Config{Rate: 1}, true},
		{"infinite", tokenbucket.Config{Rate: rate.Inf}, true},
		{"all set", tokenbucket.Config{Rate: 5, Burst: 10, IdleTTL: time.Second, MaxKeys: 100}, true},
		{"zero value", tokenbucket.Config{}, false},
		{"negative rate", tokenbucket.Config{Rate: -1}, false},
		{"NaN rate", tokenbucket.Config{Rate: rate.Limit(nan())}, false},
		{"negative burst", tokenbucket.Config{Rate: 1, Burst: -1}, false},
		{"negative TTL", tokenbucket.Config{Rate: 1, IdleTTL: -time.Second}, false},
		{"negative MaxKeys", tokenbucket.Config{Rate: 1, MaxKeys: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tokenbucket.New(tt.cfg)
			if tt.ok {
				require.NoError(t, err)
				require.NotNil(t, r)
				return
			}
			require.ErrorIs(t, err, tokenbucket.ErrInvalidConfig)
			assert.ErrorContains(t, err, "tokenbucket: ")
			assert.Nil(t, r)
		})
	}
}

func nan() float64 { var z float64; return z / z }

func mustNew(t testing.TB, cfg tokenbucket.Config) *tokenbucket.Registry {
	t.Helper()
	r, err := tokenbucket.New(cfg)
	require.NoError(t, err)
	return r
}

func TestRegistryDefaults(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: 3})
	b := r.GetAt("a", at(0))
	assert.Equal(t, rate.Limit(3), b.Rate())
	assert.Equal(t, 1, b.Burst(), "Burst 0 means 1")
	assert.Same(t, b, r.GetAt("a", at(0)))
	assert.Equal(t, 1, r.Len())

	// Idle for just under the default TTL: kept.
	assert.Equal(t, 0, r.EvictAt(at(0).Add(tokenbucket.DefaultIdleTTL-time.Nanosecond)))
	assert.Equal(t, 1, r.EvictAt(at(0).Add(tokenbucket.DefaultIdleTTL)))
	assert.Equal(t, 0, r.Len())
}

func TestRegistryKeysAreIndependent(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: 1, Burst: 2})
	assert.True(t, r.AllowAt("a", at(0)))
	assert.True(t, r.AllowAt("a", at(0)))
	assert.False(t, r.AllowAt("a", at(0)))
	assert.True(t, r.AllowAt("b", at(0)))

	r.SetRateAt("b", at(0), 10, 1)
	assert.Equal(t, rate.Limit(10), r.GetAt("b", at(0)).Rate())
	assert.Equal(t, rate.Limit(1), r.GetAt("a", at(0)).Rate())

	r.DrainAt("c", at(0), at(5000))
	assert.False(t, r.AllowAt("c", at(4999)))
	assert.Equal(t, at(5000), r.GetAt("c", at(0)).DrainedUntil())
	assert.True(t, r.AllowAt("a", at(1000)))

	res := r.ReserveAt("a", at(1000))
	require.True(t, res.OK())
	assert.Equal(t, time.Second, res.DelayFrom(at(1000)))
}

func TestRegistryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, tokenbucket.Config{Rate: 2, IdleTTL: time.Second})
		start := time.Now()
		var wg sync.WaitGroup
		took := make([]time.Duration, 3)
		for i := range took {
			wg.Go(func() {
				assert.NoError(t, r.Wait(context.Background(), "host"))
				took[i] = time.Since(start)
			})
			synctest.Wait()
		}
		wg.Wait()
		assert.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second}, took)

		// A waited-on key is not evicted, however idle it looks.
		r.Drain("host", time.Now().Add(3*time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Wait(ctx, "host") }()
		synctest.Wait()
		time.Sleep(2 * time.Hour)
		r.GetAt("other", time.Now()) // a new key sweeps
		assert.Equal(t, 0, r.Evict())
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		time.Sleep(2 * time.Hour)
		assert.Equal(t, 2, r.Evict())
	})
}

func TestRegistryEviction(t *testing.T) {
	const ttl = time.Minute
	ms := func(d time.Duration) int { return int(d / time.Millisecond) }
	tests := []struct {
		name   string
		setup  func(r *tokenbucket.Registry)
		evict  time.Time
		evicts int
	}{
		{"idle and full", func(r *tokenbucket.Registry) { r.GetAt("k", at(0)) }, at(ms(ttl)), 1},
		{"not yet idle", func(r *tokenbucket.Registry) { r.GetAt("k", at(0)) }, at(ms(ttl) - 1), 0},
		{"touched later", func(r *tokenbucket.Registry) {
			r.GetAt("k", at(0))
			r.AllowAt("k", at(30_000))
		}, at(ms(ttl) + 29_999), 0},
		{"drained past the TTL", func(r *tokenbucket.Registry) {
			r.DrainAt("k", at(0), at(ms(2*ttl)))
		}, at(ms(2*ttl) - 1), 0},
		{"drain over, refilled", func(r *tokenbucket.Registry) {
			r.DrainAt("k", at(0), at(ms(2*ttl)))
		}, at(ms(2*ttl) + 1000), 1},
		{"still refilling", func(r *tokenbucket.Registry) {
			r.SetRateAt("k", at(0), 0.01, 1) // 100s per token
			r.AllowAt("k", at(0))
		}, at(ms(ttl)), 0},
		{"refilled", func(r *tokenbucket.Registry) {
			r.SetRateAt("k", at(0), 0.01, 1)
			r.AllowAt("k", at(0))
		}, at(100_000), 1},
		{"outstanding reservation", func(r *tokenbucket.Registry) {
			r.SetRateAt("k", at(0), 0.001, 1)
			r.ReserveAt("k", at(0))
			r.ReserveAt("k", at(0)) // due at 1000s
		}, at(999_000), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustNew(t, tokenbucket.Config{Rate: 1, IdleTTL: ttl})
			tt.setup(r)
			assert.Equal(t, tt.evicts, r.EvictAt(tt.evict))
			assert.Equal(t, 1-tt.evicts, r.Len())
		})
	}
}

func TestRegistryEvictedKeyStartsAfresh(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: 1, IdleTTL: time.Second})
	b := r.GetAt("k", at(0))
	r.SetRateAt("k", at(0), 100, 7)
	require.Equal(t, 1, r.EvictAt(at(10_000)))
	fresh := r.GetAt("k", at(10_000))
	assert.NotSame(t, b, fresh)
	assert.Equal(t, rate.Limit(1), fresh.Rate(), "a rate from SetRateAt reverts to the default")
	// The old Bucket still works on its own.
	assert.True(t, b.AllowAt(at(10_000)))
}

func TestRegistrySweepsOnInsert(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: 1, IdleTTL: time.Second})
	for i := range 10 {
		r.GetAt(strconv.Itoa(i), at(0))
	}
	// Each new key evicts up to 4 idle ones.
	r.GetAt("x", at(1000))
	assert.Equal(t, 7, r.Len())
	r.GetAt("y", at(1000))
	assert.Equal(t, 4, r.Len())
	r.GetAt("z", at(1000))
	assert.Equal(t, 3, r.Len())
}

func TestRegistryHotKeyDoesNotBlockTheSweep(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: 1000, Burst: 1000, IdleTTL: time.Second})
	r.GetAt("hot", at(0))
	for i := range 100_000 {
		now := at(i)
		r.AllowAt("hot", now)
		r.GetAt(strconv.Itoa(i), now) // one new key per ms, never seen again
		require.LessOrEqual(t, r.Len(), 1000+2+1, "at %dms", i)
	}
}

func TestRegistryMaxKeys(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: 1, MaxKeys: 3})
	r.DrainAt("drained", at(0), at(60_000))
	r.GetAt("a", at(0))
	r.GetAt("b", at(0))
	r.GetAt("c", at(1)) // evicts "a", not the drained key placed before it
	assert.Equal(t, 3, r.Len())
	assert.False(t, r.AllowAt("drained", at(2)), "drain kept")
	r.GetAt("d", at(2))
	assert.Equal(t, 3, r.Len())

	// Nothing but drained keys: the hard bound still holds.
	r = mustNew(t, tokenbucket.Config{Rate: 1, MaxKeys: 2})
	for i := range 10 {
		r.DrainAt(strconv.Itoa(i), at(0), at(60_000))
		assert.LessOrEqual(t, r.Len(), 2)
	}
}

// TestRegistryMillionKeys visits 1,000,000 distinct keys once each, one per
// millisecond, with a one-second IdleTTL: the Registry holds the keys of the
// last second (1,000) and never more than 4/3 of them plus one.
func TestRegistryMillionKeys(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const perTTL = 1000 // keys visited within one IdleTTL
	r := mustNew(t, tokenbucket.Config{Rate: 10, Burst: 5, IdleTTL: perTTL * time.Millisecond})

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	buf := make([]byte, 0, 32)
	maxLen := 0
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "host-"...), int64(i), 10)
		if !r.AllowAt(string(buf), at(i)) {
			t.Fatalf("key %d not allowed", i)
		}
		maxLen = max(maxLen, r.Len())
	}
	assert.LessOrEqual(t, maxLen, perTTL*4/3+1)
	t.Logf("max Len %d over %d keys", maxLen, n)

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d bytes (%d keys held)", grew, r.Len())
	// Generous: 1,000 keys are well under a megabyte; a million would be
	// hundreds of megabytes.
	assert.Less(t, grew, int64(8<<20))
	runtime.KeepAlive(r)
}

func TestRegistryConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, tokenbucket.Config{Rate: 50, Burst: 2, IdleTTL: 100 * time.Millisecond, MaxKeys: 20})
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 200 {
					key := strconv.Itoa((g*7 + i) % 30)
					switch i % 5 {
					case 0:
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						_ = r.Wait(ctx, key)
						cancel()
					case 1:
						r.SetRate(key, rate.Limit(10+i%40), 1+i%3)
					case 2:
						if i%20 == 2 {
							r.Drain(key, time.Now().Add(20*time.Millisecond))
						}
					case 3:
						res := r.Reserve(key)
						if res.Delay() > 10*time.Millisecond {
							res.Cancel()
						}
					default:
						r.Allow(key)
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, r.Len(), 20)
		time.Sleep(time.Minute)
		r.Evict()
		assert.Equal(t, 0, r.Len())
	})
}

// TestRegistryBoundWithHotKeys: 2,000 keys in constant use and a trickle of
// new ones. The sweep re-places each hot key once per IdleTTL; the new keys
// are evicted behind them. Len stays within 4/3 of the keys touched in the
// last two IdleTTLs, plus one.
func TestRegistryBoundWithHotKeys(t *testing.T) {
	const (
		hot   = 2000
		ttlMs = 1000
	)
	r := mustNew(t, tokenbucket.Config{Rate: 1000, Burst: 10, IdleTTL: ttlMs * time.Millisecond})
	hotKeys := benchKeys(hot)
	maxLen, cold := 0, 0
	for ms := range 20 * ttlMs {
		now := at(ms)
		for i := range 20 { // each hot key every 100ms
			r.AllowAt(hotKeys[(ms*20+i)%hot], now)
		}
		if ms%10 == 0 { // a new key every 10ms, never seen again
			r.AllowAt("cold-"+strconv.Itoa(cold), now)
			cold++
		}
		maxLen = max(maxLen, r.Len())
	}
	touchedIn2TTL := hot + 2*ttlMs/10
	t.Logf("max Len %d; keys touched in 2×IdleTTL %d", maxLen, touchedIn2TTL)
	assert.LessOrEqual(t, maxLen, touchedIn2TTL*4/3+1)
}

func TestRegistryEvictAtEdges(t *testing.T) {
	r := mustNew(t, tokenbucket.Config{Rate: rate.Inf, IdleTTL: time.Second})
	assert.Equal(t, 0, r.EvictAt(at(0)), "empty")
	r.AllowAt("k", at(0))
	assert.Equal(t, 1, r.EvictAt(at(1000)), "a rate.Inf bucket is always full")

	// A burst of keys, then all evicted: the map is rebuilt small (memory
	// is given back), and the Registry works on.
	r = mustNew(t, tokenbucket.Config{Rate: 1, IdleTTL: time.Second})
	for i := range 5000 {
		r.GetAt(strconv.Itoa(i), at(0))
	}
	r.GetAt("late", at(500))
	assert.Equal(t, 5000, r.EvictAt(at(1000)))
	assert.Equal(t, 1, r.Len())
	assert.Equal(t, 1, r.EvictAt(at(1500)))
	assert.True(t, r.AllowAt("0", at(2000)))
	assert.Equal(t, 1, r.Len())
}
