package adaptive_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

// Two collectors (two controllers, as two processes would have) crawl one
// host that announces 3 s pauses. Sharing a Store, neither sends while the
// other's pause is in force; without one, they do.
func TestStoreSharesPauses(t *testing.T) {
	violations := func(store adaptive.Store) (int, int) {
		var v, thr int
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, oneHost(testserver.Policy{
				Limit:   fixedWindow(10),
				Latency: testserver.Latency{Base: 20 * time.Millisecond},
				Excess:  testserver.Excess{FixedRetryAfter: 3 * time.Second},
			}))
			var wg sync.WaitGroup
			for i := 0; i < 2; i++ {
				opts := []adaptive.Option{adaptive.WithRobots(false)}
				if store != nil {
					opts = append(opts, adaptive.WithStore(store))
				}
				c, ctrl := newCollector(t, srv, opts...)
				wg.Add(1)
				go func(c *colly.Collector, start time.Duration) {
					defer wg.Done()
					time.Sleep(start) // the second process joins later
					crawl(t, c, 10, 30*time.Second, srv.HostURL("a.test"))
				}(c, time.Duration(i)*1700*time.Millisecond)
				t.Cleanup(func() { assertIdle(t, ctrl) })
			}
			wg.Wait()
			st := srv.Stats("a.test")
			v, thr = st.PauseViolations, st.ByStatus[429]
		})
		return v, thr
	}
	alone, thrAlone := violations(nil)
	shared, thrShared := violations(&adaptive.MemoryStore{})
	t.Logf("pause violations: %d without a store (%d 429s), %d with one (%d 429s)", alone, thrAlone, shared, thrShared)
	require.Positive(t, thrShared, "the scenario must throttle")
	assert.Positive(t, alone, "without a store the second collector knocks during the first one's pause")
	assert.Zero(t, shared)
}

// sharedPause reads the pause a store holds for scope (with a lease it gives
// back at once).
func sharedPause(t *testing.T, store adaptive.Store, scope string) (time.Duration, adaptive.Reason) {
	t.Helper()
	ctx := context.Background()
	g, err := store.Acquire(ctx, adaptive.Acquisition{Scope: scope, Process: "reader", Rate: 1, LeaseTTL: time.Second})
	require.NoError(t, err)
	if g.Lease != "" {
		_, err = store.Release(ctx, adaptive.Release{Scope: scope, Process: "reader", Lease: g.Lease})
		require.NoError(t, err)
	}
	return g.Paused, g.Reason
}

// MemoryStore: the longest pause wins; the schedule spaces the fleet's
// sends at the rate asked, after a pause; leases bound the fleet's
// concurrency and expire; the law's state is committed only on the version
// it derives from; an empty store takes its clients' state.
func TestMemoryStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m adaptive.MemoryStore
		ctx := context.Background()
		acq := func(scope string, rate float64, limit int) adaptive.Grant {
			g, err := m.Acquire(ctx, adaptive.Acquisition{Scope: scope, Process: "p1", Rate: rate, Limit: limit, LeaseTTL: 10 * time.Second})
			require.NoError(t, err)
			return g
		}
		rel := func(r adaptive.Release) adaptive.Settlement {
			r.Process = "p1"
			st, err := m.Release(ctx, r)
			require.NoError(t, err)
			return st
		}

		st := rel(adaptive.Release{Scope: "a", Pause: time.Minute, Reason: adaptive.ReasonRetryAfter})
		assert.Equal(t, time.Minute, st.Paused)
		st = rel(adaptive.Release{Scope: "a", Pause: time.Second, Reason: adaptive.ReasonBackoff})
		assert.Equal(t, time.Minute, st.Paused, "a shorter pause never shortens one in force")
		assert.Equal(t, adaptive.ReasonRetryAfter, st.Reason)

		// the schedule: 10/s, one slot after the other, a pause first
		g1, g2, g3 := acq("a", 10, 0), acq("a", 10, 0), acq("a", 10, 0)
		assert.Equal(t, []time.Duration{time.Minute, time.Minute + 100*time.Millisecond, time.Minute + 200*time.Millisecond},
			[]time.Duration{g1.Wait, g2.Wait, g3.Wait})
		assert.Equal(t, time.Minute, g1.Paused)
		assert.Equal(t, 1, g1.Live)
		b1 := acq("b", 10, 0)
		assert.Zero(t, b1.Wait, "scopes are independent")

		// leases: a limit of 2
		c1, c2, c3 := acq("c", 100, 2), acq("c", 100, 2), acq("c", 100, 2)
		require.NotEmpty(t, c1.Lease)
		require.NotEmpty(t, c2.Lease)
		assert.Empty(t, c3.Lease, "the fleet's limit is in use")
		assert.Positive(t, c3.Wait)
		rel(adaptive.Release{Scope: "c", Lease: c1.Lease})
		assert.NotEmpty(t, acq("c", 100, 2).Lease, "a lease given back is free")
		time.Sleep(11 * time.Second)
		assert.NotEmpty(t, acq("c", 100, 2).Lease, "leases not renewed expire")

		// the law: seeded by the first client, committed on its version
		g, err := m.Acquire(ctx, adaptive.Acquisition{Scope: "d", Process: "p1", Rate: 1, Seed: []byte("s0"), LeaseTTL: time.Second})
		require.NoError(t, err)
		assert.Nil(t, g.State, "the seed is the caller's own state")
		assert.Equal(t, uint64(1), g.Version)
		g, err = m.Acquire(ctx, adaptive.Acquisition{Scope: "d", Process: "p2", Rate: 1, LeaseTTL: time.Second})
		require.NoError(t, err)
		assert.Equal(t, []byte("s0"), g.State, "another process gets it")
		assert.Equal(t, uint64(1), g.Version)
		assert.Equal(t, 2, g.Live)
		st = rel(adaptive.Release{Scope: "d", State: []byte("s1"), Version: 1})
		assert.True(t, st.Committed)
		assert.Equal(t, uint64(2), st.Version)
		st = rel(adaptive.Release{Scope: "d", State: []byte("s1'"), Version: 1})
		assert.False(t, st.Committed, "derived from a version that is gone")
		assert.Equal(t, []byte("s1"), st.State)
		assert.Equal(t, uint64(2), st.Version)
	})
}
