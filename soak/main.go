// Command soak is a long run of the adaptive controller over real loopback
// sockets: by default 1,000,000 requests across 10,000 hosts of the bundled
// test server, every tenth host with a tight hidden limit (so pauses,
// Retry-After and rate cuts run all the time), the others generous. It
// samples the heap, the goroutines, the open file descriptors and the live
// scopes at 10 %, 50 % and 100 % of the requests; after warm-up all of them
// must stay flat.
//
//	go run ./soak                 # 1,000,000 requests, 10,000 hosts (a few minutes)
//	go run ./soak -short          # 20,000 requests, 500 hosts (CI)
//
// It talks only to 127.0.0.1 and stops by itself: at the request count or
// at -duration, whichever comes first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/testserver"
)

func main() {
	hosts := flag.Int("hosts", 10000, "hosts of the test server (one loopback listener each)")
	requests := flag.Int64("requests", 1_000_000, "requests to send in all")
	workers := flag.Int("workers", 256, "goroutines sending")
	duration := flag.Duration("duration", 15*time.Minute, "stop after this long even if the count is not reached")
	short := flag.Bool("short", false, "a small run for CI: 500 hosts, 20,000 requests, at most 2 minutes (unless given)")
	memprofile := flag.String("memprofile", "", "write a heap profile here at the end (who holds the memory)")
	flag.Parse()
	demo.Short(*short, map[string]string{"hosts": "500", "requests": "20000", "duration": "2m"})
	if *hosts < 1 || *requests < 1 || *workers < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -hosts, -requests, -workers and -duration must be positive")
		os.Exit(2)
	}
	if err := run(*hosts, *requests, *workers, *duration, *memprofile); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type sample struct {
	at         string
	requests   int64
	elapsed    time.Duration
	heapMB     float64
	sysMB      float64
	goroutines int
	fds        int
	scopes     int
}

func run(nHosts int, total int64, workers int, limit time.Duration, memprofile string) error {
	names := testserver.HostNames(nHosts)
	pol := make(map[string]testserver.Policy, nHosts)
	for i, h := range names {
		p := testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 50, Window: time.Second},
			Latency: testserver.Latency{Base: time.Millisecond, Jitter: 2 * time.Millisecond},
			Site:    testserver.Site{Pages: 100},
		}
		if i%10 == 0 { // a tight host: one request per two seconds
			p.Limit = testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: 2 * time.Second}
		}
		pol[h] = p
	}
	srv, err := testserver.New(testserver.Config{Hosts: pol, Network: testserver.Loopback})
	if err != nil {
		return err
	}
	defer srv.Close()
	urls := make([]string, nHosts)
	for i, h := range names {
		urls[i] = srv.HostURL(h)
	}
	tr := polite.NewTransport(srv.Transport(), polite.Config{Default: polite.Rule{MaxRetries: -1}})
	client := &http.Client{Transport: tr}
	ctrl := tr.Controller()

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var sent, ok, throttled, failed atomic.Int64
	var samples []sample
	var smu sync.Mutex
	start := time.Now()
	marks := []struct {
		at string
		n  int64
	}{{"10 %", total / 10}, {"50 %", total / 2}, {"100 %", total}}
	var mark atomic.Int32
	take := func(n int64) {
		i := int(mark.Load())
		if i >= len(marks) || n < marks[i].n || !mark.CompareAndSwap(int32(i), int32(i+1)) {
			return
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := sample{at: marks[i].at, requests: n, elapsed: time.Since(start), heapMB: float64(ms.HeapAlloc) / (1 << 20),
			sysMB: float64(ms.Sys) / (1 << 20), goroutines: runtime.NumGoroutine(), fds: openFDs(), scopes: len(ctrl.Report().Scopes)}
		smu.Lock()
		samples = append(samples, s)
		smu.Unlock()
		fmt.Printf("%6s  %9d requests  %8.1fs  heap %7.1f MB  sys %7.1f MB  goroutines %5d  fds %5d  scopes %5d\n",
			s.at, s.requests, s.elapsed.Seconds(), s.heapMB, s.sysMB, s.goroutines, s.fds, s.scopes)
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > total {
					return
				}
				host := urls[int(i)%nHosts]
				// a crawler bounds each request: a polite wait that cannot end
				// within 2 s fails at once instead of holding the worker
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				req, _ := http.NewRequestWithContext(rctx, http.MethodGet, fmt.Sprintf("%s/page/%d", host, i%100), nil)
				resp, err := client.Do(req)
				n := sent.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					if errors.Is(err, polite.ErrPaused) || errors.Is(err, context.DeadlineExceeded) {
						// a paused scope, or a wait past the deadline, fails
						// fast: do not spin on it
						demo.Sleep(ctx, 10*time.Millisecond)
					}
				default:
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						throttled.Add(1)
					} else {
						ok.Add(1)
					}
				}
				rcancel()
				take(n)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	idle := 0
	for _, s := range ctrl.Report().Scopes {
		idle += s.InFlight + s.Waiting
	}
	var violations int
	for _, h := range names {
		violations += srv.Stats(h).PauseViolations
	}
	fmt.Printf("\n%d requests in %.1fs (%.0f req/s): %d ok, %d 429, %d errors; pause violations %d; slots still held %d\n",
		sent.Load(), elapsed.Seconds(), float64(sent.Load())/elapsed.Seconds(), ok.Load(), throttled.Load(), failed.Load(), violations, idle)
	if idle != 0 {
		return fmt.Errorf("%d slots still held after the run", idle)
	}
	if sent.Load() < total {
		fmt.Printf("stopped by -duration %v before %d requests\n", limit, total)
	}
	if memprofile != "" {
		f, err := os.Create(memprofile)
		if err != nil {
			return err
		}
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	runtime.KeepAlive(tr) // the controller's scopes count in the samples and the profile
	return nil
}

// openFDs counts this process's open file descriptors (Linux), -1 elsewhere.
func openFDs() int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(d)
}
