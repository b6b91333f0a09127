package frontier_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// mixed is a crawl on which colly/queue wastes its threads: four hosts whose rates differ,
// each with ten seconds of work at its rate, their URLs added host after
// host (the slow one first), as a crawler discovers them.
var mixed = []struct {
	host  string
	rate  float64
	pages int
}{
	{"a.test", 5, 50},
	{"b.test", 20, 200},
	{"c.test", 20, 200},
	{"d.test", 10, 100},
}

type result struct {
	makespan time.Duration
	waiting  int // samples (every 10 ms) in which a thread waited on a scope
	pages    map[string]int
}

// crawlMixed runs the mixed crawl with 8 threads through one of: the
// frontier, colly/queue, or an async collector that visits every URL at
// once (no threads: the bound the frontier is judged against).
func crawlMixed(t *testing.T, mode string, robots bool) result {
	var res result
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		cfg := polite.Config{Robots: new(robots), JitterSeed: 1}
		for _, h := range mixed {
			hosts[h.host] = testserver.Policy{Latency: testserver.Latency{Base: 100 * time.Millisecond}}
			cfg.Rules = append(cfg.Rules, polite.Rule{Domain: h.host, Rate: h.rate, InitialRate: h.rate})
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := colly.NewCollector(colly.Async(mode == "async"))
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, cfg)
		require.NoError(t, ctrl.Err())
		var urls []string
		for _, h := range mixed {
			for i := range h.pages {
				urls = append(urls, fmt.Sprintf("%s/page/%d", srv.HostURL(h.host), i))
			}
		}

		stop := make(chan struct{})
		sampled := make(chan int)
		go func() { // a thread waiting on a scope is in its line
			n := 0
			for {
				select {
				case <-stop:
					sampled <- n
					return
				case <-time.After(10 * time.Millisecond):
				}
				for _, s := range ctrl.Report().Scopes {
					if s.Waiting > 0 {
						n++
						break
					}
				}
			}
		}()

		start := time.Now()
		switch mode {
		case "frontier":
			q, err := frontier.New(ctrl, frontier.Config{Threads: 8})
			require.NoError(t, err)
			for _, u := range urls {
				require.NoError(t, q.AddURL(u))
			}
			require.NoError(t, q.Run(c))
			assert.Empty(t, q.Backlogs())
		case "colly":
			q, err := queue.New(8, nil)
			require.NoError(t, err)
			for _, u := range urls {
				require.NoError(t, q.AddURL(u))
			}
			require.NoError(t, q.Run(c))
		case "async":
			for _, u := range urls {
				require.NoError(t, c.Visit(u))
			}
			c.Wait()
		}
		res.makespan = time.Since(start)
		close(stop)
		res.waiting = <-sampled
		res.pages = map[string]int{}
		for _, h := range mixed {
			res.pages[h.host] = len(srv.Stats(h.host).Accepted)
		}
	})
	return res
}

// Finding 3: with colly/queue, all 8 threads wait on the slow host while
// the others' URLs wait behind; the frontier hands each thread a request
// whose scope can send, and finishes within 10 % of the async run, no
// thread ever waiting politely on a scope.
func TestFrontierNeverBlocksOnOneHost(t *testing.T) {
	async := crawlMixed(t, "async", false)
	colly := crawlMixed(t, "colly", false)
	front := crawlMixed(t, "frontier", false)
	for name, r := range map[string]result{"async": async, "colly/queue": colly, "frontier": front} {
		t.Logf("%-12s makespan %6.2f s, samples with a thread waiting on a scope %4d", name, r.makespan.Seconds(), r.waiting)
		for _, h := range mixed {
			assert.Equal(t, h.pages, r.pages[h.host], "%s: every page of %s", name, h.host)
		}
	}
	assert.LessOrEqual(t, front.makespan, async.makespan*110/100, "within 10 %% of the async run")
	assert.Zero(t, front.waiting, "no thread waited on a scope")
	assert.Greater(t, colly.makespan, 2*front.makespan, "colly/queue blocks on the slow host")
	assert.Positive(t, colly.waiting)
}

// With robots.txt on, a scope's first request reads it (unclaimed, the
// page then waits one send interval after it); the makespan holds.
func TestFrontierWithRobots(t *testing.T) {
	async := crawlMixed(t, "async", true)
	front := crawlMixed(t, "frontier", true)
	t.Logf("async %.2f s, frontier %.2f s (%d samples with a thread waiting)", async.makespan.Seconds(), front.makespan.Seconds(), front.waiting)
	assert.LessOrEqual(t, front.makespan, async.makespan*110/100)
	assert.LessOrEqual(t, front.waiting, 4*50, "at most one interval per host, at its first contact")
}

// A crawl that discovers its URLs: callbacks add links while Run runs, and
// Run returns when nothing is left; Colly's visited filter drops repeats.
func TestFrontierDiscovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		for _, h := range []string{"a.test", "b.test", "c.test"} {
			hosts[h] = testserver.Policy{
				Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 10, Window: time.Second},
				Latency: testserver.Latency{Base: 50 * time.Millisecond},
				Site:    testserver.Site{Pages: 40, FanOut: 3},
			}
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := colly.NewCollector()
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{JitterSeed: 1})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 6})
		require.NoError(t, err)
		var seen sync.Map
		var dup atomic.Int64
		c.OnHTML("a[href]", func(e *colly.HTMLElement) {
			u := e.Request.AbsoluteURL(e.Attr("href"))
			if _, loaded := seen.LoadOrStore(u, true); !loaded {
				require.NoError(t, q.AddURL(u))
			} else {
				dup.Add(1)
			}
		})
		for h := range hosts {
			require.NoError(t, q.AddURL(srv.HostURL(h)+"/"))
		}
		require.NoError(t, q.Run(c))
		for h := range hosts {
			st := srv.Stats(h)
			assert.Equal(t, 41, len(st.Accepted), "%s: the index and 40 pages", h)
			assert.Zero(t, st.PauseViolations, h)
		}
		assert.True(t, q.IsEmpty())
		assert.Empty(t, q.Backlogs())
		for _, s := range ctrl.Report().Scopes {
			assert.Zero(t, s.InFlight, s.Scope)
		}
	})
}

// Bounded memory: beyond MaxSize, AddURL fails with ErrFull
// (colly.ErrQueueFull); Backlogs shows each scope's share.
func TestFrontierBounded(t *testing.T) {
	ctrl, err := polite.New(polite.Config{})
	require.NoError(t, err)
	q, err := frontier.New(ctrl, frontier.Config{MaxSize: 5})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, q.AddURL(fmt.Sprintf("http://a.test/%d", i)))
	}
	require.NoError(t, q.AddURL("http://B.test:80/"))
	require.NoError(t, q.AddURL("http://c.test:8080/"))
	assert.ErrorIs(t, q.AddURL("http://d.test/"), frontier.ErrFull)
	assert.ErrorIs(t, q.AddURL("http://d.test/"), colly.ErrQueueFull)
	assert.Equal(t, 5, q.Size())
	assert.Equal(t, []frontier.Backlog{{Scope: "a.test", Queued: 3}, {Scope: "b.test", Queued: 1}, {Scope: "c.test:8080", Queued: 1}}, q.Backlogs())
}

// Untrusted input fails with an error, never a panic.
func TestFrontierBadInput(t *testing.T) {
	ctrl, err := polite.New(polite.Config{})
	require.NoError(t, err)
	_, err = frontier.New(nil, frontier.Config{})
	assert.Error(t, err)
	_, err = frontier.New(ctrl, frontier.Config{Threads: -1})
	assert.Error(t, err)
	q, err := frontier.New(ctrl, frontier.Config{})
	require.NoError(t, err)
	for _, u := range []string{"", "/relative", "ftp://a.test/", "http://%zz", "http:///nohost"} {
		assert.Error(t, q.AddURL(u), u)
	}
	assert.Error(t, q.AddRequest(nil))
	assert.ErrorIs(t, q.Run(nil), frontier.ErrNotAttached)
	assert.ErrorIs(t, q.Run(colly.NewCollector()), frontier.ErrNotAttached)
	assert.True(t, q.IsEmpty())
}

// Stop ends Run once the running requests are done; the rest stays queued
// for the next Run.
func TestFrontierStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}}})
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Default: polite.Rule{Rate: 1}})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 2})
		require.NoError(t, err)
		for i := range 10 {
			require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
		}
		go func() { time.Sleep(2500 * time.Millisecond); q.Stop() }()
		require.NoError(t, q.Run(c))
		sent := srv.Stats("a.test").Requests
		assert.Equal(t, 3, sent, "one per second until the stop")
		assert.Equal(t, 10-sent, q.Size())
		require.NoError(t, q.Run(c))
		assert.Equal(t, 10, srv.Stats("a.test").Requests)
	})
}

// The controller learns through the frontier what it learns from a scope's
// line: on one host with a hidden 4/s (GCRA, burst 1), colly/queue (all
// threads waiting in the scope's line) and the frontier find the same
// estimate and take the same time. (Before the frontier asked again on
// every Notify, it sent on a due time a rate rise had moved, late, and the
// pacer's credit for that lateness drew a 429 that halved the estimate.)
func TestFrontierFindsTheLimit(t *testing.T) {
	run := func(mode string) (took time.Duration, est float64) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
				Limit:   testserver.Limit{Kind: testserver.TokenBucket, Rate: 4, Burst: 1},
				Latency: testserver.Latency{Base: 50 * time.Millisecond},
			}}})
			c := colly.NewCollector()
			c.WithTransport(srv.Transport())
			ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), JitterSeed: 1})
			type runner interface {
				AddURL(string) error
				Run(*colly.Collector) error
			}
			var q runner
			if mode == "frontier" {
				q, _ = frontier.New(ctrl, frontier.Config{Threads: 8})
			} else {
				q, _ = queue.New(8, nil)
			}
			for i := range 200 {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
			}
			start := time.Now()
			require.NoError(t, q.Run(c))
			took = time.Since(start)
			snap, _ := ctrl.Snapshot("a.test")
			est = snap.Estimate
			assert.Equal(t, 200, len(srv.Stats("a.test").Accepted))
		})
		return took, est
	}
	tq, eq := run("colly")
	tf, ef := run("frontier")
	t.Logf("colly/queue %.1f s, estimate %.2f/s; frontier %.1f s, estimate %.2f/s", tq.Seconds(), eq, tf.Seconds(), ef)
	assert.InDelta(t, eq, ef, 0.05*eq)
	assert.LessOrEqual(t, tf, tq*102/100)
}

// A URL robots.txt disallows is handed out at once and fails in Colly's
// hands with polite.ErrDisallowed (OnError), unsent, holding no slot.
func TestFrontierDisallowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
			Robots: testserver.Robots{Disallow: []string{"/page/1"}},
		}}})
		c := colly.NewCollector()
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{JitterSeed: 1})
		var disallowed atomic.Int64
		c.OnError(func(_ *colly.Response, err error) {
			if errors.Is(err, polite.ErrDisallowed) {
				disallowed.Add(1)
			}
		})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 4})
		require.NoError(t, err)
		for i := range 20 {
			require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
		}
		require.NoError(t, q.Run(c))
		assert.Equal(t, int64(11), disallowed.Load(), "/page/1 and /page/10 to /page/19")
		st := srv.Stats("a.test")
		assert.Equal(t, 9, len(st.Accepted))
		assert.Equal(t, 1, st.Robots)
		snap, _ := ctrl.Snapshot("a.test")
		assert.Zero(t, snap.InFlight)
	})
}

// Two processes, each with its own frontier and controller, sharing a
// Store: the claims each frontier hands out hold its own slot, the sends
// go through the fleet, and the fleet's ceiling holds for both together.
// Every URL is done and no slot or lease is left held.
func TestFrontierWithStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
			Latency: testserver.Latency{Base: 50 * time.Millisecond},
		}}})
		store := &fleet.MemoryStore{}
		var wg sync.WaitGroup
		for i := range 2 {
			c := colly.NewCollector(colly.AllowURLRevisit())
			c.WithTransport(srv.Transport())
			ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), JitterSeed: uint64(i + 1), Store: store, Default: polite.Rule{Rate: 5, InitialRate: 5}})
			require.NoError(t, ctrl.Err())
			q, err := frontier.New(ctrl, frontier.Config{Threads: 4})
			require.NoError(t, err)
			for p := range 50 {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), 100*i+p)))
			}
			wg.Go(func() {
				assert.NoError(t, q.Run(c))
				for _, s := range ctrl.Report().Scopes {
					assert.Zero(t, s.InFlight, s.Scope)
					assert.Zero(t, s.Waiting, s.Scope)
				}
				assert.NoError(t, ctrl.Close())
			})
		}
		start := time.Now()
		wg.Wait()
		took := time.Since(start)
		st := srv.Stats("a.test")
		assert.Equal(t, 100, len(st.Accepted))
		// 100 sends at the fleet's 5/s take about 20 s (two apart: 10 s)
		t.Logf("100 pages at a fleet ceiling of 5/s in %.1f s", took.Seconds())
		assert.GreaterOrEqual(t, took, 19*time.Second, "the ceiling is the fleet's, not each process's")
		most := 0 // the most pages in any 2 s
		for i, a := range st.Accepted {
			n := 0
			for _, b := range st.Accepted[i:] {
				if b-a < 2*time.Second {
					n++
				}
			}
			most = max(most, n)
		}
		assert.LessOrEqual(t, most, 11, "at most 5/s for both together, plus the first of the window")
	})
}
