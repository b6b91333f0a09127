package polite_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/testserver"
)

// robots.txt is read once per host and trusted for 24 h (RFC 9309), then
// read again.
func TestRobotsCachedFor24h(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{CrawlDelay: time.Second}}))
		c, _ := newCollector(t, srv)
		a := srv.HostURL("a.test")
		require.NoError(t, c.Visit(a+"/page/1"))
		require.NoError(t, c.Visit(a+"/page/2"))
		assert.Equal(t, 1, srv.Stats("a.test").Robots)
		time.Sleep(24*time.Hour - time.Minute)
		require.NoError(t, c.Visit(a+"/page/3"))
		assert.Equal(t, 1, srv.Stats("a.test").Robots, "still fresh just before 24 h")
		time.Sleep(2 * time.Minute)
		require.NoError(t, c.Visit(a+"/page/4"))
		assert.Equal(t, 2, srv.Stats("a.test").Robots, "read again after 24 h")
	})
}

// robots.txt goes through the same politeness: a 429 on it pauses the scope
// like any other, and nothing is sent during the pause.
func TestRobotsThroughPoliteness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{Status: 429, RetryAfter: 5 * time.Second}}))
		c, _ := newCollector(t, srv)
		ok, _ := crawl(t, c, 4, 30*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		t.Logf("robots fetches %d, pages %d, violations %d, first page after %v", st.Robots, ok, st.PauseViolations, st.Accepted[0])
		assert.Zero(t, st.PauseViolations)
		assert.Positive(t, ok, "the crawl goes on under the conservative delay")
		require.NotEmpty(t, st.Accepted)
		assert.GreaterOrEqual(t, st.Accepted[0], 5*time.Second, "no page before the robots.txt pause ended")
		// not retried: the first page goes out after the 5 s pause plus one
		// conservative 5 s interval (the drained bucket refills from zero)
		assert.Less(t, st.Accepted[0], 11*time.Second, "a throttled robots.txt must not hold the crawl")
		assert.Equal(t, 1, st.Robots, "asked again only after RobotsRetry (1 min)")
		// 429 on robots.txt means the conservative default delay (5 s)
		for i := 1; i < len(st.Accepted); i++ {
			assert.GreaterOrEqual(t, st.Accepted[i]-st.Accepted[i-1], 5*time.Second)
		}
	})
}

// An absurd Crawl-delay is capped (30 s by default) and said in the log.
func TestCrawlDelayCappedAndLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{Body: "User-agent: *\nCrawl-delay: 100000\n"}}))
		var mu sync.Mutex
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
		c, _ := newCollector(t, srv, polite.Config{Logger: logger})
		crawl(t, c, 2, 65*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		require.GreaterOrEqual(t, len(st.Accepted), 3)
		for i := 1; i < len(st.Accepted); i++ {
			gap := st.Accepted[i] - st.Accepted[i-1]
			assert.GreaterOrEqual(t, gap, 30*time.Second)
			assert.Less(t, gap, 31*time.Second, "capped at 30 s, not 100000 s")
		}
		mu.Lock()
		assert.True(t, strings.Contains(buf.String(), "Crawl-delay capped"), buf.String())
		mu.Unlock()
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Robots.txt Crawl-delay.
func TestCrawlDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Robots: testserver.Robots{CrawlDelay: 2 * time.Second}},
			"b.test": {Robots: testserver.Robots{Status: 404}},
			"d.test": {Robots: testserver.Robots{Body: "User-agent: *\nCrawl-delay: 100000\n"}},
		}})
		c, _ := newCollector(t, srv)
		crawl(t, c, 8, 20*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		require.GreaterOrEqual(t, len(st.Accepted), 5)
		for i := 1; i < len(st.Accepted); i++ {
			assert.GreaterOrEqual(t, st.Accepted[i]-st.Accepted[i-1], 2*time.Second, "requests %d and %d", i-1, i)
		}
		assert.Equal(t, 1, st.Robots, "robots.txt fetched once")

		// 404: no delay
		ok, _ := crawl(t, c, 8, 5*time.Second, srv.HostURL("b.test"))
		assert.Greater(t, ok, int64(20))
		// 5xx: see TestRobotsUnreadable
		// absurd: capped at 30 s, not 100000 s
		okd, _ := crawl(t, c, 2, 65*time.Second, srv.HostURL("d.test"))
		assert.GreaterOrEqual(t, okd, int64(2))
	})
}

// Allow and Disallow are enforced from the one fetch (RFC 9309, the most
// specific rule wins): a disallowed URL fails at once with ErrDisallowed in
// a *ScopeError and is never sent; RobotsDisallow false keeps only
// Crawl-delay.
func TestRobotsDisallowEnforced(t *testing.T) {
	body := "User-agent: *\nDisallow: /page/\nAllow: /page/1\n"
	for _, enforce := range []bool{true, false} {
		t.Run(map[bool]string{true: "default", false: "off"}[enforce], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{Body: body}}))
				var opts []polite.Config
				if !enforce {
					opts = append(opts, polite.Config{RobotsDisallow: new(false)})
				}
				c, ctrl := newCollector(t, srv, opts...)
				a := srv.HostURL("a.test")
				require.NoError(t, c.Visit(a+"/page/1"), "allowed by the longer Allow")
				start := time.Now()
				err := c.Visit(a + "/page/2")
				st := srv.Stats("a.test")
				if !enforce {
					require.NoError(t, err)
					assert.Equal(t, 3, st.Requests, "robots.txt and both pages")
					return
				}
				require.ErrorIs(t, err, polite.ErrDisallowed)
				var se *polite.ScopeError
				require.ErrorAs(t, err, &se)
				assert.ErrorIs(t, se, polite.ErrDisallowed)
				assert.Equal(t, polite.PauseNone, se.Pause)
				assert.Equal(t, "a.test", se.Scope)
				assert.True(t, se.Until.IsZero(), "a rule, not an outage")
				assert.Zero(t, time.Since(start), "fails at once")
				assert.Equal(t, 2, st.Requests, "robots.txt and /page/1 only")
				assert.Equal(t, 1, st.Robots)
				assertIdle(t, ctrl)
			})
		})
	}
}

// A robots.txt answering 5xx means "disallow all" (RFC 9309 2.3.1.4) until
// it is asked again after RobotsRetry; with Disallow off, the conservative
// delay (RobotsFailDelay, 5 s) between pages instead.
func TestRobotsUnreadable(t *testing.T) {
	t.Run("disallow all", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{Status: 503}}))
			c, ctrl := newCollector(t, srv)
			a := srv.HostURL("a.test")
			start := time.Now()
			err := c.Visit(a + "/page/1")
			require.ErrorIs(t, err, polite.ErrDisallowed)
			var se *polite.ScopeError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, start.Add(time.Minute), se.Until, "until robots.txt is asked again")
			time.Sleep(30 * time.Second)
			require.ErrorIs(t, c.Visit(a+"/page/2"), polite.ErrDisallowed)
			assert.Equal(t, 1, srv.Stats("a.test").Robots, "not asked again within RobotsRetry")
			time.Sleep(31 * time.Second)
			require.ErrorIs(t, c.Visit(a+"/page/3"), polite.ErrDisallowed)
			st := srv.Stats("a.test")
			assert.Equal(t, 2, st.Robots, "asked again after RobotsRetry")
			assert.Equal(t, 2, st.Requests, "no page was sent")
			assertIdle(t, ctrl)
		})
	})
	t.Run("disallow off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{Status: 503}}))
			c, _ := newCollector(t, srv, polite.Config{RobotsDisallow: new(false)})
			ok, _ := crawl(t, c, 8, 20*time.Second, srv.HostURL("a.test"))
			assert.Positive(t, ok)
			st := srv.Stats("a.test")
			for i := 1; i < len(st.Accepted); i++ {
				assert.GreaterOrEqual(t, st.Accepted[i]-st.Accepted[i-1], 5*time.Second)
			}
		})
	})
}

// Colly's own robots.txt handling (IgnoreRobotsTxt = false) and the
// controller's read one fetch: Colly's request for robots.txt passes
// through the transport, which reads it for the controller too. Colly
// refuses what robots.txt disallows itself (colly.ErrRobotsTxtBlocked,
// before the controller sees the request); the Crawl-delay of that one
// fetch paces the pages.
func TestRobotsOneFetchWithCollyRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{CrawlDelay: 2 * time.Second, Disallow: []string{"/page/9"}}}))
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.IgnoreRobotsTxt = false
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{JitterSeed: 1})
		require.NoError(t, ctrl.Err())
		a := srv.HostURL("a.test")
		for i := 1; i <= 4; i++ {
			require.NoError(t, c.Visit(fmt.Sprintf("%s/page/%d", a, i)))
		}
		require.ErrorIs(t, c.Visit(a+"/page/9"), colly.ErrRobotsTxtBlocked)
		st := srv.Stats("a.test")
		assert.Equal(t, 1, st.Robots, "one fetch of robots.txt for both")
		require.Len(t, st.Accepted, 4)
		for i := 1; i < len(st.Accepted); i++ {
			assert.GreaterOrEqual(t, st.Accepted[i]-st.Accepted[i-1], 2*time.Second, "Crawl-delay from the shared fetch")
		}
		assertIdle(t, ctrl)
	})
}

// A robots.txt the controller itself refused to ask for (its scope paused
// beyond MaxPause) is no outage: the page fails with that refusal, not
// ErrDisallowed, and robots.txt is asked for again next time.
func TestRobotsRefusedIsNotUnreadable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		store := &fleet.MemoryStore{}
		// another collector of the fleet shared an hour's pause
		_, err := store.Return(t.Context(), fleet.Return{Scope: "a.test", Process: "other", Pause: time.Hour, Reason: fleet.Reason(1) /* retry-after, as the controller numbers it */})
		require.NoError(t, err)
		c, _ := newCollector(t, srv, polite.Config{Store: store})
		err = c.Visit(srv.HostURL("a.test") + "/page/1")
		require.ErrorIs(t, err, polite.ErrPaused)
		assert.NotErrorIs(t, err, polite.ErrDisallowed)
		assert.Zero(t, srv.Stats("a.test").Requests)
	})
}

// A Visit that needs robots.txt ends with its caller's context, and nothing
// is sent after the cancel.
func TestRobotsFetchEndsWithCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.x.test": {Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 60 * time.Second}},
			"b.x.test": {},
		}})
		// an attempt timeout, as Attach sets from the collector's
		tr := polite.NewTransport(srv.Transport(), polite.Config{Robots: new(true), Scope: polite.ScopeDomain, JitterSeed: 1, AttemptTimeout: 10 * time.Second, Default: polite.Rule{MaxRetries: -1}})
		client := &http.Client{Transport: tr}
		a, b := srv.HostURL("a.x.test"), srv.HostURL("b.x.test")
		st, err := get(context.Background(), client, a+"/page/1")
		require.NoError(t, err)
		require.Equal(t, 200, st)
		st, err = get(context.Background(), client, a+"/page/2")
		require.NoError(t, err)
		require.Equal(t, 429, st, "the scope is paused for 60 s")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		_, err = get(ctx, client, b+"/page/1")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, time.Second, time.Since(start), "returned when the caller cancelled")
		time.Sleep(2 * time.Minute)
		assert.Zero(t, srv.Stats("b.x.test").Requests, "nothing sent after the cancel")
	})
}

// robots.txt answers faster than the pages (no processing), and with a
// network round trip its answer was the fastest success the law ever saw:
// taken as the unloaded round trip, it made every page read as queueing
// and cut the limit to 1 (9.1/s of 20 with robots.txt on, 18.6/s off, on
// sockets S1 fell to 9.5 %). The baseline is now the least round mean.
func TestRobotsDoNotSetTheBaseline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Limit: fixedWindow(20),
			Latency: testserver.Latency{Base: 100 * time.Millisecond, RTT: 10 * time.Millisecond}}))
		ctrl, err := polite.New(polite.Config{Robots: new(true), JitterSeed: 1})
		require.NoError(t, err)
		c := newCollectorWith(t, srv, ctrl)
		crawl(t, c, 10, 30*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		s, _ := ctrl.Snapshot("a.test")
		good := float64(window(st, 10*time.Second, 30*time.Second)) / 20
		t.Logf("accepted %.1f/s of 20, limit %d, robots.txt requests %d", good, s.Limit, st.Robots)
		require.Equal(t, 1, st.Robots)
		assert.Greater(t, s.Limit, 2)
		assert.GreaterOrEqual(t, good, 0.9*20)
	})
}

// A RobotsTTL too long to add to the controller's clock is for ever, not
// "already stale": robots.txt is read once for 20 pages. Before, the
// expiry overflowed and robots.txt was fetched again before every request.
func TestRobotsTTLHuge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		ctrl, err := polite.New(polite.Config{Robots: new(true), RobotsTTL: math.MaxInt64, JitterSeed: 1})
		require.NoError(t, err)
		client := &http.Client{Transport: ctrl.Transport(srv.Transport())}
		time.Sleep(time.Second) // the controller's clock past its origin
		for i := range 20 {
			_, err := get(t.Context(), client, fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i))
			require.NoError(t, err)
		}
		assert.Equal(t, 1, srv.Stats("a.test").Robots)
	})
}
