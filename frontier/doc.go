// Package frontier is a polite crawl queue for Colly, used as colly/queue
// is (threads, AddURL, Run), that never lets a thread wait on one host
// while another host could use it: one FIFO per scope, as Heritrix and
// Nutch keep per host, and each free thread gets the request whose scope is
// ready soonest, its send slot reserved from the adaptive controller first.
// (With a shared Store, a reservation holds the process's slot, not the fleet's:
// a thread may still wait for the fleet's schedule.)
//
//	c := colly.NewCollector(colly.Async()) // or synchronous: Threads bound what is in flight either way
//	ctrl := adaptive.Attach(c)
//	q, _ := frontier.New(ctrl, frontier.Config{Threads: 8, Path: "crawl.db"}) // Path: survives a crash
//	defer q.Close()
//	c.OnHTML("a[href]", func(e *colly.HTMLElement) { q.AddLink(e.Request, e.Attr("href")) })
//	q.AddURL("https://example.com/")
//	q.Run(c) // returns when every URL, and every URL added meanwhile, is done
//
// With Config.Shared (frontier/redisfrontier on Redis), the processes of a
// fleet consume one frontier: one FIFO per scope and one set of requests
// seen for them all, each request under a lease that returns it to the
// queue if its process dies.
//
// Progress gives the counts, the rate and the ETA (with a Shared, the
// fleet's). The module's docs/frontier.md says what a queue in a file and
// a shared one promise, and docs/colly.md compares the frontier with
// colly/queue.
package frontier
