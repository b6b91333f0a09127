package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/redisstore"
)

// workerFlag, as the first argument, makes the bench binary one process of
// a fleet cell (fleet.go starts them): the second argument is its
// childConfig as JSON. It is not in -h: nobody runs it by hand.
const workerFlag = "-fleet-worker"

// childConfig is what a fleet process is told on its command line. Times
// are Unix nanoseconds of the wall clock, which the processes of one
// machine share.
type childConfig struct {
	Proc   int    `json:"proc"`
	Redis  string `json:"redis"`  // a redis:// URL
	Prefix string `json:"prefix"` // the cell's keys in Redis
	// Hosts maps each host name of the cell to its loopback listener.
	Hosts   map[string]string `json:"hosts"`
	Workers int               `json:"workers"` // goroutines per host
	// Ceilings are Rule.Rate per host.
	Ceilings map[string]float64 `json:"ceilings"`
	// Robots turns robots.txt on (polite.Config.Robots).
	Robots    bool  `json:"robots"`
	JudgeFrom int64 `json:"judge_from"` // the end of the warm-up
	// End is when the process stops starting requests; those under way
	// then run to their end, Timeout at most.
	End int64 `json:"end"`
	// Timeout is each request's deadline, in nanoseconds: its context's,
	// which the controller's waits count against (Colly's request timeout
	// stays its default, the controller's per-attempt timeout).
	Timeout time.Duration `json:"timeout"`
}

// childReport is what a fleet process prints on its standard output, as
// JSON, when its crawl ends.
type childReport struct {
	Proc int `json:"proc"`
	// Began is when the first request started: from then on to End the
	// process has URLs queued on every host.
	Began int64 `json:"began"`
	// Sends counts the requests this process put on the wire per host
	// (robots.txt included) after the warm-up; Calls the Redis commands
	// its store sent over the same time per host (by the scope its keys
	// name; "" for others), and RTTs the round trip of those that
	// succeeded, in microseconds.
	Sends  map[string]int `json:"sends"`
	Calls  map[string]int `json:"calls"`
	RTTs   []int64        `json:"rtt_us"`
	Failed int            `json:"failed_calls"` // Redis commands that failed, whole run
	// Requests are this process's requests (calls of Visit), whole run.
	Requests requestCount `json:"requests"`
	// Samples are the controller's snapshots of each host, every
	// sampleEvery.
	Samples []sample `json:"samples"`
	// Logs are the controller's lines about the shared store, with their
	// times.
	Logs []logLine `json:"logs"`
	// Stuck holds, when requests were still running past their deadline,
	// where this process's goroutines were then (runtime/pprof's
	// goroutine profile, identical stacks counted once), for whoever
	// looks for why.
	Stuck string `json:"stuck_stacks,omitempty"`
	// Requeued is, in a shared-frontier crawl, the fleet's count of
	// requests whose lease expired (frontier.Queue.Requeued).
	Requeued int    `json:"requeued,omitempty"`
	Err      string `json:"error,omitempty"`
}

// requestCount is how a process's requests ended. Started = Answered +
// Errors + TimedOut + Unended.
type requestCount struct {
	Started  int `json:"started"`
	Answered int `json:"answered"` // Visit returned no error
	// Errors ended with an error before their deadline: a status Colly
	// counts as one (429, 503), a refusal of the controller, a failed
	// connection.
	Errors int `json:"errors"`
	// TimedOut ended by their deadline (childConfig.Timeout): lost.
	TimedOut int `json:"timed_out"`
	// Unended were still running when the process reported: lost too.
	Unended int `json:"unended"`
	// SlowestMs is the longest a request took to end.
	SlowestMs float64 `json:"slowest_ms"`
}

func (r requestCount) lost() int { return r.TimedOut + r.Unended }

type sample struct {
	At       int64   `json:"at"`
	Host     string  `json:"host"`
	Rate     float64 `json:"rate"`
	Estimate float64 `json:"estimate"`
	Limit    float64 `json:"limit"`
	// Shared is Snapshot.FleetShared (the store answered the last call);
	// FleetRate the fleet's rate as this process sees it.
	Shared    bool    `json:"shared"`
	FleetRate float64 `json:"fleet_rate"`
}

type logLine struct {
	At  int64  `json:"at"`
	Msg string `json:"msg"`
}

const sampleEvery = 100 * time.Millisecond

// childMain is a fleet process: it crawls the cell's hosts through its own
// controller, shared with the others through Redis, until the cell ends
// (or its parent goes away), and prints its report.
func childMain(arg string) {
	runChild(arg, func(c *childConfig) int { return c.Proc }, crawlFleet)
}

// runChild is a child process of the bench: it reads its configuration
// from arg, runs, and prints its report as JSON on standard output (and
// exits 1 on an error).
func runChild[C any](arg string, proc func(*C) int, run func(C, *childReport) error) {
	var cfg C
	rep := childReport{Sends: map[string]int{}, Calls: map[string]int{}}
	err := json.Unmarshal([]byte(arg), &cfg)
	if err == nil {
		rep.Proc = proc(&cfg)
		err = run(cfg, &rep)
	}
	if err != nil {
		rep.Err = err.Error()
	}
	out, _ := json.Marshal(rep)
	os.Stdout.Write(append(out, '\n'))
	if err != nil {
		os.Exit(1)
	}
}

func crawlFleet(cfg childConfig, rep *childReport) error {
	if cfg.Workers < 1 || len(cfg.Hosts) == 0 || cfg.Timeout <= 0 {
		return errors.New("bench: fleet worker: no hosts, no workers or no timeout")
	}
	end := time.Unix(0, cfg.End)
	// ctx ends when the parent goes away; at end the process only stops
	// starting requests: those under way run to their end, or their
	// deadline
	ctx, cancel := demo.ParentGone(context.Background())
	defer cancel()

	// the controller's lines about the store, kept with their times (it
	// logs them on slog's default logger when it has none of its own)
	logs := &storeLog{}
	slog.SetDefault(slog.New(logs))
	redis.SetLogger(quietRedis{}) // a dial refused while Redis is down is expected

	opt, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return fmt.Errorf("bench: fleet worker: %w", err)
	}
	// as redisstore's doc recommends: every call bounded by its context
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = time.Second
	opt.MaxRetries = -1 // the controller falls back and retries by itself
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	// the store's cost, timed on the client's commands: the harness hands
	// the controller redisstore's Store itself, whatever its methods
	timer := newCommandTimer(cfg.Hosts, cfg.JudgeFrom, cfg.End)
	rdb.AddHook(timer)
	store := redisstore.New(rdb, redisstore.Options{Prefix: cfg.Prefix})

	w := &sendCounter{next: loopbackTransport(cfg.Hosts), proc: strconv.Itoa(cfg.Proc), from: cfg.JudgeFrom, to: cfg.End, n: map[string]*atomic.Int64{}}
	for h := range cfg.Hosts {
		w.n[h] = &atomic.Int64{}
	}
	c := colly.NewCollector(colly.AllowURLRevisit(), colly.StdlibContext(ctx))
	c.WithTransport(w)
	pc := polite.Config{Store: store, Robots: new(cfg.Robots)}
	closeLog, err := decisionLog(&pc, "proc", cfg.Proc)
	if err != nil {
		return fmt.Errorf("bench: fleet worker: %w", err)
	}
	defer closeLog()
	for h, rate := range cfg.Ceilings {
		if _, ok := cfg.Hosts[h]; ok {
			pc.Rules = append(pc.Rules, polite.Rule{Domain: h, Rate: rate})
		}
	}
	ctrl := adaptive.Attach(c, pc)
	if err := ctrl.Err(); err != nil {
		return err
	}

	var reqs requests
	var wg sync.WaitGroup
	rep.Began = time.Now().UnixNano()
	for h := range cfg.Hosts {
		var seq atomic.Int64
		seq.Store(int64(cfg.Proc * 100_000))
		for range cfg.Workers {
			// each worker visits through a clone of its own (one client,
			// one controller), whose Context it sets before each request:
			// Colly has no per-request deadline of its own, and its
			// request timeout becomes the controller's per-attempt one,
			// which the polite wait does not count against
			wc := c.Clone()
			if adaptive.Attach(wc) != ctrl {
				return errors.New("bench: fleet worker: a clone got a controller of its own")
			}
			base := wc.Context
			wg.Go(func() {
				for ctx.Err() == nil && time.Now().Before(end) {
					rctx, done := context.WithTimeout(base, cfg.Timeout)
					wc.Context = rctx
					t0 := reqs.start()
					err := wc.Visit(fmt.Sprintf("http://%s/page/%d", h, seq.Add(1)%sitePages))
					took := reqs.end(t0, err, cfg.Timeout)
					done()
					// a refusal without sending (a parked scope) returns at
					// once: do not spin on it (as run.go)
					var ue *url.Error
					if err != nil && errors.As(err, &ue) && took < time.Millisecond {
						demo.Sleep(ctx, 100*time.Millisecond)
					}
				}
			})
		}
	}
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if !now.Before(end) {
					return
				}
				for h := range cfg.Hosts {
					if s, ok := ctrl.Snapshot(h); ok {
						rep.Samples = append(rep.Samples, sample{At: now.UnixNano(), Host: h, Rate: s.Rate,
							Estimate: s.Estimate, Limit: float64(s.Limit), Shared: s.FleetShared, FleetRate: s.FleetRate})
					}
				}
			}
		}
	})
	sampler.Wait()
	// the requests under way at the end: each ends by its deadline, or it
	// is lost (Unended)
	drained := demo.WaitFor(&wg, cfg.Timeout+5*time.Second)
	rep.Requests = reqs.count()
	if !drained {
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		rep.Stuck = b.String()[:min(b.Len(), 64<<10)]
	}
	_ = ctrl.Close() // the fleet's leases back
	for h, n := range w.n {
		rep.Sends[h] = int(n.Load())
	}
	timer.report(rep)
	rep.Logs = logs.lines()
	if ctx.Err() != nil {
		return errors.New("bench: fleet worker: stopped early: the parent went away")
	}
	if !drained {
		return fmt.Errorf("bench: fleet worker: %d requests still running %v after their deadline", rep.Requests.Unended, 5*time.Second)
	}
	return nil
}

// requests counts a process's requests as they start and end.
type requests struct {
	mu sync.Mutex
	c  requestCount // guarded by mu
}

func (r *requests) start() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c.Started++
	return time.Now()
}

// end notes the end of a request started at t0 with err, against its
// deadline timeout, and returns how long it took.
func (r *requests) end(t0 time.Time, err error, timeout time.Duration) time.Duration {
	took := time.Since(t0)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.c.Answered++
	case took >= timeout-timeoutSlack:
		r.c.TimedOut++
	default:
		r.c.Errors++
	}
	r.c.SlowestMs = max(r.c.SlowestMs, float64(took.Microseconds())/1000)
	return took
}

// timeoutSlack is how much earlier than its deadline a request that fails
// counts as timed out: the deadline's timer and the error's way back.
const timeoutSlack = 50 * time.Millisecond

func (r *requests) count() requestCount {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.c
	c.Unended = c.Started - c.Answered - c.Errors - c.TimedOut
	return c
}

// loopbackTransport reaches the cell's hosts by name (http://a.test) at
// their loopback listeners, as testserver's own Transport does in the
// bench process; any other address is refused.
func loopbackTransport(hosts map[string]string) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			name, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			a, ok := hosts[strings.ToLower(name)]
			if !ok {
				return nil, fmt.Errorf("bench: %s is not a host of the cell", addr)
			}
			return d.DialContext(ctx, network, a)
		},
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
	}
}

// sendCounter counts the requests put on the wire per host in [from, to),
// and names this process on each (clientHeader), for the server's log.
type sendCounter struct {
	next     http.RoundTripper
	proc     string
	from, to int64
	n        map[string]*atomic.Int64 // read-only after start
}

func (s *sendCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if now := time.Now().UnixNano(); now >= s.from && now < s.to {
		if n := s.n[req.URL.Hostname()]; n != nil {
			n.Add(1)
		}
	}
	req = req.Clone(req.Context()) // a RoundTripper leaves its request as it is
	req.Header.Set(clientHeader, s.proc)
	return s.next.RoundTrip(req)
}

// commandTimer is a go-redis hook that times every command the store
// sends: the fleet's cost per send. A command counts for the host whose
// scope its arguments name (redisstore's keys carry the scope, as is or
// in base64), "" if none.
type commandTimer struct {
	from, to int64
	names    map[string][]string // host: the forms its scope takes in a key

	mu     sync.Mutex
	calls  map[string]int // guarded by mu: per host, in [from, to)
	rtts   []int64        // guarded by mu: µs, successful commands in [from, to)
	failed int            // guarded by mu
}

func newCommandTimer(hosts map[string]string, from, to int64) *commandTimer {
	t := &commandTimer{from: from, to: to, names: map[string][]string{}, calls: map[string]int{}}
	for h := range hosts {
		t.names[h] = []string{h, base64.RawURLEncoding.EncodeToString([]byte(h)), base64.StdEncoding.EncodeToString([]byte(h))}
	}
	return t
}

func (t *commandTimer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t *commandTimer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmd)
		t.note(t.host(cmd), t0, err)
		return err
	}
}

func (t *commandTimer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmds)
		host := ""
		if len(cmds) > 0 {
			host = t.host(cmds[0])
		}
		t.note(host, t0, err) // one round trip
		return err
	}
}

// host is the host whose scope cmd's arguments name.
func (t *commandTimer) host(cmd redis.Cmder) string {
	for _, a := range cmd.Args() {
		s, ok := a.(string)
		if !ok {
			continue
		}
		for h, forms := range t.names {
			for _, f := range forms {
				if strings.Contains(s, f) {
					return h
				}
			}
		}
	}
	return ""
}

func (t *commandTimer) note(host string, t0 time.Time, err error) {
	d := time.Since(t0)
	at := t0.UnixNano()
	if errors.Is(err, redis.Nil) {
		err = nil // an answer: nothing there
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.failed++
	}
	if at < t.from || at >= t.to {
		return
	}
	t.calls[host]++
	if err == nil {
		t.rtts = append(t.rtts, d.Microseconds())
	}
}

func (t *commandTimer) report(rep *childReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.calls {
		rep.Calls[k] = v
	}
	rep.RTTs = append([]int64(nil), t.rtts...)
	rep.Failed = t.failed
}

// storeLog is a slog.Handler that keeps the controller's lines about the
// shared store, with their times, and echoes them on standard error.
type storeLog struct {
	mu sync.Mutex
	ls []logLine // guarded by mu
}

func (*storeLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (s *storeLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "store") { // "shared store unreachable", "shared store back", or as the library says it
		return nil
	}
	s.mu.Lock()
	s.ls = append(s.ls, logLine{At: r.Time.UnixNano(), Msg: r.Message})
	s.mu.Unlock()
	fmt.Fprintf(os.Stderr, "%s %s\n", r.Time.Format("15:04:05.000"), r.Message)
	return nil
}

func (s *storeLog) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *storeLog) WithGroup(string) slog.Handler      { return s }

func (s *storeLog) lines() []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logLine(nil), s.ls...)
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// decisionLog points pc's Logger at BENCH_DECISIONS/<name>-<proc>.<k>.log
// when that variable names a directory: every decision of the process's
// controller, for a look at one cell (BENCH_DECISIONS=dir go run ./bench
// -fleet 8 ..., or -fleet-crawl 2). k is the first number free there, so
// that the runs and cells of one command keep a log each instead of the
// last overwriting the others (cells and runs go one after another: k
// counts them, for each proc). The function it returns closes the file.
func decisionLog(pc *polite.Config, name string, proc int) (func(), error) {
	dir := os.Getenv("BENCH_DECISIONS")
	if dir == "" {
		return func() {}, nil
	}
	var f *os.File
	for k := 1; ; k++ {
		var err error
		f, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.%d.log", name, proc, k)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	pc.Logger = slog.New(slog.NewTextHandler(f, nil)).With("proc", proc)
	return func() { f.Close() }, nil
}
