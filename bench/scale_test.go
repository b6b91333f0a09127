package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/testserver"
)

// The scale run is a test because only a test can open a testing/synctest
// bubble. It is off unless asked for, so that go test ./... stays fast:
//
//	go test ./bench -run TestScale -scale -v -timeout 0
//
// By default it is the scale target: 10,000 hosts with hidden limits of 1 to
// 20 req/s, one hour of virtual crawl, in at most 2 minutes of real time.
// That is about 378 million requests through net/http over in-memory pipes,
// far more than 2 cores serve in 2 minutes, so the crawl stops at the
// real-time deadline and the report says how much virtual time it covered.
// Smaller runs that finish:
//
//	go test ./bench -run TestScale -scale -v -timeout 0 -scale.virtual 1m -scale.deadline 0
//	go test ./bench -run TestScale -scale -v -timeout 0 -scale.hosts 100 -scale.deadline 0
var (
	scale         = flag.Bool("scale", false, "run TestScale, the scale run in virtual time")
	scaleHosts    = flag.Int("scale.hosts", 10000, "hosts, each with its own hidden limit")
	scaleVirtual  = flag.Duration("scale.virtual", time.Hour, "virtual length of the crawl")
	scaleWorkers  = flag.Int("scale.workers", 2, "goroutines per host")
	scaleMinRate  = flag.Float64("scale.minrate", 1, "lowest hidden capacity, req/s")
	scaleMaxRate  = flag.Float64("scale.maxrate", 20, "highest hidden capacity, req/s")
	scaleLatency  = flag.Duration("scale.latency", 50*time.Millisecond, "latency of every admitted request")
	scaleDeadline = flag.Duration("scale.deadline", 2*time.Minute, "stop the crawl after this much real time (0: none); the report says how much virtual time it covered")
)

// scaleHost is host i's hidden limit: capacities spread evenly over
// [minRate, maxRate] (a golden-ratio sequence, so that neighbours differ),
// the kinds taking turns: fixed window, GCRA with a burst of 2, sliding
// window.
func scaleHost(i int, minRate, maxRate float64) (testserver.Limit, float64) {
	f := math.Mod(float64(i)*0.6180339887498949, 1)
	r := minRate + f*(maxRate-minRate)
	switch i % 3 {
	case 0:
		n := max(1, int(math.Round(r)))
		return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}, float64(n)
	case 1:
		r = math.Round(r*10) / 10
		return testserver.Limit{Kind: testserver.TokenBucket, Rate: r, Burst: 2}, r
	default:
		n := max(1, int(math.Round(r)))
		return testserver.Limit{Kind: testserver.SlidingWindow, N: n, Window: time.Second}, float64(n)
	}
}

// TestScale crawls many hosts at once through one adaptive transport in
// virtual time (the Memory network inside a synctest bubble), each host
// with its own hidden limit and its own workers, and reports the aggregate
// goodput against the sum of the capacities, the peak memory and the real
// time it took.
func TestScale(t *testing.T) {
	if !*scale {
		t.Skip("the scale run takes minutes: go test ./bench -run TestScale -scale -v")
	}
	hosts, virtual, workers := *scaleHosts, *scaleVirtual, *scaleWorkers
	var warm time.Duration // a quarter of the crawl, at most 5 minutes
	realStart, cpuStart := time.Now(), readCPU()
	var peakHeap, peakSys uint64
	var sampleMem = func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
		peakSys = max(peakSys, ms.Sys)
	}
	var (
		capacity          float64
		accepted, sent    int
		rejected, viol    int
		virtualDone       time.Duration
		scopes            int
		stopped           atomic.Bool
		requests          atomic.Int64
		lowCap, lowGood   float64 // hosts at or under 5 req/s
		highCap, highGood float64 // hosts at or above 15 req/s
	)
	if *scaleDeadline > 0 {
		// a timer started outside the bubble runs on the real clock
		tm := time.AfterFunc(*scaleDeadline, func() { stopped.Store(true) })
		defer tm.Stop()
	}
	synctest.Test(t, func(t *testing.T) {
		cfg := testserver.Config{Network: testserver.Memory, Hosts: make(map[string]testserver.Policy, hosts)}
		names := testserver.HostNames(hosts)
		caps := make(map[string]float64, hosts)
		for i, name := range names {
			lim, c := scaleHost(i, *scaleMinRate, *scaleMaxRate)
			cfg.Hosts[name] = testserver.Policy{Limit: lim, Latency: testserver.Latency{Base: *scaleLatency},
				Site: testserver.Site{Pages: sitePages}}
			caps[name] = c
		}
		srv := testserver.NewTest(t, cfg)
		// the server's transport keeps 1024 idle connections in all: with
		// 10,000 hosts that would redial all the time
		tr := srv.Transport().Clone()
		tr.MaxIdleConns = 0
		tr.MaxIdleConnsPerHost = workers
		tr.DisableCompression = true
		client := &http.Client{Transport: polite.NewTransport(tr)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		start := time.Now()
		end := start.Add(virtual)
		var wg sync.WaitGroup
		for _, name := range names {
			base := srv.HostURL(name)
			for w := range workers {
				wg.Go(func() {
					for n := w; ; n += workers {
						if stopped.Load() || !time.Now().Before(end) {
							return
						}
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/page/%d", base, n%sitePages), nil)
						resp, err := client.Do(req)
						requests.Add(1)
						if err != nil {
							time.Sleep(100 * time.Millisecond) // a refusal: do not spin
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		}
		// sample memory every virtual 10 s; stop at the real-time deadline
		done := make(chan struct{})
		go func() {
			for {
				sampleMem()
				select {
				case <-done:
					return
				case <-time.After(10 * time.Second):
				}
			}
		}()
		wg.Wait()
		virtualDone = time.Since(start)
		close(done)
		sampleMem()
		scopes = len(client.Transport.(*polite.Transport).Controller().Report().Scopes)

		// the server started with the crawl: the bubble's clock stands
		// still until every goroutine blocks
		to := min(virtual, virtualDone)
		warm = min(to/4, 5*time.Minute)
		from := warm
		span := (to - from).Seconds()
		for _, name := range names {
			st := srv.Stats(name)
			a, r := demo.CountIn(st.Accepted, from, to), demo.CountIn(st.Rejected, from, to)
			accepted += a
			sent += a + r
			rejected += r
			viol += st.PauseViolations
			capacity += caps[name]
			switch c := caps[name]; {
			case c <= 5:
				lowCap += c
				lowGood += float64(a) / span
			case c >= 15:
				highCap += c
				highGood += float64(a) / span
			}
		}
		cancel()
		client.CloseIdleConnections()
		tr.CloseIdleConnections()
		if virtualDone > warm {
			goodput := float64(accepted) / span
			t.Logf("goodput after %v of warm-up: %.0f req/s of %.0f req/s (sum of capacities) = %.1f %%",
				warm.Round(time.Second), goodput, capacity, goodput/capacity*100)
			t.Logf("  hosts at <= 5 req/s: %.1f %% of their capacity; at >= 15 req/s: %.1f %%",
				lowGood/lowCap*100, highGood/highCap*100)
			t.Logf("rejected %d of %d requests (%.2f %%), %d pause violations", rejected, sent, pct(rejected, sent), viol)
		}
	})
	elapsed := time.Since(realStart)
	if p, ok := foreign(cpuStart, readCPU()); ok {
		t.Logf("other processes used %.0f %% of the machine's CPU during the run", p)
	}
	t.Logf("%d hosts, %d workers each, capacities %.0f–%.0f req/s, latency %v", hosts, workers, *scaleMinRate, *scaleMaxRate, *scaleLatency)
	t.Logf("virtual crawl %v of %v asked; %d requests; %d live scopes at the end", virtualDone.Round(time.Second), virtual, requests.Load(), scopes)
	t.Logf("real time %v on %d CPUs (GOMAXPROCS %d); peak heap in use %.0f MiB, peak Sys %.0f MiB",
		elapsed.Round(100*time.Millisecond), runtime.NumCPU(), runtime.GOMAXPROCS(0), float64(peakHeap)/(1<<20), float64(peakSys)/(1<<20))
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of) * 100
}
