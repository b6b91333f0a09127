// Multihost crawls several hosts at once through one Colly collector made
// polite with adaptive.Attach: each host gets its own controller (a scope),
// finds its own limit, and one host's trouble does not slow the others.
//
// The hosts (the bundled testserver, on real loopback sockets) hide
// different limits:
//
//	fast.test     50 req/s, fixed window, 100 ms per page
//	slow.test     10 req/s, fixed window, 300 ms per page
//	strict.test   3 req/s, token bucket (GCRA) with a burst of 1, 50 ms
//	banning.test  5 req/s, fixed window, and a ban (403 with a block page
//	              for 10 minutes) after 3 rejections within a minute
//
// Each host has its own workers, as a crawler keeps a queue per host, so
// that a slow host cannot hold the goroutines the others need. Blocked
// events (403s, block pages) arrive on ctrl.Events(), with e.Class Blocked; after
// three in a row the controller parks the scope and further visits fail at
// once with polite.ErrBlocked, which stops that host's workers here (a real
// crawler would rotate its proxy and call ctrl.Unpark).
//
// Run it from the repository root:
//
//	go run ./examples/multihost          # 30 s
//	go run ./examples/multihost -short   # 5 s smoke run
//
// Every interval it prints a line per host: the pacing rate, the
// concurrency limit, the requests in flight, accepted and throttled so far,
// and why a request to it waits. At the end it prints, per host, the
// goodput after the warm-up against the hidden capacity, the 429s and 403s
// the server sent, the pause violations and whether the scope is parked,
// then the controller's own summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/demo" // helpers shared by this repository's programs
	"github.com/colly-polite/polite/testserver"
)

// site is one host of the run: its hidden policy and, for the summary, the
// capacity that policy stands for.
type site struct {
	name     string
	policy   testserver.Policy
	capacity float64 // req/s
	about    string
}

func fixedWindow(n int) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
}

var sites = []site{
	{"fast.test", testserver.Policy{Limit: fixedWindow(50), Latency: testserver.Latency{Base: 100 * time.Millisecond}},
		50, "50/s fixed window"},
	{"slow.test", testserver.Policy{Limit: fixedWindow(10), Latency: testserver.Latency{Base: 300 * time.Millisecond}},
		10, "10/s fixed window"},
	{"strict.test", testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: 3, Burst: 1},
		Latency: testserver.Latency{Base: 50 * time.Millisecond}},
		3, "3/s GCRA, burst 1"},
	{"banning.test", testserver.Policy{Limit: fixedWindow(5), Latency: testserver.Latency{Base: 100 * time.Millisecond},
		Ban: &testserver.Ban{After: 3, Within: time.Minute, For: 10 * time.Minute}},
		5, "5/s, bans after 3 429s"},
}

// host is the run-time state of one site.
type host struct {
	site
	base, scope string
	ok, failed  atomic.Int64
	parked      atomic.Bool // a visit failed with ErrBlocked
}

func main() {
	duration := flag.Duration("duration", 30*time.Second, "how long to crawl")
	warmup := flag.Duration("warmup", 10*time.Second, "time left out of the goodput figures")
	workers := flag.Int("workers", 12, "goroutines per host")
	short := flag.Bool("short", false, "a 5 s smoke run (warm-up: half of it)")
	flag.Parse()
	// -short: 5 s and a warm-up of half the run, unless given on the command line
	demo.Short(*short, map[string]string{"duration": "5s"})
	demo.Short(*short, map[string]string{"warmup": (*duration / 2).String()})
	if *warmup >= *duration {
		*warmup = *duration / 2
	}

	cfg := testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{}}
	for _, s := range sites {
		cfg.Hosts[s.name] = s.policy
	}
	srv, err := testserver.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	c := colly.NewCollector(colly.AllowURLRevisit(), colly.StdlibContext(ctx))
	c.WithTransport(srv.Transport())
	ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
	if err := ctrl.Err(); err != nil {
		log.Fatal(err)
	}

	hosts := make([]*host, len(sites))
	byScope := map[string]*host{}
	for i, s := range sites {
		base := srv.HostURL(s.name) // http://127.0.0.1:PORT: a listener per host
		h := &host{site: s, base: base, scope: demo.ScopeOf(base)}
		hosts[i], byScope[h.scope] = h, h
	}
	// Colly hands each response or error to the callbacks with the request,
	// whose host is the scope key.
	hostOf := func(r *colly.Request) *host { return byScope[demo.ScopeOf("http://"+r.URL.Host)] }
	c.OnResponse(func(r *colly.Response) { hostOf(r.Request).ok.Add(1) })
	c.OnError(func(r *colly.Response, err error) {
		if h := hostOf(r.Request); h != nil && !errors.Is(err, context.Canceled) {
			h.failed.Add(1)
		}
	})

	fmt.Printf("%d hosts, %d workers each, one collector, %v\n", len(hosts), *workers, *duration)
	for _, h := range hosts {
		fmt.Printf("  %-13s %-24s %s\n", h.name, h.about, h.base)
	}
	fmt.Println()

	start := time.Now()
	end := start.Add(*duration)
	srvStart := srv.Elapsed() // the server's clock, which Stats use
	elapsed := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }

	// Blocked events: the controller never waits for us, so read them as
	// they come.
	var blocked atomic.Int64
	var events sync.WaitGroup
	events.Go(func() {
		for {
			select {
			case e := <-ctrl.Events():
				if e.Class != classify.Blocked {
					continue
				}
				if n := blocked.Add(1); n <= 6 {
					name, path := e.Scope, e.URL
					if h := byScope[e.Scope]; h != nil {
						name = h.name
					}
					if u, err := url.Parse(e.URL); err == nil {
						path = u.Path
					}
					fmt.Printf("%6v  blocked event: %s answered %d to %s (limit %d, rate %.2f req/s)\n",
						elapsed(), name, e.Status, path, e.Limit, e.Rate)
				}
			case <-ctx.Done():
				return
			}
		}
	})

	var wg sync.WaitGroup
	for _, h := range hosts {
		var seq atomic.Int64
		for range *workers {
			wg.Go(func() {
				for ctx.Err() == nil && time.Now().Before(end) && !h.parked.Load() {
					err := c.Visit(fmt.Sprintf("%s/page/%d", h.base, seq.Add(1)%1000))
					if errors.Is(err, polite.ErrBlocked) {
						if !h.parked.Swap(true) {
							// err is an *polite.ScopeError: the scope, the reason and until when
							fmt.Printf("%6v  %s is parked (%v): its workers stop\n", elapsed(), h.name, err)
						}
						return
					}
				}
			})
		}
	}

	// every interval, a line per host: rate, limit, in flight, accepted,
	// 429s and why its requests wait
	every := 5 * time.Second
	if *duration < 15*time.Second {
		every = time.Second
	}
	follow := make([]demo.Host, len(hosts))
	for i, h := range hosts {
		follow[i] = demo.Host{Name: h.name[:len(h.name)-len(".test")], Scope: h.scope}
	}
	for t := every; t <= *duration; t += every {
		demo.Sleep(ctx, time.Until(start.Add(t)))
		demo.Progress(os.Stdout, t, ctrl, follow)
	}
	demo.Sleep(ctx, time.Until(end))
	cancel()
	if err := demo.Stop(&wg, srv); err != nil { // waits for the workers, closing the server if they linger
		log.Fatal(err)
	}
	events.Wait()
	// The events that came in after the last read.
	for more := true; more; {
		select {
		case e := <-ctrl.Events():
			if e.Class == classify.Blocked {
				blocked.Add(1)
			}
		default:
			more = false
		}
	}

	from, to := srvStart+*warmup, srvStart+*duration
	fmt.Printf("\nafter the %v warm-up (%v of crawling), per host:\n", *warmup, to-from)
	fmt.Printf("  %-13s %-24s %9s %7s %6s %5s %5s %5s  %s\n",
		"host", "hidden limit", "goodput", "of cap", "pages", "429s", "403s", "viol", "scope")
	for _, h := range hosts {
		st := srv.Stats(h.name)
		good := float64(demo.CountIn(st.Accepted, from, to)) / (to - from).Seconds()
		snap, _ := ctrl.Snapshot(h.scope)
		state := fmt.Sprintf("rate %.2f, limit %d", snap.Rate, snap.Limit)
		if snap.Parked {
			state = "PARKED"
		}
		fmt.Printf("  %-13s %-24s %7.2f/s %6.1f%% %6d %5d %5d %5d  %s\n",
			h.name, h.about, good, good/h.capacity*100, h.ok.Load(), st.ByStatus[429], st.ByStatus[403],
			st.PauseViolations, state)
	}
	fmt.Println()
	demo.Summary(os.Stdout, ctrl, follow)
	ban := srv.Stats(hosts[len(hosts)-1].name) // banning.test
	fmt.Printf("\nblocked events received: %d (dropped unread, every class: %d)\n", blocked.Load(), ctrl.Report().DroppedEvents)
	switch snap, _ := ctrl.Snapshot(hosts[len(hosts)-1].scope); {
	case snap.Parked:
		fmt.Printf("banning.test: banned %d time(s); the controller parked it after %d 403s\n", ban.BanCount, ban.ByStatus[403])
	case ban.BanCount > 0:
		fmt.Printf("banning.test: banned %d time(s) (%d 403s) but not parked\n", ban.BanCount, ban.ByStatus[403])
	default:
		fmt.Println("banning.test: never banned (the controller kept under its limit)")
	}
}
