package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/testserver"
)

// crawlSite is one host of a whole crawl (S11): its hidden limit, and the
// capacity it stands for.
type crawlSite struct {
	host     string
	about    string
	capacity float64           // req/s
	policy   testserver.Policy // the crawl sets Site and Latency.RTT
}

// crawlHost is what one host of a whole crawl came to.
type crawlHost struct {
	Host     string  `json:"host"`
	About    string  `json:"about"`
	Capacity float64 `json:"capacity"`
	// Pages is the number to visit: the index and -pages pages. IdealS is
	// Pages / Capacity; FinishS is the host's last answer (or failure),
	// from the start of the crawl; its target is IdealS + finishSlack.
	Pages   int     `json:"pages"`
	IdealS  float64 `json:"ideal_s"`
	FinishS float64 `json:"finish_s"`
	// Fetched counts the distinct pages answered 200; Lost is Pages -
	// Fetched.
	Fetched int `json:"fetched"`
	Lost    int `json:"lost"`
	// Requests and Rejected are the server's counts (robots.txt
	// excluded) over the whole crawl.
	Requests    int     `json:"requests"`
	Rejected    int     `json:"rejected"`
	RejectedPct float64 `json:"rejected_pct"`
	Violations  int     `json:"pause_violations"`
	Robots      int     `json:"robots_txt_requests"`
}

// finishSlack is adaptive's allowance over a host's ideal finish time:
// slow start, the discovery of the site's links and the end of the last
// window.
const finishSlack = 5 * time.Second

// crawlDeadline is when a whole crawl of pages per host is stopped: twice
// the slowest host's ideal time, plus 30 s.
func crawlDeadline(sites []crawlSite, pages int) time.Duration {
	var slowest float64
	for _, s := range sites {
		slowest = max(slowest, float64(pages+1)/s.capacity)
	}
	return 2*time.Duration(slowest*float64(time.Second)) + 30*time.Second
}

// runCrawl is a whole crawl: one async collector starts at the index of
// every host and follows the links of their sites until it has visited
// every page (Colly visits each URL once), or until the deadline.
func runCrawl(ctx context.Context, sc *scenario, ct *contender, cfg cellConfig) (result, error) {
	res := newResult(sc, ct, cfg)
	hosts := make(map[string]testserver.Policy, len(sc.crawl))
	for _, s := range sc.crawl {
		p := s.policy
		p.Site = testserver.Site{Pages: cfg.pages}
		hosts[s.host] = p
	}
	rg, err := newRig(ctx, hosts, ct, cfg, sc.wire, colly.Async(true))
	if err != nil {
		res.Err = err.Error()
		return res, err
	}
	defer rg.close()
	srv, c, cctx := rg.srv, rg.c, rg.ctx

	// What the collector saw of each host, keyed by "127.0.0.1:PORT" (a
	// listener per host).
	type tally struct {
		mu      sync.Mutex
		fetched map[string]bool // paths answered 200; guarded by mu
		last    time.Duration   // server clock of the last answer; guarded by mu
	}
	byAddr := make(map[string]*tally, len(sc.crawl))
	for _, s := range sc.crawl {
		byAddr[strings.TrimPrefix(rg.base(s.host), "http://")] = &tally{fetched: map[string]bool{}}
	}
	note := func(r *colly.Request, ok bool) {
		t := byAddr[r.URL.Host]
		if t == nil || cctx.Err() != nil { // the failures of a crawl cut at its deadline are not answers
			return
		}
		at := srv.Elapsed()
		t.mu.Lock()
		defer t.mu.Unlock()
		t.last = max(t.last, at)
		if ok {
			t.fetched[r.URL.Path] = true
		}
	}
	c.OnResponse(func(r *colly.Response) { note(r.Request, r.StatusCode == 200) })
	c.OnError(func(r *colly.Response, _ error) { note(r.Request, false) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { _ = e.Request.Visit(e.Attr("href")) })

	start := srv.Elapsed()
	for _, s := range sc.crawl {
		if err := c.Visit(rg.base(s.host) + "/"); err != nil {
			res.Err = err.Error()
			return res, err
		}
	}
	var crawling sync.WaitGroup
	crawling.Go(c.Wait)
	deadline := crawlDeadline(sc.crawl, cfg.pages)
	if !demo.WaitFor(&crawling, deadline) && ctx.Err() == nil {
		res.CrawlCut = true
	}
	n := srv.Elapsed() - start
	rg.cancel()
	if err := demo.Stop(&crawling, srv); err != nil {
		res.Err = err.Error()
		return res, err
	}

	res.LengthS = n.Seconds()
	res.MaxInFlight = rg.w.max.Load()
	for _, s := range sc.crawl {
		st := srv.Stats(s.host)
		t := byAddr[strings.TrimPrefix(rg.base(s.host), "http://")]
		h := crawlHost{Host: s.host, About: s.about, Capacity: s.capacity, Pages: cfg.pages + 1,
			Fetched: len(t.fetched), Requests: len(st.Accepted) + len(st.Rejected), Rejected: len(st.Rejected),
			Violations: st.PauseViolations, Robots: st.Robots}
		h.IdealS = float64(h.Pages) / s.capacity
		h.FinishS = max(t.last-start, 0).Seconds()
		h.Lost = h.Pages - h.Fetched
		if h.Requests > 0 {
			h.RejectedPct = float64(h.Rejected) / float64(h.Requests) * 100
		}
		res.Crawl = append(res.Crawl, h)
		res.Sent += h.Requests
		res.Rejected += h.Rejected
		res.PauseViolations += h.Violations
	}
	if res.Sent > 0 {
		res.RejectedPct = float64(res.Rejected) / float64(res.Sent) * 100
	}
	res.Violations = res.PauseViolations
	res.GoodputPct = crawlShare(res.Crawl)
	return res, ctx.Err()
}

// crawlLine sums up a whole crawl on one line.
func (r *result) crawlLine() string {
	var b strings.Builder
	if r.CrawlCut {
		fmt.Fprintf(&b, "stopped at the deadline (%.0f s); ", r.LengthS)
	}
	for i, h := range r.Crawl {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %.1f s (ideal %.1f), lost %d, rejected %.2f %%", h.Host, h.FinishS, h.IdealS, h.Lost, h.RejectedPct)
	}
	return b.String()
}

// crawlShare is a whole crawl's goodput as a share of capacity, in
// percent: its worst host's ideal time over its finish, scaled by the
// share of its pages it fetched (as the simulator's whole crawls are
// judged).
func crawlShare(hosts []crawlHost) float64 {
	share := -1.0
	for _, h := range hosts {
		s := 0.0
		if h.FinishS > 0 && h.Pages > 0 {
			s = h.IdealS / h.FinishS * float64(h.Fetched) / float64(h.Pages) * 100
		}
		if share < 0 || s < share {
			share = s
		}
	}
	return max(share, 0)
}
