package frontiermetrics_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/metrics/frontiermetrics"
	"github.com/colly-polite/polite/testserver"
)

// Before a crawl: the backlog, no rate, no ETA; halfway: a rate and an
// ETA, the slowest scopes labelled (at most the bound); after: every
// request done, nothing left.
func TestCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		cfg := polite.Config{Robots: new(false), JitterSeed: 1}
		for i, h := range []string{"a.test", "b.test", "c.test"} {
			hosts[h] = testserver.Policy{Latency: testserver.Latency{Base: 50 * time.Millisecond}}
			cfg.Rules = append(cfg.Rules, polite.Rule{Domain: h, Rate: float64(2 * (i + 1)), InitialRate: float64(2 * (i + 1))})
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := colly.NewCollector()
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, cfg)
		q, err := frontier.New(ctrl, frontier.Config{Threads: 4})
		require.NoError(t, err)
		for h := range hosts {
			for i := range 20 {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(h), i)))
			}
		}
		col := frontiermetrics.New(q, 2)
		require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(`
# HELP colly_polite_frontier_queued_requests Requests waiting in the queue.
# TYPE colly_polite_frontier_queued_requests gauge
colly_polite_frontier_queued_requests 60
# HELP colly_polite_frontier_done_requests_total Requests ended without an error since the queue was made or opened.
# TYPE colly_polite_frontier_done_requests_total counter
colly_polite_frontier_done_requests_total 0
`), "colly_polite_frontier_queued_requests", "colly_polite_frontier_done_requests_total"))
		assert.Zero(t, testutil.CollectAndCount(col, "colly_polite_frontier_eta_seconds"), "no ETA without a rate")

		done := make(chan error)
		go func() { done <- q.Run(c) }()
		time.Sleep(3 * time.Second)
		assert.Equal(t, 1, testutil.CollectAndCount(col, "colly_polite_frontier_eta_seconds"))
		assert.Equal(t, 2, testutil.CollectAndCount(col, "colly_polite_frontier_scope_eta_seconds"), "the bound")
		p := q.Progress()
		assert.Positive(t, p.Rate)
		assert.Equal(t, "a.test", p.Scopes[0].Scope, "the slowest host finishes last")
		require.NoError(t, <-done)
		require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(`
# HELP colly_polite_frontier_done_requests_total Requests ended without an error since the queue was made or opened.
# TYPE colly_polite_frontier_done_requests_total counter
colly_polite_frontier_done_requests_total 60
# HELP colly_polite_frontier_eta_seconds Until nothing is left if the rates hold: the slowest scope's backlog over its rate, or the backlog over the rate if longer. Absent while a scope with a backlog has no rate yet.
# TYPE colly_polite_frontier_eta_seconds gauge
colly_polite_frontier_eta_seconds 0
`), "colly_polite_frontier_done_requests_total", "colly_polite_frontier_eta_seconds"))
		assert.Zero(t, testutil.CollectAndCount(col, "colly_polite_frontier_scope_queued_requests"))
		problems, err := testutil.CollectAndLint(col)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
}
