package frontier_test

import (
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// The frontier replaces colly/queue: its threads never wait on a slow
// host while another host could send. Here four threads crawl a slow host
// (2 requests per second) and a fast one (20) side by side, the slow
// host's URLs added first; each thread takes the request whose host is
// ready soonest, so the fast host's pages do not queue behind them.
//
// The example runs in real time (a few seconds) against the bundled test
// server in memory.
func Example() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts: map[string]testserver.Policy{
			"fast.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 20, Window: time.Second}},
			"slow.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 2, Window: time.Second}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := colly.NewCollector()
	c.WithTransport(srv.Client().Transport)
	ctrl := adaptive.Attach(c)
	defer ctrl.Close()

	q, err := frontier.New(ctrl, frontier.Config{Threads: 4})
	if err != nil {
		log.Fatal(err)
	}
	var fast, slow atomic.Int64
	c.OnResponse(func(r *colly.Response) {
		if r.Request.URL.Host == "fast.test" {
			fast.Add(1)
		} else {
			slow.Add(1)
		}
	})
	for i := range 6 {
		q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("slow.test"), i))
	}
	for i := range 30 {
		q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL("fast.test"), i))
	}
	if err := q.Run(c); err != nil {
		log.Fatal(err)
	}
	fmt.Println("fast.test pages:", fast.Load())
	fmt.Println("slow.test pages:", slow.Load())
	// Output:
	// fast.test pages: 30
	// slow.test pages: 6
}

// A crawl that follows the links it finds: AddLink resolves each href
// (relative, here) against the page it was found on, a link the queue was
// given before fails with ErrSeen and is not queued again, and Progress
// counts what ended.
func ExampleQueue_AddLink() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts:   map[string]testserver.Policy{"site.test": {Site: testserver.Site{Pages: 8, FanOut: 3}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := colly.NewCollector(colly.Async())
	c.WithTransport(srv.Client().Transport)
	ctrl := adaptive.Attach(c)
	defer ctrl.Close()
	q, err := frontier.New(ctrl, frontier.Config{Threads: 4})
	if err != nil {
		log.Fatal(err)
	}
	var pages atomic.Int64
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		q.AddLink(e.Request, e.Attr("href")) // frontier.ErrSeen for a repeat, ErrLink for an href it cannot follow
	})
	c.OnScraped(func(*colly.Response) { pages.Add(1) })
	q.AddURL(srv.HostURL("site.test") + "/")
	if err := q.Run(c); err != nil {
		log.Fatal(err)
	}
	p := q.Progress()
	fmt.Println("pages:", pages.Load())
	fmt.Println("failed:", p.Failed, "left:", p.Queued+p.Running)
	// Output:
	// pages: 9
	// failed: 0 left: 0
}
