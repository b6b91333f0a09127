package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/testserver"
)

// run crawls one cell and measures it.
func run(ctx context.Context, sc *scenario, ct *contender, cfg cellConfig) (res result, err error) {
	if sc.crawl != nil {
		return runCrawl(ctx, sc, ct, cfg)
	}
	n := sc.runLength(cfg.d)
	res = newResult(sc, ct, cfg)
	if sc.busy {
		b, err := startBurner(n + 30*time.Second)
		if err != nil {
			res.Err = err.Error()
			return res, err
		}
		// res is the named result: the load's share lands in the row
		defer func() { p := b.stop(); res.BurnerCPU = &p }()
	}
	rg, err := newRig(ctx, sc.hosts(n), ct, cfg, sc.wire, colly.AllowURLRevisit())
	if err != nil {
		res.Err = err.Error()
		return res, err
	}
	defer rg.close()
	srv, c, cctx := rg.srv, rg.c, rg.ctx
	hosts := srv.Hosts()
	bases := make([]string, len(hosts))
	for i, h := range hosts {
		bases[i] = rg.base(h)
	}

	// The crawl runs from the server's start (a few milliseconds ago) to n
	// on its clock: fixed windows, the schedule and the bins of the
	// measurement all count from there.
	var workers sync.WaitGroup
	var seq atomic.Int64
	for i := range sc.workers {
		base := bases[i%len(bases)]
		workers.Go(func() {
			for cctx.Err() == nil && srv.Elapsed() < n {
				t0 := time.Now()
				err := c.Visit(fmt.Sprintf("%s/page/%d", base, seq.Add(1)%sitePages))
				// A refusal without sending (a parked scope, an open
				// breaker) returns at once: do not spin on it, as a
				// crawler loop would not. HTTP error statuses are no
				// refusal: they go on at once.
				var ue *url.Error
				if err != nil && errors.As(err, &ue) && time.Since(t0) < time.Millisecond {
					demo.Sleep(cctx, 100*time.Millisecond)
				}
			}
		})
	}
	// Latencies are in order of completion: those answered before the
	// judged window are left out of its median.
	skip := 0
	if sc.unloaded > 0 {
		demo.Sleep(ctx, sc.judged(n)-srv.Elapsed())
		skip = len(srv.Stats(sc.target).Latencies)
	}
	demo.Sleep(ctx, n-srv.Elapsed())
	stats := make(map[string]testserver.Stats, len(hosts))
	for _, h := range hosts {
		stats[h] = srv.Stats(h)
	}
	inFlight := rg.w.max.Load()
	if rg.ctrl != nil {
		if s, ok := rg.ctrl.Snapshot(demo.ScopeOf(rg.base(sc.target))); ok {
			res.Adaptive = &snapshot{Limit: float64(s.Limit), Rate: s.Rate, Estimate: s.Estimate, Parked: s.Parked}
		}
	}
	rg.cancel()
	if err := demo.Stop(&workers, srv); err != nil {
		res.Err = err.Error()
		return res, err
	}
	measure(&res, sc, stats, n, skip)
	res.MaxInFlight = inFlight
	return res, ctx.Err()
}

// rig is what a cell crawls with: a fresh server (behind a delaying proxy
// per host when the round trip is on the wire), and a fresh collector on
// it with the contender installed.
type rig struct {
	srv     *testserver.Server
	proxies map[string]*delayProxy // by host; none without a wire
	w       *wire                  // under the contender: counts the requests on the wire
	c       *colly.Collector
	ctrl    *polite.Controller // nil but for adaptive
	ctx     context.Context    // the collector's; cancel ends the crawl
	cancel  context.CancelFunc
}

// newRig starts a server with hosts, each given the network round trip
// cfg.rtt at the server and, if onWire > 0, that round trip on the wire in
// front of it, and a collector with opts whose requests end with ctx.
func newRig(ctx context.Context, hosts map[string]testserver.Policy, ct *contender, cfg cellConfig, onWire time.Duration, opts ...colly.CollectorOption) (*rig, error) {
	for name, p := range hosts {
		p.Latency.RTT = cfg.rtt
		p.Latency.ExternalRTT = onWire
		hosts[name] = p
	}
	srv, err := testserver.New(testserver.Config{Hosts: hosts, Network: testserver.Loopback, Seed: int64(cfg.seed)})
	if err != nil {
		return nil, err
	}
	rg := &rig{srv: srv, w: &wire{next: srv.Transport()}, proxies: map[string]*delayProxy{}}
	if onWire > 0 {
		for _, h := range srv.Hosts() {
			p, err := startProxy(strings.TrimPrefix(srv.HostURL(h), "http://"), onWire)
			if err != nil {
				rg.close()
				return nil, err
			}
			rg.proxies[h] = p
		}
	}
	if err := rg.start(ctx, ct, cfg, opts); err != nil {
		rg.close()
		return nil, err
	}
	return rg, nil
}

func (rg *rig) start(ctx context.Context, ct *contender, cfg cellConfig, opts []colly.CollectorOption) error {
	rg.ctx, rg.cancel = context.WithCancel(ctx)
	rg.c = colly.NewCollector(append(opts, colly.StdlibContext(rg.ctx))...)
	var err error
	rg.ctrl, err = ct.setup(rg.c, rg.w, cfg.seed)
	return err
}

// base is the URL the crawl reaches host at: its proxy's, or the server's.
func (rg *rig) base(host string) string {
	if p := rg.proxies[host]; p != nil {
		return "http://" + p.Addr()
	}
	return rg.srv.HostURL(host)
}

// close ends the crawl, the proxies and the server.
func (rg *rig) close() {
	if rg.cancel != nil {
		rg.cancel()
	}
	for _, p := range rg.proxies {
		p.Close()
	}
	rg.srv.Close()
}

// measure fills the figures of res from the hosts' statistics at the end of
// a run of n; the first skip latencies of the target were answered before
// the judged window.
func measure(res *result, sc *scenario, stats map[string]testserver.Stats, n time.Duration, skip int) {
	warm, from := n/4, sc.judged(n)
	capacity := func(t time.Duration) float64 { return sc.capacity(t, n) }
	st := stats[sc.target]
	res.LengthS, res.JudgedFromS = n.Seconds(), from.Seconds()
	res.Capacity = meanCapacity(capacity, from, n)
	res.Goodput = float64(demo.CountIn(st.Accepted, from, n)) / (n - from).Seconds()
	if res.Capacity > 0 {
		res.GoodputPct = res.Goodput / res.Capacity * 100
	}
	if sc.unloaded > 0 {
		if m, ok := median(st.Latencies[min(skip, len(st.Latencies)):]); ok {
			ms, x := float64(m)/float64(time.Millisecond), float64(m)/float64(sc.unloaded)
			res.MedianLatencyMs, res.MedianLatencyX = &ms, &x
		}
	}
	for _, s := range stats {
		acc, rej := demo.CountIn(s.Accepted, warm, n), demo.CountIn(s.Rejected, warm, n)
		res.Sent += acc + rej
		res.Rejected += rej
		res.PauseViolations += s.PauseViolations
		res.BanCount += s.BanCount
	}
	if res.Sent > 0 {
		res.RejectedPct = float64(res.Rejected) / float64(res.Sent) * 100
	}
	since := time.Duration(0)
	if sc.change != nil {
		since = sc.change(n)
		s := since.Seconds()
		res.ChangeAtS = &s
	}
	if at, ok := converge(st.Accepted, capacity, since, n); ok {
		s := at.Seconds()
		res.ConvergeS = &s
	}
	if sc.crawlDelay > 0 {
		res.CrawlDelayViolations = gapViolations(append(slices.Clone(st.Accepted), st.Rejected...), sc.crawlDelay)
	}
	res.Violations = res.PauseViolations + res.CrawlDelayViolations
	if sc.ban {
		b := res.BanCount > 0
		res.Banned = &b
	}
	res.ServerMaxInFlight, res.ServerMaxQueued = st.MaxInFlight, st.MaxQueued
	res.ByStatus = st.ByStatus
	res.Robots = st.Robots
	res.accepted, res.rejected, res.n = st.Accepted, st.Rejected, n
}
