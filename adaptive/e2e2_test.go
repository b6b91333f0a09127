package adaptive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/testserver"
)

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

// Behaviour 9: two hosts, one hard-throttled.
func TestTwoHostsIsolation(t *testing.T) {
	alone := func(both bool) float64 {
		var good float64
		synctest.Test(t, func(t *testing.T) {
			hosts := map[string]testserver.Policy{
				"a.test": {Limit: fixedWindow(20), Latency: testserver.Latency{Base: 50 * time.Millisecond}},
			}
			if both {
				hosts["b.test"] = testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 5 * time.Second}}
			}
			srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
			c, _ := newCollector(t, srv, adaptive.WithRobots(false))
			bases := []string{srv.HostURL("a.test")}
			if both {
				bases = append(bases, srv.HostURL("b.test"))
			}
			crawl(t, c, 40, 40*time.Second, bases...)
			good = float64(window(srv.Stats("a.test"), 10*time.Second, 40*time.Second)) / 30
		})
		return good
	}
	solo, shared := alone(false), alone(true)
	t.Logf("a alone %.2f/s, a beside a throttled host %.2f/s", solo, shared)
	assert.GreaterOrEqual(t, shared, 0.95*solo)
}

// Behaviour 10: never a leaked slot.
func TestNoLeakedSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixedWindow(50), Latency: testserver.Latency{Base: 10 * time.Millisecond}},
			"b.test": {},
		}})
		c, ctrl := newCollector(t, srv, adaptive.WithRobots(false))
		a, b := srv.HostURL("a.test"), srv.HostURL("b.test")
		var n atomic.Int64
		c.OnRequest(func(r *colly.Request) {
			if r.URL.RawQuery == "abort-req" {
				r.Abort()
			}
		})
		c.OnResponseHeaders(func(r *colly.Response) {
			if r.Request.URL.RawQuery == "abort-headers" {
				r.Request.Abort()
			}
		})
		c.OnResponse(func(r *colly.Response) {
			n.Add(1)
			if r.Request.URL.RawQuery == "panic" {
				panic("user callback")
			}
		})
		_ = c.Visit(a + "/page/1?abort-req")
		_ = c.Visit(a + "/page/2?abort-headers")
		func() {
			defer func() { _ = recover() }()
			_ = c.Visit(a + "/page/3?panic")
		}()
		// redirects across hosts: each hop is a request to its own host
		_ = c.Visit(a + "/redirect?to=" + url.QueryEscape(b+"/page/1"))
		_ = c.Visit(a + "/redirect/hop?n=4&hosts=a.test,b.test")
		// cache hits
		dir := t.TempDir()
		cc := c.Clone()
		cc.CacheDir = dir
		_ = cc.Visit(a + "/page/4")
		_ = cc.Visit(a + "/page/4")
		// context cancelled while waiting: a paused scope and a short deadline
		ctx, cancel := context.WithCancel(context.Background())
		hc := &http.Client{Transport: ctrl.Transport(srv.Transport())}
		req, _ := http.NewRequestWithContext(ctx, "GET", a+"/page/ctx", nil)
		cancel()
		_, err := hc.Do(req)
		assert.ErrorIs(t, err, context.Canceled)
		// async with Wait
		ac := c.Clone()
		ac.Async = true
		for i := 0; i < 30; i++ {
			_ = ac.Visit(a + "/page/" + strconv.Itoa(10+i))
		}
		ac.Wait()
		// the queue package
		q, err := queue.New(4, &queue.InMemoryQueueStorage{MaxSize: 1000})
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			require.NoError(t, q.AddURL(b+"/page/"+strconv.Itoa(50+i)))
		}
		require.NoError(t, q.Run(c))
		assert.Positive(t, n.Load())
		assertIdle(t, ctrl)
	})
}

// Behaviour 11: polite waiting does not use up the request timeout; a
// hanging origin still times out per attempt.
func TestPauseDoesNotUseTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 12 * time.Second}},
			"b.test": {Latency: testserver.Latency{Base: time.Hour}},
		}})
		c, _ := newCollector(t, srv, adaptive.WithRobots(false), adaptive.WithDefault(adaptive.Rule{MaxRetries: 1}))
		a := srv.HostURL("a.test")
		require.NoError(t, c.Visit(a+"/page/1"))
		start := time.Now()
		require.NoError(t, c.Visit(a+"/page/2"), "succeeds after the 12 s pause")
		assert.GreaterOrEqual(t, time.Since(start), 12*time.Second)
		assert.Zero(t, srv.Stats("a.test").PauseViolations)

		start = time.Now()
		err := c.Visit(srv.HostURL("b.test") + "/page/1")
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline"), err)
		assert.Less(t, time.Since(start), 25*time.Second, "two attempts of 10 s, plus backoff")
	})
}

// Behaviour 12: retries.
func TestRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: time.Second}}))
		c, _ := newCollector(t, srv, adaptive.WithRobots(false))
		a := srv.HostURL("a.test")
		var okN, errN atomic.Int64
		c.OnResponse(func(*colly.Response) { okN.Add(1) })
		c.OnError(func(*colly.Response, error) { errN.Add(1) })
		require.NoError(t, c.Visit(a+"/page/1"))
		// within the same window: 429, then after the pause 200
		require.NoError(t, c.Visit(a+"/page/2"))
		assert.Equal(t, int64(2), okN.Load())
		assert.Zero(t, errN.Load())
		st := srv.Stats("a.test")
		assert.Equal(t, 3, st.Requests, "exactly three sends: 200, 429, 200")

		// a POST without idempotency is not retried and surfaces the 429
		before := srv.Stats("a.test").Requests
		err := c.Post(a+"/page/post", map[string]string{"k": "v"})
		err2 := c.Post(a+"/page/post", map[string]string{"k": "v"})
		assert.True(t, err != nil || err2 != nil, "one of two POSTs in a window of 1 is throttled")
		assert.Equal(t, before+2, srv.Stats("a.test").Requests, "no retry of a POST")
	})
}

// Behaviour 13: honest quota headers are paced so that no 429 happens.
func TestQuotaHeadersPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 100, Window: 10 * time.Second},
			Latency: testserver.Latency{Base: 20 * time.Millisecond},
			Excess:  testserver.Excess{QuotaHeaders: true},
		}))
		client := &http.Client{Transport: adaptive.NewTransport(srv.Transport())}
		start := time.Now()
		for time.Since(start) < 60*time.Second {
			resp, err := client.Get(srv.HostURL("a.test") + "/page/1")
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		st := srv.Stats("a.test")
		t.Logf("accepted %d, 429s %d", len(st.Accepted), st.ByStatus[429])
		assert.Zero(t, st.ByStatus[429])
		assert.GreaterOrEqual(t, len(st.Accepted), 500)
	})
}

// Behaviour 14: nobody reads the event streams; the crawl does not stall.
func TestUnreadEventsDoNotStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// a.test throttles everything after its first request of the hour
		// (a stream of events nobody reads); b.test is open
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: time.Hour}, Excess: testserver.Excess{RetryAfter: testserver.RetryAfterZero}},
			"b.test": {Latency: testserver.Latency{Base: 10 * time.Millisecond}},
		}})
		c, ctrl := newCollector(t, srv, adaptive.WithConfig(adaptive.Config{EventBuffer: 1, Robots: new(bool), BreakerThreshold: -1}))
		crawl(t, c, 20, 30*time.Second, srv.HostURL("a.test"), srv.HostURL("b.test"))
		thr := srv.Stats("a.test").ByStatus[429]
		t.Logf("a: %d 429s, %d events dropped; b: %d accepted", thr, ctrl.Dropped(classify.Throttled), len(srv.Stats("b.test").Accepted))
		assert.Greater(t, thr, 10, "the scenario throttles a lot")
		assert.Equal(t, uint64(thr-1), ctrl.Dropped(classify.Throttled), "one event buffered, every other one dropped and counted")
		assert.Greater(t, len(srv.Stats("b.test").Accepted), 1000, "the crawl of b.test goes on")
		assertIdle(t, ctrl)
	})
}

var _ = bytes.NewReader
var _ = os.Getenv
