package adaptive_test

import (
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

// One line makes a Colly collector polite: Attach wraps its transport (set
// before or after Attach, either way) and paces, limits and pauses each
// host it visits. Here an async collector with eight threads crawls the
// 30 pages of a host that takes 10 requests per second; every page is
// fetched, and no request lands in a pause the host announced.
//
// The example runs in real time (a few seconds) against the bundled test
// server in memory.
func ExampleAttach() {
	srv, err := testserver.New(testserver.Config{
		Network: testserver.Memory,
		Hosts: map[string]testserver.Policy{
			"a.test": {
				Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 10, Window: time.Second},
				Site:  testserver.Site{Pages: 30},
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	c := colly.NewCollector(colly.Async(true))
	c.WithTransport(srv.Client().Transport) // the test server's; before or after Attach
	ctrl := adaptive.Attach(c)
	defer ctrl.Close()

	var pages atomic.Int64
	c.OnResponse(func(*colly.Response) { pages.Add(1) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnError(func(r *colly.Response, err error) { log.Println(r.Request.URL, err) })
	c.Visit(srv.URL + "/")
	c.Wait()

	st := srv.Stats("a.test")
	fmt.Println("pages:", pages.Load())
	fmt.Println("requests during a pause:", st.PauseViolations)
	// Output:
	// pages: 31
	// requests during a pause: 0
}

// A Colly LimitRule keeps its meaning as a ceiling: the rate under it stays
// adaptive. Give it to Attach instead of to c.Limit.
func ExampleFromLimitRule() {
	r, err := adaptive.FromLimitRule(&colly.LimitRule{DomainGlob: "*.example.com", Parallelism: 2, Delay: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	c := colly.NewCollector()
	ctrl := adaptive.Attach(c, polite.Config{Rules: []polite.Rule{r}})
	defer ctrl.Close()
	fmt.Println(r.MaxConcurrency, r.MinGap)
	// Output:
	// 2 1s
}
