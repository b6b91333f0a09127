// Apiclient shows colly-polite outside Colly: polite.NewTransport
// makes a plain http.Client polite towards an API that announces its quota.
//
// The API (the bundled testserver, on real loopback sockets) allows 100
// requests per 10-second window and says so on every response, in the IETF
// RateLimit / RateLimit-Policy fields and in X-RateLimit-Limit, -Remaining
// and -Reset. The client is a plain loop of GET requests, one after the
// other, as an API client often is; without the transport it would spend
// its 100 requests in the first half second of each window and then collect
// 429s. The controller reads the headers, spreads what remains over what is
// left of the window, and so avoids the 429s when the headers are honest.
//
// Run it from the repository root:
//
//	go run ./examples/apiclient          # 30 s
//	go run ./examples/apiclient -short   # 5 s smoke run
//
// Every second it prints the controller's pacing rate, concurrency limit,
// requests in flight, accepted and throttled, why a request waits (the
// quota ceiling, once the headers are read), and the quota the last
// response announced; then a summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/colly-polite/polite"

	"github.com/colly-polite/polite/internal/demo" // helpers shared by this repository's programs
	"github.com/colly-polite/polite/testserver"
)

const (
	host   = "api.test"
	quota  = 100
	window = 10 * time.Second
)

func main() {
	duration := flag.Duration("duration", 30*time.Second, "how long to run the loop")
	short := flag.Bool("short", false, "a 5 s smoke run")
	flag.Parse()
	demo.Short(*short, map[string]string{"duration": "5s"}) // unless -duration is given

	srv, err := testserver.New(testserver.Config{
		Network: testserver.Loopback,
		Hosts: map[string]testserver.Policy{host: {
			Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: quota, Window: window},
			Latency: testserver.Latency{Base: 20 * time.Millisecond},
			Excess:  testserver.Excess{QuotaHeaders: true},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// The whole integration: the controller as the client's transport.
	tr := polite.NewTransport(srv.Transport())
	client := &http.Client{Transport: tr}
	ctrl := tr.Controller()
	base := srv.HostURL(host)
	hosts := []demo.Host{demo.HostOf(host, base)}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	fmt.Printf("API quota: %d requests per %v (announced in headers); one loop of GETs, %v\n\n", quota, window, *duration)

	// The loop: one request after the other until the time is up.
	var mu sync.Mutex
	var ok, throttled, failed int
	var lastQuota string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/page/"+strconv.Itoa(i%1000), nil)
			if err != nil {
				log.Fatal(err)
			}
			resp, err := client.Do(req)
			mu.Lock()
			switch {
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			case err != nil:
				failed++
			case resp.StatusCode == http.StatusTooManyRequests: // after the transport's retries
				throttled++
			case resp.StatusCode == http.StatusOK:
				ok++
			default:
				failed++
			}
			if resp != nil {
				lastQuota = resp.Header.Get("RateLimit")
			}
			mu.Unlock()
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close() // returns the controller's slot
			}
		}
	}()

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-tick.C:
			demo.Progress(os.Stdout, time.Since(start), ctrl, hosts)
			mu.Lock()
			fmt.Printf("%24s last RateLimit header: %s\n", "", lastQuota)
			mu.Unlock()
		case <-done:
			running = false
		}
	}

	st := srv.Stats(host)
	capacity := float64(quota) / window.Seconds()
	got := float64(ok) / duration.Seconds()
	fmt.Printf("\nsummary:\n")
	fmt.Printf("  requests ok          %d (%.2f req/s; the quota allows %.0f req/s on average)\n", ok, got, capacity)
	fmt.Printf("  429s from the server %d (%d reached the caller after the retries)\n", st.ByStatus[429], throttled)
	fmt.Printf("  other failures       %d\n", failed)
	fmt.Printf("  pause violations     %d\n", st.PauseViolations)
	demo.Summary(os.Stdout, ctrl, hosts)
}
