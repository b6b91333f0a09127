package frontier_test

import (
	"errors"
	"fmt"
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

		start := time.Now()
		var at20 time.Time
		var p20 frontier.Progress
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if p := q.Progress(); at20.IsZero() && p.Done >= total/5 {
					at20, p20 = time.Now(), p
				}
			}
		}()
		require.NoError(t, q.Run(c))
		took := time.Since(start)
		close(stop)
		<-sampled
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
	})
}

// Failed counts the requests Colly reported an error for (robots.txt
// disallows 11 of 20 here), Done the others; synchronous and Async alike.
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
			require.NoError(t, q.AddURL(srv.HostURL("a.test")+"/page/0")) // a revisit Colly refuses: not a failure
			require.NoError(t, q.Run(c))
			p := q.Progress()
			assert.Equal(t, 11, disallowed)
			assert.Equal(t, 11, p.Failed, "async %v", async)
			assert.Equal(t, 10, p.Done, "9 pages and the refused revisit")
		})
	}
}
