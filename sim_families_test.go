package polite

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simFamilies are the limiter families every law change is judged on, each
// at several round trips. Capacities and latencies are those of the bench
// scenarios; nothing here is tuned to the law.
func simFamilies(rtt time.Duration) []simScenario {
	ms := int64(time.Millisecond)
	sec := int64(time.Second)
	constant := simConstant
	step := func(at time.Duration, a, b float64) func(time.Duration) float64 {
		return func(t time.Duration) float64 {
			if t < at {
				return a
			}
			return b
		}
	}
	base := simScenario{RTT: rtt, Workers: 40, Duration: 120 * time.Second, JudgeFrom: 20 * time.Second, Seed: 1}
	with := func(name string, cap func(time.Duration) float64, steps ...simStep) simScenario {
		s := base
		s.Name, s.Capacity, s.Steps = name, cap, steps
		return s
	}
	fixed := func(n, lat int64, noRA bool) func() simLimiter {
		return func() simLimiter { return &simFixedWindow{n: n, w: sec, latency: lat * ms, noRA: noRA, k: -1} }
	}
	// the change comes 60-120 s in, a draw per world (ChangeSpread); the
	// drop is judged from 5 s after it, the rise from 10 s after it (the
	// law's issue asks 90 % of the new capacity from then on)
	drop := with("fixed 40/s -> 10/s at 60-120 s, 50 ms", step(60*time.Second, 40, 10),
		simStep{0, fixed(40, 50, false)}, simStep{60 * time.Second, fixed(10, 50, false)})
	drop.JudgeFrom, drop.ChangeSpread = 65*time.Second, 60*time.Second
	rise := with("fixed 10/s -> 40/s at 60-120 s, 50 ms", step(60*time.Second, 10, 40),
		simStep{0, fixed(10, 50, false)}, simStep{60 * time.Second, fixed(40, 50, false)})
	rise.JudgeFrom, rise.ChangeSpread = 70*time.Second, 60*time.Second
	pool := with("worker pool 4 x 100 ms, queues", constant(40), simStep{0, func() simLimiter {
		return &simPool{service: 100 * ms, free: make([]int64, 4)}
	}})
	pool.Latencies = true
	return []simScenario{
		with("fixed window 30/s, 350 ms", constant(30), simStep{0, fixed(30, 350, false)}),
		with("fixed window 20/s, no Retry-After, 20 ms", constant(20), simStep{0, fixed(20, 20, true)}),
		with("GCRA 5/s burst 2, 10 ms", constant(5), simStep{0, func() simLimiter {
			return &simGCRA{t: sec / 5, b: 2, latency: 10 * ms}
		}}),
		with("GCRA 12/s burst 10, rejections count, 100 ms", constant(12), simStep{0, func() simLimiter {
			return &simGCRA{t: sec / 12, b: 10, latency: 100 * ms, countRejected: true}
		}}),
		with("sliding window 20/s, rejections count, 50 ms", constant(20), simStep{0, func() simLimiter {
			return &simSliding{n: 20, w: sec, latency: 50 * ms}
		}}),
		with("concurrency cap 8 (503), 100 ms", constant(80), simStep{0, func() simLimiter {
			return &simConcurrency{c: 8, latency: 100 * ms}
		}}),
		pool,
		drop, rise,
	}
}

var simRTTs = []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond}

func simSettings(t testing.TB) *settings {
	st, err := Config{JitterSeed: 1}.resolve()
	require.NoError(t, err)
	return st
}

// TestSimFamilies runs every family at every round trip and prints the
// table docs/measurements.md quotes (go test . -run TestSimFamilies -v).
// It asserts what holds whatever the law: no request sent inside an
// announced pause, and the same figures on a second run.
//
// SIM_TRACE=FILE writes every send and answer of every run to FILE, with
// the law's state at each answer: what to read when a figure moves.
func TestSimFamilies(t *testing.T) {
	st := simSettings(t)
	if name := os.Getenv("SIM_TRACE"); name != "" {
		f, err := os.Create(name)
		require.NoError(t, err)
		defer f.Close()
		var family string
		simTrace = func(at int64, what string) { fmt.Fprintf(f, "%s %.6f %s\n", family, float64(at)/1e9, what) }
		defer func() { simTrace = nil }()
		for _, rtt := range simRTTs {
			for _, sc := range simFamilies(rtt) {
				family = fmt.Sprintf("[%s @ %v]", sc.Name, rtt)
				simRun(sc, st)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| family | RTT | goodput (%% of capacity) | rejected | violations | breaker opened | median latency |\n|---|---|---|---|---|---|---|\n")
	for _, rtt := range simRTTs {
		for _, sc := range simFamilies(rtt) {
			r := simRun(sc, st)
			assert.Zero(t, r.Violations, "%s at %v: requests inside an announced pause", sc.Name, rtt)
			assert.Equal(t, r, simRun(sc, st), "%s at %v: not deterministic", sc.Name, rtt)
			lat := "-"
			if sc.Latencies {
				lat = r.MedianLatency.String()
			}
			fmt.Fprintf(&b, "| %s | %v | %.1f %% | %.2f %% | %d | %d | %s |\n", sc.Name, rtt, 100*r.share(), 100*r.rejectedShare(), r.Violations, r.BreakerOpens, lat)
		}
	}
	t.Log("\n" + b.String())
}

// BenchmarkSimSends measures the simulator's speed on one scope: a 20/s
// fixed window over 50 ms for one virtual hour per iteration.
func BenchmarkSimSends(b *testing.B) {
	st := simSettings(b)
	sc := simFamilies(50 * time.Millisecond)[1]
	sc.Duration, sc.JudgeFrom = time.Hour, 0
	sends := 0
	start := time.Now()
	for b.Loop() {
		sends += simRun(sc, st).AllSends
	}
	b.ReportMetric(float64(sends)/time.Since(start).Seconds(), "sends/s")
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(sends), "ns/send")
}

// BenchmarkSimFleet is the scale run: 10,000 scopes, each a fixed window,
// a GCRA or a sliding window at 1-20 req/s, over 0-200 ms, crawled for one
// virtual hour, on every core (go test . -run '^$' -bench SimFleet
// -benchtime 1x). SIM_FLEET_SCOPES overrides the count.
func BenchmarkSimFleet(b *testing.B) {
	st := simSettings(b)
	n := 10_000
	if v := os.Getenv("SIM_FLEET_SCOPES"); v != "" {
		fmt.Sscan(v, &n)
	}
	for b.Loop() {
		var next, sends, accepted, violations atomic.Int64
		var capSum atomic.Uint64
		start := time.Now()
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					sc := simFleetScope(uint64(i))
					r := simRun(sc, st)
					sends.Add(int64(r.AllSends))
					accepted.Add(int64(r.Accepted))
					violations.Add(int64(r.Violations))
					capSum.Add(uint64(r.CapacityAvg * (sc.Duration - sc.JudgeFrom).Seconds()))
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		b.ReportMetric(el.Seconds(), "s/run")
		b.ReportMetric(float64(sends.Load())/el.Seconds(), "sends/s")
		b.ReportMetric(100*float64(accepted.Load())/float64(capSum.Load()), "goodput-%")
		b.ReportMetric(float64(violations.Load()), "violations")
	}
}

// simFleetScope draws scope i of the fleet.
func simFleetScope(i uint64) simScenario {
	r := simRand(i)
	rate := 1 + r.IntN(20)
	lat := int64(r.IntN(300)) * int64(time.Millisecond)
	sec := int64(time.Second)
	sc := simScenario{
		Name: fmt.Sprintf("fleet %d", i), RTT: time.Duration(r.IntN(200)) * time.Millisecond,
		Workers: 8, Duration: time.Hour, JudgeFrom: time.Minute, Seed: i + 1,
		Capacity: func(time.Duration) float64 { return float64(rate) },
	}
	switch r.IntN(3) {
	case 0:
		sc.Steps = []simStep{{0, func() simLimiter { return &simFixedWindow{n: int64(rate), w: sec, latency: lat, k: -1} }}}
	case 1:
		sc.Steps = []simStep{{0, func() simLimiter { return &simGCRA{t: sec / int64(rate), b: 1 + int64(r.IntN(4)), latency: lat} }}}
	default:
		sc.Steps = []simStep{{0, func() simLimiter { return &simSliding{n: int64(rate), w: sec, latency: lat} }}}
	}
	return sc
}

// TestSimSpread runs every family over several jitter seeds and prints the
// range of each figure (SIM_SEEDS=10 go test . -run TestSimSpread
// -v): the noise a law change must beat to count.
func TestSimSpread(t *testing.T) {
	n := simSeeds(t)
	st := simSettings(t)
	var b strings.Builder
	fmt.Fprintf(&b, "| family | RTT | goodput over %d seeds (%% of capacity) | rejected |\n|---|---|---|---|\n", n)
	for _, rtt := range simRTTs {
		for i := range simFamilies(rtt) {
			lo, hi, rlo, rhi, sum, rsum := 1e9, -1.0, 1e9, -1.0, 0.0, 0.0
			for seed := 1; seed <= n; seed++ {
				sc := simFamilies(rtt)[i]
				sc.Seed = uint64(seed)
				r := simRun(sc, st)
				lo, hi = min(lo, r.share()), max(hi, r.share())
				rlo, rhi = min(rlo, r.rejectedShare()), max(rhi, r.rejectedShare())
				sum, rsum = sum+r.share(), rsum+r.rejectedShare()
			}
			fmt.Fprintf(&b, "| %s | %v | %.1f-%.1f %% (%.1f) | %.2f-%.2f %% (%.2f) |\n", simFamilies(rtt)[i].Name, rtt, 100*lo, 100*hi, 100*sum/float64(n), 100*rlo, 100*rhi, 100*rsum/float64(n))
		}
	}
	t.Log("\n" + b.String())
}
