package main

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/adaptive"
)

// contender is one way a Colly user would make a crawl polite. setup
// installs it on a fresh collector, sending through next (the transport
// that reaches the server); it returns the adaptive controller when there
// is one, for its snapshots. seed seeds the baselines' random draws.
type contender struct {
	name  string
	about string
	setup func(c *colly.Collector, next http.RoundTripper, seed uint64) (*polite.Controller, error)
}

func limitRule(n int) func(*colly.Collector, http.RoundTripper, uint64) (*polite.Controller, error) {
	return func(c *colly.Collector, next http.RoundTripper, _ uint64) (*polite.Controller, error) {
		c.WithTransport(next)
		return nil, c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: n})
	}
}

func transport(rt func(next http.RoundTripper, seed uint64) http.RoundTripper) func(*colly.Collector, http.RoundTripper, uint64) (*polite.Controller, error) {
	return func(c *colly.Collector, next http.RoundTripper, seed uint64) (*polite.Controller, error) {
		c.WithTransport(rt(next, seed))
		return nil, nil
	}
}

// adaptiveCells numbers the cells the adaptive contender ran, for their
// decision logs.
var adaptiveCells atomic.Int64

var contenders = []contender{
	{
		name:  "adaptive",
		about: "adaptive.Attach(c): this library with its defaults (robots.txt on)",
		setup: func(c *colly.Collector, next http.RoundTripper, _ uint64) (*polite.Controller, error) {
			c.WithTransport(next)
			// BENCH_DECISIONS=dir: each cell's decisions in
			// dir/adaptive-<n>.log, n counting the adaptive cells in the
			// order they start (the order the bench prints them); the
			// file stays open for the bench's life (the "proc" field is n)
			var pc polite.Config
			if _, err := decisionLog(&pc, "adaptive", int(adaptiveCells.Add(1))); err != nil {
				return nil, err
			}
			ctrl := adaptive.Attach(c, pc)
			return ctrl, ctrl.Err()
		},
	},
	{name: "limitrule-4", about: `c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 4})`, setup: limitRule(4)},
	{name: "limitrule-10", about: "the same with Parallelism 10 (the hand-tuned optimum of S1)", setup: limitRule(10)},
	{name: "limitrule-40", about: "the same with Parallelism 40 (one per worker)", setup: limitRule(40)},
	{name: "textbook-aimd", about: "the textbook Python scraper AIMD limiter, ported (bench/aimd.go)",
		setup: transport(func(next http.RoundTripper, seed uint64) http.RoundTripper { return newTextbookAIMD(next, seed) })},
	{name: "autothrottle-1", about: "Scrapy AutoThrottle, target concurrency 1 (Scrapy's default), ported (bench/autothrottle.go)",
		setup: transport(func(next http.RoundTripper, seed uint64) http.RoundTripper { return newAutoThrottle(next, 1, seed) })},
	{name: "autothrottle-8", about: "Scrapy AutoThrottle, target concurrency 8, ported (bench/autothrottle.go)",
		setup: transport(func(next http.RoundTripper, seed uint64) http.RoundTripper { return newAutoThrottle(next, 8, seed) })},
}

// wire counts the requests on the wire: from the moment the transport
// under every contender is asked to send until the response body is closed
// or read to its end (or the attempt fails). Its maximum is the "max in
// flight" of the table. Safe for concurrent use.
type wire struct {
	next     http.RoundTripper
	cur, max atomic.Int64
	sent     atomic.Int64
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	n := w.cur.Add(1)
	w.sent.Add(1)
	for m := w.max.Load(); n > m && !w.max.CompareAndSwap(m, n); m = w.max.Load() {
	}
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		w.cur.Add(-1)
		return nil, err
	}
	resp.Body = &wireBody{ReadCloser: resp.Body, w: w}
	return resp, nil
}

type wireBody struct {
	io.ReadCloser
	w    *wire
	once sync.Once
}

func (b *wireBody) done() { b.once.Do(func() { b.w.cur.Add(-1) }) }

func (b *wireBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done()
	}
	return n, err
}

func (b *wireBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}
