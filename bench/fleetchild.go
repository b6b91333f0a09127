package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/fleet"
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
	End       int64 `json:"end"`
}

// childReport is what a fleet process prints on its standard output, as
// JSON, when its crawl ends.
type childReport struct {
	Proc int `json:"proc"`
	// Sends counts the requests this process put on the wire per host
	// (robots.txt included) after the warm-up; Calls the store calls per
	// scope (Acquire, Release, Renew) over the same time, and RTTs the
	// round trip of those that succeeded, in microseconds.
	Sends  map[string]int `json:"sends"`
	Calls  map[string]int `json:"calls"`
	RTTs   []int64        `json:"rtt_us"`
	Failed int            `json:"failed_calls"` // store calls that failed, whole run
	// Samples are the controller's snapshots of each host, every
	// sampleEvery.
	Samples []sample `json:"samples"`
	// Logs are the controller's lines about the shared store ("shared
	// store unreachable", "shared store back"), with their times.
	Logs []logLine `json:"logs"`
	Err  string    `json:"error,omitempty"`
}

type sample struct {
	At       int64   `json:"at"`
	Host     string  `json:"host"`
	Rate     float64 `json:"rate"`
	Estimate float64 `json:"estimate"`
	Limit    float64 `json:"limit"`
}

type logLine struct {
	At  int64  `json:"at"`
	Msg string `json:"msg"`
}

const sampleEvery = 250 * time.Millisecond

// childMain is a fleet process: it crawls the cell's hosts through its own
// controller, shared with the others through Redis, until the cell ends
// (or its parent goes away), and prints its report.
func childMain(arg string) {
	var cfg childConfig
	rep := childReport{Sends: map[string]int{}, Calls: map[string]int{}}
	err := json.Unmarshal([]byte(arg), &cfg)
	if err == nil {
		rep.Proc = cfg.Proc
		err = crawlFleet(cfg, &rep)
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
	if cfg.Workers < 1 || len(cfg.Hosts) == 0 {
		return errors.New("bench: fleet worker: no hosts or no workers")
	}
	end := time.Unix(0, cfg.End)
	ctx, cancel := demo.ParentGone(context.Background())
	defer cancel()
	ctx, cancelEnd := context.WithDeadline(ctx, end)
	defer cancelEnd()

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
	store := &timedStore{Store: redisstore.New(rdb, redisstore.Options{Prefix: cfg.Prefix}),
		from: cfg.JudgeFrom, to: cfg.End, calls: map[string]int{}}

	w := &sendCounter{next: loopbackTransport(cfg.Hosts), from: cfg.JudgeFrom, to: cfg.End, n: map[string]*atomic.Int64{}}
	for h := range cfg.Hosts {
		w.n[h] = &atomic.Int64{}
	}
	c := colly.NewCollector(colly.AllowURLRevisit(), colly.StdlibContext(ctx))
	c.WithTransport(w)
	pc := polite.Config{Store: store, Robots: new(cfg.Robots)}
	for h, rate := range cfg.Ceilings {
		pc.Rules = append(pc.Rules, polite.Rule{Domain: h, Rate: rate})
	}
	ctrl := adaptive.Attach(c, pc)
	if err := ctrl.Err(); err != nil {
		return err
	}

	var wg sync.WaitGroup
	for h := range cfg.Hosts {
		var seq atomic.Int64
		seq.Store(int64(cfg.Proc * 100_000))
		for range cfg.Workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					t0 := time.Now()
					err := c.Visit(fmt.Sprintf("http://%s/page/%d", h, seq.Add(1)%sitePages))
					// a refusal without sending (a parked scope) returns at
					// once: do not spin on it (as run.go)
					var ue *url.Error
					if err != nil && errors.As(err, &ue) && time.Since(t0) < time.Millisecond {
						demo.Sleep(ctx, 100*time.Millisecond)
					}
				}
			})
		}
	}
	wg.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				for h := range cfg.Hosts {
					if s, ok := ctrl.Snapshot(h); ok {
						rep.Samples = append(rep.Samples, sample{At: now.UnixNano(), Host: h, Rate: s.Rate,
							Estimate: s.Estimate, Limit: float64(s.Limit)})
					}
				}
			}
		}
	})
	<-ctx.Done()
	if !demo.WaitFor(&wg, 15*time.Second) {
		return errors.New("bench: fleet worker: workers still busy 15 s after the end")
	}
	_ = ctrl.Close() // the fleet's leases back
	for h, n := range w.n {
		rep.Sends[h] = int(n.Load())
	}
	store.report(rep)
	rep.Logs = logs.lines()
	if time.Now().Before(end) {
		return errors.New("bench: fleet worker: stopped early: the parent went away")
	}
	return nil
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

// sendCounter counts the requests put on the wire per host in [from, to).
type sendCounter struct {
	next     http.RoundTripper
	from, to int64
	n        map[string]*atomic.Int64 // read-only after start
}

func (s *sendCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if now := time.Now().UnixNano(); now >= s.from && now < s.to {
		if n := s.n[req.URL.Hostname()]; n != nil {
			n.Add(1)
		}
	}
	return s.next.RoundTrip(req)
}

// timedStore times every call to the Store it wraps: the cost of the fleet
// per send. It passes pause notifications through.
type timedStore struct {
	fleet.Store
	from, to int64

	mu     sync.Mutex
	calls  map[string]int // guarded by mu: per scope, in [from, to)
	rtts   []int64        // guarded by mu: µs, successful calls in [from, to)
	failed int            // guarded by mu
}

func (t *timedStore) note(scope string, t0 time.Time, err error) {
	d := time.Since(t0)
	at := t0.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.failed++
	}
	if at < t.from || at >= t.to {
		return
	}
	t.calls[scope]++
	if err == nil {
		t.rtts = append(t.rtts, d.Microseconds())
	}
}

func (t *timedStore) Lease(ctx context.Context, a fleet.LeaseRequest) (fleet.Lease, error) {
	t0 := time.Now()
	g, err := t.Store.Lease(ctx, a)
	t.note(a.Scope, t0, err)
	return g, err
}

func (t *timedStore) Return(ctx context.Context, r fleet.Return) (fleet.Settlement, error) {
	t0 := time.Now()
	st, err := t.Store.Return(ctx, r)
	t.note(r.Scope, t0, err)
	return st, err
}

func (t *timedStore) Renew(ctx context.Context, scope, process string, leases []string, ttl time.Duration) error {
	t0 := time.Now()
	err := t.Store.Renew(ctx, scope, process, leases, ttl)
	t.note(scope, t0, err)
	return err
}

// Subscribe implements fleet.Notifier when the store it wraps does.
func (t *timedStore) Subscribe(fn func(fleet.Notice)) (cancel func()) {
	if n, ok := t.Store.(fleet.Notifier); ok {
		return n.Subscribe(fn)
	}
	return func() {}
}

func (t *timedStore) report(rep *childReport) {
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
	if !strings.Contains(r.Message, "shared store") {
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
