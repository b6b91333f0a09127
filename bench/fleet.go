package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/testserver"
)

// The fleet's hosts. a.test hides a fixed window of 20/s, the reference
// family of the single-process figures (S1, S8) and of adaptive's
// in-process fleet test, low enough that eight processes on two cores are
// not CPU-bound by the crawl itself (2.5/s each), and with a Retry-After
// that the fleet must share as one pause. b.test has no limit of its own:
// Rule.Rate 10/s is the ceiling the fleet must keep as one client. Both
// are 40 ms of network away (Redis is on loopback, as in a real fleet the
// store is nearer than the site) and take 100 ms (a.test) or 50 ms
// (b.test) to answer.
const (
	fleetTarget   = "a.test"
	fleetCeiled   = "b.test"
	fleetCapacity = 20.0
	fleetCeiling  = 10.0
	fleetRTT      = 40 * time.Millisecond
)

func fleetHosts() map[string]testserver.Policy {
	return map[string]testserver.Policy{
		fleetTarget: {Limit: fixedWindow(int(fleetCapacity)), Site: site(),
			Latency: testserver.Latency{Base: 100 * time.Millisecond, RTT: fleetRTT}},
		fleetCeiled: {Site: site(), Latency: testserver.Latency{Base: 50 * time.Millisecond, RTT: fleetRTT}},
	}
}

// fleetAbout describes the set-up, for the report.
const fleetAbout = "a.test: fixed window 20/s, 100 ms + 40 ms RTT (capacity 20/s); b.test: no limit, 50 ms + 40 ms RTT, Rule.Rate 10/s (the fleet's ceiling)"

// fleetConfig is what fleet mode takes from the command line.
type fleetConfig struct {
	procs       []int
	n           time.Duration // a cell's length; the outage cell runs n + outage
	outage      time.Duration // 0: no outage cell
	outageProcs int
	workers     int // goroutines per host per process
	robots      bool
	seed        uint64
	short       bool
	verbose     bool
	jsonOut     string
}

// parseProcs reads -fleet: process counts separated by commas.
func parseProcs(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("bench: -fleet: %q is not a process count in 1..64 (e.g. 1,2,4,8)", s)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// fleetMain runs the fleet cells and reports them; it returns the exit
// status. Every process it starts (redis-server, the fleet's) ends before
// it returns, and with it if it is killed (demo.DieWithParent).
func fleetMain(ctx context.Context, cfg fleetConfig) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -fleet: cannot find this program to start its processes:", err)
		return 1
	}
	url, rs, err := demo.Redis()
	if errors.Is(err, demo.ErrNoRedis) {
		if demo.RedisOptional(cfg.short) {
			fmt.Println("bench: fleet smoke run skipped: redis-server is not on PATH and REDIS_URL is not set (Debian: apt-get install redis-server)")
			return 0
		}
		fmt.Fprintln(os.Stderr, "bench: -fleet needs Redis: redis-server is not on PATH and REDIS_URL is not set; install it (Debian: apt-get install redis-server) or set REDIS_URL")
		return 1
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -fleet:", err)
		return 1
	}
	if rs != nil {
		defer rs.Close()
	} else if err := pingRedis(url); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -fleet: the Redis of REDIS_URL does not answer: %v\n", err)
		return 1
	}

	outage := cfg.outage > 0
	if outage && rs == nil {
		fmt.Fprintln(os.Stderr, "bench: the outage cell kills and restarts a redis-server of the bench's own: skipped with REDIS_URL")
		outage = false
	}
	where := "a redis-server of its own on " + url
	if rs == nil {
		where = "REDIS_URL" // not printed: it may hold a password
	}
	fmt.Fprintf(os.Stderr, "bench: fleet cells of %v with %v processes (%d goroutines per host each)", cfg.n, cfg.procs, cfg.workers)
	if outage {
		fmt.Fprintf(os.Stderr, ", then %d processes for %v with Redis down for %v", cfg.outageProcs, cfg.n+cfg.outage, cfg.outage)
	}
	fmt.Fprintf(os.Stderr, "; %s\n", where)

	began := time.Now()
	var results []fleetResult
	failed := false
	runCell := func(procs int, down time.Duration) {
		r, err := runFleetCell(ctx, cfg, exe, url, rs, procs, down)
		if err != nil {
			r.Err = err.Error()
			failed = true
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", r.name(), r.oneLine())
		if cfg.verbose {
			r.printSeconds(os.Stderr)
		}
	}
	for _, n := range cfg.procs {
		if ctx.Err() != nil {
			break
		}
		runCell(n, 0)
	}
	if outage && ctx.Err() == nil {
		runCell(cfg.outageProcs, cfg.outage)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 1
	}

	doc := fleetDoc{
		Command: "go run ./bench " + strings.Join(os.Args[1:], " "), Date: time.Now().Format(time.RFC3339),
		Go: runtime.Version(), CPUs: runtime.NumCPU(), Hosts: fleetAbout, Duration: cfg.n.String(), Warmup: (cfg.n / 4).String(),
		Outage: cfg.outage.String(), Workers: cfg.workers, Robots: cfg.robots, Redis: where, Short: cfg.short,
		TookS: time.Since(began).Round(time.Second).Seconds(), Results: results,
	}
	printFleet(os.Stdout, &doc)
	if cfg.jsonOut != "" {
		if err := writeFleetJSON(cfg.jsonOut, &doc); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

// pingRedis checks that the Redis at url answers.
func pingRedis(url string) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	redis.SetLogger(quietRedis{}) // the error says it all
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// fleetResult is one fleet cell.
type fleetResult struct {
	Procs int `json:"procs"`
	// LengthS is the cell's length; JudgedFromS the end of its warm-up.
	LengthS     float64 `json:"length_s"`
	JudgedFromS float64 `json:"judged_from_s"`
	// Goodput is what a.test accepted per second after the warm-up, and
	// GoodputPct that as a share of its capacity (20/s).
	Goodput    float64 `json:"goodput"`
	GoodputPct float64 `json:"goodput_pct"`
	// Sent and Rejected are a.test's requests after the warm-up.
	Sent        int     `json:"sent"`
	Rejected    int     `json:"rejected"`
	RejectedPct float64 `json:"rejected_pct"`
	// Violations are testserver's pause violations, both hosts, whole run.
	Violations int `json:"pause_violations"`
	// CeilingRate is the fleet's rate on b.test after the warm-up, against
	// Ceiling (Rule.Rate); CeilingMaxBin its busiest second; CeilingKept
	// whether CeilingRate stayed within 2 % of Ceiling.
	Ceiling       float64 `json:"ceiling"`
	CeilingRate   float64 `json:"ceiling_rate"`
	CeilingMaxBin int     `json:"ceiling_max_1s"`
	CeilingKept   bool    `json:"ceiling_kept"`
	// ProcSends are each process's sends per second on a.test after the
	// warm-up (its share of the fleet).
	ProcSends []float64              `json:"proc_sends_per_s"`
	Store     storeCost              `json:"store"`
	CPU       cpuUse                 `json:"cpu"`
	Outage    *outage                `json:"outage,omitempty"`
	ByStatus  map[string]map[int]int `json:"by_status,omitempty"`
	Err       string                 `json:"error,omitempty"`

	accepted, rejected, ceiled []time.Duration // for -v
	n                          time.Duration
}

// storeCost is what the fleet paid Redis after the warm-up: the round
// trip of each call (Acquire, Release, Renew) that succeeded, and calls
// per request on the wire.
type storeCost struct {
	Calls        int     `json:"calls"`
	Sends        int     `json:"sends"`
	CallsPerSend float64 `json:"calls_per_send"`
	// TargetCallsPerSend counts a.test's scope alone.
	TargetCallsPerSend float64 `json:"target_calls_per_send"`
	MeanMs             float64 `json:"rtt_mean_ms"`
	P50Ms              float64 `json:"rtt_p50_ms"`
	P99Ms              float64 `json:"rtt_p99_ms"`
	Failed             int     `json:"failed_calls"` // whole run
}

// cpuUse is the machine's CPU during the cell, in percent of all cores:
// busy in all, the fleet's processes, redis-server and the bench process
// (which runs the testserver), and the rest (other programs).
type cpuUse struct {
	BusyPct   float64 `json:"busy_pct"`
	FleetPct  float64 `json:"fleet_pct"`
	RedisPct  float64 `json:"redis_pct"`
	BenchPct  float64 `json:"bench_pct"`
	OthersPct float64 `json:"others_pct"`
	Known     bool    `json:"known"`
}

// outage is what the outage cell measures: Redis killed at KillAtS (on the
// server's clock) and answering again at BackAtS.
type outage struct {
	KillAtS float64 `json:"kill_at_s"`
	BackAtS float64 `json:"back_at_s"`
	// SharedRate is the rate the fleet last agreed on before the kill (the
	// mean over processes of a.test's rate in force at their last sample);
	// BeforeRate the fleet's measured send rate on a.test over the 5 s
	// before the kill.
	SharedRate float64 `json:"shared_rate"`
	BeforeRate float64 `json:"before_rate"`
	// During the outage, on a.test: requests and rejections, the mean send
	// rate, the sends of each whole second, the busiest, and how far it
	// went over SharedRate.
	Sent          int     `json:"sent"`
	Rejected      int     `json:"rejected"`
	RejectedPct   float64 `json:"rejected_pct"`
	Rate          float64 `json:"rate"`
	Bins          []int   `json:"sends_per_s"`
	MaxBin        int     `json:"max_1s"`
	OverSharedPct float64 `json:"max_over_shared_pct"`
	// The same on b.test, against its ceiling (the rate its fleet shares
	// is Rule.Rate).
	CeilingRate    float64 `json:"ceiling_rate"`
	CeilingBins    []int   `json:"ceiling_sends_per_s"`
	CeilingMaxBin  int     `json:"ceiling_max_1s"`
	CeilingOverPct float64 `json:"ceiling_max_over_pct"`
	// SharedAgainS is the time from Redis answering again to the last
	// process saying "shared store back"; null if one never said so.
	SharedAgainS     *float64   `json:"shared_again_s"`
	SharedAgainProcS []*float64 `json:"shared_again_per_proc_s"`
	Unreachable      int        `json:"unreachable_lines"`
	Back             int        `json:"back_lines"`
	// After: from 5 s after Redis is back to the end.
	AfterGoodputPct  float64 `json:"after_goodput_pct"`
	AfterRejectedPct float64 `json:"after_rejected_pct"`
	// Timeline is each process's view of a.test, second by second of the
	// server's clock (its last sample in that second): how the fleet's
	// rate, estimate and concurrency limit went through the outage.
	Timeline []procTimeline `json:"timeline"`
}

// procTimeline is one process's a.test snapshots, one per second (-1:
// no sample in that second).
type procTimeline struct {
	Proc     int       `json:"proc"`
	Rate     []float64 `json:"rate"`
	Estimate []float64 `json:"estimate"`
	Limit    []float64 `json:"limit"`
}

// timeline is r's a.test samples, one per second of [0, n).
func timeline(r childReport, n time.Duration, at func(int64) time.Duration) procTimeline {
	secs := int(n / time.Second)
	t := procTimeline{Proc: r.Proc, Rate: make([]float64, secs), Estimate: make([]float64, secs), Limit: make([]float64, secs)}
	for i := range secs {
		t.Rate[i], t.Estimate[i], t.Limit[i] = -1, -1, -1
	}
	for _, s := range r.Samples {
		if i := int(at(s.At) / time.Second); s.Host == fleetTarget && i >= 0 && i < secs {
			t.Rate[i], t.Estimate[i], t.Limit[i] = round2(s.Rate), round2(s.Estimate), round2(s.Limit)
		}
	}
	return t
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func (r *fleetResult) name() string {
	if r.Outage != nil {
		return fmt.Sprintf("outage, %d procs", r.Procs)
	}
	return fmt.Sprintf("%d procs", r.Procs)
}

// runFleetCell runs one cell: a fresh testserver, procs processes of this
// program crawling it through Redis for cfg.n (plus down, with Redis
// killed for down from the middle of cfg.n on), and the measures.
func runFleetCell(ctx context.Context, cfg fleetConfig, exe, url string, rs *demo.RedisServer, procs int, down time.Duration) (fleetResult, error) {
	length, warm := cfg.n+down, cfg.n/4
	res := fleetResult{Procs: procs, LengthS: length.Seconds(), JudgedFromS: warm.Seconds(), Ceiling: fleetCeiling, n: length}
	if down > 0 {
		res.Outage = &outage{}
	}
	srv, err := testserver.New(testserver.Config{Hosts: fleetHosts(), Network: testserver.Loopback, Seed: int64(cfg.seed)})
	if err != nil {
		return res, err
	}
	defer srv.Close()
	origin := time.Now().Add(-srv.Elapsed()) // the server's time zero on the wall clock, which the processes share
	wall := func(d time.Duration) time.Time { return origin.Add(d) }
	at := func(ns int64) time.Duration { return time.Unix(0, ns).Sub(origin) }

	hosts := map[string]string{}
	for _, h := range srv.Hosts() {
		hosts[h] = strings.TrimPrefix(srv.HostURL(h), "http://")
	}
	cc := childConfig{Redis: url, Prefix: fmt.Sprintf("bench-fleet:%d", time.Now().UnixNano()), Hosts: hosts,
		Workers: cfg.workers, Ceilings: map[string]float64{fleetCeiled: fleetCeiling}, Robots: cfg.robots,
		JudgeFrom: wall(warm).UnixNano(), End: wall(length).UnixNano()}

	// redis-server's CPU: the process running now, and the one killed
	cpu0, redisFrom := readCPU(), redisTicks(rs)
	var redisUsed uint64
	var fl fleetProcs
	defer fl.kill()
	for i := range procs {
		cc.Proc = i + 1
		if err := fl.start(exe, cc); err != nil {
			return res, err
		}
	}

	// the outage: Redis killed (a crash) at the middle of cfg.n, started
	// again (empty, on the same port) down later
	var killedAt, backAt, restartAt time.Duration
	var outErr error
	var outWG sync.WaitGroup
	if down > 0 {
		outWG.Go(func() {
			if demo.Sleep(ctx, cfg.n/2-srv.Elapsed()) != nil {
				return
			}
			redisUsed += since(redisFrom, redisTicks(rs))
			rs.Kill()
			killedAt = srv.Elapsed()
			if demo.Sleep(ctx, killedAt+down-srv.Elapsed()) != nil {
				return
			}
			restartAt = srv.Elapsed()
			outErr = rs.Start()
			backAt = srv.Elapsed()
			redisFrom = redisTicks(rs)
		})
	}
	demo.Sleep(ctx, length-srv.Elapsed())
	a, b := srv.Stats(fleetTarget), srv.Stats(fleetCeiled)
	outWG.Wait()
	reports, waitErr := fl.stop(20 * time.Second)
	cpu1 := readCPU()
	redisUsed += since(redisFrom, redisTicks(rs))
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if outErr != nil {
		return res, fmt.Errorf("bench: restarting redis-server: %w", outErr)
	}

	// a.test and b.test, after the warm-up
	to := length
	res.Goodput = float64(demo.CountIn(a.Accepted, warm, to)) / (to - warm).Seconds()
	res.GoodputPct = res.Goodput / fleetCapacity * 100
	res.Rejected = demo.CountIn(a.Rejected, warm, to)
	res.Sent = demo.CountIn(a.Accepted, warm, to) + res.Rejected
	res.RejectedPct = percent(res.Rejected, res.Sent)
	res.Violations = a.PauseViolations + b.PauseViolations
	bs := append(slices.Clone(b.Accepted), b.Rejected...)
	res.CeilingRate = float64(demo.CountIn(bs, warm, to)) / (to - warm).Seconds()
	res.CeilingMaxBin = slices.Max(append(bins(bs, warm, to), 0))
	res.CeilingKept = res.CeilingRate <= fleetCeiling*1.02
	res.ByStatus = map[string]map[int]int{fleetTarget: a.ByStatus, fleetCeiled: b.ByStatus}
	res.accepted, res.rejected, res.ceiled = a.Accepted, a.Rejected, bs

	// the processes' reports
	var rtts []int64
	for _, r := range reports {
		res.ProcSends = append(res.ProcSends, float64(r.Sends[fleetTarget])/(to-warm).Seconds())
		for _, n := range r.Sends {
			res.Store.Sends += n
		}
		for _, n := range r.Calls {
			res.Store.Calls += n
		}
		res.Store.Failed += r.Failed
		rtts = append(rtts, r.RTTs...)
	}
	res.Store.CallsPerSend = ratio(res.Store.Calls, res.Store.Sends)
	targetCalls, targetSends := 0, 0
	for _, r := range reports {
		targetCalls += r.Calls[fleetTarget]
		targetSends += r.Sends[fleetTarget]
	}
	res.Store.TargetCallsPerSend = ratio(targetCalls, targetSends)
	res.Store.MeanMs, res.Store.P50Ms, res.Store.P99Ms = rttStats(rtts)

	// CPU: the machine, and this cell's processes in it
	if cpu0.ok && cpu1.ok && cpu1.total > cpu0.total {
		total := float64(cpu1.total - cpu0.total)
		res.CPU.Known = true
		res.CPU.BusyPct = float64(cpu1.busy-cpu0.busy) / total * 100
		res.CPU.BenchPct = float64(cpu1.self-cpu0.self) / total * 100
		res.CPU.RedisPct = float64(redisUsed) / total * 100
		res.CPU.FleetPct = fl.ticks() / total * 100
		res.CPU.OthersPct = max(res.CPU.BusyPct-res.CPU.BenchPct-res.CPU.RedisPct-res.CPU.FleetPct, 0)
	}

	if o := res.Outage; o != nil {
		measureOutage(o, a, bs, reports, warm, killedAt, restartAt, backAt, length, at)
	}
	return res, waitErr
}

// measureOutage fills o: a.test's sends and rejections while Redis was
// down, against the rate the fleet last shared, and how soon each process
// shared again once Redis answered.
func measureOutage(o *outage, a testserver.Stats, ceiled []time.Duration, reports []childReport, warm, killedAt, restartAt, backAt, length time.Duration,
	at func(int64) time.Duration) {
	o.KillAtS, o.BackAtS = killedAt.Seconds(), backAt.Seconds()
	sends := append(slices.Clone(a.Accepted), a.Rejected...)
	before := max(warm, killedAt-5*time.Second)
	o.BeforeRate = float64(demo.CountIn(sends, before, killedAt)) / (killedAt - before).Seconds()
	var shared []float64
	for _, r := range reports {
		last := -1
		for i, s := range r.Samples {
			if s.Host == fleetTarget && at(s.At) < killedAt {
				last = i
			}
		}
		if last >= 0 {
			shared = append(shared, r.Samples[last].Rate)
		}
	}
	if len(shared) > 0 {
		for _, s := range shared {
			o.SharedRate += s / float64(len(shared))
		}
	}
	o.Rejected = demo.CountIn(a.Rejected, killedAt, backAt)
	o.Sent = demo.CountIn(a.Accepted, killedAt, backAt) + o.Rejected
	o.RejectedPct = percent(o.Rejected, o.Sent)
	o.Rate = float64(o.Sent) / (backAt - killedAt).Seconds()
	o.Bins = bins(sends, killedAt, backAt)
	o.MaxBin = slices.Max(append(o.Bins, 0))
	if o.SharedRate > 0 {
		o.OverSharedPct = (float64(o.MaxBin)/o.SharedRate - 1) * 100
	}
	o.CeilingRate = float64(demo.CountIn(ceiled, killedAt, backAt)) / (backAt - killedAt).Seconds()
	o.CeilingBins = bins(ceiled, killedAt, backAt)
	o.CeilingMaxBin = slices.Max(append(o.CeilingBins, 0))
	o.CeilingOverPct = (float64(o.CeilingMaxBin)/fleetCeiling - 1) * 100
	// shared again: each process's first "shared store back" after the
	// restart began, counted from the moment Redis answered
	var slowest time.Duration
	all := true
	for _, r := range reports {
		var got *float64
		for _, l := range r.Logs {
			switch {
			case strings.Contains(l.Msg, "unreachable"):
				o.Unreachable++
			case strings.Contains(l.Msg, "back"):
				o.Back++
				if d := at(l.At); got == nil && d >= restartAt {
					s := max(d-backAt, 0)
					slowest = max(slowest, s)
					v := s.Seconds()
					got = &v
				}
			}
		}
		all = all && got != nil
		o.SharedAgainProcS = append(o.SharedAgainProcS, got)
	}
	if all && len(reports) > 0 {
		v := slowest.Seconds()
		o.SharedAgainS = &v
	}
	for _, r := range reports {
		o.Timeline = append(o.Timeline, timeline(r, length, at))
	}
	after := backAt + 5*time.Second
	if after < length {
		acc, rej := demo.CountIn(a.Accepted, after, length), demo.CountIn(a.Rejected, after, length)
		o.AfterGoodputPct = float64(acc) / (length - after).Seconds() / fleetCapacity * 100
		o.AfterRejectedPct = percent(rej, acc+rej)
	}
}

// since is b - a, ticks counted from a (0 if the counter went back: a
// process that was not the same).
func since(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

// bins counts ts in each whole second of [from, to) (a last partial
// second is left out).
func bins(ts []time.Duration, from, to time.Duration) []int {
	n := int((to - from) / time.Second)
	out := make([]int, n)
	for _, t := range ts {
		if t >= from {
			if i := int((t - from) / time.Second); i < n {
				out[i]++
			}
		}
	}
	return out
}

// percent is a as a share of b, in percent (0 for b = 0).
func percent(a, b int) float64 { return ratio(a, b) * 100 }

// ratio is a / b (0 for b = 0).
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// rttStats are the mean, median and 99th percentile of round trips in µs,
// in milliseconds.
func rttStats(us []int64) (mean, p50, p99 float64) {
	if len(us) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(us)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	q := func(p float64) float64 {
		return float64(s[min(int(math.Ceil(p*float64(len(s))))-1, len(s)-1)]) / 1000
	}
	return sum / float64(len(s)) / 1000, q(0.50), q(0.99)
}

// redisTicks is the CPU time redis-server has used so far, in clock ticks
// (0 when unknown, or with REDIS_URL).
func redisTicks(rs *demo.RedisServer) uint64 {
	if rs == nil {
		return 0
	}
	t, _ := procTicks(strconv.Itoa(rs.Pid()))
	return t
}

// fleetProcs are the processes of one cell.
type fleetProcs struct {
	ps []*fleetProc
}

type fleetProc struct {
	cmd      *exec.Cmd
	stdin    io.Closer
	out, log *capped
	done     chan struct{} // closed when cmd.Wait returned
	err      error         // cmd.Wait's; set before done is closed
}

// start runs this program as fleet process cc.Proc. Its standard input is
// a pipe: when it closes (stop, or this process dies) the child stops.
func (f *fleetProcs) start(exe string, cc childConfig) error {
	arg, err := json.Marshal(cc)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, workerFlag, string(arg))
	demo.DieWithParent(cmd)
	p := &fleetProc{cmd: cmd, out: &capped{max: 64 << 20}, log: &capped{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.log
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start fleet process %d: %w", cc.Proc, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	f.ps = append(f.ps, p)
	return nil
}

// stop tells the processes to stop, waits up to grace for them, kills
// those still running, and reads their reports.
func (f *fleetProcs) stop(grace time.Duration) ([]childReport, error) {
	for _, p := range f.ps {
		p.stdin.Close()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	var errs []error
	for i, p := range f.ps {
		select {
		case <-p.done:
		case <-t.C:
			f.kill()
			errs = append(errs, fmt.Errorf("bench: fleet process %d still running %v after the end: killed", i+1, grace))
		}
	}
	var reports []childReport
	for i, p := range f.ps {
		<-p.done
		var r childReport
		out := bytes.TrimSpace(p.out.bytes())
		if j := bytes.LastIndexByte(out, '\n'); j >= 0 {
			out = out[j+1:]
		}
		if err := json.Unmarshal(out, &r); err != nil {
			errs = append(errs, fmt.Errorf("bench: fleet process %d: no report (%v): %s", i+1, p.err, p.log.tail(400)))
			continue
		}
		if r.Err != "" {
			errs = append(errs, fmt.Errorf("bench: fleet process %d: %s", i+1, r.Err))
		}
		reports = append(reports, r)
	}
	return reports, errors.Join(errs...)
}

// kill kills every process still running and waits for them.
func (f *fleetProcs) kill() {
	for _, p := range f.ps {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
		}
	}
	for _, p := range f.ps {
		<-p.done
	}
}

// ticks is the CPU time the processes used, in clock ticks of /proc/stat
// (once they have ended).
func (f *fleetProcs) ticks() float64 {
	var d time.Duration
	for _, p := range f.ps {
		if st := p.cmd.ProcessState; st != nil {
			d += st.UserTime() + st.SystemTime()
		}
	}
	return d.Seconds() * clockTicks
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	b   bytes.Buffer // guarded by mu
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := max(c.max-c.b.Len(), 0)
	c.b.Write(p[:min(room, len(p))])
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.b.Bytes())
}

// tail is the last n bytes written (of those kept), on one line.
func (c *capped) tail(n int) string {
	b := c.bytes()
	b = b[max(len(b)-n, 0):]
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " | ")
}
