package polite_test

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/internal/hook"
	"github.com/colly-polite/polite/testserver"
)

// gaps are the times between consecutive accepted requests, sorted.
func gaps(st testserver.Stats) []time.Duration {
	acc := append([]time.Duration(nil), st.Accepted...)
	sort.Slice(acc, func(i, j int) bool { return acc[i] < acc[j] })
	var out []time.Duration
	for i := 1; i < len(acc); i++ {
		out = append(out, acc[i]-acc[i-1])
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// MinGap is a ceiling the adaptive rate never exceeds, kept before the
// send and strictly: no two sends closer, and the scope runs at 1/MinGap
// (Colly's Delay sleeps after the response instead).
func TestMinGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Latency: testserver.Latency{Base: 50 * time.Millisecond}}))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false), Default: polite.Rule{MinGap: 300 * time.Millisecond}})
		crawl(t, c, 8, 30*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		g := gaps(st)
		require.NotEmpty(t, g)
		assert.GreaterOrEqual(t, g[0], 300*time.Millisecond, "the shortest gap")
		assert.GreaterOrEqual(t, len(st.Accepted), 90, "about 1/MinGap: %d in 30 s", len(st.Accepted))
		snap, _ := ctrl.Snapshot("a.test")
		assert.LessOrEqual(t, snap.Rate, 1/0.3)
	})
}

// RandomGap adds a random extra to each gap, drawn per send, never below
// MinGap. (Judged once slow start, from 2/s, has reached the ceiling.)
func TestRandomGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		c, _ := newCollector(t, srv, polite.Config{Robots: new(false), Default: polite.Rule{MinGap: 200 * time.Millisecond, RandomGap: 200 * time.Millisecond}})
		crawl(t, c, 4, 40*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		assert.GreaterOrEqual(t, gaps(st)[0], 200*time.Millisecond, "never below MinGap, slow start included")
		st.Accepted = slices.DeleteFunc(st.Accepted, func(a time.Duration) bool { return a < 10*time.Second })
		g := gaps(st)
		require.Greater(t, len(g), 50)
		var sum time.Duration
		for _, d := range g {
			sum += d
		}
		mean := sum / time.Duration(len(g))
		t.Logf("%d gaps: shortest %v, longest %v, mean %v", len(g), g[0], g[len(g)-1], mean)
		assert.GreaterOrEqual(t, g[0], 200*time.Millisecond, "never below MinGap")
		assert.Less(t, g[len(g)-1], 400*time.Millisecond+time.Millisecond)
		assert.Greater(t, g[len(g)-1]-g[0], 150*time.Millisecond, "spread over the random part")
		assert.InDelta(t, float64(300*time.Millisecond), float64(mean), float64(30*time.Millisecond))
	})
}

// GlobalRate caps all scopes of one controller together, on top of each
// scope's own ceilings.
func TestGlobalRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		for _, h := range testserver.HostNames(4) {
			hosts[h] = testserver.Policy{Latency: testserver.Latency{Base: 20 * time.Millisecond}}
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false), GlobalRate: 10})
		var bases []string
		for h := range hosts {
			bases = append(bases, srv.HostURL(h))
		}
		crawl(t, c, 16, 20*time.Second, bases...)
		var all []time.Duration
		for h := range hosts {
			st := srv.Stats(h)
			assert.Greater(t, len(st.Accepted), 20, "every host gets its share: %s", h)
			all = append(all, st.Accepted...)
		}
		perSecond := map[time.Duration]int{}
		for _, a := range all {
			perSecond[a.Truncate(time.Second)]++
		}
		for s, n := range perSecond {
			assert.LessOrEqual(t, n, 10, "second %v", s)
		}
		in20 := 0
		for _, a := range all {
			if a < 20*time.Second {
				in20++
			}
		}
		assert.InDelta(t, 200, in20, 5, "10/s over the first 20 s")
		assertIdle(t, ctrl)
	})
}

// FromLimitRule: Colly's own matcher (its glob syntax), Delay as MinGap,
// RandomDelay as RandomGap, Parallelism as MaxConcurrency (0 is 1).
func TestFromLimitRule(t *testing.T) {
	r, err := adaptive.FromLimitRule(&colly.LimitRule{DomainGlob: "{a,b}.test", Parallelism: 2, Delay: 500 * time.Millisecond, RandomDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	assert.True(t, r.Match("a.test"))
	assert.True(t, r.Match("b.test"))
	assert.False(t, r.Match("c.test"))
	assert.Equal(t, 500*time.Millisecond, r.MinGap)
	assert.Equal(t, 100*time.Millisecond, r.RandomGap)
	assert.Equal(t, 2, r.MaxConcurrency)

	r, err = adaptive.FromLimitRule(&colly.LimitRule{DomainRegexp: `^x\.`})
	require.NoError(t, err)
	assert.True(t, r.Match("x.test"))
	assert.Equal(t, 1, r.MaxConcurrency, "Colly's Parallelism 0 is 1")

	for name, lr := range map[string]*colly.LimitRule{
		"nil":            nil,
		"no pattern":     {Delay: time.Second},
		"bad regexp":     {DomainRegexp: "("},
		"bad glob":       {DomainGlob: "[a"},
		"negative delay": {DomainGlob: "*", Delay: -1},
	} {
		_, err := adaptive.FromLimitRule(lr)
		assert.ErrorIs(t, err, polite.ErrConfig, name)
	}
}

// A converted LimitRule through a collector: its Delay is a gap before
// every send of the scope, its Parallelism a ceiling per scope.
func TestFromLimitRuleCrawl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Latency: testserver.Latency{Base: time.Second}}))
		r, err := adaptive.FromLimitRule(&colly.LimitRule{DomainGlob: "*.test", Parallelism: 2, Delay: 200 * time.Millisecond})
		require.NoError(t, err)
		c, _ := newCollector(t, srv, polite.Config{Robots: new(false), Rules: []polite.Rule{r}})
		crawl(t, c, 8, 20*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		assert.GreaterOrEqual(t, gaps(st)[0], 200*time.Millisecond)
		assert.LessOrEqual(t, st.MaxInFlight, 2)
		assert.Positive(t, len(st.Accepted))
	})
}

// Rules match the host, and host:port when the URL names a port other
// than the scheme's default (Colly matches URL.Host, host:port, only).
func TestRuleMatchesHostPort(t *testing.T) {
	slow := func(r polite.Rule) polite.Rule { r.Rate = 0.5; return r }
	for _, tc := range []struct {
		rule polite.Rule
		url  string
		want bool
	}{
		{slow(polite.Rule{Domain: "127.0.0.1:8080"}), "http://127.0.0.1:8080/", true},
		{slow(polite.Rule{Domain: "127.0.0.1:8080"}), "http://127.0.0.1:8081/", false},
		{slow(polite.Rule{Domain: "127.0.0.1:*"}), "http://127.0.0.1:9000/", true},
		{slow(polite.Rule{Domain: "*.example.com"}), "http://a.example.com:8080/", true},
		{slow(polite.Rule{Domain: "a.test"}), "http://A.TEST/", true},
		{slow(polite.Rule{Domain: "a.test:80"}), "http://a.test:80/", false}, // the default port is no port
		{slow(polite.Rule{DomainRegexp: regexp.MustCompile(`:8080$`)}), "http://b.test:8080/", true},
		{slow(polite.Rule{Match: func(h string) bool { return h == "c.test:1" }}), "http://c.test:1/", true},
	} {
		ctrl, err := polite.New(polite.Config{Robots: new(false), Rules: []polite.Rule{tc.rule}})
		require.NoError(t, err)
		req, _ := http.NewRequest("GET", tc.url, nil)
		p, err := ctrl.Acquire(context.Background(), req)
		require.NoError(t, err)
		p.Drop()
		snap, ok := ctrl.Snapshot(hook.ScopeKey(ctrl, req))
		require.True(t, ok)
		assert.Equal(t, tc.want, snap.Rate == 0.5, "%+v on %s: rate %v", tc.rule.Domain, tc.url, snap.Rate)
	}
}

// Malformed gaps fail safe.
func TestGapsValidated(t *testing.T) {
	for name, opt := range map[string]polite.Config{
		"negative MinGap":     {Default: polite.Rule{MinGap: -1}},
		"negative RandomGap":  {Default: polite.Rule{RandomGap: -1}},
		"gap above MaxPause":  {Default: polite.Rule{MinGap: time.Hour}},
		"negative GlobalRate": {GlobalRate: -1},
		"random gap too long": {Rules: []polite.Rule{{Domain: "*", MinGap: time.Minute, RandomGap: 2 * time.Minute}}},
	} {
		_, err := polite.New(opt)
		assert.ErrorIs(t, err, polite.ErrConfig, name)
	}
}

// Gaps past what the schedule can keep are errors, never kept shorter
// without a word or wrapped: a MinGap above the gap of the least rate
// (1e-6/s: about 11.6 days) under a MaxPause that allows it, and a MinGap
// plus RandomGap past MaxInt64 (before, the sum wrapped negative, passed
// the check against MaxPause, and every request failed).
func TestGapsPastTheSchedule(t *testing.T) {
	century := 100 * 365 * 24 * time.Hour
	_, err := polite.New(polite.Config{MaxPause: century, Default: polite.Rule{MinGap: 30 * 24 * time.Hour}})
	assert.ErrorIs(t, err, polite.ErrConfig, "a MinGap of 30 days")
	assert.ErrorContains(t, err, "MinGap")
	_, err = polite.New(polite.Config{Default: polite.Rule{MinGap: math.MaxInt64, RandomGap: math.MaxInt64}})
	assert.ErrorIs(t, err, polite.ErrConfig, "gaps that wrap")
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{MaxPause: century, Robots: new(false), Default: polite.Rule{MinGap: 10 * 24 * time.Hour}})
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
		p, err := ctrl.Acquire(context.Background(), req)
		require.NoError(t, err)
		first := time.Now()
		p.Record(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}}, nil)
		p, err = ctrl.Acquire(context.Background(), req)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(first), 10*24*time.Hour)
		p.Drop()
	})
}
