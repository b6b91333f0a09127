package main

import (
	"slices"
	"time"

	"github.com/colly-polite/polite/testserver"
)

// scenario is one named origin set-up: its hosts and their hidden limits,
// the load the crawl puts on it, and the capacity a perfect crawler would
// reach. Every function of n takes the run's length (length(d) for a
// -duration of d).
type scenario struct {
	name  string // "S1" ...
	title string // one line for the table header
	// hosts builds the server's hosts for a run of n (S4 and S10 place
	// their capacity step at half of n). The harness adds -rtt to each.
	hosts func(n time.Duration) map[string]testserver.Policy
	// target is the host whose goodput is reported.
	target string
	// workers is the number of goroutines calling Visit. When the scenario
	// has several hosts, worker w crawls host w mod len(hosts), as a
	// crawler keeps one queue per host.
	workers int
	// capacity is the hidden capacity of target (req/s) in force at t on
	// the server's clock, in a run of n.
	capacity func(t, n time.Duration) float64
	// crawlDelay, if set, is the robots.txt Crawl-delay of target: two
	// requests closer than it count as a pause violation.
	crawlDelay time.Duration
	// ban reports whether the scenario's host bans (the "banned" column).
	ban bool
	// change, if set, is when the capacity steps down (S4) or up (S10):
	// convergence is then measured from it.
	change func(n time.Duration) time.Duration
	// length, if set, is the length of the run for a -duration of d; the
	// default is d.
	length func(d time.Duration) time.Duration
	// judge, if set, is when the goodput's window starts in a run of n; the
	// default is the end of the warm-up, n/4.
	judge func(n time.Duration) time.Duration
	// unloaded, if set, is the target's processing time without queueing:
	// the median latency of its admitted requests in the goodput's window
	// is reported as a multiple of it, and adaptive's target is at most
	// maxLatency times.
	unloaded time.Duration
	// reachWithin, if set, is adaptive's target for the time to converge
	// after the capacity change.
	reachWithin time.Duration
	// crawl, if set, makes the scenario a whole crawl of these hosts by
	// one async collector (crawl.go) instead of a timed run of workers.
	crawl []crawlSite
	// contenders, if set, are the only contenders that run the scenario.
	contenders []string
	// wire, if set, puts this round trip on the wire: a delaying proxy
	// (proxy.go) in front of every host, each direction half of it.
	wire time.Duration
	// busy runs the cell beside a CPU load on every core (busy.go).
	busy bool
}

// maxLatency is adaptive's target for the median latency of a queueing
// origin, as a multiple of its unloaded latency.
const maxLatency = 1.5

// runLength is the length of a run of sc for a -duration of d.
func (sc *scenario) runLength(d time.Duration) time.Duration {
	if sc.length != nil {
		return sc.length(d)
	}
	return d
}

// judged is when the goodput's window starts in a run of n.
func (sc *scenario) judged(n time.Duration) time.Duration {
	if sc.judge != nil {
		return sc.judge(n)
	}
	return n / 4
}

// runs reports whether contender name runs sc.
func (sc *scenario) runs(name string) bool {
	return sc.contenders == nil || slices.Contains(sc.contenders, name)
}

func fixedWindow(n int) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
}

func constant(c float64) func(t, n time.Duration) float64 {
	return func(time.Duration, time.Duration) float64 { return c }
}

// Pages per host: far more than a run visits, so that every visit is a
// distinct page.
const sitePages = 1 << 20

func site() testserver.Site { return testserver.Site{Pages: sitePages} }

// halfRun is the capacity step of S4 and S10: half of the run, on a whole
// second of the server's clock so that it falls on a fixed-window (and a
// bin) boundary.
func halfRun(n time.Duration) time.Duration {
	return max((n / 2).Truncate(time.Second), time.Second)
}

// stepHost is a.test of S4 and S10: a fixed window of before/s, after/s
// from half of the run on, 350 ms per page.
func stepHost(before, after int) func(n time.Duration) map[string]testserver.Policy {
	return func(n time.Duration) map[string]testserver.Policy {
		return map[string]testserver.Policy{"a.test": {
			Limit:    fixedWindow(before),
			Schedule: []testserver.Step{{At: halfRun(n), Limit: fixedWindow(after)}},
			Latency:  testserver.Latency{Base: 350 * time.Millisecond}, Site: site(),
		}}
	}
}

// stepCapacity is the capacity of stepHost(before, after).
func stepCapacity(before, after int) func(t, n time.Duration) float64 {
	return func(t, n time.Duration) float64 {
		if t < halfRun(n) {
			return float64(before)
		}
		return float64(after)
	}
}

// lastQuarter is where S10's goodput is judged: after the rise, once the
// crawler has had time to find the new capacity.
func lastQuarter(n time.Duration) time.Duration { return n - n/4 }

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
		capacity: stepCapacity(40, 10), change: halfRun, hosts: stepHost(40, 10),
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
	{
		name: "S9", title: "a queueing origin: 4 workers of 100 ms that never say no (capacity 40/s), 40 workers crawling; median latency beside goodput",
		target: "a.test", workers: 40, capacity: constant(40), unloaded: 100 * time.Millisecond,
		hosts: func(time.Duration) map[string]testserver.Policy {
			return map[string]testserver.Policy{"a.test": {
				Limit:   testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 4},
				Latency: testserver.Latency{Base: 100 * time.Millisecond}, Site: site(),
			}}
		},
	},
	{
		name: "S10", title: "fixed window 10/s, up to 40/s at half of the run, 350 ms, 40 workers; 4 x -duration long, goodput over the last quarter",
		target: "a.test", workers: 40,
		capacity: stepCapacity(10, 40), change: halfRun, hosts: stepHost(10, 40),
		length:      func(d time.Duration) time.Duration { return 4 * d },
		judge:       lastQuarter,
		reachWithin: 30 * time.Second,
	},
	{
		name: "S11", title: "a whole crawl: -pages pages (and the index) on each of 4 hosts, one async collector following the site's links",
		crawl:      crawlSites,
		contenders: []string{"adaptive", "limitrule-10"},
	},
}

// crawlSites are S11's hosts: mixed limits and latencies.
var crawlSites = []crawlSite{
	{host: "a.test", about: "fixed window 5/s, 200 ms", capacity: 5,
		policy: testserver.Policy{Limit: fixedWindow(5), Latency: testserver.Latency{Base: 200 * time.Millisecond}}},
	{host: "b.test", about: "fixed window 10/s, 100 ms", capacity: 10,
		policy: testserver.Policy{Limit: fixedWindow(10), Latency: testserver.Latency{Base: 100 * time.Millisecond}}},
	{host: "c.test", about: "GCRA 20/s burst 5, 50 ms", capacity: 20,
		policy: testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: 20, Burst: 5},
			Latency: testserver.Latency{Base: 50 * time.Millisecond}}},
	{host: "d.test", about: "at most 4 in flight (503 above), 100 ms: 40/s", capacity: 40,
		policy: testserver.Policy{Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 4},
			Latency: testserver.Latency{Base: 100 * time.Millisecond}}},
}

// The harness's kinds, W1-W12 (go run ./bench -kinds): the servers the law
// was measured failing on, as the simulator's kinds (adaptive's
// sim_kinds_test.go) model them, over a round trip on the wire. They run
// adaptive and the static 10-worker rule the measurements compared it
// with.
var kinds = []scenario{
	wireKind("W1", "limit_req 30/s burst 10, Retry-After 1, 350 ms, 200 ms on the wire", 30,
		limitReq(30, 10, 350*time.Millisecond, testserver.Excess{FixedRetryAfter: time.Second})),
	busyKind(wireKind("W2", "W1 beside a CPU load on every core (a busy machine)", 30,
		limitReq(30, 10, 350*time.Millisecond, testserver.Excess{FixedRetryAfter: time.Second}))),
	wireKind("W3", "limit_req 5/s burst 2, Retry-After 1, 10 ms, 200 ms on the wire", 5,
		limitReq(5, 2, 10*time.Millisecond, testserver.Excess{FixedRetryAfter: time.Second})),
	wireKind("W4", "sliding window 30/s, rejections count (HAProxy's rate, as an exact log), Retry-After 1, 350 ms, 200 ms on the wire", 30,
		testserver.Policy{Limit: testserver.Limit{Kind: testserver.SlidingWindow, N: 30, Window: time.Second, CountRejected: true},
			Latency: testserver.Latency{Base: 350 * time.Millisecond}, Excess: testserver.Excess{FixedRetryAfter: time.Second}}),
	costKind(),
	wireKind("W6", "limit_req 30/s burst 10 answering 403 (no Retry-After), 350 ms, 200 ms on the wire", 30,
		limitReq(30, 10, 350*time.Millisecond, testserver.Excess{Status: 403, RetryAfter: testserver.RetryAfterNone})),
	wireKind("W7", "limit_conn 8 (503, no Retry-After), 350 ms, 200 ms on the wire: 22.9/s", 8/0.35,
		testserver.Policy{Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8},
			Latency: testserver.Latency{Base: 350 * time.Millisecond}, Excess: testserver.Excess{RetryAfter: testserver.RetryAfterNone}}),
	dropKind(),
	{
		name: "W9", title: "S11's whole crawl (4 hosts, -pages pages each), 200 ms on the wire",
		crawl: crawlSites, wire: kindWire, contenders: kindContenders,
	},
	wireKind("W10", "limit_req 10/s burst 5 answering 503 without Retry-After, 100 ms, 200 ms on the wire", 10,
		limitReq(10, 5, 100*time.Millisecond, testserver.Excess{Status: 503, RetryAfter: testserver.RetryAfterNone})),
	spreadKind(),
	capKind(),
}

// capKind is W12: W7's concurrency cap with no round trip on the wire,
// before pages whose cost spreads uniformly over 200-500 ms (350 ms on
// average): the client's count in flight is the server's, so the cap is
// one level, as in the simulator's limit_conn at 0 ms.
func capKind() scenario {
	p := testserver.Policy{Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8},
		Latency: testserver.Latency{Base: 200 * time.Millisecond, Jitter: 300 * time.Millisecond},
		Excess:  testserver.Excess{RetryAfter: testserver.RetryAfterNone}}
	sc := wireKind("W12", "limit_conn 8 (503, no Retry-After), pages of 200-500 ms (uniform), no round trip on the wire: 22.9/s", 8/0.35, p)
	sc.wire = 0
	return sc
}

// spreadKind is W11: W1's limiter before pages whose cost spreads
// uniformly over 200-500 ms (350 ms on average, never overloaded), with no
// round trip on the wire: the world the simulator finds the latency knee
// mistaking for a queue.
func spreadKind() scenario {
	p := limitReq(30, 10, 200*time.Millisecond, testserver.Excess{FixedRetryAfter: time.Second})
	p.Latency.Jitter = 300 * time.Millisecond
	sc := wireKind("W11", "limit_req 30/s burst 10, Retry-After 1, pages of 200-500 ms (uniform), no round trip on the wire", 30, p)
	sc.wire = 0
	return sc
}

// kindWire is the round trip the kinds put on the wire, as measured.
const kindWire = 200 * time.Millisecond

// kindLength is a kind's cell for a -duration of d: three times as long,
// so that its judged window (after a warm-up of a quarter) holds two of
// the law's long gaps between probes (50 s after a 1-s Retry-After). A
// 60-s cell judged from 15 s ends before the first probe after slow
// start's end: W4 read 94.3-94.4 % in such cells and 85.5-90.6 % over
// three minutes, where each failed probe cost a step down.
func kindLength(d time.Duration) time.Duration { return 3 * d }

var kindContenders = []string{"adaptive", "limitrule-10"}

// limitReq is nginx's limit_req rate=r burst=b nodelay in front of an
// origin of cost, answering excess as ex says.
func limitReq(r float64, b int, cost time.Duration, ex testserver.Excess) testserver.Policy {
	return testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: r, Burst: b},
		Latency: testserver.Latency{Base: cost}, Excess: ex}
}

// wireKind is a one-host kind of capacity c behind the wire, crawled by 40
// workers.
func wireKind(name, title string, c float64, p testserver.Policy) scenario {
	return scenario{name: name, title: title, target: "a.test", workers: 40, capacity: constant(c),
		wire: kindWire, contenders: kindContenders, length: kindLength,
		hosts: func(time.Duration) map[string]testserver.Policy {
			p := p
			p.Site = site()
			return map[string]testserver.Policy{"a.test": p}
		}}
}

func busyKind(sc scenario) scenario {
	sc.busy = true
	return sc
}

// costKind is W5: pages of 20 ms until the end of the warm-up, then of
// 600 ms, never overloaded, behind limit_req 20/s burst 10; judged from a
// third of the run (5 s into the slow phase of a 60-s cell).
func costKind() scenario {
	sc := wireKind("W5", "pages of 20 ms, of 600 ms from a quarter of the run on (never overloaded), limit_req 20/s burst 10, Retry-After 1, 200 ms on the wire", 20,
		testserver.Policy{})
	sc.hosts = func(n time.Duration) map[string]testserver.Policy {
		p := limitReq(20, 10, 20*time.Millisecond, testserver.Excess{FixedRetryAfter: time.Second})
		p.Latency.Schedule = []testserver.CostStep{{At: n / 4, Base: 600 * time.Millisecond}}
		p.Site = site()
		return map[string]testserver.Policy{"a.test": p}
	}
	sc.judge = func(n time.Duration) time.Duration { return n / 3 }
	return sc
}

// dropKind is W8: limit_req 40/s, reloaded at 10/s at half of the run,
// 200 ms; judged from 5 s after the drop in a 60-s cell.
func dropKind() scenario {
	sc := wireKind("W8", "limit_req 40/s burst 10, reloaded at 10/s at half of the run, Retry-After 1, 200 ms, 200 ms on the wire", 0,
		testserver.Policy{})
	ex := testserver.Excess{FixedRetryAfter: time.Second}
	sc.capacity, sc.change = stepCapacity(40, 10), halfRun
	sc.hosts = func(n time.Duration) map[string]testserver.Policy {
		p := limitReq(40, 10, 200*time.Millisecond, ex)
		p.Schedule = []testserver.Step{{At: halfRun(n), Limit: limitReq(10, 10, 0, ex).Limit}}
		p.Site = site()
		return map[string]testserver.Policy{"a.test": p}
	}
	sc.judge = func(n time.Duration) time.Duration { return halfRun(n) + n/12 }
	return sc
}
