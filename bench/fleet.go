package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	neturl "net/url"
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

// The fleet's hosts. a.test hides a fixed window (20/s unless
// -fleet-capacity says otherwise), the reference
// family of the single-process figures (S1, S8) and of adaptive's
// in-process fleet test, low enough that eight processes on two cores are
// not CPU-bound by the crawl itself (2.5/s each), and with a Retry-After
// that the fleet must share as one pause. b.test has no limit of its own:
// Rule.Rate 10/s is the ceiling the fleet must keep as one client. Both
// are 40 ms of network away (Redis is on loopback, as in a real fleet the
// store is nearer than the site) and take 100 ms (a.test) or 50 ms
// (b.test) to answer.
const (
	fleetTarget  = "a.test"
	fleetCeiled  = "b.test"
	fleetCeiling = 10.0
	fleetRTT     = 40 * time.Millisecond
)

// fleetHosts are the hosts, a.test's window capacity a second.
func fleetHosts(capacity int) map[string]testserver.Policy {
	return map[string]testserver.Policy{
		fleetTarget: {Limit: fixedWindow(capacity), Site: site(),
			Latency: testserver.Latency{Base: 100 * time.Millisecond, RTT: fleetRTT}},
		fleetCeiled: {Site: site(), Latency: testserver.Latency{Base: 50 * time.Millisecond, RTT: fleetRTT}},
	}
}

// fleetAbout describes the set-up, for the report.
func fleetAbout(capacity int) string {
	return fmt.Sprintf("a.test: fixed window %d/s, 100 ms + 40 ms RTT (capacity %d/s); b.test: no limit, 50 ms + 40 ms RTT, Rule.Rate 10/s (the fleet's ceiling)", capacity, capacity)
}

// fleetConfig is what fleet mode takes from the command line.
type fleetConfig struct {
	procs        []int         // the process-count cells (none: only the others)
	capacity     int           // a.test's fixed window, a second
	n            time.Duration // a cell's length; a store-fault cell runs n + its fault
	outage       time.Duration // Redis killed for this long; 0: no outage cell
	outageProcs  int
	fault        time.Duration // the proxy misbehaving for this long; 0: no garbage and slow cells
	faultProcs   int
	ceilingProcs int           // 0: no ceiling cell
	timeout      time.Duration // each request's deadline
	workers      int           // goroutines per host per process
	runs         int
	robots       bool
	seed         uint64
	short        bool
	verbose      bool
	jsonOut      string
}

// parseProcs reads -fleet: process counts separated by commas, or 0 for
// none (only the ceiling and store-fault cells).
func parseProcs(list string) ([]int, error) {
	if strings.TrimSpace(list) == "0" {
		return nil, nil
	}
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("bench: -fleet: %q is not a process count in 1..64 (e.g. 1,2,4,8; 0 alone: none)", s)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// cellKind is what a fleet cell tests.
type cellKind string

const (
	cellProcs   cellKind = "procs"   // N processes on both hosts
	cellCeiling cellKind = "ceiling" // b.test alone, under its Rule.Rate
	cellOutage  cellKind = "outage"  // Redis killed (SIGKILL), restarted empty
	cellGarbage cellKind = "garbage" // the proxy answers bytes that are not RESP
	cellSlow    cellKind = "slow"    // the proxy holds every reply slowReply
)

// cellSpec is one fleet cell: its kind, its processes and, for a store
// fault, how long the store fails.
type cellSpec struct {
	kind  cellKind
	procs int
	fault time.Duration
}

// storeFault is the proxy's fault of a garbage or slow cell.
func (c cellSpec) storeFault() storeFault {
	switch c.kind {
	case cellGarbage:
		return faultGarbage
	case cellSlow:
		return faultSlow
	}
	return faultNone
}

// hosts are the hosts the cell's processes crawl.
func (c cellSpec) hosts() []string {
	if c.kind == cellCeiling {
		return []string{fleetCeiled}
	}
	return []string{fleetTarget, fleetCeiled}
}

// fleetEnv is what every cell of a run shares: this program, to start the
// processes, and the Redis they share (rs nil: REDIS_URL's).
type fleetEnv struct {
	exe, url string
	rs       *demo.RedisServer
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
	env := fleetEnv{exe: exe, url: url, rs: rs}

	outage := cfg.outage > 0
	if outage && rs == nil {
		fmt.Fprintln(os.Stderr, "bench: the outage cell kills and restarts a redis-server of the bench's own: skipped with REDIS_URL")
		outage = false
	}
	var cells []cellSpec
	for _, n := range cfg.procs {
		cells = append(cells, cellSpec{kind: cellProcs, procs: n})
	}
	if cfg.ceilingProcs > 0 {
		cells = append(cells, cellSpec{kind: cellCeiling, procs: cfg.ceilingProcs})
	}
	if outage {
		cells = append(cells, cellSpec{kind: cellOutage, procs: cfg.outageProcs, fault: cfg.outage})
	}
	if cfg.fault > 0 {
		cells = append(cells, cellSpec{kind: cellGarbage, procs: cfg.faultProcs, fault: cfg.fault},
			cellSpec{kind: cellSlow, procs: cfg.faultProcs, fault: cfg.fault})
	}
	if len(cells) == 0 {
		fmt.Fprintln(os.Stderr, "bench: -fleet: no cell to run (-fleet 0 with -ceiling-procs 0, -outage 0 and -fault 0)")
		return 1
	}
	where := "a redis-server of its own on " + url
	if rs == nil {
		where = "REDIS_URL" // not printed: it may hold a password
	}
	var names []string
	for _, c := range cells {
		names = append(names, cellName(c))
	}
	fmt.Fprintf(os.Stderr, "bench: fleet cells of %v (a store fault's: %v and the fault), %d goroutines per host each, requests' deadline %v, %d run(s): %s; %s\n",
		cfg.n, cfg.n, cfg.workers, cfg.timeout, cfg.runs, strings.Join(names, ", "), where)

	began := time.Now()
	var results []fleetResult
	failed := false
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, c := range cells {
			if ctx.Err() != nil {
				break
			}
			r, err := runFleetCell(ctx, cfg, env, c, run)
			if err != nil {
				r.Err = err.Error()
				failed = true
			}
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "  %-18s %s\n", r.label(cfg.runs), r.oneLine())
			if cfg.verbose {
				r.printSeconds(os.Stderr)
			}
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 1
	}

	doc := fleetDoc{
		Command: "go run ./bench " + strings.Join(os.Args[1:], " "), Date: time.Now().Format(time.RFC3339),
		Go: runtime.Version(), CPUs: runtime.NumCPU(), Hosts: fleetAbout(cfg.capacity), Duration: cfg.n.String(), Warmup: (cfg.n / 4).String(),
		Outage: cfg.outage.String(), Fault: cfg.fault.String(), Timeout: cfg.timeout.String(), Workers: cfg.workers, Runs: cfg.runs,
		Robots: cfg.robots, Redis: where, Short: cfg.short,
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
	Cell  cellKind `json:"cell"`
	Procs int      `json:"procs"`
	Run   int      `json:"run"`
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
	// Violations are testserver's pause violations, both hosts, whole run;
	// ByOthers those by a process the pause was not announced to (another
	// process was told, and the fleet shares it through the store), and
	// OthersLateMs the latest of those after the pause began: how long the
	// process had, at most, to hear of it.
	Violations   int     `json:"pause_violations"`
	ByOthers     int     `json:"pause_violations_by_others"`
	OthersLateMs float64 `json:"others_violation_late_ms"`
	// CeilingRate is the fleet's rate on b.test after the warm-up, against
	// Ceiling (Rule.Rate); CeilingMaxBin its busiest second; CeilingKept
	// whether CeilingRate stayed within 2 % of Ceiling.
	Ceiling       float64 `json:"ceiling"`
	CeilingRate   float64 `json:"ceiling_rate"`
	CeilingMaxBin int     `json:"ceiling_max_1s"`
	CeilingKept   bool    `json:"ceiling_kept"`
	// ProcSends are each process's sends per second on a.test after the
	// warm-up, as the process counted them.
	ProcSends []float64 `json:"proc_sends_per_s"`
	// Shares are how each host's requests split between the processes,
	// per window, on the server's log (a.test's is judged; in the ceiling
	// cell, b.test's).
	Shares []shareWindows `json:"shares"`
	// Requests are the fleet's requests and how they ended, whole run;
	// ProcRequests each process's.
	Requests     requestCount   `json:"requests"`
	ProcRequests []requestCount `json:"proc_requests"`
	// Stuck holds, per process whose requests outlived their deadline,
	// where its goroutines were then.
	Stuck map[int]string `json:"stuck_stacks,omitempty"`
	Store storeCost      `json:"store"`
	CPU   cpuUse         `json:"cpu"`
	// Fault is the store fault of an outage, garbage or slow cell.
	Fault    *faultResult           `json:"fault,omitempty"`
	ByStatus map[string]map[int]int `json:"by_status,omitempty"`
	Err      string                 `json:"error,omitempty"`

	accepted, rejected, ceiled []time.Duration // for -v
	n                          time.Duration
}

// storeCost is what the fleet paid Redis after the warm-up: the round
// trip of each command its stores sent that succeeded, and commands per
// request on the wire.
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

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// cellName names a cell in the report.
func cellName(c cellSpec) string {
	if c.kind == cellProcs {
		return fmt.Sprintf("%d procs", c.procs)
	}
	return fmt.Sprintf("%s, %d procs", c.kind, c.procs)
}

func (r *fleetResult) name() string { return cellName(cellSpec{kind: r.Cell, procs: r.Procs}) }

// label is the cell's name and, with several runs, its run.
func (r *fleetResult) label(runs int) string {
	if runs > 1 {
		return fmt.Sprintf("%s #%d", r.name(), r.Run)
	}
	return r.name()
}

// judgedShares is the split the cell is judged on: a.test's, or b.test's
// in the ceiling cell.
func (r *fleetResult) judgedShares() *shareWindows {
	host := fleetTarget
	if r.Cell == cellCeiling {
		host = fleetCeiled
	}
	for i := range r.Shares {
		if r.Shares[i].Host == host {
			return &r.Shares[i]
		}
	}
	return nil
}

// runFleetCell runs one cell: a fresh testserver, c.procs processes of
// this program crawling it through Redis for cfg.n (plus c.fault, with the
// store failing for c.fault from the middle of cfg.n on), and the
// measures.
func runFleetCell(ctx context.Context, cfg fleetConfig, env fleetEnv, c cellSpec, run int) (fleetResult, error) {
	length, warm := cfg.n+c.fault, cfg.n/4
	res := fleetResult{Cell: c.kind, Procs: c.procs, Run: run, LengthS: length.Seconds(), JudgedFromS: warm.Seconds(), Ceiling: fleetCeiling, n: length}
	if c.fault > 0 {
		res.Fault = &faultResult{Kind: string(c.kind)}
	}
	srv, err := testserver.New(testserver.Config{Hosts: fleetHosts(cfg.capacity), Network: testserver.Loopback,
		Seed: int64(cfg.seed) + int64(run) - 1, ClientHeader: clientHeader})
	if err != nil {
		return res, err
	}
	defer srv.Close()
	origin := time.Now().Add(-srv.Elapsed()) // the server's time zero on the wall clock, which the processes share
	wall := func(d time.Duration) time.Time { return origin.Add(d) }
	at := func(ns int64) time.Duration { return time.Unix(0, ns).Sub(origin) }

	// the store the processes reach: Redis, or the proxy before it
	storeURL := env.url
	var proxy *faultProxy
	if f := c.storeFault(); f != faultNone {
		if storeURL, proxy, err = behindProxy(env.url); err != nil {
			return res, err
		}
		defer proxy.Close()
	}

	hosts := map[string]string{}
	for _, h := range c.hosts() {
		hosts[h] = strings.TrimPrefix(srv.HostURL(h), "http://")
	}
	cc := childConfig{Redis: storeURL, Prefix: fmt.Sprintf("bench-fleet:%d", time.Now().UnixNano()), Hosts: hosts,
		Workers: cfg.workers, Ceilings: map[string]float64{fleetCeiled: fleetCeiling}, Robots: cfg.robots,
		JudgeFrom: wall(warm).UnixNano(), End: wall(length).UnixNano(), Timeout: cfg.timeout}

	// redis-server's CPU: the process running now, and the one killed
	cpu0, redisFrom := readCPU(), redisTicks(env.rs)
	var redisUsed uint64
	var fl fleetProcs
	defer fl.kill()
	for i := range c.procs {
		cc.Proc = i + 1
		if err := fl.start(env.exe, cc); err != nil {
			return res, err
		}
	}

	// the store fault, from the middle of cfg.n on: Redis killed (a crash)
	// and started again, empty, on the same port; or the proxy misbehaving
	var faultAt, healedAt time.Duration
	var restartedEmpty bool
	var faultErr error
	var faultWG sync.WaitGroup
	if c.fault > 0 {
		faultWG.Go(func() {
			if demo.Sleep(ctx, cfg.n/2-srv.Elapsed()) != nil {
				return
			}
			if c.kind == cellOutage {
				if faultErr = markRedis(env.rs); faultErr != nil {
					return
				}
				redisUsed += since(redisFrom, redisTicks(env.rs))
				env.rs.Kill()
			} else {
				proxy.Set(c.storeFault())
			}
			faultAt = srv.Elapsed()
			if demo.Sleep(ctx, faultAt+c.fault-srv.Elapsed()) != nil {
				return
			}
			if c.kind == cellOutage {
				if faultErr = env.rs.Start(); faultErr != nil {
					return
				}
				healedAt = srv.Elapsed()
				redisFrom = redisTicks(env.rs)
				restartedEmpty, faultErr = emptyRedis(env.rs)
			} else {
				proxy.Set(faultNone)
				healedAt = srv.Elapsed()
			}
		})
	}
	demo.Sleep(ctx, length-srv.Elapsed())
	a, b := srv.Stats(fleetTarget), srv.Stats(fleetCeiled)
	faultWG.Wait()
	// the processes stop starting requests at the end; those under way
	// have their deadline to end
	reports, waitErr := fl.wait(cfg.timeout + 15*time.Second)
	cpu1 := readCPU()
	redisUsed += since(redisFrom, redisTicks(env.rs))
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if faultErr != nil {
		return res, fmt.Errorf("bench: the store fault: %w", faultErr)
	}
	if c.kind == cellOutage && !restartedEmpty {
		waitErr = errors.Join(waitErr, errors.New("bench: redis-server came back with the data it had before the kill: not the outage this cell measures"))
	}

	// a.test and b.test, after the warm-up
	to := length
	res.Goodput = float64(demo.CountIn(a.Accepted, warm, to)) / (to - warm).Seconds()
	res.GoodputPct = res.Goodput / float64(cfg.capacity) * 100
	res.Rejected = demo.CountIn(a.Rejected, warm, to)
	res.Sent = demo.CountIn(a.Accepted, warm, to) + res.Rejected
	res.RejectedPct = percent(res.Rejected, res.Sent)
	res.Violations = a.PauseViolations + b.PauseViolations
	res.ByOthers = a.PauseViolationsByOthers + b.PauseViolationsByOthers
	res.OthersLateMs = float64(max(a.OthersViolationLate, b.OthersViolationLate).Microseconds()) / 1000
	bs := append(slices.Clone(b.Accepted), b.Rejected...)
	res.CeilingRate = float64(demo.CountIn(bs, warm, to)) / (to - warm).Seconds()
	res.CeilingMaxBin = slices.Max(append(bins(bs, warm, to), 0))
	res.CeilingKept = res.CeilingRate <= fleetCeiling*1.02
	res.ByStatus = map[string]map[int]int{fleetTarget: a.ByStatus, fleetCeiled: b.ByStatus}
	res.accepted, res.rejected, res.ceiled = a.Accepted, a.Rejected, bs

	// the split between the processes, while every one had URLs queued
	// (from its first request to the end), after the warm-up
	from := warm
	for _, r := range reports {
		from = max(from, at(r.Began))
	}
	for _, h := range c.hosts() {
		st := map[string]testserver.Stats{fleetTarget: a, fleetCeiled: b}[h]
		res.Shares = append(res.Shares, measureShares(h, st.Clients, c.procs, from, to))
	}

	// the processes' reports
	var rtts []int64
	for _, r := range reports {
		res.ProcSends = append(res.ProcSends, float64(r.Sends[fleetTarget])/(to-warm).Seconds())
		res.ProcRequests = append(res.ProcRequests, r.Requests)
		if r.Stuck != "" {
			if res.Stuck == nil {
				res.Stuck = map[int]string{}
			}
			res.Stuck[r.Proc] = r.Stuck
		}
		res.Requests.add(r.Requests)
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

	if f := res.Fault; f != nil {
		if c.kind == cellOutage {
			f.RestartedEmpty = &restartedEmpty
		}
		// the fault ends when Redis answers again, or the proxy is healed
		measureFault(f, a, b, reports, warm, faultAt, healedAt, length, float64(cfg.capacity), at)
	}
	return res, waitErr
}

// add counts o's requests in r.
func (r *requestCount) add(o requestCount) {
	r.Started += o.Started
	r.Answered += o.Answered
	r.Errors += o.Errors
	r.TimedOut += o.TimedOut
	r.Unended += o.Unended
	r.SlowestMs = max(r.SlowestMs, o.SlowestMs)
}

// behindProxy starts a faultProxy before the Redis of rawURL and returns
// the URL that reaches Redis through it.
func behindProxy(rawURL string) (string, *faultProxy, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return "", nil, fmt.Errorf("bench: the Redis URL: %w", err)
	}
	p, err := startFaultProxy(opt.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("bench: the store's proxy: %w", err)
	}
	u, err := neturl.Parse(rawURL)
	if err != nil {
		p.Close()
		return "", nil, fmt.Errorf("bench: the Redis URL: %w", err)
	}
	u.Host = p.Addr()
	return u.String(), p, nil
}

// sentinelKey is written to Redis before it is killed: gone after the
// restart, the store came back empty.
const sentinelKey = "bench-fleet:before-the-kill"

func markRedis(rs *demo.RedisServer) error {
	return withRedis(rs, func(ctx context.Context, c *redis.Client) error {
		return c.Set(ctx, sentinelKey, "1", 0).Err()
	})
}

// emptyRedis reports whether the Redis restarted has lost what it held
// before the kill (and is set to persist nothing).
func emptyRedis(rs *demo.RedisServer) (bool, error) {
	empty := false
	err := withRedis(rs, func(ctx context.Context, c *redis.Client) error {
		n, err := c.Exists(ctx, sentinelKey).Result()
		if err != nil {
			return err
		}
		conf, err := c.ConfigGet(ctx, "*").Result()
		if err != nil {
			return err
		}
		empty = n == 0 && conf["save"] == "" && conf["appendonly"] == "no"
		return nil
	})
	return empty, err
}

func withRedis(rs *demo.RedisServer, fn func(context.Context, *redis.Client) error) error {
	c := redis.NewClient(&redis.Options{Addr: rs.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return fn(ctx, c)
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
// a pipe: when it closes (wait, or this process dies) the child stops.
func (f *fleetProcs) start(exe string, cc childConfig) error {
	arg, err := json.Marshal(cc)
	if err != nil {
		return err
	}
	return f.startArgs(exe, cc.Proc, workerFlag, string(arg))
}

// allDone reports whether every process has ended.
func (f *fleetProcs) allDone() bool {
	for _, p := range f.ps {
		select {
		case <-p.done:
		default:
			return false
		}
	}
	return true
}

// startArgs runs this program with args as fleet process proc.
func (f *fleetProcs) startArgs(exe string, proc int, args ...string) error {
	var err error
	cmd := exec.Command(exe, args...)
	demo.DieWithParent(cmd)
	p := &fleetProc{cmd: cmd, out: &capped{max: 64 << 20}, log: &capped{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.log
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start fleet process %d: %w", proc, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	f.ps = append(f.ps, p)
	return nil
}

// wait waits up to grace for the processes to end by themselves (at the
// cell's end, once their requests under way have ended), then tells those
// still running to stop and kills them if they do not; it reads their
// reports.
func (f *fleetProcs) wait(grace time.Duration) ([]childReport, error) {
	t := time.NewTimer(grace)
	defer t.Stop()
	var errs []error
	late := false
	for i, p := range f.ps {
		select {
		case <-p.done:
		case <-t.C:
			late = true
		}
		if late {
			errs = append(errs, fmt.Errorf("bench: fleet process %d still running %v after the end: stopped", i+1, grace))
			break
		}
	}
	for _, p := range f.ps {
		p.stdin.Close() // the processes still running stop
	}
	if late {
		stop := time.AfterFunc(5*time.Second, f.kill)
		defer stop.Stop()
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
