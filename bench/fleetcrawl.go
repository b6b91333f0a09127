package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/frontier/redisfrontier"
	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/redisstore"
	"github.com/colly-polite/polite/testserver"
)

// The shared-frontier crawl (go run ./bench -fleet-crawl 1,2,4): S11's
// whole crawl (four hosts of -pages pages and an index each, each with its
// own hidden capacity, links found as pages are fetched) by N processes
// consuming one frontier in Redis (frontier/redisfrontier), their sends
// under one schedule per host (redisstore). With -fleet-crawl-kill, a cell
// of 4 whose first process is killed (SIGKILL) once a third of the pages
// are fetched. Each process prints every page it fetched, so the pages of
// a killed one are counted too. With -fleet-crawl-outage, a cell of 4 in
// which Redis is killed (SIGKILL) once a third of the pages are fetched
// and restarted empty 10 s later: the processes build the queue again
// from what each holds. Judged per host: its finish (the last page
// accepted, from the first request of the crawl) against pages/capacity,
// every page fetched, and the pages fetched twice.

// fleetCrawlConfig is the crawl mode's settings.
type fleetCrawlConfig struct {
	procs   []int
	kill    bool
	outage  bool
	pages   int
	threads int
	runs    int
	seed    uint64
	timeout time.Duration // the whole crawl's
	jsonOut string
}

// crawlCell is one crawl: its processes and whether one is killed, or
// Redis.
type crawlCell struct {
	procs  int
	kill   bool
	outage bool
}

// crawlOutage is how long Redis stays down in the outage cell.
const crawlOutage = 10 * time.Second

// crawlHostResult is one host of a crawl cell.
type crawlHostResult struct {
	Host        string  `json:"host"`
	Capacity    float64 `json:"capacity"`
	Pages       int     `json:"pages"` // the index included
	Fetched     int     `json:"fetched"`
	Twice       int     `json:"fetched_twice"`       // by the processes' prints
	ServerTwice int     `json:"accepted_over_pages"` // accepted by the host beyond one per page
	Missing     int     `json:"missing"`
	Rejected    int     `json:"rejected"`
	Accepted    int     `json:"accepted"`
	IdealS      float64 `json:"ideal_s"` // pages / capacity
	FinishS     float64 `json:"finish_s"`
	RejectedPct float64 `json:"rejected_pct"`
}

// crawlResult is one crawl cell's run.
type crawlResult struct {
	Procs    int               `json:"procs"`
	Killed   bool              `json:"killed"`
	KilledAt float64           `json:"killed_at_s,omitempty"`
	Outage   bool              `json:"redis_outage,omitempty"`
	DownAt   float64           `json:"redis_down_at_s,omitempty"` // killed then, restarted empty crawlOutage later
	Run      int               `json:"run"`
	TookS    float64           `json:"took_s"`
	PerProc  []int             `json:"fetched_per_process"`
	Requeued int               `json:"requeued"` // the fleet's count of leases expired
	Hosts    []crawlHostResult `json:"hosts"`
	Err      string            `json:"error,omitempty"`
}

// crawlChild is a crawl process's configuration.
type crawlChild struct {
	Proc    int               `json:"proc"`
	Redis   string            `json:"redis"`
	Prefix  string            `json:"prefix"`
	Hosts   map[string]string `json:"hosts"` // host -> loopback listener
	Threads int               `json:"threads"`
	Lease   time.Duration     `json:"lease"`
}

// crawlWorkerFlag, as the first argument, makes the bench binary one
// process of a shared-frontier crawl.
const crawlWorkerFlag = "-fleet-crawl-worker"

// crawlLease is the lease's life in the crawl: what a killed process's
// requests wait before the others take them.
const crawlLease = 5 * time.Second

func fleetCrawlMain(ctx context.Context, cfg fleetCrawlConfig) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -fleet-crawl:", err)
		return 1
	}
	url, rs, err := demo.Redis()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -fleet-crawl needs Redis (redis-server on PATH, or REDIS_URL):", err)
		return 1
	}
	if rs != nil {
		defer rs.Close()
	}
	var cells []crawlCell
	for _, n := range cfg.procs {
		cells = append(cells, crawlCell{procs: n})
	}
	if cfg.kill {
		cells = append(cells, crawlCell{procs: 4, kill: true})
	}
	if cfg.outage {
		if rs == nil {
			fmt.Fprintln(os.Stderr, "bench: -fleet-crawl-outage needs the bench's own redis-server (REDIS_URL is set)")
			return 1
		}
		cells = append(cells, crawlCell{procs: 4, outage: true})
	}
	var results []crawlResult
	failed := false
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, c := range cells {
			if ctx.Err() != nil {
				break
			}
			r, err := runCrawlCell(ctx, cfg, exe, url, rs, c, run)
			if ctx.Err() != nil {
				// interrupted: the cell was cut short, and its figures are
				// no crawl's (a cell that ran 0.01 s, its hosts' pages
				// missing); it is left out of the table and the JSON
				fmt.Fprintf(os.Stderr, "  %d processes, run %d: interrupted, left out\n", c.procs, run)
				break
			}
			if err != nil {
				r.Err = err.Error()
				failed = true
			}
			results = append(results, r)
			fmt.Fprintf(os.Stderr, "  %s\n", r.oneLine())
		}
	}
	printCrawls(os.Stdout, cfg, results)
	if cfg.jsonOut != "" {
		doc := map[string]any{"command": "go run ./bench " + strings.Join(os.Args[1:], " "), "date": time.Now().Format(time.RFC3339),
			"pages": cfg.pages, "threads": cfg.threads, "lease": crawlLease.String(), "results": results}
		b, _ := json.MarshalIndent(doc, "", "  ")
		if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}

func runCrawlCell(ctx context.Context, cfg fleetCrawlConfig, exe, redisURL string, rs *demo.RedisServer, c crawlCell, run int) (crawlResult, error) {
	res := crawlResult{Procs: c.procs, Killed: c.kill, Outage: c.outage, Run: run}
	hosts := map[string]testserver.Policy{}
	for _, s := range crawlSites {
		p := s.policy
		p.Site = testserver.Site{Pages: cfg.pages}
		hosts[s.host] = p
	}
	srv, err := testserver.New(testserver.Config{Hosts: hosts, Network: testserver.Loopback, Seed: int64(cfg.seed) + int64(run) - 1})
	if err != nil {
		return res, err
	}
	defer srv.Close()
	cc := crawlChild{Redis: redisURL, Prefix: fmt.Sprintf("bench-crawl:%d", time.Now().UnixNano()), Hosts: map[string]string{},
		Threads: cfg.threads, Lease: crawlLease}
	for h := range hosts {
		cc.Hosts[h] = strings.TrimPrefix(srv.HostURL(h), "http://")
	}
	var fl fleetProcs
	defer fl.kill()
	start := srv.Elapsed()
	for i := range c.procs {
		cc.Proc = i + 1
		arg, _ := json.Marshal(cc)
		if err := fl.startArgs(exe, cc.Proc, crawlWorkerFlag, string(arg)); err != nil {
			return res, err
		}
	}
	total := len(hosts) * (cfg.pages + 1)
	deadline := time.Now().Add(cfg.timeout)
	killed, down := false, time.Time{}
	var errs []error
	for !fl.allDone() && time.Now().Before(deadline) && ctx.Err() == nil {
		if (c.kill && !killed || c.outage && down.IsZero()) && accepted(srv, hosts) >= total/3 {
			at := (srv.Elapsed() - start).Seconds()
			if c.kill {
				_ = fl.ps[0].cmd.Process.Kill()
				killed, res.KilledAt = true, at
			} else {
				rs.Kill()
				down, res.DownAt = time.Now(), at
			}
		}
		if !down.IsZero() && rs.Pid() == 0 && time.Since(down) >= crawlOutage {
			if err := rs.Start(); err != nil {
				errs = append(errs, fmt.Errorf("bench: redis-server did not start again: %w", err))
				break
			}
		}
		_ = demo.Sleep(ctx, 50*time.Millisecond)
	}
	res.TookS = (srv.Elapsed() - start).Seconds()
	if !fl.allDone() {
		errs = append(errs, fmt.Errorf("bench: the crawl did not end within %v", cfg.timeout))
	}
	reports, waitErr := fl.wait(5 * time.Second)
	for _, r := range reports {
		res.Requeued = max(res.Requeued, r.Requeued)
	}
	if waitErr != nil && !(c.kill && len(reports) == c.procs-1) {
		errs = append(errs, waitErr)
	}
	// every page each process printed, a killed one's included
	count := map[string]int{}
	for _, p := range fl.ps {
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(p.out.bytes()))
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "fetched "); ok {
				count[u]++
				n++
			}
		}
		res.PerProc = append(res.PerProc, n)
	}
	for _, s := range crawlSites {
		st := srv.Stats(s.host)
		h := crawlHostResult{Host: s.host, Capacity: s.capacity, Pages: cfg.pages + 1, Accepted: len(st.Accepted), Rejected: len(st.Rejected)}
		base := "http://" + s.host
		for i := -1; i < cfg.pages; i++ {
			u := base + "/"
			if i >= 0 {
				u = fmt.Sprintf("%s/page/%d", base, i)
			}
			switch n := count[u]; {
			case n == 0:
				h.Missing++
			default:
				h.Fetched++
				h.Twice += n - 1
			}
		}
		h.ServerTwice = max(h.Accepted-h.Pages, 0)
		h.IdealS = float64(h.Pages) / s.capacity
		if len(st.Accepted) > 0 {
			h.FinishS = (st.Accepted[len(st.Accepted)-1] - start).Seconds()
		}
		h.RejectedPct = percent(len(st.Rejected), len(st.Accepted)+len(st.Rejected))
		res.Hosts = append(res.Hosts, h)
	}
	return res, errors.Join(errs...)
}

// accepted is the pages the hosts accepted so far.
func accepted(srv *testserver.Server, hosts map[string]testserver.Policy) int {
	n := 0
	for h := range hosts {
		n += len(srv.Stats(h).Accepted)
	}
	return n
}

func (r crawlResult) oneLine() string {
	name := fmt.Sprintf("crawl, %d procs", r.Procs)
	if r.Killed {
		name += fmt.Sprintf(", one killed at %.1f s", r.KilledAt)
	}
	if r.Outage {
		name += fmt.Sprintf(", Redis down at %.1f s for %v", r.DownAt, crawlOutage)
	}
	s := fmt.Sprintf("%-32s #%d took %.1f s, fetched per process %v, requeued %d;", name, r.Run, r.TookS, r.PerProc, r.Requeued)
	for _, h := range r.Hosts {
		s += fmt.Sprintf(" %s %.1f s of %.1f (missing %d, twice %d, accepted over pages %d, rejected %.2f %%)", h.Host, h.FinishS, h.IdealS, h.Missing, h.Twice, h.ServerTwice, h.RejectedPct)
	}
	if r.Err != "" {
		s += " ERROR " + r.Err
	}
	return s
}

// printCrawls prints the crawl cells' table: per cell and host, the finish
// over the runs (median and latest) against the ideal and its target.
func printCrawls(out *os.File, cfg fleetCrawlConfig, rs []crawlResult) {
	fmt.Fprintf(out, "\nShared-frontier crawl: %d pages and the index on each of %d hosts, %d threads per process, leases of %v, %d run(s)\n",
		cfg.pages, len(crawlSites), cfg.threads, crawlLease, cfg.runs)
	fmt.Fprintln(out, "| cell | host | ideal | finish, median | latest | target | missing | fetched twice, most | accepted over pages, most | rejected, worst |")
	fmt.Fprintln(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	type key struct {
		procs          int
		killed, outage bool
	}
	var keys []key
	by := map[key][]crawlResult{}
	for _, r := range rs {
		k := key{r.Procs, r.Killed, r.Outage}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	for _, k := range keys {
		name := fmt.Sprintf("%d procs", k.procs)
		if k.killed {
			name += ", one killed"
		}
		if k.outage {
			name += ", Redis restarted empty"
		}
		for i, s := range crawlSites {
			var fin []float64
			missing, twice, over, rej := 0, 0, 0, 0.0
			var ideal float64
			for _, r := range by[k] {
				if i >= len(r.Hosts) {
					continue
				}
				h := r.Hosts[i]
				fin = append(fin, h.FinishS)
				missing += h.Missing
				twice = max(twice, h.Twice)
				over = max(over, h.ServerTwice)
				rej = math.Max(rej, h.RejectedPct)
				ideal = h.IdealS
			}
			if len(fin) == 0 {
				continue
			}
			sort.Float64s(fin)
			target := ideal + 2
			if k.killed {
				target += crawlLease.Seconds()
			}
			if k.outage {
				target += crawlOutage.Seconds()
			}
			fmt.Fprintf(out, "| %s | %s | %.1f s | %.1f s | %.1f s | %.1f s | %d | %d | %d | %.2f %% |\n",
				name, s.host, ideal, medianOf(fin), slices.Max(fin), target, missing, twice, over, rej)
		}
	}
}

// crawlChildMain is one process of a shared-frontier crawl: it adds each
// host's index (the others' adds are ErrSeen), runs the shared queue until
// the fleet's is empty, printing each page it fetched, then its report.
func crawlChildMain(arg string) {
	runChild(arg, func(c *crawlChild) int { return c.Proc }, crawlShared)
}

func crawlShared(cfg crawlChild, rep *childReport) error {
	ctx, cancel := demo.ParentGone(context.Background())
	defer cancel()
	redis.SetLogger(quietRedis{})
	opt, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	sh, err := redisfrontier.New(ctx, rdb, redisfrontier.Options{Prefix: cfg.Prefix})
	if err != nil {
		return err
	}
	c := colly.NewCollector(colly.StdlibContext(ctx))
	c.WithTransport(loopbackTransport(cfg.Hosts))
	pc := polite.Config{Robots: new(false), Store: redisstore.New(rdb, redisstore.Options{Prefix: cfg.Prefix + "-fleet"})}
	closeLog, err := decisionLog(&pc, "crawl-proc", cfg.Proc)
	if err != nil {
		return err
	}
	defer closeLog()
	ctrl := adaptive.Attach(c, pc)
	defer ctrl.Close()
	q, err := frontier.New(ctrl, frontier.Config{Threads: cfg.Threads, Shared: sh, LeaseTTL: cfg.Lease})
	if err != nil {
		return err
	}
	defer q.Close()
	var mu sync.Mutex
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = q.AddLink(e.Request, e.Attr("href")) })
	c.OnResponse(func(r *colly.Response) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, "fetched %s\n", r.Request.URL) // at once: a process killed has printed what it fetched
		mu.Unlock()
	})
	for h := range cfg.Hosts {
		if err := q.AddURL("http://" + h + "/"); err != nil && !errors.Is(err, frontier.ErrSeen) {
			return err
		}
	}
	err = q.Run(c)
	rep.Requeued = q.Requeued()
	return err
}
