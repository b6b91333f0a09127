package frontier_test

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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

// Once a fifth of a crawl is done, the ETA puts the finish within 20 % of
// when it comes: on the mixed crawl (four hosts at 5, 20, 20 and 10 req/s,
// ten seconds of work each) and on a lopsided one (a slow host with 20 s
// of work, a fast one with 5 s), where the whole backlog over the whole
// rate would say a third of the time: the crawl's ETA is its slowest
// scope's.
func TestFrontierProgressETA(t *testing.T) {
	lopsided := []struct {
		host  string
		rate  float64
		pages int
	}{{"slow.test", 2, 40}, {"fast.test", 20, 100}}
	for name, crawl := range map[string][]struct {
		host  string
		rate  float64
		pages int
	}{"mixed": mixed, "lopsided": lopsided} {
		t.Run(name, func(t *testing.T) { progressETA(t, crawl, name == "lopsided") })
	}
}

func progressETA(t *testing.T, crawl []struct {
	host  string
	rate  float64
	pages int
}, lopsided bool) {
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		cfg := polite.Config{Robots: new(false), JitterSeed: 1}
		total := 0
		for _, h := range crawl {
			hosts[h.host] = testserver.Policy{Latency: testserver.Latency{Base: 100 * time.Millisecond}}
			cfg.Rules = append(cfg.Rules, polite.Rule{Domain: h.host, Rate: h.rate, InitialRate: h.rate})
			total += h.pages
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := colly.NewCollector(colly.Async())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, cfg)
		q, err := frontier.New(ctrl, frontier.Config{Threads: 8})
		require.NoError(t, err)
		for _, h := range crawl {
			for i := range h.pages {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(h.host), i)))
			}
		}
		p := q.Progress()
		assert.Equal(t, total, p.Queued)
		assert.Equal(t, frontier.Unknown, p.ETA, "no rate yet")
		assert.Zero(t, p.Added, "the URLs the crawl starts from are not what it found")

		start := time.Now()
		stop := sampleAt(q, total/5, nil)
		require.NoError(t, q.Run(c))
		took := time.Since(start)
		at20, p20 := stop()
		require.False(t, at20.IsZero())
		predicted := at20.Sub(start) + p20.ETA
		naive := time.Duration(float64(p20.Queued+p20.Running) / p20.Rate * float64(time.Second))
		t.Logf("at %.1f s (%d done, %.1f/s): ETA %.1f s (backlog over rate: %.1f s), finish predicted at %.1f s, came at %.1f s",
			at20.Sub(start).Seconds(), p20.Done, p20.Rate, p20.ETA.Seconds(), naive.Seconds(), predicted.Seconds(), took.Seconds())
		for _, s := range p20.Scopes {
			t.Logf("  %-9s queued %3d running %d done %3d rate %5.1f/s ETA %5.1f s", s.Scope, s.Queued, s.Running, s.Done, s.Rate, s.ETA.Seconds())
		}
		assert.InDelta(t, took.Seconds(), predicted.Seconds(), 0.2*took.Seconds())
		if lopsided {
			assert.Less(t, 2*naive, p20.ETA, "the whole backlog over the whole rate is far off")
		}
		assert.Len(t, p20.Scopes, len(crawl))
		assert.Equal(t, p20.ETA, p20.Scopes[0].ETA, "the slowest scope first, its ETA the crawl's")

		p = q.Progress()
		assert.Equal(t, total, p.Done)
		assert.Zero(t, p.Failed)
		assert.Zero(t, p.Queued+p.Running)
		assert.Zero(t, p.ETA)
		assert.Empty(t, p.Scopes, "a scope's counts go with it; the crawl's stay")
		assert.Positive(t, p.Rate)
		assert.Zero(t, p.Added, "nothing added once the crawl began")
	})
}

// Failed counts the requests Colly reported an error for (robots.txt
// disallows 11 of 20 here), Done the others, one Colly refused to send
// (too deep) included; synchronous and Async alike.
func TestFrontierProgressFailed(t *testing.T) {
	for _, async := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
				Robots: testserver.Robots{Disallow: []string{"/page/1"}},
			}}})
			c := colly.NewCollector(colly.Async(async))
			c.WithTransport(srv.Transport())
			ctrl := adaptive.Attach(c, polite.Config{JitterSeed: 1})
			var disallowed int
			c.OnError(func(_ *colly.Response, err error) {
				if errors.Is(err, polite.ErrDisallowed) {
					disallowed++
				}
			})
			q, err := frontier.New(ctrl, frontier.Config{Threads: 1})
			require.NoError(t, err)
			for i := range 20 {
				require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
			}
			c.MaxDepth = 2
			deep, _ := url.Parse(srv.HostURL("a.test") + "/page/99")
			require.NoError(t, q.AddRequest(&colly.Request{URL: deep, Method: "GET", Depth: 3})) // Colly refuses it: not a failure
			require.NoError(t, q.Run(c))
			p := q.Progress()
			assert.Equal(t, 11, disallowed)
			assert.Equal(t, 11, p.Failed, "async %v", async)
			assert.Equal(t, 10, p.Done, "9 pages and the refused one")
		})
	}
}

// The bench's whole crawl (S11: four hosts with hidden limits, fixed
// window 5/s at 200 ms, fixed window 10/s at 100 ms, GCRA 20/s at 50 ms,
// 4 in flight at 100 ms; the index and 300 pages each), run through the
// queue, its links added with AddLink as they are found, in virtual time.
// Each page is sent once and the crawl ends near its slowest host's own
// work. Once a fifth of the pages are done, the ETA says too little: it
// is the backlog found so far over the rates, and most of the slowest
// host's pages are not found yet.
func TestFrontierProgressWholeCrawl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pages = 300
		fixed := func(n int) testserver.Limit {
			return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
		}
		hosts := map[string]testserver.Policy{
			"a.test": {Limit: fixed(5), Latency: testserver.Latency{Base: 200 * time.Millisecond}},
			"b.test": {Limit: fixed(10), Latency: testserver.Latency{Base: 100 * time.Millisecond}},
			"c.test": {Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: 20, Burst: 5}, Latency: testserver.Latency{Base: 50 * time.Millisecond}},
			"d.test": {Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 4}, Latency: testserver.Latency{Base: 100 * time.Millisecond}},
		}
		for h, p := range hosts {
			p.Site = testserver.Site{Pages: pages}
			hosts[h] = p
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := colly.NewCollector(colly.Async())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{JitterSeed: 1})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 16})
		require.NoError(t, err)
		c.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = q.AddLink(e.Request, e.Attr("href")) })
		for h := range hosts {
			require.NoError(t, q.AddURL(srv.HostURL(h)+"/"))
		}
		total := len(hosts) * (pages + 1)
		start := time.Now()
		type guess struct{ at, finish time.Duration }
		var guesses []guess // every sample's predicted finish
		stop := sampleAt(q, total/5, func(p frontier.Progress) {
			if p.ETA >= 0 {
				d := time.Since(start)
				guesses = append(guesses, guess{d, d + p.ETA})
			}
			if d := time.Since(start); d%(10*time.Second) < 100*time.Millisecond && os.Getenv("FRONTIER_TRACE") != "" {
				line := fmt.Sprintf("%5.0fs done %4d failed %d queued %4d running %2d", d.Seconds(), p.Done, p.Failed, p.Queued, p.Running)
				for _, s := range p.Scopes {
					line += fmt.Sprintf(" | %s q%d r%d d%d %.1f/s", s.Scope, s.Queued, s.Running, s.Done, s.Rate)
				}
				t.Log(line)
			}
		})
		require.NoError(t, q.Run(c))
		took := time.Since(start)
		at20, p20 := stop()
		require.False(t, at20.IsZero())
		predicted := at20.Sub(start) + p20.ETA
		t.Logf("at %.1f s (%d done, %d queued, %.1f/s): ETA %.1f s, finish predicted at %.1f s, came at %.1f s",
			at20.Sub(start).Seconds(), p20.Done, p20.Queued, p20.Rate, p20.ETA.Seconds(), predicted.Seconds(), took.Seconds())
		// by time rather than by pages: what the ETA said at 20 % of the
		// crawl's duration, and from when on it stayed within 20 %
		var at20t guess
		settled := time.Duration(-1)
		for _, g := range guesses {
			if g.at <= took/5 {
				at20t = g
			}
			if off := float64(g.finish-took) / float64(took); off < -0.2 || off > 0.2 {
				settled = -1
			} else if settled < 0 {
				settled = g.at
			}
		}
		t.Logf("at %.1f s (20 %% of the time): finish predicted at %.1f s; within 20 %% of the finish from %.1f s on (%.0f %% of the time)",
			at20t.at.Seconds(), at20t.finish.Seconds(), settled.Seconds(), 100*settled.Seconds()/took.Seconds())
		for _, s := range p20.Scopes {
			t.Logf("  %-8s queued %3d running %d done %3d rate %5.1f/s ETA %5.1f s", s.Scope, s.Queued, s.Running, s.Done, s.Rate, s.ETA.Seconds())
		}
		for h := range hosts {
			assert.Equal(t, pages+1, len(srv.Stats(h).Accepted), "%s: each page answered once", h)
		}
		// a.test's own work is 301 pages at 5/s, 60.2 s: a link found again
		// (each page is linked from five) costs no send slot of its scope
		assert.Less(t, took, 75*time.Second)
		// the ETA counts what is known: the pages not yet found are not in
		// it, and at 20 % of the pages most of a.test's are not found yet;
		// by 20 % of the time they are (a page links to five others).
		// Added says so: the crawl was adding more than it ended
		assert.Less(t, predicted, took)
		t.Logf("at 20 %% of the pages: added %.1f/s, ended %.1f/s", p20.Added, p20.Rate)
		assert.Greater(t, p20.Added, p20.Rate, "still finding pages")
		assert.InDelta(t, took.Seconds(), at20t.finish.Seconds(), 0.2*took.Seconds(), "the ETA at 20 %% of the time")
	})
}

// sampleAt samples q's progress every 100 ms (each, if not nil, sees
// every sample) until the func it returns is called, which returns when
// the first sample with n or more done was taken, and that sample (the
// zero time if none was).
func sampleAt(q *frontier.Queue, n int, each func(frontier.Progress)) (stop func() (time.Time, frontier.Progress)) {
	var at time.Time
	var first frontier.Progress
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			p := q.Progress()
			if at.IsZero() && p.Done >= n {
				at, first = time.Now(), p
			}
			if each != nil {
				each(p)
			}
		}
	}()
	return func() (time.Time, frontier.Progress) {
		close(done)
		<-sampled
		return at, first
	}
}

// Added counts the requests added once the crawl began, in memory and in
// a file alike: a repeat the queue drops is not one, nor a URL queued
// before the crawl began. Two crawls that find the same page, one of them
// twice, read the same Added.
func TestFrontierProgressAdded(t *testing.T) {
	for _, file := range []bool{false, true} {
		added := map[int]float64{}
		for _, adds := range []int{1, 2} {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
					Latency: testserver.Latency{Base: 100 * time.Millisecond},
				}}})
				c := colly.NewCollector()
				c.WithTransport(srv.Transport())
				ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), JitterSeed: 1})
				cfg := frontier.Config{Threads: 1}
				if file {
					cfg.Path = filepath.Join(t.TempDir(), "q.db")
				}
				q, err := frontier.New(ctrl, cfg)
				require.NoError(t, err)
				defer q.Close()
				first := srv.HostURL("a.test") + "/page/1"
				c.OnResponse(func(r *colly.Response) {
					if r.Request.URL.String() != first {
						return
					}
					for i := range adds {
						err := q.AddURL(srv.HostURL("a.test") + "/page/2")
						if i > 0 {
							assert.ErrorIs(t, err, frontier.ErrSeen)
						} else {
							assert.NoError(t, err)
						}
					}
				})
				require.NoError(t, q.AddURL(first))
				require.Zero(t, q.Progress().Added, "queued before the crawl began")
				require.NoError(t, q.Run(c))
				p := q.Progress()
				assert.Equal(t, 2, p.Done)
				assert.Positive(t, p.Added, "a page found once the crawl began")
				added[adds] = p.Added
			})
		}
		assert.Equal(t, added[1], added[2], "file %v: the repeat is not counted", file)
	}
}
