package polite

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/colly-polite/polite/tokenbucket"
)

// The bound of a kind: what the best fixed client reaches in the same
// world. A law judged against a target needs to know whether the target can
// be reached at all: a concurrency cap in front of pages whose cost spreads,
// seen over a round trip that jitters, refuses some of any steady stream
// that comes near its capacity, whoever sends it. The bound is an oracle
// that knows the world in advance and picks, per world, the best pair of a
// pacing rate and a cap on what it keeps in flight (the law's two knobs),
// held for the whole run: no slow start, no probe, no reaction to an
// answer. It sends evenly at the rate, on the world's machine (a busy
// one's stalls delay its sends too, and it then either catches up or
// restarts its schedule, whichever does better), never more than the cap
// in flight (a request is in flight from its send until its answer,
// refused or not, is back), and is judged as the law is: accepted per second over the judged
// window against the capacity, at most refusedMax of its sends refused.
// The law adapts and the bound does not, so the law can beat it (a law
// that reacts to a refusal sends less into the next one); the bound says
// where a steady client stands.

// simBoundRun is the fixed client at rate r (per second) with at most cap
// in flight (0: no cap) in seed's world of sc: its share of the capacity
// and the share of its judged sends refused.
func simBoundRun(sc simScenario, seed uint64, r float64, cap int) (share, refused float64) {
	return simBoundRunOn(sc, seed, r, cap, false)
}

// simBoundRunOn is simBoundRun on the world's machine: on a busy one each
// send goes when the machine gets to it (simWorld.late), and catchUp says
// whether the client then keeps its schedule (the sends a stall delayed
// go at its end, at once) or restarts it from the late send, as the
// pacer does (tokenbucket.MaxCredit of lateness given back at most).
func simBoundRunOn(sc simScenario, seed uint64, r float64, cap int, catchUp bool) (share, refused float64) {
	w := newSimWorld(sc.World, seed, sc.Duration)
	lim := sc.Steps[0].New()
	w.serve(lim)
	half := int64(sc.RTT) / 2
	gap := int64(1e9 / r)
	var (
		sends, accepted int
		back            []int64 // when each request in flight is answered, ascending
	)
	for t := int64(0); t < int64(sc.Duration); {
		// the answers back by t free their slots
		n, _ := slices.BinarySearch(back, t+1)
		back = back[:copy(back, back[n:])]
		if cap > 0 && len(back) >= cap {
			t = back[0]
			continue
		}
		sent := t
		if w.busy {
			sent = w.late(t)
		}
		up, down := w.halves(half)
		a := sent + up
		ok, leave, _, _ := lim.arrive(a)
		at := a + down
		if ok {
			at = leave + down
		}
		i, _ := slices.BinarySearch(back, at)
		back = slices.Insert(back, i, at)
		if a >= int64(sc.JudgeFrom) && a < int64(sc.Duration) {
			sends++
			if ok {
				accepted++
			}
		}
		t += gap
		if !catchUp {
			t = max(t, sent+gap-min(gap/4, int64(tokenbucket.MaxCredit)))
		}
	}
	secs := (sc.Duration - sc.JudgeFrom).Seconds()
	return float64(accepted) / secs / sc.Capacity(0), 1 - float64(accepted)/float64(max(sends, 1))
}

// simBound is the best share of the capacity a fixed client reaches in
// seed's world of sc with at most refusedMax of its sends refused, over
// rates up to 1.5 times the capacity and caps from 1 to sc.Workers (and
// none), and the rate and cap that reach it. A rate is searched by
// bisection, which takes the share refused to grow with the rate. A server
// that refuses nothing at 1.5 times its capacity (a queue) is bounded there
// by the search, not by what it accepts.
func simBound(sc simScenario, seed uint64, refusedMax float64) (best, rate float64, cap int) {
	c := sc.Capacity(0)
	try := func(k int, catchUp bool) {
		lo, hi := 0.02*c, 1.5*c
		for range 24 {
			m := (lo + hi) / 2
			if _, ref := simBoundRunOn(sc, seed, m, k, catchUp); ref <= refusedMax {
				lo = m
			} else {
				hi = m
			}
		}
		if s, ref := simBoundRunOn(sc, seed, lo, k, catchUp); ref <= refusedMax && s > best {
			best, rate, cap = s, lo, k
		}
	}
	// on a busy machine, a client that catches up after a stall and one
	// that does not: the better of the two (an idle machine is never late)
	modes := []bool{false}
	if newSimWorld(sc.World, seed, sc.Duration).busy {
		modes = append(modes, true)
	}
	for _, catchUp := range modes {
		try(0, catchUp)
		if best < 0.99 {
			for k := 1; k <= sc.Workers; k++ {
				try(k, catchUp)
			}
		}
	}
	return best, rate, cap
}

// In the ideal world (no jitter, constant costs) a steady client can take
// a rate limiter's and a concurrency cap's whole capacity without a
// refusal, at 0 ms and over a round trip: the bound finds it, and stays
// under what the limiter can accept.
func TestSimBoundIdeal(t *testing.T) {
	sec := int64(time.Second)
	for _, rtt := range []time.Duration{0, 200 * time.Millisecond} {
		base := simScenario{RTT: rtt, Workers: 40, Duration: 60 * time.Second, JudgeFrom: 10 * time.Second}
		gcra := base
		gcra.Name, gcra.Capacity = "GCRA 20/s burst 5", simConstant(20)
		gcra.Steps = []simStep{{0, simFronted(func() simLimiter { return &simGCRA{t: sec / 20, b: 5} }, simConstCost(50*time.Millisecond), 0, 1)}}
		conn := base
		conn.Name, conn.Capacity = "limit_conn 8, 350 ms", simConstant(8/0.35)
		conn.Steps = []simStep{{0, simFronted(func() simLimiter { return &simConnCap{c: 8} }, simConstCost(350*time.Millisecond), 0, 0)}}
		for _, sc := range []simScenario{gcra, conn} {
			best, rate, _ := simBound(sc, 1, 0.01)
			assert.GreaterOrEqual(t, best, 0.98, "%s at %v: the bound", sc.Name, rtt)
			// over 50 s, a burst of 5 is 0.5 % of a 20/s capacity
			assert.LessOrEqual(t, best, 1.006, "%s at %v: the bound", sc.Name, rtt)
			_, refused := simBoundRun(sc, 1, rate, 0)
			assert.LessOrEqual(t, refused, 0.01, "%s at %v: the bound's own rate", sc.Name, rtt)
			// and past the capacity, a steady client is refused the excess
			_, refused = simBoundRun(sc, 1, 1.2*sc.Capacity(0), 0)
			assert.Greater(t, refused, 0.1, "%s at %v: 1.2 times the capacity", sc.Name, rtt)
		}
	}
	// with no round trip, a client's cap on what it keeps in flight is the
	// server's count in service: a cap of 8 is never refused by a cap of 8,
	// whatever the rate and however the pages' cost spreads
	conn := simScenario{Name: "limit_conn 8, spread costs", Workers: 40, Duration: 60 * time.Second, JudgeFrom: 10 * time.Second,
		Capacity: simConstant(8 / 0.35), World: simProfile{CostSpread: 0.5},
		Steps: []simStep{{0, simFronted(func() simLimiter { return &simConnCap{c: 8} }, simConstCost(350*time.Millisecond), 0, 0)}}}
	share, refused := simBoundRun(conn, 1, 1.5*conn.Capacity(0), 8)
	assert.Zero(t, refused, "a cap of 8 in flight against limit_conn 8 at 0 ms")
	assert.Greater(t, share, 0.9, "a cap of 8 in flight against limit_conn 8 at 0 ms")
	_, refused = simBoundRun(conn, 1, 1.5*conn.Capacity(0), 0)
	assert.Greater(t, refused, 0.1, "no cap in flight, 1.5 times the capacity")
}

// TestSimBound prints, for every kind and family whose capacity does not
// change, the law's median and worst of SIM_SEEDS worlds beside the bound
// in the same worlds: the best fixed client at most 1 % refused
// (SIM_SEEDS=30 go test . -run TestSimBound -v). docs/harness.md quotes
// it. A server that never refuses (a queue) has no such bound: its rate is
// bounded by the latency it adds, which this does not judge.
func TestSimBound(t *testing.T) {
	n := simSeeds(t)
	st := simSettings(t)
	var b strings.Builder
	fmt.Fprintf(&b, "| kind | RTT | law: median of %d worlds | worst | bound (best fixed rate and in-flight cap, <= 1 %% refused): median | worst | law's worst / bound in its world |\n|---|--:|--:|--:|--:|--:|--:|\n", n)
	for _, set := range []func(time.Duration) []simScenario{simKinds, simFamilies} {
		for _, rtt := range simRTTs {
			for _, sc := range set(rtt) {
				if len(sc.Hosts) > 0 || len(sc.Steps) != 1 || sc.ChangeSpread > 0 {
					continue
				}
				var law, bound []float64
				never := false
				for seed := 1; seed <= n; seed++ {
					sc.Seed = uint64(seed)
					law = append(law, simRun(sc, st).share())
					best, _, _ := simBound(sc, uint64(seed), 0.01)
					_, refused := simBoundRun(sc, uint64(seed), 1.5*sc.Capacity(0), 0)
					never = never || refused <= 0.01
					bound = append(bound, best)
				}
				if never {
					fmt.Fprintf(&b, "| %s | %v | %.1f %% | %.1f %% | never refuses | | |\n", sc.Name, rtt, 100*simMedian(law), 100*slices.Min(law))
					continue
				}
				worst, seed := simCell{Shares: law}.worst()
				fmt.Fprintf(&b, "| %s | %v | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %.2f |\n", sc.Name, rtt,
					100*simMedian(law), 100*worst, 100*simMedian(bound), 100*slices.Min(bound), worst/math.Max(bound[seed-1], 1e-9))
			}
		}
	}
	t.Log("\n" + b.String())
}
