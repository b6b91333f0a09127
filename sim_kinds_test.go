package polite

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// simKinds are the kinds of server the law was seen to fail on, or could
// fail on, each judged by its worst world: every seed draws a world
// (simProfile) as well as the gate's jitter. Most are nginx or HAProxy set
// up as they were measured: limit_req in front of an origin of a given
// cost. Capacities and costs are those of the real runs; nothing here is
// tuned to the law.
func simKinds(rtt time.Duration) []simScenario {
	sec := int64(time.Second)
	ms := time.Millisecond
	worlds := simProfile{Phase: time.Second, RTTJitter: 0.2, CostSpread: 0.3, Drift: 0.1, Busy: 0.3}
	base := simScenario{RTT: rtt, Workers: 40, Duration: 120 * time.Second, JudgeFrom: 20 * time.Second, Seed: 1, World: worlds}
	with := func(name string, capacity float64, adm func() simLimiter, cost simCost, status int, ra int64) simScenario {
		s := base
		s.Name, s.Capacity = name, simConstant(capacity)
		s.Steps = []simStep{{0, simFronted(adm, cost, status, ra)}}
		return s
	}
	// nginx limit_req rate=r burst=b nodelay: a GCRA
	limitReq := func(r, b int64) func() simLimiter {
		return func() simLimiter { return &simGCRA{t: sec / r, b: b} }
	}

	busy := with("limit_req 30/s burst 10, Retry-After 1, 350 ms, busy machine", 30, limitReq(30, 10), simConstCost(350*ms), 0, 1)
	busy.World.Busy, busy.World.Shared = 1, true

	cost := with("page cost 20 ms, 600 ms from 15 s, limit_req 20/s burst 10", 20, limitReq(20, 10),
		func(a int64, _ float64) int64 {
			if a < int64(15*time.Second) {
				return int64(20 * ms)
			}
			return int64(600 * ms)
		}, 0, 1)
	cost.JudgeFrom = 25 * time.Second

	// a concurrency cap's capacity is its cap over the cost: the world's
	// drift would move it, so these worlds do not drift
	conn := with("limit_conn 8 (503), 350 ms: 22.9/s", 8/0.35, func() simLimiter { return &simConnCap{c: 8} }, simConstCost(350*ms), 0, 0)
	conn.World.Drift = 0

	drop := with("limit_req 40/s -> 10/s at 60-120 s (reload), 200 ms", 0, limitReq(40, 10), simConstCost(200*ms), 0, 1)
	drop.Capacity = func(t time.Duration) float64 {
		if t < 60*time.Second {
			return 40
		}
		return 10
	}
	drop.Steps = append(drop.Steps, simStep{60 * time.Second, simFronted(limitReq(10, 10), simConstCost(200*ms), 0, 1)})
	drop.JudgeFrom, drop.ChangeSpread = 65*time.Second, 60*time.Second

	penalty := with("penalty box: 20/s, 10 s out after a 429 that says Retry-After 1, 100 ms", 20, func() simLimiter {
		return &simPenalty{inner: &simGCRA{t: sec / 20, b: 5}, box: 10 * sec}
	}, simConstCost(100*ms), 0, 1)

	mix := with("per-URL cost 30 ms (70 %), 150 ms (25 %), 1.5 s (5 %), limit_req 20/s burst 10", 20, limitReq(20, 10),
		func(_ int64, u float64) int64 {
			switch {
			case u < 0.70:
				return int64(30 * ms)
			case u < 0.95:
				return int64(150 * ms)
			}
			return int64(1500 * ms)
		}, 0, 1)

	drift := with("origin cost drifting 100 -> 400 -> 100 ms over 120 s, fixed window 20/s", 20, func() simLimiter {
		return &simFixedWindow{n: 20, w: sec, k: -1}
	}, func(a int64, _ float64) int64 {
		return int64(float64(100*ms) * (2.5 - 1.5*math.Cos(2*math.Pi*float64(a)/float64(120*time.Second))))
	}, 0, 0)

	// its refused workers knock every 100 ms: a minute shows the park
	forbidden := with("limit_req 30/s burst 10 answering 403, 350 ms", 30, limitReq(30, 10), simConstCost(350*ms), 403, -1)
	forbidden.Duration = 60 * time.Second

	return []simScenario{
		with("limit_req 30/s burst 10, Retry-After 1, 350 ms", 30, limitReq(30, 10), simConstCost(350*ms), 0, 1),
		busy,
		with("limit_req 5/s burst 2, Retry-After 1, 10 ms", 5, limitReq(5, 2), simConstCost(10*ms), 0, 1),
		with("HAProxy sliding window 30/s, rejections count, Retry-After 1, 350 ms", 30, func() simLimiter {
			return &simHAProxy{n: 30, period: sec, k: -2}
		}, simConstCost(350*ms), 0, 1),
		cost,
		forbidden,
		conn,
		drop,
		simCrawlKind(rtt, worlds, simFIFO),
		simCrawlKind(rtt, worlds, simReady),
		with("limit_req 10/s burst 5 without nodelay: queues, then 503 without Retry-After, 100 ms", 10, func() simLimiter {
			return &simLeaky{rate: 10, burst: 5}
		}, simConstCost(100*ms), 0, 0),
		with("limit_req 10/s burst 5 answering 503 without Retry-After, 100 ms", 10, limitReq(10, 5), simConstCost(100*ms), 503, -1),
		penalty,
		mix,
		drift,
		// the socket bench's W4: an exact log of the last second's
		// arrivals, refused ones logged too (HAProxy's counter as
		// tracked before its deny rule), answering a fixed Retry-After
		with("sliding log 30/s, rejections count, Retry-After 1, 350 ms (W4)", 30, func() simLimiter {
			return &simSliding{n: 30, w: sec}
		}, simConstCost(350*ms), 0, 1),
	}
}

// simFronted builds a simFront for a step.
func simFronted(adm func() simLimiter, cost simCost, status int, ra int64) func() simLimiter {
	return func() simLimiter { return &simFront{adm: adm(), cost: cost, status: status, ra: ra} }
}

// simCrawlKind is a whole crawl of the bench's S11 hosts, 300 pages each,
// by 40 workers shared as dispatch says.
func simCrawlKind(rtt time.Duration, worlds simProfile, dispatch simDispatch) simScenario {
	sec := int64(time.Second)
	ms := time.Millisecond
	host := func(name string, capacity float64, adm func() simLimiter, cost time.Duration) simHost {
		return simHost{Name: name, Pages: 300, Capacity: simConstant(capacity),
			Steps: []simStep{{0, simFronted(adm, simConstCost(cost), 0, 0)}}}
	}
	hosts := []simHost{
		host("a.test", 5, func() simLimiter { return &simFixedWindow{n: 5, w: sec, k: -1} }, 200*ms),
		host("b.test", 10, func() simLimiter { return &simFixedWindow{n: 10, w: sec, k: -1} }, 100*ms),
		host("c.test", 20, func() simLimiter { return &simGCRA{t: sec / 20, b: 5} }, 50*ms),
		host("d.test", 40, func() simLimiter { return &simConnCap{c: 4} }, 100*ms),
	}
	name := "a crawl of 4 hosts x 300 pages (5, 10, 20, 40/s), one FIFO queue"
	if dispatch == simReady {
		name = "the same crawl, the ready host first (frontier)"
	}
	worlds.Drift = 0 // d.test's capacity is its cap over its cost
	return simScenario{Name: name, RTT: rtt, Workers: 40, Duration: simCrawlDeadline(hosts), Seed: 1,
		World: worlds, Hosts: hosts, Dispatch: dispatch}
}

// simSeeds is SIM_SEEDS, the number of worlds a printing test runs; it
// skips the test when unset.
func simSeeds(t *testing.T) int {
	n := 0
	fmt.Sscan(os.Getenv("SIM_SEEDS"), &n)
	if n == 0 {
		t.Skip("SIM_SEEDS=10 to run")
	}
	return n
}

// simConstant is a capacity that does not change.
func simConstant(c float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return c }
}

// simCell is one family at one RTT over seeds 1..n: its worst and median
// world.
type simCell struct {
	Name             string
	RTT              time.Duration
	Shares, Rejected []float64 // per seed, in seed order
	Violations       int       // over every seed
	Breaker, Failed  int
}

func (c simCell) worst() (share float64, seed int) {
	i := 0
	for j, s := range c.Shares {
		if s < c.Shares[i] {
			i = j
		}
	}
	return c.Shares[i], i + 1
}

func simMedian(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// simMatrix runs families(rtt) for every RTT over seeds 1..n.
func simMatrix(families func(time.Duration) []simScenario, rtts []time.Duration, n int, st *settings) []simCell {
	var cells []simCell
	for _, rtt := range rtts {
		for i, sc := range families(rtt) {
			c := simCell{Name: sc.Name, RTT: rtt}
			for seed := 1; seed <= n; seed++ {
				sc := families(rtt)[i]
				sc.Seed = uint64(seed)
				r := simRun(sc, st)
				c.Shares = append(c.Shares, r.share())
				c.Rejected = append(c.Rejected, r.rejectedShare())
				c.Violations += r.Violations
				c.Breaker += r.BreakerOpens
				c.Failed += r.Failed
			}
			cells = append(cells, c)
		}
	}
	return cells
}

// simTable renders cells as the table docs/harness.md holds.
func simTable(cells []simCell, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| kind | RTT | goodput, median of %d worlds | worst (seed) | rejected, median | worst | violations, all worlds | breaker opened, all worlds | refused, all worlds |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n", n)
	for _, c := range cells {
		w, seed := c.worst()
		fmt.Fprintf(&b, "| %s | %v | %.1f %% | %.1f %% (%d) | %.2f %% | %.2f %% | %d | %d | %d |\n",
			c.Name, c.RTT, 100*simMedian(c.Shares), 100*w, seed, 100*simMedian(c.Rejected), 100*slices.Max(c.Rejected),
			c.Violations, c.Breaker, c.Failed)
	}
	return b.String()
}

// TestSimWorlds prints, for every kind and every old family at every RTT,
// the median and the worst of SIM_SEEDS worlds (SIM_SEEDS=10 go test
// . -run TestSimWorlds -v): the figures docs/harness.md quotes.
// The old families' worlds vary the gate's jitter only, as in TestSimSpread.
func TestSimWorlds(t *testing.T) {
	n := simSeeds(t)
	st := simSettings(t)
	t.Log("\nkinds (sim_kinds_test.go):\n" + simTable(simMatrix(simKinds, simRTTs, n, st), n))
	t.Log("\nfamilies (sim_families_test.go):\n" + simTable(simMatrix(simFamilies, simRTTs, n, st), n))
}

// TestSimCrawl prints the whole crawls host by host: the median and the
// latest finish over SIM_SEEDS worlds against each host's ideal
// (SIM_SEEDS=10 go test . -run TestSimCrawl -v).
func TestSimCrawl(t *testing.T) {
	n := simSeeds(t)
	st := simSettings(t)
	var b strings.Builder
	fmt.Fprintf(&b, "| crawl | RTT | host | ideal | finish, median of %d | latest | rejected, median |\n|---|--:|---|--:|--:|--:|--:|\n", n)
	for _, rtt := range simRTTs {
		for _, d := range []simDispatch{simFIFO, simReady} {
			var hosts [][]simCrawlHost
			var name string
			for seed := 1; seed <= n; seed++ {
				sc := simCrawlKind(rtt, simKinds(rtt)[0].World, d)
				sc.Seed, name = uint64(seed), sc.Name
				for i, h := range simRun(sc, st).Crawl.Hosts {
					if seed == 1 {
						hosts = append(hosts, nil)
					}
					hosts[i] = append(hosts[i], h)
				}
			}
			for _, hs := range hosts {
				var fin, rej []float64
				for _, h := range hs {
					fin = append(fin, h.Finish.Seconds())
					rej = append(rej, 100*float64(h.Rejected)/float64(max(h.Sends, 1)))
				}
				fmt.Fprintf(&b, "| %s | %v | %s | %.1f s | %.1f s | %.1f s | %.2f %% |\n", name, rtt, hs[0].Name,
					hs[0].Ideal.Seconds(), simMedian(fin), slices.Max(fin), simMedian(rej))
			}
		}
	}
	t.Log("\n" + b.String())
}

// simForbidAll answers 403 to everything, after a cost.
type simForbidAll struct{}

func (simForbidAll) arrive(int64) (bool, int64, int, int64) { return false, 0, 403, 0 }

// A host that answers 403 to everything is parked, and each park ends with
// one probe after a bound that doubles while the blocks persist: after its
// first minute it costs a handful of requests an hour, in every world and
// at every round trip.
func TestSimForbiddenHour(t *testing.T) {
	st := simSettings(t)
	for _, rtt := range simRTTs {
		for seed := uint64(1); seed <= 3; seed++ {
			sc := simScenario{Name: "403 to everything", RTT: rtt, Workers: 40, Seed: seed,
				Duration: 61 * time.Minute, JudgeFrom: time.Minute, Capacity: simConstant(0),
				World: simKinds(rtt)[0].World,
				Steps: []simStep{{0, simFronted(func() simLimiter { return simForbidAll{} }, simConstCost(0), 403, -1)}}}
			r := simRun(sc, st)
			t.Logf("at %v, world %d: %d requests after the first minute, %d in all", rtt, seed, r.Sends, r.AllSends)
			assert.LessOrEqual(t, r.Sends, 10, "at %v, world %d: requests in the hour after the first minute", rtt, seed)
			assert.Positive(t, r.Sends, "at %v, world %d: the parks end by themselves", rtt, seed)
			assert.Zero(t, r.Violations, "at %v, world %d", rtt, seed)
		}
	}
}
