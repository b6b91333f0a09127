package metrics_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/colly-polite/polite"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/metrics"
)

// fastController never makes a request wait, so that thousands of scopes
// can be driven in a loop.
func fastController(t testing.TB, cfg ...polite.Config) *polite.Controller {
	t.Helper()
	var c polite.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Default = polite.Rule{InitialRate: 1e9, StartConcurrency: 1 << 20, MaxConcurrency: 1 << 20}
	ctrl, err := polite.New(c)
	require.NoError(t, err)
	return ctrl
}

// scrape gathers c through a pedantic registry (which checks every
// metric against its description) and returns each series by name and
// labels: `name{k="v",...}`.
func scrape(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// scopeLabels are the distinct values of the scope label in a scrape.
func scopeLabels(s map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range s {
		if i := strings.Index(k, `scope="`); i >= 0 {
			v := k[i+len(`scope="`):]
			out[v[:strings.IndexByte(v, '"')]] = true
		}
	}
	return out
}

// total sums the series of one metric over every label.
func total(s map[string]float64, name string) float64 {
	var n float64
	for k, v := range s {
		if strings.HasPrefix(k, name+"{") {
			n += v
		}
	}
	return n
}

// visit sends n requests with status 200 to host.
func visit(t *testing.T, ctrl *polite.Controller, host string, n int) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+host+"/", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	for range n {
		p, err := ctrl.Acquire(context.Background(), req)
		require.NoError(t, err)
		p.Record(resp, nil)
	}
}

// 10,000 scopes, about half of them over the traffic threshold: only the
// first 50 get a label, the rest are one "other"; when every scope is
// evicted, the labels go, "other" takes their counts whole, no counter goes
// down, and the freed labels go to new scopes.
func TestCardinalityBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl := fastController(t, polite.Config{IdleTTL: time.Minute})
		c := metrics.New(ctrl, metrics.WithMaxScopes(50), metrics.WithMinRequests(10))
		sent := 0
		for i := range 10_000 {
			n := i%20 + 1 // 1..20 requests
			visit(t, ctrl, "h"+strconv.Itoa(i)+".test", n)
			sent += n
		}
		first := scrape(t, c)
		labels := scopeLabels(first)
		assert.Len(t, labels, 51, "50 scopes of their own and other")
		assert.True(t, labels["other"])
		assert.Equal(t, float64(sent), total(first, "colly_polite_requests_total"), "every request counted once")
		assert.Equal(t, float64(sent), total(first, "colly_polite_responses_total"))
		assert.Less(t, len(first), 51*16, "series bounded by the labels, not the scopes")

		// two idle minutes, then one request elsewhere sweeps them all out
		time.Sleep(2 * time.Minute)
		visit(t, ctrl, "late.test", 1)
		second := scrape(t, c)
		assert.Equal(t, map[string]bool{"other": true}, scopeLabels(second), "evicted scopes lose their labels")
		assert.Equal(t, float64(sent+1), total(second, "colly_polite_requests_total"))
		assert.Equal(t, float64(10_000), second["colly_polite_scopes_evicted_total{}"])
		for k, v := range first {
			if strings.Contains(k, "_total{") && strings.Contains(k, `scope="other"`) {
				assert.GreaterOrEqual(t, second[k], v, "%s went down", k)
			}
		}

		// the freed labels go to the next scopes to reach the threshold
		time.Sleep(time.Second)
		for i := range 60 {
			visit(t, ctrl, "n"+strconv.Itoa(i)+".test", 10)
		}
		third := scrape(t, c)
		assert.Len(t, scopeLabels(third), 51)
		assert.Equal(t, float64(sent+1+600), total(third, "colly_polite_requests_total"))
		assert.Equal(t, float64(10), third[`colly_polite_requests_total{class="success",scope="n0.test"}`],
			"a scope first seen by this scrape keeps all it counted")
		for k, v := range second {
			if strings.Contains(k, "_total{") {
				assert.GreaterOrEqual(t, third[k], v, "%s went down", k)
			}
		}
	})
}

// A scope that an earlier scrape counted in "other" leaves there all it
// counted before the scrape that labels it: its own counter starts then.
func TestLabelAfterEarlierScrape(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl := fastController(t)
		c := metrics.New(ctrl, metrics.WithMinRequests(10))
		visit(t, ctrl, "a.test", 5)
		first := scrape(t, c)
		assert.Equal(t, float64(5), first[`colly_polite_requests_total{class="success",scope="other"}`])
		time.Sleep(time.Second)
		visit(t, ctrl, "a.test", 7)
		second := scrape(t, c)
		assert.Equal(t, float64(12), second[`colly_polite_requests_total{class="success",scope="other"}`], "other never goes down")
		assert.Equal(t, float64(0), second[`colly_polite_requests_total{class="success",scope="a.test"}`])
		visit(t, ctrl, "a.test", 3)
		third := scrape(t, c)
		assert.Equal(t, float64(12), third[`colly_polite_requests_total{class="success",scope="other"}`])
		assert.Equal(t, float64(3), third[`colly_polite_requests_total{class="success",scope="a.test"}`])
	})
}

// A host named "other" is never labelled: its label would be the fold's.
func TestScopeNamedOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl := fastController(t)
		visit(t, ctrl, "other", 20)
		s := scrape(t, metrics.New(ctrl))
		assert.Equal(t, float64(20), s[`colly_polite_requests_total{class="success",scope="other"}`])
	})
}

// The names, types, units and help texts follow Prometheus conventions
// (promlint), over a controller whose scopes show every kind of series:
// one labelled and paused by Retry-After, one labelled and held at its
// configured ceiling, and others folded.
func TestLint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Default: polite.Rule{Rate: 1}})
		require.NoError(t, err)
		for range 2 {
			send(t, ctrl, "http://a.test/", 200)
			send(t, ctrl, "http://d.test/", 200)
		}
		send(t, ctrl, "http://a.test/", 429, "Retry-After", "10")
		send(t, ctrl, "http://b.test/", 503)
		send(t, ctrl, "http://c.test/", 403)
		c := metrics.New(ctrl, metrics.WithMinRequests(2), metrics.WithConstLabels(prometheus.Labels{"crawler": "test"}))
		problems, err := testutil.CollectAndLint(c)
		require.NoError(t, err)
		assert.Empty(t, problems)
		s := scrape(t, c)
		assert.Equal(t, float64(1), s[`colly_polite_pause_reason{crawler="test",reason="retry-after",scope="a.test"}`])
		assert.Equal(t, float64(1), s[`colly_polite_ceiling_requests_per_second{ceiling="configured",crawler="test",scope="d.test"}`])
		assert.Equal(t, float64(1), s[`colly_polite_pacing_requests_per_second{crawler="test",scope="d.test"}`])
		assert.Equal(t, float64(2), s[`colly_polite_pause_reason{crawler="test",reason="none",scope="other"}`], "b.test and c.test")
	})
}

// Whatever a scope function returns, a scrape works and the application's
// own metrics with it: a key that is not valid UTF-8, or is very long,
// gets a valid label of bounded length; two keys that clean up alike keep
// labels of their own; a key spelled like another's cleaned label is
// folded into "other" rather than duplicate a series. (Twelve requests to
// http://%ff%fe.evil/ under a Config.Scope returning r.URL.Hostname() made
// every Gather fail, "not valid UTF-8", and /metrics answer 500.)
func TestHostileScopeLabels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl := fastController(t, polite.Config{Scope: func(r *http.Request) string { return r.Header.Get("Scope") }})
		as := func(scope string, n int) {
			req, _ := http.NewRequest("GET", "http://a.test/", nil)
			req.Header.Set("Scope", scope)
			for range n {
				p, err := ctrl.Acquire(context.Background(), req)
				require.NoError(t, err)
				p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
			}
		}
		u, err := url.Parse("http://%ff%fe.evil/")
		require.NoError(t, err)
		long := strings.Repeat("é", 5000) + ".test"
		for _, k := range []string{u.Hostname(), "\xff.evil", "\xfe.evil", long} {
			as(k, 12)
		}
		reg := prometheus.NewPedanticRegistry()
		own := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_pages_total", Help: "The application's own."})
		own.Inc()
		reg.MustRegister(metrics.New(ctrl), own)
		labels := func() map[string]bool {
			mfs, err := reg.Gather()
			require.NoError(t, err, "a scrape never fails on a scope's name")
			out := map[string]bool{}
			found := false
			for _, mf := range mfs {
				found = found || mf.GetName() == "app_pages_total"
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "scope" {
							out[l.GetValue()] = true
						}
					}
				}
			}
			assert.True(t, found, "the application's metrics are served too")
			return out
		}
		got := labels()
		assert.Len(t, got, 4, "four labels of their own, and no other (nothing is folded): %q", got)
		var cleaned string
		for l := range got {
			assert.True(t, utf8.ValidString(l))
			assert.LessOrEqual(t, len(l), 128)
			if strings.HasPrefix(l, "\uFFFD.evil~") {
				cleaned = l
			}
		}
		require.NotEmpty(t, cleaned)
		as(cleaned, 12) // a key spelled like a cleaned label
		assert.Len(t, labels(), 5, "folded into other: no duplicate series")
	})
}
