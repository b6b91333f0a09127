package adaptive_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
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
		c, _ := newCollector(t, srv, adaptive.WithLogger(logger))
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

// Behaviour 8: robots.txt Crawl-delay.
func TestCrawlDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Robots: testserver.Robots{CrawlDelay: 2 * time.Second}},
			"b.test": {Robots: testserver.Robots{Status: 404}},
			"c.test": {Robots: testserver.Robots{Status: 503}},
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
		// 5xx: a conservative default (5 s) until it can be read
		okc, _ := crawl(t, c, 8, 20*time.Second, srv.HostURL("c.test"))
		assert.Positive(t, okc)
		cst := srv.Stats("c.test")
		for i := 1; i < len(cst.Accepted); i++ {
			assert.GreaterOrEqual(t, cst.Accepted[i]-cst.Accepted[i-1], 5*time.Second)
		}
		// absurd: capped at 30 s, not 100000 s
		okd, _ := crawl(t, c, 2, 65*time.Second, srv.HostURL("d.test"))
		assert.GreaterOrEqual(t, okd, int64(2))
	})
}
