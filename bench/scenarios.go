package main

import (
	"time"

	"github.com/colly-polite/polite/testserver"
)

// scenario is one named origin set-up: its hosts and their hidden limits,
// the load the crawl puts on it, and the capacity a perfect crawler would
// reach.
type scenario struct {
	name  string // "S1" ...
	title string // one line for the table header
	// hosts builds the server's hosts for a run of d (S4 places its
	// capacity drop at half of d).
	hosts func(d time.Duration) map[string]testserver.Policy
	// target is the host whose goodput is reported.
	target string
	// workers is the number of goroutines calling Visit. When the scenario
	// has several hosts, worker w crawls host w mod len(hosts), as a
	// crawler keeps one queue per host.
	workers int
	// capacity is the hidden capacity of target (req/s) in force at t on
	// the server's clock, in a run of d.
	capacity func(t, d time.Duration) float64
	// crawlDelay, if set, is the robots.txt Crawl-delay of target: two
	// requests closer than it count as a pause violation.
	crawlDelay time.Duration
	// ban reports whether the scenario's host bans (the "banned" column).
	ban bool
	// drop, if set, is when the capacity changes (S4): convergence is then
	// measured after it.
	drop func(d time.Duration) time.Duration
}

func fixedWindow(n int) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
}

func constant(c float64) func(t, d time.Duration) float64 {
	return func(time.Duration, time.Duration) float64 { return c }
}

// Pages per host: far more than a run visits, so that every visit is a
// distinct page.
const sitePages = 1 << 20

func site() testserver.Site { return testserver.Site{Pages: sitePages} }

// halfRun is S4's capacity drop: half of the run, on a whole second of the
// server's clock so that it falls on a fixed-window (and a bin) boundary.
func halfRun(d time.Duration) time.Duration {
	return max((d / 2).Truncate(time.Second), time.Second)
}

var scenarios = []scenario{
	{
		name: "S1", title: "fixed window 30/s, 350 ms, 40 workers (the reference)",
		target: "a.test", workers: 40, capacity: constant(30),
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit: fixedWindow(30), Latency: testserver.Latency{Base: 350 * time.Millisecond}, Site: site(),
			}}
		},
	},
	{
		name: "S2", title: "GCRA 5/s burst 2, 10 ms, 40 workers (strict and fast)",
		target: "a.test", workers: 40, capacity: constant(5),
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit:   testserver.Limit{Kind: testserver.TokenBucket, Rate: 5, Burst: 2},
				Latency: testserver.Latency{Base: 10 * time.Millisecond}, Site: site(),
			}}
		},
	},
	{
		name: "S3", title: "S1 without any Retry-After header",
		target: "a.test", workers: 40, capacity: constant(30),
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit: fixedWindow(30), Latency: testserver.Latency{Base: 350 * time.Millisecond},
				Excess: testserver.Excess{RetryAfter: testserver.RetryAfterNone}, Site: site(),
			}}
		},
	},
	{
		name: "S4", title: "fixed window 40/s, down to 10/s at half of the run, 350 ms, 40 workers",
		target: "a.test", workers: 40,
		capacity: func(t, d time.Duration) float64 {
			if t < halfRun(d) {
				return 40
			}
			return 10
		},
		drop: halfRun,
		hosts: func(d time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit:    fixedWindow(40),
				Schedule: []testserver.Step{{At: halfRun(d), Limit: fixedWindow(10)}},
				Latency:  testserver.Latency{Base: 350 * time.Millisecond}, Site: site(),
			}}
		},
	},
	{
		name: "S5", title: "at most 8 in flight (503 above), 100 ms, 40 workers: capacity 80/s",
		target: "a.test", workers: 40, capacity: constant(80),
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit:   testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8},
				Latency: testserver.Latency{Base: 100 * time.Millisecond}, Site: site(),
			}}
		},
	},
	{
		name: "S6", title: "two hosts, 20 workers each: a.test 30/s (100 ms) beside b.test 1/s with Retry-After 5 s; goodput of a.test",
		target: "a.test", workers: 40, capacity: constant(30),
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{
				"a.test": {Limit: fixedWindow(30), Latency: testserver.Latency{Base: 100 * time.Millisecond}, Site: site()},
				"b.test": {Limit: fixedWindow(1), Latency: testserver.Latency{Base: 100 * time.Millisecond},
					Excess: testserver.Excess{FixedRetryAfter: 5 * time.Second}, Site: site()},
			}
		},
	},
	{
		name: "S7", title: "robots.txt Crawl-delay: 1, no other limit, 100 ms, 8 workers: capacity 1/s",
		target: "a.test", workers: 8, capacity: constant(1), crawlDelay: time.Second,
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Latency: testserver.Latency{Base: 100 * time.Millisecond},
				Robots:  testserver.Robots{CrawlDelay: time.Second}, Site: site(),
			}}
		},
	},
	{
		name: "S8", title: "fixed window 20/s, 100 ms, 40 workers; 20 rejections within 10 s ban the client (403) for 60 s",
		target: "a.test", workers: 40, capacity: constant(20), ban: true,
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit: fixedWindow(20), Latency: testserver.Latency{Base: 100 * time.Millisecond},
				Ban: &testserver.Ban{After: 20, Within: 10 * time.Second, For: 60 * time.Second}, Site: site(),
			}}
		},
	},
}
