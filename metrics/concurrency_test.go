package metrics_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/metrics"
	"github.com/colly-polite/polite/testserver"
)

// Scrapes, reports and snapshots run while two processes' frontiers crawl
// three throttling hosts through one shared Store, with the decision log
// at Debug: every path that changes a scope (claims, sends, records, the
// fleet's pauses and law) runs beside every path that reads one. Run
// under -race, this is the check that they share no unguarded state. At
// the end the counts agree with the server's.
func TestScrapeDuringFrontierCrawl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		for _, h := range []string{"a.test", "b.test", "c.test"} {
			hosts[h] = testserver.Policy{
				Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 5, Window: time.Second},
				Latency: testserver.Latency{Base: 30 * time.Millisecond},
				Excess:  testserver.Excess{FixedRetryAfter: time.Second},
			}
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		store := &fleet.MemoryStore{}
		debug := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var ctrls []*polite.Controller
		var crawls sync.WaitGroup
		for i := range 2 {
			c := colly.NewCollector(colly.AllowURLRevisit())
			c.WithTransport(srv.Transport())
			ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Store: store, Logger: debug, JitterSeed: uint64(i + 1)})
			require.NoError(t, ctrl.Err())
			ctrls = append(ctrls, ctrl)
			q, err := frontier.New(ctrl, frontier.Config{Threads: 6})
			require.NoError(t, err)
			for p := range 40 {
				for h := range hosts {
					require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(h), 100*i+p)))
				}
			}
			crawls.Go(func() { assert.NoError(t, q.Run(c)) })
		}
		done := make(chan struct{})
		var scrapes sync.WaitGroup
		for _, ctrl := range ctrls {
			reg := prometheus.NewRegistry()
			reg.MustRegister(metrics.New(ctrl))
			scrapes.Go(func() {
				for {
					select {
					case <-done:
						return
					case <-time.After(50 * time.Millisecond):
					}
					_, err := reg.Gather()
					assert.NoError(t, err)
					_ = ctrl.Report()
					_ = ctrl.Report().Scopes
				}
			})
		}
		crawls.Wait()
		close(done)
		scrapes.Wait()

		var sent, recorded, accepted uint64
		for h := range hosts {
			st := srv.Stats(h)
			sent += uint64(st.Requests)
			accepted += uint64(len(st.Accepted))
		}
		var ok uint64
		for _, ctrl := range ctrls {
			r := ctrl.Report()
			for _, s := range r.Scopes {
				assert.Zero(t, s.InFlight, s.Scope)
				for _, n := range s.Statuses {
					recorded += n
				}
				ok += s.Counts[classify.Success]
			}
			require.NoError(t, ctrl.Close())
		}
		t.Logf("%d sent, %d recorded, %d accepted", sent, recorded, accepted)
		assert.Equal(t, sent, recorded, "every response counted once")
		assert.Equal(t, accepted, ok)
	})
}
