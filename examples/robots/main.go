// Robots shows adaptive.Attach honouring a robots.txt Crawl-delay with its
// defaults: no option, no LimitRule.
//
// The host (the bundled testserver, on real loopback sockets) has no hidden
// limit at all, but its robots.txt says "Crawl-delay: 1". Eight goroutines
// visit pages through one collector as fast as it lets them. Before the first
// page the controller fetches robots.txt once (through the same politeness)
// and from then on sends at most one request per second to the host, however
// many goroutines are waiting.
//
// Run it from the repository root:
//
//	go run ./examples/robots          # 15 s
//	go run ./examples/robots -short   # 4 s smoke run
//
// Every second it prints the pacing rate, the requests accepted so far and
// why requests wait (the Crawl-delay ceiling). Then it prints every gap
// between consecutive requests the server accepted, as
// the server measured them on arrival, marked OK when it is at least the
// Crawl-delay and VIOLATION when it is shorter (by however little), and a
// summary. The program exits 0 either way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/internal/demo" // helpers shared by this repository's programs
	"github.com/colly-polite/polite/testserver"
)

const (
	host       = "a.test"
	crawlDelay = time.Second
)

func main() {
	duration := flag.Duration("duration", 15*time.Second, "how long to crawl")
	workers := flag.Int("workers", 8, "goroutines visiting pages")
	short := flag.Bool("short", false, "a 4 s smoke run")
	flag.Parse()
	demo.Short(*short, map[string]string{"duration": "4s"}) // unless -duration is given

	srv, err := testserver.New(testserver.Config{
		Network: testserver.Loopback,
		Hosts: map[string]testserver.Policy{host: {
			Latency: testserver.Latency{Base: 50 * time.Millisecond},
			Robots:  testserver.Robots{CrawlDelay: crawlDelay},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	c := colly.NewCollector(colly.AllowURLRevisit(), colly.StdlibContext(ctx))
	c.WithTransport(srv.Transport())
	ctrl := adaptive.Attach(c) // defaults: robots.txt Crawl-delay honoured

	var ok, failed atomic.Int64
	c.OnResponse(func(*colly.Response) { ok.Add(1) })
	c.OnError(func(_ *colly.Response, err error) {
		if !errors.Is(err, context.Canceled) {
			failed.Add(1)
			fmt.Println("error:", err)
		}
	})

	base := srv.HostURL(host)
	fmt.Printf("robots.txt of %s says Crawl-delay: %v; %d workers, one collector, %v\n\n",
		host, crawlDelay.Seconds(), *workers, *duration)

	end := time.Now().Add(*duration)
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range *workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				t0 := time.Now()
				if err := c.Visit(fmt.Sprintf("%s/page/%d", base, seq.Add(1)%1000)); err != nil && time.Since(t0) < time.Millisecond {
					demo.Sleep(ctx, 100*time.Millisecond) // a refusal without waiting: do not spin
				}
			}
		})
	}
	// a line per second: rate, in flight, accepted, and why requests wait
	// (the Crawl-delay ceiling, once robots.txt is read)
	start := time.Now()
	hosts := []demo.Host{demo.HostOf(host, base)}
	for t := time.Second; t <= *duration; t += time.Second {
		demo.Sleep(ctx, time.Until(start.Add(t)))
		demo.Progress(os.Stdout, t, ctrl, hosts)
	}
	demo.Sleep(ctx, time.Until(end))
	cancel()
	if err := demo.Stop(&wg, srv); err != nil { // waits for the workers, closing the server if they linger
		log.Fatal(err)
	}

	st := srv.Stats(host)
	violations := 0
	minGap := time.Duration(-1)
	for i, at := range st.Accepted {
		if i == 0 {
			fmt.Printf("request %3d at %7.3fs  (robots.txt was read first)\n", i+1, at.Seconds())
			continue
		}
		gap := at - st.Accepted[i-1]
		verdict := "OK"
		if gap < crawlDelay {
			verdict = "VIOLATION"
			violations++
		}
		if minGap < 0 || gap < minGap {
			minGap = gap
		}
		fmt.Printf("request %3d at %7.3fs  gap %s  %s\n", i+1, at.Seconds(), ms(gap), verdict)
	}

	fmt.Printf("\nsummary:\n")
	fmt.Printf("  requests accepted    %d in %v (%d pages fetched, %d failed visits)\n",
		len(st.Accepted), *duration, ok.Load(), failed.Load())
	fmt.Printf("  robots.txt fetched   %d time(s)\n", st.Robots)
	if minGap >= 0 {
		fmt.Printf("  shortest gap         %s (Crawl-delay %s)\n", ms(minGap), ms(crawlDelay))
	}
	fmt.Printf("  pause violations     %d\n", st.PauseViolations)
	demo.Summary(os.Stdout, ctrl, hosts)
	if violations == 0 {
		fmt.Printf("OK: every gap between accepted requests is at least the Crawl-delay\n")
	} else {
		fmt.Printf("VIOLATION: %d of %d gaps are shorter than the Crawl-delay (shortest %s short)\n",
			violations, len(st.Accepted)-1, ms(crawlDelay-minGap))
	}
}

// ms formats d in milliseconds to the microsecond: a gap a hair under the
// delay must not print as the delay itself.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
