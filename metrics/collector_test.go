package metrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/metrics"
)

// send acquires a slot for url on ctrl and records a response of status
// with header h (key, value pairs).
func send(t *testing.T, ctrl *polite.Controller, url string, status int, h ...string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	p, err := ctrl.Acquire(context.Background(), req)
	require.NoError(t, err)
	resp := &http.Response{StatusCode: status, Header: http.Header{}, Request: req}
	for i := 0; i+1 < len(h); i += 2 {
		resp.Header.Set(h[i], h[i+1])
	}
	p.Record(resp, nil)
}

// A scripted scope: a configured ceiling of 1 req/s, six responses (three
// 200s, a 404, a 418, a 429 with Retry-After: 2), then the pause runs out.
// With one scope, labelled, there is no "other" series at all: nothing is
// folded into it.
// Everything here is exact in virtual time: the waits (0, 0.99 s, as the
// pacer gives the first send's 10 ms of credit, then 1 s each), the
// counts, the 2 s paused.
func TestCollectScriptedScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Jitter: -1, JitterSeed: 1, Default: polite.Rule{Rate: 1}})
		require.NoError(t, err)
		for range 3 {
			send(t, ctrl, "http://a.test/", 200)
		}
		send(t, ctrl, "http://a.test/missing", 404)
		send(t, ctrl, "http://a.test/teapot", 418)
		send(t, ctrl, "http://a.test/", 429, "Retry-After", "2")
		time.Sleep(3 * time.Second)

		want := `
# HELP colly_polite_requests_total Requests recorded, by outcome class (success, neutral, throttled, blocked, overloaded, transport-failure, canceled).
# TYPE colly_polite_requests_total counter
colly_polite_requests_total{class="neutral",scope="a.test"} 2
colly_polite_requests_total{class="success",scope="a.test"} 3
colly_polite_requests_total{class="throttled",scope="a.test"} 1
# HELP colly_polite_responses_total Responses by status code (the less common codes under "other").
# TYPE colly_polite_responses_total counter
colly_polite_responses_total{code="200",scope="a.test"} 3
colly_polite_responses_total{code="404",scope="a.test"} 1
colly_polite_responses_total{code="429",scope="a.test"} 1
colly_polite_responses_total{code="other",scope="a.test"} 1
# HELP colly_polite_pause_seconds_total Time spent paused (Retry-After, backoff, quota, breaker).
# TYPE colly_polite_pause_seconds_total counter
colly_polite_pause_seconds_total{scope="a.test"} 2
# HELP colly_polite_retries_total Attempts after the first of a request.
# TYPE colly_polite_retries_total counter
colly_polite_retries_total{scope="a.test"} 0
# HELP colly_polite_pause_reason Scopes by why they are paused: retry-after, backoff, quota, breaker, blocked (parked), or none.
# TYPE colly_polite_pause_reason gauge
colly_polite_pause_reason{reason="none",scope="a.test"} 1
# HELP colly_polite_breaker_state Scopes by breaker state: closed, open, half-open.
# TYPE colly_polite_breaker_state gauge
colly_polite_breaker_state{scope="a.test",state="closed"} 1
# HELP colly_polite_in_flight_requests Requests sent and not yet answered.
# TYPE colly_polite_in_flight_requests gauge
colly_polite_in_flight_requests{scope="a.test"} 0
# HELP colly_polite_wait_seconds Polite wait of each granted request, from asking its scope for a slot to getting one.
# TYPE colly_polite_wait_seconds histogram
colly_polite_wait_seconds_bucket{le="0"} 1
colly_polite_wait_seconds_bucket{le="0.001"} 1
colly_polite_wait_seconds_bucket{le="0.01"} 1
colly_polite_wait_seconds_bucket{le="0.05"} 1
colly_polite_wait_seconds_bucket{le="0.1"} 1
colly_polite_wait_seconds_bucket{le="0.25"} 1
colly_polite_wait_seconds_bucket{le="0.5"} 1
colly_polite_wait_seconds_bucket{le="1"} 6
colly_polite_wait_seconds_bucket{le="2.5"} 6
colly_polite_wait_seconds_bucket{le="5"} 6
colly_polite_wait_seconds_bucket{le="10"} 6
colly_polite_wait_seconds_bucket{le="30"} 6
colly_polite_wait_seconds_bucket{le="60"} 6
colly_polite_wait_seconds_bucket{le="120"} 6
colly_polite_wait_seconds_bucket{le="+Inf"} 6
colly_polite_wait_seconds_sum 4.99
colly_polite_wait_seconds_count 6
# HELP colly_polite_scopes Live scopes.
# TYPE colly_polite_scopes gauge
colly_polite_scopes 1
`
		c := metrics.New(ctrl, metrics.WithMinRequests(1))
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
			"colly_polite_requests_total", "colly_polite_responses_total", "colly_polite_pause_seconds_total",
			"colly_polite_retries_total", "colly_polite_pause_reason", "colly_polite_breaker_state",
			"colly_polite_in_flight_requests", "colly_polite_wait_seconds", "colly_polite_scopes"))
	})
}

// With a shared Store, a labelled scope shows the fleet's view: its rate,
// its processes, whether the store answers.
func TestCollectFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		var ctrls []*polite.Controller
		for i := range 2 {
			ctrl, err := polite.New(polite.Config{Store: store, JitterSeed: uint64(i + 1), Default: polite.Rule{Rate: 3}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = ctrl.Close() })
			ctrls = append(ctrls, ctrl)
		}
		for range 6 {
			for _, ctrl := range ctrls {
				send(t, ctrl, "http://a.test/", 200)
			}
		}
		want := `
# HELP colly_polite_fleet_processes With a shared Store: the processes that acquired on the scope lately, this one included.
# TYPE colly_polite_fleet_processes gauge
colly_polite_fleet_processes{scope="a.test"} 2
# HELP colly_polite_fleet_rate_requests_per_second With a shared Store: the fleet's rate on the scope (all processes together), in requests per second; absent for "other" and without a Store.
# TYPE colly_polite_fleet_rate_requests_per_second gauge
colly_polite_fleet_rate_requests_per_second{scope="a.test"} 3
# HELP colly_polite_fleet_shared With a shared Store: 1 while the store answers (the fleet's schedule, law and pauses in force), 0 while this process runs on its share.
# TYPE colly_polite_fleet_shared gauge
colly_polite_fleet_shared{scope="a.test"} 1
`
		require.NoError(t, testutil.CollectAndCompare(metrics.New(ctrls[0], metrics.WithMinRequests(1)), strings.NewReader(want),
			"colly_polite_fleet_processes", "colly_polite_fleet_rate_requests_per_second", "colly_polite_fleet_shared"))
	})
}
