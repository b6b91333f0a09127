// Convergence is the reference scenario of colly-polite, end to end: one
// Colly collector made polite with one line, adaptive.Attach, against a host
// whose limit it is not told.
//
// The host (the bundled testserver, on real loopback sockets) admits 30
// requests per second in fixed one-second windows, answers 429 with
// Retry-After beyond that and takes 350 ms per page. Forty goroutines visit
// distinct pages through the one collector as fast as it lets them. The
// controller starts slowly, overshoots once, measures the capacity from
// what the server accepted and settles just under it; after that the server
// hardly ever has to say no.
//
// Run it from the repository root:
//
//	go run ./examples/convergence                 # 40 s, writes convergence.png
//	go run ./examples/convergence -short          # 6 s smoke run
//	go run ./examples/convergence -out ""         # no picture
//	go run ./examples/convergence -metrics :9090  # serves /metrics (Prometheus) while it runs
//	go run ./examples/convergence -log run.log    # writes the decision log (slog text, Info)
//
// Every 2 s it prints the pacing rate, the concurrency limit, the requests
// in flight, the requests accepted and the 429s so far, and why a request
// waits right now; at the end, the goodput after the warm-up (10 s, or half
// the run with -short) against the hidden 30/s, the share of requests
// rejected, the pause violations (requests sent while a Retry-After was
// still in force) and the controller's summary. The picture shows the
// limit, the rate, the accepted throughput and the 429s over time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/internal/demo" // helpers shared by this repository's programs
	"github.com/colly-polite/polite/metrics"
	"github.com/colly-polite/polite/testserver"
)

// The hidden capacity and the load, as in the reference scenario S1.
const (
	host     = "a.test"
	capacity = 30 // requests per one-second window
	latency  = 350 * time.Millisecond
	pages    = 1000 // the host's site: /page/0 .. /page/999
)

func main() {
	duration := flag.Duration("duration", 40*time.Second, "how long to crawl")
	warmup := flag.Duration("warmup", 10*time.Second, "time left out of the goodput figures")
	workers := flag.Int("workers", 40, "goroutines visiting pages")
	out := flag.String("out", "convergence.png", `PNG to write ("" for none)`)
	short := flag.Bool("short", false, "a 6 s smoke run (warm-up: half of it)")
	metricsAddr := flag.String("metrics", "", `serve Prometheus metrics at http://ADDR/metrics while it runs (":9090")`)
	logFile := flag.String("log", "", "write the controller's decision log to this file")
	flag.Parse()
	// -short: 6 s and a warm-up of half the run, unless given on the command line
	demo.Short(*short, map[string]string{"duration": "6s"})
	demo.Short(*short, map[string]string{"warmup": (*duration / 2).String()})
	if *warmup >= *duration {
		*warmup = *duration / 2
	}

	srv, err := testserver.New(testserver.Config{
		Network: testserver.Loopback,
		Hosts: map[string]testserver.Policy{host: {
			Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: capacity, Window: time.Second},
			Latency: testserver.Latency{Base: latency},
			Site:    testserver.Site{Pages: pages},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The whole integration: a collector on the server's transport, and one
	// line. robots.txt is off so that the run is about the hidden limit only.
	c := colly.NewCollector(colly.AllowURLRevisit(), colly.StdlibContext(ctx))
	c.WithTransport(srv.Transport())
	cfg := polite.Config{Robots: new(false)}
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		cfg.Logger = slog.New(slog.NewTextHandler(f, nil))
	}
	ctrl := adaptive.Attach(c, cfg)
	if err := ctrl.Err(); err != nil {
		log.Fatal(err)
	}

	if *metricsAddr != "" {
		stop, err := serveMetrics(*metricsAddr, ctrl)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
	}

	var ok, failed atomic.Int64
	c.OnResponse(func(*colly.Response) { ok.Add(1) })
	c.OnError(func(_ *colly.Response, err error) {
		if !errors.Is(err, context.Canceled) { // the end of the run is not a failure
			failed.Add(1)
		}
	})

	fmt.Printf("hidden limit: %d req/s (fixed window), latency %v; %d workers, one collector, %v\n\n",
		capacity, latency, *workers, *duration)
	base := srv.HostURL(host)
	hosts := []demo.Host{demo.HostOf(host, base)}
	start := srv.Elapsed() // the server's clock: Stats and the fixed windows use it
	end := start + *duration

	var wg sync.WaitGroup
	var seq atomic.Int64
	for range *workers {
		wg.Go(func() {
			for ctx.Err() == nil && srv.Elapsed() < end {
				n := seq.Add(1) % pages
				t0 := time.Now()
				if err := c.Visit(fmt.Sprintf("%s/page/%d", base, n)); err != nil && time.Since(t0) < time.Millisecond {
					demo.Sleep(ctx, 100*time.Millisecond) // a refusal without waiting: do not spin
				}
			}
		})
	}

	// Sample every 250 ms on the server's clock, print every 2 s, and stop
	// the workers at the end: cancelling ctx ends the polite waits and the
	// requests in flight.
	var samples []sample
	var warm testserver.Stats // the server's counts at the end of the warm-up
	for i := 1; ; i++ {
		at := start + time.Duration(i)*sampleEvery
		if at > end {
			break
		}
		demo.Sleep(ctx, at-srv.Elapsed())
		st := srv.Stats(host)
		snap, _ := ctrl.Snapshot(scopeOf(base))
		s := sample{t: at - start, limit: float64(snap.Limit), inflight: snap.InFlight, rate: snap.Rate,
			ok: ok.Load(), rejected: st.ByStatus[429]}
		samples = append(samples, s)
		if at-start <= *warmup {
			warm = st
		}
		if i%(int(printEvery/sampleEvery)) == 0 {
			demo.Progress(os.Stdout, s.t, ctrl, hosts)
		}
	}
	cancel()
	if err := demo.Stop(&wg, srv); err != nil { // waits for the workers, closing the server if they linger
		log.Fatal(err)
	}

	st := srv.Stats(host)
	from, to := start+*warmup, end
	secs := (to - from).Seconds()
	good := float64(demo.CountIn(st.Accepted, from, to)) / secs
	rej := st.ByStatus[429] - warm.ByStatus[429]
	sent := st.Requests - warm.Requests
	fmt.Printf("\nafter the %v warm-up (%v of crawling):\n", *warmup, *duration-*warmup)
	fmt.Printf("  goodput           %.2f req/s = %.1f %% of the hidden %d/s\n", good, good/capacity*100, capacity)
	fmt.Printf("  rejected (429)    %d of %d requests = %.2f %%\n", rej, sent, pct(rej, sent))
	fmt.Printf("whole run:\n")
	fmt.Printf("  pages fetched     %d (%.2f req/s)\n", ok.Load(), float64(ok.Load())/duration.Seconds())
	fmt.Printf("  429s              %d, %d of them in the warm-up\n", st.ByStatus[429], warm.ByStatus[429])
	fmt.Printf("  failed visits     %d (429 after the retries, or an error)\n", failed.Load())
	fmt.Printf("  pause violations  %d\n", st.PauseViolations)
	fmt.Println()
	demo.Summary(os.Stdout, ctrl, hosts)
	if *out != "" {
		if err := writePlot(*out, samples, st.PerSecond, start, *duration, *workers); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("picture: %s\n", *out)
	}
}

const (
	sampleEvery = 250 * time.Millisecond
	printEvery  = 2 * time.Second
)

// sample is the state at one instant: the controller's, and the counts so
// far.
type sample struct {
	t        time.Duration // since the start of the crawl
	limit    float64
	inflight int
	rate     float64
	ok       int64
	rejected int // 429s
}

// scopeOf is the controller's scope key of a base URL "http://host:port".
func scopeOf(base string) string { return demo.ScopeOf(base) }

// serveMetrics serves ctrl's metrics at http://addr/metrics until stop is
// called.
func serveMetrics(addr string, ctrl *polite.Controller) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(ctrl))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Printf("metrics: http://%s/metrics\n", ln.Addr())
	return func() { srv.Close() }, nil
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of) * 100
}
