package frontier_test

import (
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// An Async collector: the queue's threads bound what is in flight (a
// thread holds its request until Colly's last callback), every URL is
// fetched once, and when Run returns nothing of the crawl is running, so
// that c.Wait returns at once.
func TestFrontierAsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Latency: testserver.Latency{Base: 50 * time.Millisecond}},
			"b.test": {Latency: testserver.Latency{Base: 50 * time.Millisecond}},
		}})
		c := colly.NewCollector(colly.Async())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), JitterSeed: 1, Default: polite.Rule{Rate: 100, InitialRate: 100}})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 3})
		require.NoError(t, err)
		var running, most, scraped atomic.Int64
		c.OnRequest(func(*colly.Request) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		})
		c.OnScraped(func(*colly.Response) {
			time.Sleep(20 * time.Millisecond) // a slow callback still holds its thread
			scraped.Add(1)
			running.Add(-1)
		})
		for _, h := range []string{"a.test", "b.test"} {
			for i := range 20 {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(h), i)))
			}
		}
		require.NoError(t, q.Run(c))
		assert.Equal(t, int64(40), scraped.Load(), "every callback ran before Run returned")
		assert.Equal(t, int64(3), most.Load(), "never more than Threads in flight")
		assert.Equal(t, 20, srv.Stats("a.test").Requests)
		assert.Equal(t, 20, srv.Stats("b.test").Requests)
		assert.LessOrEqual(t, srv.Stats("a.test").MaxInFlight+srv.Stats("b.test").MaxInFlight, 3+1)
		assert.True(t, q.IsEmpty())
		assert.Empty(t, q.Backlogs())
		start := time.Now()
		c.Wait()
		assert.Zero(t, time.Since(start), "Run left nothing running")
	})
}

// An Async request that ends without a callback the queue hears (an
// OnRequest registered after Run aborts it) frees its thread once Colly's
// wait group is empty; a request Colly refuses before it starts
// (too deep) frees it at once. Run returns, every thread free.
func TestFrontierAsyncSilentEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}}})
		c := colly.NewCollector(colly.Async())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 2})
		require.NoError(t, err)
		for i := range 4 {
			require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
		}
		c.MaxDepth = 2
		deep, _ := url.Parse(srv.HostURL("a.test") + "/page/9")
		require.NoError(t, q.AddRequest(&colly.Request{URL: deep, Method: "GET", Depth: 3})) // ErrMaxDepth in Do
		require.NoError(t, q.Run(c))                                                         // the queue's callbacks are registered now
		assert.Equal(t, 4, srv.Stats("a.test").Requests)

		c.OnRequest(func(r *colly.Request) { r.Abort() }) // after the queue's: it cannot see it
		for i := range 4 {
			require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), 10+i)))
		}
		done := make(chan error)
		go func() { done <- q.Run(c) }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("Run never returned")
		}
		assert.Equal(t, 4, srv.Stats("a.test").Requests, "the aborted ones were not sent")
		assert.True(t, q.IsEmpty())
	})
}
