package polite_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/testserver"
)

// The healthy host of every adversarial crawl: 20/s, 50 ms.
var healthy = testserver.Policy{Limit: fixedWindow(20), Latency: testserver.Latency{Base: 50 * time.Millisecond}}

// adversarial crawls x.test (the adversary) and b.test (healthy) for 60 s
// with 20 workers each, and returns x's stats, b's goodput after 10 s, and
// the errors the user saw for x.
func adversarial(t *testing.T, x testserver.Policy, xPath string, robots bool) (testserver.Stats, float64, []error) {
	var st testserver.Stats
	var good float64
	var errs []error
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"x.test": x, "b.test": healthy}})
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(robots)})
		var mu sync.Mutex
		c.OnError(func(r *colly.Response, err error) {
			if r.Request.URL.Host == "x.test" {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
		crawl(t, c, 40, 60*time.Second, srv.HostURL("x.test")+xPath, srv.HostURL("b.test"))
		st = srv.Stats("x.test")
		good = float64(window(srv.Stats("b.test"), 10*time.Second, 60*time.Second)) / 50
		assertIdle(t, ctrl)
	})
	return st, good, errs
}

// maxSends bounds what a crawl may send to a host that keeps failing: never
// above the initial pacing rate (2/s: failures never raise it) over 60 s,
// plus the workers' first wave and robots.txt. A zero-wait loop would send
// thousands.
const maxSends = 2*60 + 20 + 5

func TestAdversarialOrigins(t *testing.T) {
	alone := func() float64 {
		var good float64
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"b.test": healthy}})
			c, _ := newCollector(t, srv, polite.Config{Robots: new(false)})
			crawl(t, c, 20, 60*time.Second, srv.HostURL("b.test"))
			good = float64(window(srv.Stats("b.test"), 10*time.Second, 60*time.Second)) / 50
		})
		return good
	}()
	raw := func(lines ...string) testserver.Policy {
		return testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{RawRetryAfter: lines}}
	}
	cases := []struct {
		name   string
		x      testserver.Policy
		path   string
		robots bool
		check  func(t *testing.T, st testserver.Stats, errs []error)
	}{
		{name: "reset mid-body", x: testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.ResetMidBody, Bytes: 10}},
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.True(t, anyIs(errs, io.ErrUnexpectedEOF), "a typed error: %v", first(errs))
			}},
		{name: "drip one byte a second", x: testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.DripBody, Bytes: 100}},
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.True(t, anyIs(errs, context.DeadlineExceeded), "each attempt times out: %v", first(errs))
			}},
		{name: "headers never arrive", x: testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.Hang}},
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.True(t, anyIs(errs, context.DeadlineExceeded), "each attempt times out: %v", first(errs))
			}},
		{name: "redirect loop", x: healthy, path: "/redirect/loop?%d",
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.NotEmpty(t, errs, "the loop surfaces as an error")
			}},
		{name: "429 empty body on a closed connection", x: testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{CloseConnection: true}}},
		{name: "Retry-After huge", x: raw("1000000000000"),
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.True(t, anyIs(errs, polite.ErrPaused), "parked: %v", first(errs))
				assert.Zero(t, st.PauseViolations)
			}},
		{name: "Retry-After negative", x: raw("-1")},
		{name: "Retry-After garbage", x: raw("in a while")},
		{name: "Retry-After conflicting", x: raw("5", "3600"),
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.True(t, anyIs(errs, polite.ErrPaused), "the longest wins, above the ceiling: %v", first(errs))
			}},
		{name: "Retry-After date long past", x: raw("Thu, 01 Jan 1970 00:00:00 GMT")},
		{name: "Retry-After date far future", x: raw("Fri, 31 Dec 9999 23:59:59 GMT"),
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.True(t, anyIs(errs, polite.ErrPaused), "%v", first(errs))
				assert.Zero(t, st.PauseViolations)
			}},
		{name: "quota lies: remaining 0, reset in the past", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Excess: testserver.Excess{QuotaLie: testserver.QuotaLieResetDate}},
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				// a reset already past is no pause (clock skew says the same);
				// the host's own limit still paces the crawl
				assert.LessOrEqual(t, st.Requests, 20*60+40)
				assert.Positive(t, len(st.Accepted))
			}},
		{name: "Crawl-delay 1e9", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Robots: testserver.Robots{Body: "User-agent: *\nCrawl-delay: 1000000000\n"}}, robots: true,
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				require.GreaterOrEqual(t, len(st.Accepted), 2)
				for i := 1; i < len(st.Accepted); i++ {
					gap := st.Accepted[i] - st.Accepted[i-1]
					assert.GreaterOrEqual(t, gap, 30*time.Second, "capped at 30 s")
					assert.Less(t, gap, 31*time.Second, "not 1e9 s")
				}
			}},
		{name: "Crawl-delay -1", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Robots: testserver.Robots{Body: "User-agent: *\nCrawl-delay: -1\n"}}, robots: true,
			check: noDelay},
		{name: "Crawl-delay abc", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Robots: testserver.Robots{Body: "User-agent: *\nCrawl-delay: abc\n"}}, robots: true,
			check: noDelay},
		{name: "robots.txt of 10 MB", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Robots: testserver.Robots{CrawlDelay: 2 * time.Second, Size: 10 << 20}}, robots: true,
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				assert.Equal(t, 1, st.Robots)
				require.GreaterOrEqual(t, len(st.Accepted), 10)
				for i := 1; i < len(st.Accepted); i++ {
					assert.GreaterOrEqual(t, st.Accepted[i]-st.Accepted[i-1], 2*time.Second, "the delay at the top of a huge file is honoured")
				}
			}},
		{name: "robots.txt with a BOM", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Robots: testserver.Robots{Body: "\uFEFFUser-agent: *\nCrawl-delay: 2\n"}}, robots: true,
			check: func(t *testing.T, st testserver.Stats, errs []error) {
				require.GreaterOrEqual(t, len(st.Accepted), 10)
				for i := 1; i < len(st.Accepted); i++ {
					assert.GreaterOrEqual(t, st.Accepted[i]-st.Accepted[i-1], 2*time.Second, "the BOM does not hide the delay")
				}
			}},
		{name: "robots.txt served as HTML", x: testserver.Policy{Limit: healthy.Limit, Latency: healthy.Latency, Robots: testserver.Robots{ContentType: "text/html", Body: "<html><body><h1>Welcome</h1></body></html>"}}, robots: true,
			check: noDelay},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := tc.x
			st, good, errs := adversarial(t, x, tc.path, tc.robots)
			t.Logf("x: %d sends (%v), %d errors, violations %d; b: %.2f/s (alone %.2f/s)", st.Requests, st.ByStatus, len(errs), st.PauseViolations, good, alone)
			// the other host keeps its pace
			assert.GreaterOrEqual(t, good, 0.95*alone, "b beside the adversary")
			// no zero-wait loop: a bounded rate of sends to the adversary
			if x.Adversary.Kind != testserver.NoAdversary || len(x.Excess.RawRetryAfter) > 0 || x.Excess.CloseConnection {
				assert.LessOrEqual(t, st.Requests, maxSends, "sends to the failing host")
			}
			if tc.path != "" {
				// each visit of the loop is 11 hops, all paced under the
				// host's limit: no more than its 20/s
				assert.LessOrEqual(t, st.Requests, 20*60+40, "hops of the loop")
			}
			if tc.check != nil {
				tc.check(t, st, errs)
			}
		})
	}
}

func anyIs(errs []error, target error) bool {
	for _, e := range errs {
		if errors.Is(e, target) {
			return true
		}
	}
	return false
}

func first(errs []error) any {
	if len(errs) == 0 {
		return "no error"
	}
	s := errs[0].Error()
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[:i]
	}
	return s
}

// noDelay: a robots.txt that cannot be read as rules sets no delay (RFC 9309
// parsers use what they can): the host is crawled at its own pace.
func noDelay(t *testing.T, st testserver.Stats, errs []error) {
	assert.Equal(t, 1, st.Robots)
	assert.Greater(t, len(st.Accepted), 500, "crawled at the host's pace, not a delay's")
}
