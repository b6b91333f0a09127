// Queue crawls four hosts with mixed limits through a queue of threads,
// twice: with colly/queue, then with frontier.Queue, each run through one
// adaptive controller, and prints every second how far each host is.
//
// The hosts (the bundled testserver, on real loopback sockets):
//
//	slow.test    4 req/s, token bucket (GCRA), burst 1, 50 ms per page
//	mid.test     15 req/s, fixed window, 100 ms
//	fast.test    40 req/s, fixed window, 50 ms
//	rule.test    no limit, but a colly.LimitRule (Delay 500 ms) converted
//	             with adaptive.FromLimitRule, matched by host:port
//
// Each host has about the same work at its rate. The URLs are queued host
// after host, the slow one first, as a crawler discovers them. colly/queue
// hands them out in that order: every thread waits on slow.test while the
// other hosts' URLs wait behind it. The frontier hands each free thread a
// request whose host can send now, so the hosts progress side by side and
// the crawl ends when the slowest host's own work does. For the frontier,
// each line ends with its Progress: the counts, the rate, and the ETA,
// which is the slowest host's backlog over its rate.
//
// Run it from the repository root:
//
//	go run ./examples/queue          # about a minute
//	go run ./examples/queue -short   # a smoke run of a few seconds
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/queue"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/internal/demo" // helpers shared by this repository's programs
	"github.com/colly-polite/polite/testserver"
)

// site is one host: its hidden policy and its share of the work.
type site struct {
	name   string
	policy testserver.Policy
	rate   float64 // its capacity, req/s: the host gets rate × work pages
}

func fixedWindow(n int) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
}

var sites = []site{
	{"slow.test", testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: 4, Burst: 1}, Latency: testserver.Latency{Base: 50 * time.Millisecond}}, 4},
	{"mid.test", testserver.Policy{Limit: fixedWindow(15), Latency: testserver.Latency{Base: 100 * time.Millisecond}}, 15},
	{"fast.test", testserver.Policy{Limit: fixedWindow(40), Latency: testserver.Latency{Base: 50 * time.Millisecond}}, 40},
	{"rule.test", testserver.Policy{Latency: testserver.Latency{Base: 50 * time.Millisecond}}, 2},
}

func main() {
	work := flag.Duration("work", 10*time.Second, "each host's work at its rate")
	threads := flag.Int("threads", 8, "the queue's threads")
	short := flag.Bool("short", false, "a smoke run (2 s of work per host)")
	flag.Parse()
	demo.Short(*short, map[string]string{"work": "2s"})

	var summary []string
	for _, mode := range []string{"colly/queue", "frontier"} {
		fmt.Printf("== %s, %d threads\n", mode, *threads)
		took, err := run(mode, *work, *threads)
		if err != nil {
			log.Fatal(err)
		}
		summary = append(summary, fmt.Sprintf("%-12s %6.1f s", mode, took.Seconds()))
	}
	fmt.Println("== makespan")
	for _, s := range summary {
		fmt.Println(s)
	}
}

// host is one site during a run.
type host struct {
	site
	pages    int
	done     atomic.Int64
	finished atomic.Int64 // nanoseconds since the start, when its last page came
}

func run(mode string, work time.Duration, threads int) (time.Duration, error) {
	cfg := testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{}}
	for _, s := range sites {
		cfg.Hosts[s.name] = s.policy
	}
	srv, err := testserver.New(cfg)
	if err != nil {
		return 0, err
	}
	defer srv.Close()

	hosts := map[string]*host{} // by host:port, the scope key
	var order []*host
	for _, s := range sites {
		u, _ := url.Parse(srv.HostURL(s.name))
		h := &host{site: s, pages: max(1, int(s.rate*work.Seconds()))}
		hosts[u.Host] = h
		order = append(order, h)
	}

	c := colly.NewCollector()
	c.WithTransport(srv.Transport())
	ruleURL, _ := url.Parse(srv.HostURL("rule.test"))
	rule, err := adaptive.FromLimitRule(&colly.LimitRule{DomainGlob: ruleURL.Host, Delay: 500 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Rules: []polite.Rule{rule}})
	if err := ctrl.Err(); err != nil {
		return 0, err
	}
	start := time.Now()
	c.OnResponse(func(r *colly.Response) {
		if h := hosts[r.Request.URL.Host]; h != nil {
			if h.done.Add(1) == int64(h.pages) {
				h.finished.Store(int64(time.Since(start)))
			}
		}
	})

	var add func(string) error
	var runQueue func() error
	var backlog func() string
	switch mode {
	case "frontier":
		q, err := frontier.New(ctrl, frontier.Config{Threads: threads})
		if err != nil {
			return 0, err
		}
		add, runQueue = q.AddURL, func() error { return q.Run(c) }
		backlog = func() string { // the live progress line: the ETA is the slowest host's
			p := q.Progress()
			eta := "?"
			if p.ETA != frontier.Unknown {
				eta = fmt.Sprintf("%.0fs", p.ETA.Seconds())
			}
			last := ""
			if len(p.Scopes) > 0 {
				if h := hosts[p.Scopes[0].Scope]; h != nil {
					last = ", last " + h.name
				}
			}
			return fmt.Sprintf("queued %d, running %d, done %d, failed %d, %.1f/s, added %.1f/s, ETA %s%s", p.Queued, p.Running, p.Done, p.Failed, p.Rate, p.Added, eta, last)
		}
	default:
		q, err := queue.New(threads, nil)
		if err != nil {
			return 0, err
		}
		add, runQueue = q.AddURL, func() error { return q.Run(c) }
		backlog = func() string { n, _ := q.Size(); return fmt.Sprintf("queued %d", n) }
	}
	for _, h := range order { // host after host, the slow one first
		for i := range h.pages {
			if err := add(fmt.Sprintf("%s/page/%d", srv.HostURL(h.name), i)); err != nil {
				return 0, err
			}
		}
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // progress, every second
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			line := fmt.Sprintf("%4.0fs", time.Since(start).Seconds())
			for _, h := range order {
				line += fmt.Sprintf("  %s %3d/%-3d", h.name, h.done.Load(), h.pages)
			}
			fmt.Println(line + "  " + backlog())
		}
	}()
	err = runQueue()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return 0, err
	}
	sort.Slice(order, func(i, j int) bool { return order[i].finished.Load() < order[j].finished.Load() })
	for _, h := range order {
		st := srv.Stats(h.name)
		fmt.Printf("  %-10s %3d/%-3d pages, done at %5.1f s (its own work: %4.1f s at %2.0f/s), 429s %d, pause violations %d\n",
			h.name, h.done.Load(), h.pages, time.Duration(h.finished.Load()).Seconds(), float64(h.pages)/h.rate, h.rate,
			st.ByStatus[429], st.PauseViolations)
	}
	fmt.Printf("  all done in %.1f s\n", took.Seconds())
	return took, nil
}
