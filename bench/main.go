// Bench is the benchmark harness of colly-polite: named scenarios (S1–S11)
// and the harness's kinds (W1–W12) over real loopback sockets against the
// bundled testserver, each crawled in turn by this library and by what a
// Colly user would pick instead, and tables of how close each came to the
// server's hidden capacity and how politely.
//
// Run it from the repository root:
//
//	go run ./bench -rtt 0,200ms -json bench/results.json -v   # every cell at RTT 0 and at 200 ms (about 70 minutes)
//	go run ./bench                          # RTT 0 only, 20 s cells (S10: 80 s), about 35 minutes
//	go run ./bench -rtt 200ms               # RTT 200 ms only
//	go run ./bench -duration 12s            # shorter cells
//	go run ./bench -scenario S1,S2 -contender adaptive,limitrule-10
//	go run ./bench -json results.json       # the table as JSON too
//	go run ./bench -kinds -duration 60s -runs 3 -contender adaptive   # the kinds, three runs each, 180-s cells (docs/harness.md)
//	go run ./bench -short                   # smoke run: 2 s cells, 4 at a time, 20 pages in S11 and W9, S1-S11 and W1-W12; nothing is judged
//
// Every run counts. -runs N runs each cell N times (run k with -seed + k -
// 1 for the server's jitter and the baselines' draws) and prints, after the
// rows of every run, each cell's median and worst: goodput as a share of
// capacity (a whole crawl's: its worst host's ideal time over its finish,
// scaled by the pages it fetched) and the rejected share. The machine's
// load during each run (other processes' share of the CPU) is reported,
// never chosen: nothing waits for a quiet machine or keeps the least
// disturbed run.
//
// The kinds W1–W12 are the servers the law was measured failing on (nginx
// limit_req with Retry-After 1, a sliding window that counts rejections, a
// page cost that rises without load, a limiter answering 403, limit_conn,
// a reload to a lower rate, a whole crawl, 503 without Retry-After), as
// the simulator's kinds model them, each behind a delaying TCP proxy on
// loopback (proxy.go) that puts a 200-ms round trip on the wire: the
// request reaches the limiter 100 ms after it left, every answer takes
// 100 ms back, in order, and a new connection waits a round trip for its
// handshake. W2 is W1 beside a CPU load on every core, in a child process
// the bench starts and stops (busy.go). W11 has no wire but pages whose
// cost spreads over 200-500 ms; so has W12, W7's limit_conn 8 with no
// wire (the client's count in flight is the server's). They run adaptive and limitrule-10, 40
// workers (W9: S11's crawl).
//
// Each cell (scenario × RTT × contender) gets a fresh server and a fresh
// Colly collector. In S1–S10 the scenario's number of goroutines call
// c.Visit on distinct pages for the run's length (-duration; 4 × -duration
// in S10) on the server's clock. S11 is a whole crawl instead: one async
// collector (colly.Async) starts at the index of each of four hosts of
// mixed limits and follows the links of their sites (-pages pages each, and
// the index) until it has visited them all. -rtt gives every host of every
// scenario that network round trip (testserver's Latency.RTT), rejections
// included; with a list, each scenario runs at each RTT. The contenders:
//
//	adaptive        adaptive.Attach(c), defaults (robots.txt on)
//	limitrule-N     c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: N}), N = 4, 10, 40
//	textbook-aimd   the textbook Python scraper AIMD limiter, ported (aimd.go)
//	autothrottle-T  Scrapy's AutoThrottle with target concurrency T = 1, 8, ported (autothrottle.go)
//
// S11 runs adaptive and limitrule-10 only.
//
// The columns of S1–S10:
//
//	goodput     accepted requests per second of the scenario's target host
//	            in the judged window (after the warm-up, the first quarter
//	            of the run; in S10 the last quarter), and that as a share of
//	            the hidden capacity over the same time
//	latency     S9 only: the median latency at the origin (arrival to
//	            answer, queueing included, RTT excluded) of the target's
//	            requests answered in the judged window, as a multiple of
//	            its unloaded latency (100 ms)
//	rejected    429, 503 and 403 answers as a share of all requests (every
//	            host of the scenario), after the warm-up
//	converge    the time to converge: the start of the first 5 s (at least
//	            one bin) during which the accepted rate of every bin of the
//	            server's clock is within ±10 % of the capacity in force; bins
//	            are 1 s, or long enough to hold 10 requests at capacity (2 s
//	            at 5/s, 10 s at 1/s); S4 counts from the capacity drop, S10
//	            from the rise (there: the time to reach 90 % of the new
//	            capacity); "never" if it did not happen within the run
//	in flight   the most requests on the wire at once (client side, all hosts)
//	violations  requests that arrived while a pause the server announced
//	            with Retry-After was still in force (testserver's
//	            PauseViolations, all hosts, whole run); in S7 also every
//	            request that came less than the Crawl-delay after the one
//	            before it
//	banned      S8 only: whether the host started a ban
//
// S11 has a table of its own, a row per host: its finish time (its last
// answer, from the start of the crawl) against the ideal pages / capacity,
// the pages lost (not answered 200 when the crawl ended), the share of its
// requests rejected and its pause violations. A crawl still running at
// twice the slowest host's ideal time plus 30 s is stopped there.
//
// Cells run one after the other by default: on a small machine, cells run
// side by side (-parallel) perturb each other's timing.
//
// # Fleet mode
//
// -fleet runs several OS processes as one polite client through Redis
// (polite.Config.Store with package redisstore) instead of the scenarios:
//
//	go run ./bench -fleet 1,2,4,8 -json bench/results-fleet.json -v   # 60-s cells, the ceiling cell, then the three store faults (about 10 minutes)
//	go run ./bench -fleet 1,2,4,8 -duration 30s -outage 0 -fault 0   # shorter cells, no store fault
//	go run ./bench -fleet 0 -outage 0 -fault 0 -runs 6               # the ceiling cell alone, six times
//	go run ./bench -short -fleet 1,2                                  # smoke run: 3-s cells, 1-s faults, 5-s deadlines; nothing is judged
//
// The bench starts one redis-server on a free loopback port (REDIS_URL, if
// set, is used instead, and the outage cell is skipped: it kills Redis;
// without either, -fleet fails with one line, and -short skips unless
// REDISSTORE_REQUIRED is set). Each cell gets a fresh testserver with two
// loopback hosts, a.test (a fixed window of 20/s, 100 ms + 40 ms RTT: the
// reference family of the single-process figures, low enough for eight
// processes on two cores; -fleet-capacity sets another window, so that
// a law whose path happens to suit 20/s is seen elsewhere) and b.test
// (no limit, 50 ms + 40 ms RTT, under a Rule.Rate of 10/s: a ceiling the
// fleet must keep as one client), and N
// processes of this program (re-executed with a hidden argument), each with
// its own Colly collector and adaptive.Attach sharing one Redis, and
// -fleet-workers goroutines per host, crawling both hosts by name
// (http://a.test, dialled at the host's listener) for -duration (default
// 60 s in fleet mode). Each request has a deadline of -fleet-timeout
// (Colly's request timeout, 30 s). robots.txt is off unless -fleet-robots:
// testserver answers robots.txt without the origin's processing time, and
// that round trip becomes the scope's unloaded minimum, so that the
// latency knee holds the concurrency limit at 1 whatever the fleet.
// Each process names itself on every request (an X-Fleet-Process header
// that the testserver's log splits by: testserver.Config.ClientHeader),
// times its store's Redis commands (a go-redis hook: the controller gets
// redisstore's Store itself), samples its controller's Snapshot of each
// host every 100 ms, counts its requests as they start and end, and
// reports as JSON on its standard output. At the end of the cell it stops
// starting requests; those under way run to their end, or their deadline.
// A process stops by itself then, when the bench's pipe to it closes, or
// (Linux) when the bench dies. -runs N runs every cell N times (run k with
// the server's seed -seed + k - 1) and adds each cell's median and worst.
// Per cell, after the warm-up (the first quarter):
//
//	goodput       a.test's accepted requests per second, and as a share of 20/s
//	rejected      a.test's 429s as a share of its requests
//	violations    pause violations (testserver's), both hosts, whole run
//	share x N     each process's share of a.test's requests (accepted and
//	              rejected, on the server's log) in each 10-s window while
//	              every process had URLs queued, times N: the least and the
//	              most over processes and windows (1 and 1: an even split)
//	per process   the least and the most one process sent per second to
//	              a.test, as the processes counted
//	b.test        the fleet's rate on b.test and its busiest second; the
//	              ceiling is kept if the rate is within 2 % of 10/s
//	requests      the fleet's requests (calls of Visit), whole run; those
//	              that timed out (ended by their deadline) and those still
//	              running 5 s after it (unended): both are lost; the
//	              slowest to end
//	store RTT     mean, median and 99th percentile of the Redis commands
//	              that succeeded
//	calls/send    Redis commands per request on the wire (all hosts; a.test
//	              alone, by the scope the command's keys name)
//	CPU           the machine's busy share during the cell, and the fleet's
//	              processes', redis-server's and the rest's (Linux)
//
// The split section gives each process's accepted requests per window.
// After the process-count cells:
//
//	ceiling       -ceiling-procs processes crawl b.test alone (Rule.Rate
//	              10/s, -fleet-workers each), judged on b.test's split
//	              and on requests lost
//	outage        -outage-procs processes for -duration + -outage, Redis
//	              killed (SIGKILL) at half of -duration and started again
//	              on the same port -outage later, empty (a key written
//	              before the kill must be gone, and Redis saves nothing)
//	garbage       -fault-procs processes for -duration + -fault, their
//	              Redis behind a TCP proxy on loopback that, from half of
//	              -duration on and for -fault, answers every command with
//	              bytes that are not RESP (faultproxy.go)
//	slow          the same, the proxy holding every reply 1.5 s
//
// For each store fault: a.test's rejected share during it; the fleet's
// requests in each second of the fault and of the 10 s after it, on a.test
// against the last shared rate (each process's last Snapshot.FleetRate
// with the store shared before the fault, averaged) and on b.test against
// its ceiling; a.test's goodput in the 10 s after, as a share of capacity;
// the longest silence on a.test from the fault on; and the time from the
// store answering again (Redis up, the proxy healed) to the last process
// sampling Snapshot.FleetShared true on every host it crawls. The JSON
// (and -v) also hold each process's a.test rate, fleet rate, estimate,
// concurrency limit and sharing, second by second, and, when requests
// outlived their deadline, where that process's goroutines were.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/colly-polite/polite/internal/demo"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == crawlWorkerFlag {
		crawlChildMain(os.Args[2]) // one process of a shared-frontier crawl
		return
	}
	if len(os.Args) == 3 && os.Args[1] == workerFlag {
		childMain(os.Args[2]) // one process of a fleet cell
		return
	}
	if len(os.Args) == 3 && os.Args[1] == burnFlag {
		burnMain(os.Args[2]) // the CPU load of a busy-machine cell
		return
	}
	duration := flag.Duration("duration", 20*time.Second, "length of each cell (scenario × contender), on the server's clock; S10 runs 4 times as long, the kinds W1-W8 and W10-W12 3 times")
	short := flag.Bool("short", false, "smoke run: 2 s cells, 4 at a time, 20 pages in S11 (unless -duration, -parallel or -pages say otherwise); figures are not meaningful and not judged")
	only := flag.String("scenario", "", "comma-separated scenarios to run (default: all), e.g. S1,S4")
	who := flag.String("contender", "", "comma-separated contenders to run (default: all), e.g. adaptive,limitrule-10")
	rtts := flag.String("rtt", "0", "comma-separated network round trips applied to every host, e.g. 0,200ms: each scenario runs at each")
	pages := flag.Int("pages", 300, "S11: pages per host (besides the index)")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	parallel := flag.Int("parallel", 1, "cells to run at once (more than 1 perturbs timing)")
	runs := flag.Int("runs", 1, "run each cell this many times; every run counts: the table gives each run, then the median and the worst")
	withKinds := flag.Bool("kinds", false, "run the harness's kinds W1-W12 (the servers the law fails on, 200 ms on the wire) instead of S1-S11")
	verbose := flag.Bool("v", false, "print each cell's accepted and rejected requests per second of the target host")
	seed := flag.Uint64("seed", 1, "seed of the baselines' random draws and of the server's latency jitter (adaptive keeps its default random seed)")
	fleet := flag.String("fleet", "", "fleet mode: comma-separated process counts, e.g. 1,2,4,8: that many processes share one Redis (instead of the scenarios)")
	outage := flag.Duration("outage", 10*time.Second, "fleet mode: how long Redis is down in the outage cell; 0: no outage cell")
	outageProcs := flag.Int("outage-procs", 4, "fleet mode: processes in the outage cell")
	fleetWorkers := flag.Int("fleet-workers", 6, "fleet mode: goroutines per host in each process")
	fleetCap := flag.Int("fleet-capacity", 20, "fleet mode: a.test's fixed window, requests a second (its capacity)")
	fleetRobots := flag.Bool("fleet-robots", false, "fleet mode: robots.txt on in the fleet's controllers (Attach's default; off by default here: see the doc comment)")
	fault := flag.Duration("fault", 6*time.Second, "fleet mode: how long the proxy between the fleet and Redis misbehaves in the garbage and slow cells; 0: no such cells")
	faultProcs := flag.Int("fault-procs", 2, "fleet mode: processes in the garbage and slow cells")
	ceilingProcs := flag.Int("ceiling-procs", 2, "fleet mode: processes in the ceiling cell (b.test alone under Rule.Rate 10/s); 0: no ceiling cell")
	fleetTimeout := flag.Duration("fleet-timeout", 30*time.Second, "fleet mode: each request's deadline (Colly's request timeout); a request that reaches it is lost")
	fleetCrawl := flag.String("fleet-crawl", "", "shared-frontier crawl mode: comma-separated process counts, e.g. 1,2,4: S11's whole crawl (-pages pages a host) by that many processes consuming one frontier in Redis")
	fleetCrawlKill := flag.Bool("fleet-crawl-kill", false, "shared-frontier crawl mode: also a cell of 4 processes whose first is killed (SIGKILL) a third of the way")
	fleetCrawlOutage := flag.Bool("fleet-crawl-outage", false, "shared-frontier crawl mode: also a cell of 4 processes during which Redis is killed (SIGKILL) a third of the way and restarted empty 10 s later")
	fleetCrawlThreads := flag.Int("fleet-crawl-threads", 8, "shared-frontier crawl mode: the frontier's threads per process")
	flag.Parse()
	if *fleetCrawl != "" {
		procs, err := parseProcs(*fleetCrawl)
		if err != nil {
			log.Fatal(err)
		}
		demo.Short(*short, map[string]string{"pages": "20"})
		if *pages < 1 || *runs < 1 || *fleetCrawlThreads < 1 {
			log.Fatal("bench: -fleet-crawl needs -pages, -runs and -fleet-crawl-threads of at least 1")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := fleetCrawlMain(ctx, fleetCrawlConfig{procs: procs, kill: *fleetCrawlKill, outage: *fleetCrawlOutage, pages: *pages, threads: *fleetCrawlThreads,
			runs: *runs, seed: *seed, timeout: 10 * time.Minute, jsonOut: *jsonOut})
		stop()
		os.Exit(code)
	}
	if *fleet != "" {
		procs, err := parseProcs(*fleet)
		if err != nil {
			log.Fatal(err)
		}
		demo.Short(*short, map[string]string{"duration": "3s", "outage": "1s", "outage-procs": "2", "fault": "1s", "fleet-timeout": "5s"})
		demo.Short(true, map[string]string{"duration": "60s"}) // fleet cells are 60 s unless -duration says otherwise
		if *duration < 2*time.Second || *outage < 0 || *outageProcs < 1 || *fault < 0 || *faultProcs < 1 || *ceilingProcs < 0 ||
			*fleetTimeout <= 0 || *fleetWorkers < 1 || *fleetCap < 1 || *runs < 1 {
			log.Fatal("bench: fleet mode needs -duration >= 2s, -outage >= 0, -outage-procs >= 1, -fault >= 0, -fault-procs >= 1, -ceiling-procs >= 0, -fleet-timeout > 0, -fleet-workers >= 1, -fleet-capacity >= 1 and -runs >= 1")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := fleetMain(ctx, fleetConfig{procs: procs, capacity: *fleetCap, n: *duration, outage: *outage, outageProcs: *outageProcs,
			fault: *fault, faultProcs: *faultProcs, ceilingProcs: *ceilingProcs, timeout: *fleetTimeout, runs: *runs,
			workers: *fleetWorkers, robots: *fleetRobots, seed: *seed, short: *short, verbose: *verbose, jsonOut: *jsonOut})
		stop()
		os.Exit(code)
	}
	demo.Short(*short, map[string]string{"duration": "2s", "parallel": "4", "pages": "20"})
	if *duration < time.Second {
		log.Fatal("bench: -duration must be at least 1s")
	}
	if *pages < 1 || *runs < 1 {
		log.Fatal("bench: -pages and -runs must be at least 1")
	}
	*parallel = max(*parallel, 1)

	// -scenario names any; without it, S1-S11, or W1-W12 with -kinds, or
	// both in a smoke run
	set := scenarios
	switch {
	case *only != "" || (*short && !*withKinds):
		set = allScenarios()
	case *withKinds:
		set = kinds
	}
	scs, err := pick(set, *only, func(s scenario) string { return s.name })
	if err != nil {
		log.Fatal(err)
	}
	cts, err := pick(contenders, *who, func(c contender) string { return c.name })
	if err != nil {
		log.Fatal(err)
	}
	rtt, err := parseRTTs(*rtts)
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	type cell struct {
		sc  *scenario
		ct  *contender
		cfg cellConfig
	}
	var cells []cell
	for i := range scs {
		for _, r := range rtt {
			for j := range cts {
				if !scs[i].runs(cts[j].name) {
					continue
				}
				for k := range *runs {
					// each run its own seed of the server's jitter and the
					// baselines' draws
					cells = append(cells, cell{&scs[i], &cts[j], cellConfig{d: *duration, rtt: r, pages: *pages, seed: *seed + uint64(k), run: k + 1}})
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %d cells of %v (S10: %v, the kinds: %v), RTT %s, %d run(s) each, %d at a time (%s, %d CPUs)\n",
		len(cells), *duration, 4**duration, kindLength(*duration), *rtts, *runs, *parallel, runtime.Version(), runtime.NumCPU())
	began := time.Now()
	results := make([]result, len(cells))
	sem := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, cl := range cells {
		sem <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			label := fmt.Sprintf("%-3s rtt %-6v %-15s", cl.sc.name, cl.cfg.rtt, cl.ct.name)
			if *runs > 1 {
				label += fmt.Sprintf(" run %d", cl.cfg.run)
			}
			// every run counts: the machine's load is told, not chosen
			before := readCPU()
			r, err := run(ctx, cl.sc, cl.ct, cl.cfg)
			if p, ok := foreign(before, readCPU()); ok {
				r.OthersCPU = &p
			}
			if err != nil {
				log.Printf("bench: %s: %v", label, err)
				failed.Store(true)
			}
			results[i] = r
			fmt.Fprintf(os.Stderr, "  %s %s\n", label, r.oneLine())
			if *verbose && cl.sc.crawl == nil {
				fmt.Fprintf(os.Stderr, "      accepted/s %v\n      rejected/s %v\n", r.perSecond(r.accepted), r.perSecond(r.rejected))
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		log.Fatal("bench: interrupted")
	}

	fmt.Printf("go run ./bench %s\n", strings.Join(os.Args[1:], " "))
	if *short {
		fmt.Println("(-short: a smoke run, cells too short and run side by side; the figures mean nothing and no target is judged)")
	}
	fmt.Printf("%d cells of %v (warm-up %v; S10 %v; the kinds %v, warm-up %v), RTT %s, %d at a time, %s, %d CPUs, %s, took %v\n\n",
		len(cells), *duration, *duration/4, 4**duration, kindLength(*duration), kindLength(*duration)/4, *rtts, *parallel, runtime.Version(), runtime.NumCPU(),
		time.Now().Format("2006-01-02"), time.Since(began).Round(time.Second))
	for _, sc := range scs {
		fmt.Printf("  %-3s %s\n", sc.name, sc.title)
	}
	fmt.Println()
	printTable(os.Stdout, results)
	printCrawl(os.Stdout, results)
	if *runs > 1 {
		fmt.Println()
		printRuns(os.Stdout, results)
	}
	fmt.Println()
	printTargets(os.Stdout, results, *short)

	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, *duration, *parallel, results); err != nil {
			log.Fatal(err)
		}
	}
	if failed.Load() {
		os.Exit(1)
	}
}

// cellConfig is what a cell takes from the command line.
type cellConfig struct {
	d     time.Duration // -duration
	rtt   time.Duration // the network round trip of every host, at the server
	pages int           // S11's pages per host
	seed  uint64
	run   int // 1..-runs
}

// allScenarios is S1-S11 and the kinds W1-W12.
func allScenarios() []scenario { return slices.Concat(scenarios, kinds) }

// pick selects the items named in the comma-separated list (all if empty).
func pick[T any](all []T, list string, name func(T) string) ([]T, error) {
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var out []T
	for _, want := range strings.Split(list, ",") {
		want = strings.TrimSpace(want)
		i := slices.IndexFunc(all, func(t T) bool { return strings.EqualFold(name(t), want) })
		if i < 0 {
			var names []string
			for _, t := range all {
				names = append(names, name(t))
			}
			return nil, fmt.Errorf("bench: unknown %q (known: %s)", want, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// parseRTTs reads -rtt: durations separated by commas, "0" for none.
func parseRTTs(list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, s := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bench: -rtt: %q is not a duration >= 0 (e.g. 0,200ms)", s)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// result is one cell of the table.
type result struct {
	Scenario  string `json:"scenario"`
	Contender string `json:"contender"`
	// RTT is the network round trip of every host at the server; Wire the
	// one on the wire in front of it (a delaying proxy), if any.
	RTT  string `json:"rtt"`
	Wire string `json:"wire,omitempty"`
	// Run numbers the runs of one cell (-runs), from 1.
	Run int `json:"run"`
	// LengthS is the length of the run, in seconds (S11: of the crawl);
	// JudgedFromS is where the goodput's window starts.
	LengthS     float64 `json:"length_s"`
	JudgedFromS float64 `json:"judged_from_s"`
	// Capacity is the hidden capacity of the target host, averaged over
	// the judged window, req/s.
	Capacity   float64 `json:"capacity"`
	Goodput    float64 `json:"goodput"`     // req/s accepted by the target host in the judged window
	GoodputPct float64 `json:"goodput_pct"` // of Capacity
	// MedianLatencyMs is the median latency at the origin of the target's
	// requests answered in the judged window, for a scenario with an
	// unloaded latency (S9); MedianLatencyX is that as a multiple of it.
	MedianLatencyMs *float64 `json:"median_latency_ms,omitempty"`
	MedianLatencyX  *float64 `json:"median_latency_x,omitempty"`
	// Sent and Rejected count the requests (robots.txt excluded) of every
	// host after the warm-up; RejectedPct is Rejected / Sent.
	Sent        int     `json:"sent"`
	Rejected    int     `json:"rejected"`
	RejectedPct float64 `json:"rejected_pct"`
	// ConvergeS is the time to converge in seconds, counted from ChangeAtS
	// (the capacity step of S4 and S10) when there is one; null if it
	// never converged.
	ConvergeS *float64 `json:"converge_s"`
	ChangeAtS *float64 `json:"change_at_s,omitempty"`
	// MaxInFlight is counted on the client side; ServerMaxInFlight is the
	// most requests the target host served at once, ServerMaxQueued the
	// most it held queued (S9).
	MaxInFlight       int64 `json:"max_in_flight"`
	ServerMaxInFlight int   `json:"server_max_in_flight"`
	ServerMaxQueued   int   `json:"server_max_queued,omitempty"`
	// PauseViolations: testserver's count over all hosts and the whole run;
	// CrawlDelayViolations: S7's requests closer than the Crawl-delay.
	// Violations is their sum, the table's column.
	PauseViolations      int `json:"pause_violations"`
	CrawlDelayViolations int `json:"crawl_delay_violations"`
	Violations           int `json:"violations"`
	// Banned is set for scenarios whose host bans.
	Banned   *bool `json:"banned,omitempty"`
	BanCount int   `json:"ban_count"`
	// Whole-run counts of the target host.
	ByStatus map[int]int `json:"by_status,omitempty"`
	Robots   int         `json:"robots_txt_requests"`
	// Crawl is S11's report, a row per host; CrawlCut is set when the
	// crawl was stopped at its deadline.
	Crawl    []crawlHost `json:"crawl,omitempty"`
	CrawlCut bool        `json:"crawl_cut,omitempty"`
	// Adaptive is the controller's view of the target host at the end.
	Adaptive *snapshot `json:"adaptive,omitempty"`
	Err      string    `json:"error,omitempty"`
	// OthersCPU is the share of the machine's CPU that other processes used
	// during the cell, in percent (Linux only), the bench's own CPU load
	// included; BurnerCPU is that load's share, in a busy-machine cell.
	OthersCPU *float64 `json:"others_cpu_pct,omitempty"`
	BurnerCPU *float64 `json:"burner_cpu_pct,omitempty"`

	accepted, rejected []time.Duration // of the target host, for -v
	n                  time.Duration   // the run's length
}

// newResult is the cell's row before it is measured.
func newResult(sc *scenario, ct *contender, cfg cellConfig) result {
	r := result{Scenario: sc.name, Contender: ct.name, RTT: cfg.rtt.String(), Run: cfg.run}
	if sc.wire > 0 {
		r.Wire = sc.wire.String()
	}
	return r
}

// perSecond counts ts per second of the run.
func (r *result) perSecond(ts []time.Duration) []int {
	out := make([]int, int(r.n/time.Second))
	for _, t := range ts {
		if i := int(t / time.Second); i >= 0 && i < len(out) {
			out[i]++
		}
	}
	return out
}

type snapshot struct {
	Limit    float64 `json:"limit"`
	Rate     float64 `json:"rate"`
	Estimate float64 `json:"estimate"`
	Parked   bool    `json:"parked"`
}

func (r *result) othersCPU() float64 {
	if r.OthersCPU == nil {
		return 0
	}
	return *r.OthersCPU
}
