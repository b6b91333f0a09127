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
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/testserver"
)

// Two collectors (two controllers, as two processes would have) crawl one
// host that announces 3 s pauses. Sharing a Store, neither sends while the
// other's pause is in force; without one, they do.
func TestStoreSharesPauses(t *testing.T) {
	violations := func(store fleet.Store) (int, int) {
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
	shared, thrShared := violations(&fleet.MemoryStore{})
	t.Logf("pause violations: %d without a store (%d 429s), %d with one (%d 429s)", alone, thrAlone, shared, thrShared)
	require.Positive(t, thrShared, "the scenario must throttle")
	assert.Positive(t, alone, "without a store the second collector knocks during the first one's pause")
	assert.Zero(t, shared)
}

// sharedPause reads the pause a store holds for scope (with a lease it gives
// back at once).
func sharedPause(t *testing.T, store fleet.Store, scope string) (time.Duration, adaptive.PauseReason) {
	t.Helper()
	ctx := context.Background()
	g, err := store.Lease(ctx, fleet.LeaseRequest{Scope: scope, Process: "reader", Rate: 1, TTL: time.Second})
	require.NoError(t, err)
	if g.ID != "" {
		_, err = store.Return(ctx, fleet.Return{Scope: scope, Process: "reader", Lease: g.ID})
		require.NoError(t, err)
	}
	return g.Paused, adaptive.PauseReason(g.Reason)
}
