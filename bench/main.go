// Bench is the benchmark harness of colly-polite: named scenarios (S1–S11)
// over real loopback sockets against the bundled testserver, each crawled
// in turn by this library and by what a Colly user would pick instead, and
// tables of how close each came to the server's hidden capacity and how
// politely.
//
// Run it from the repository root:
//
//	go run ./bench -rtt 0,200ms -rerun 1 -json bench/results.json -v   # the full run: every cell at RTT 0 and at 200 ms (about 70 minutes)
//	go run ./bench                          # RTT 0 only, 20 s cells (S10: 80 s), about 35 minutes
//	go run ./bench -rtt 200ms               # RTT 200 ms only
//	go run ./bench -duration 12s            # shorter cells
//	go run ./bench -scenario S1,S2 -contender adaptive,limitrule-10
//	go run ./bench -json results.json       # the table as JSON too
//	go run ./bench -short                   # smoke run: 2 s cells, 4 at a time, 20 pages in S11; nothing is judged
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
	"time"

	"github.com/colly-polite/polite/internal/demo"
)

func main() {
	duration := flag.Duration("duration", 20*time.Second, "length of each cell (scenario × contender), on the server's clock; S10 runs 4 times as long")
	short := flag.Bool("short", false, "smoke run: 2 s cells, 4 at a time, 20 pages in S11 (unless -duration, -parallel or -pages say otherwise); figures are not meaningful and not judged")
	only := flag.String("scenario", "", "comma-separated scenarios to run (default: all), e.g. S1,S4")
	who := flag.String("contender", "", "comma-separated contenders to run (default: all), e.g. adaptive,limitrule-10")
	rtts := flag.String("rtt", "0", "comma-separated network round trips applied to every host, e.g. 0,200ms: each scenario runs at each")
	pages := flag.Int("pages", 300, "S11: pages per host (besides the index)")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	parallel := flag.Int("parallel", 1, "cells to run at once (more than 1 perturbs timing)")
	quiet := flag.Float64("quiet", 15, "before each cell, wait (up to -patience) until other processes use less than this share of the CPU, in percent; 0: do not wait (sequential runs only)")
	patience := flag.Duration("patience", 30*time.Second, "the longest wait for a quiet machine before a cell")
	rerun := flag.Int("rerun", 0, "re-run a cell up to this many times while other processes took more than twice -quiet of the CPU during it; the least perturbed run is kept")
	verbose := flag.Bool("v", false, "print each cell's accepted and rejected requests per second of the target host")
	seed := flag.Uint64("seed", 1, "seed of the baselines' random draws and of the server's latency jitter (adaptive keeps its default random seed)")
	flag.Parse()
	demo.Short(*short, map[string]string{"duration": "2s", "parallel": "4", "quiet": "0", "rerun": "0", "pages": "20"})
	if *duration < time.Second {
		log.Fatal("bench: -duration must be at least 1s")
	}
	if *pages < 1 {
		log.Fatal("bench: -pages must be at least 1")
	}
	*parallel = max(*parallel, 1)

	scs, err := pick(scenarios, *only, func(s scenario) string { return s.name })
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
				if scs[i].runs(cts[j].name) {
					cells = append(cells, cell{&scs[i], &cts[j], cellConfig{d: *duration, rtt: r, pages: *pages, seed: *seed}})
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %d cells of %v (S10: %v), RTT %s, %d at a time (%s, %d CPUs)\n",
		len(cells), *duration, 4**duration, *rtts, *parallel, runtime.Version(), runtime.NumCPU())
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
			var r result
			var err error
			for try := 0; try <= *rerun; try++ {
				if *quiet > 0 && *parallel == 1 {
					waitQuiet(ctx, *quiet, *patience)
				}
				before := readCPU()
				rr, e := run(ctx, cl.sc, cl.ct, cl.cfg)
				if p, ok := foreign(before, readCPU()); ok {
					rr.OthersCPU = &p
				}
				if try == 0 || rr.othersCPU() < r.othersCPU() {
					r, err = rr, e
				}
				if e != nil || ctx.Err() != nil || *quiet <= 0 || r.othersCPU() <= 2**quiet || try == *rerun {
					break
				}
				fmt.Fprintf(os.Stderr, "  %s other processes took %.0f %% of the CPU: again\n", label, rr.othersCPU())
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
	fmt.Printf("%d cells of %v (warm-up %v; S10 %v), RTT %s, %d at a time, %s, %d CPUs, %s, took %v\n\n",
		len(cells), *duration, *duration/4, 4**duration, *rtts, *parallel, runtime.Version(), runtime.NumCPU(),
		time.Now().Format("2006-01-02"), time.Since(began).Round(time.Second))
	for _, sc := range scs {
		fmt.Printf("  %-3s %s\n", sc.name, sc.title)
	}
	fmt.Println()
	printTable(os.Stdout, results)
	printCrawl(os.Stdout, results)
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
	rtt   time.Duration // the network round trip of every host
	pages int           // S11's pages per host
	seed  uint64
}

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
	// RTT is the network round trip of every host.
	RTT string `json:"rtt"`
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
	// during the cell, in percent (Linux only).
	OthersCPU *float64 `json:"others_cpu_pct,omitempty"`

	accepted, rejected []time.Duration // of the target host, for -v
	n                  time.Duration   // the run's length
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
