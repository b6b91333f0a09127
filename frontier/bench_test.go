package frontier_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// The durability settings the benchmarks compare.
var durability = []struct {
	name string
	cfg  func(dir string) frontier.Config
}{
	{"memory", func(string) frontier.Config { return frontier.Config{MaxSize: 1 << 30} }},
	{"file-nosync", func(dir string) frontier.Config {
		return frontier.Config{Path: filepath.Join(dir, "q.db"), NoSync: true}
	}},
	{"file-sync", func(dir string) frontier.Config { return frontier.Config{Path: filepath.Join(dir, "q.db")} }},
}

func benchQueue(b *testing.B, cfg frontier.Config) *frontier.Queue {
	ctrl, err := polite.New(polite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	q, err := frontier.New(ctrl, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

func benchURL(i int) string { return fmt.Sprintf("http://h%d.test/page/%d", i%1000, i) }

// AddURL one at a time from one goroutine: one commit per URL with a file.
func BenchmarkAddURL(b *testing.B) {
	for _, d := range durability {
		b.Run(d.name, func(b *testing.B) {
			q := benchQueue(b, d.cfg(b.TempDir()))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := q.AddURL(benchURL(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "urls/s")
		})
	}
}

// AddURL from 64 goroutines per core, as callbacks add links: the
// callers whose adds arrive while a commit runs share the next one.
func BenchmarkAddURLParallel(b *testing.B) {
	for _, d := range durability {
		b.Run(d.name, func(b *testing.B) {
			q := benchQueue(b, d.cfg(b.TempDir()))
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(64)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := q.AddURL(benchURL(int(n.Add(1)))); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "urls/s")
		})
	}
}

// AddURLs in batches of 1,000: one commit per batch.
func BenchmarkAddURLs(b *testing.B) {
	for _, d := range durability {
		b.Run(d.name, func(b *testing.B) {
			q := benchQueue(b, d.cfg(b.TempDir()))
			batch := make([]string, envInt("FRONTIER_BATCH", 1000))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				for k := range batch {
					batch[k] = benchURL(i)
					i++
				}
				if _, err := q.AddURLs(batch...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "urls/s")
		})
	}
}

// instant answers every request at once, in memory.
type instant struct{}

func (instant) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// Run hands out b.N queued URLs over 1,000 scopes to 8 threads against a
// transport that answers at once: the queue's own cost per URL (its
// dispatch, the controller's reservation, Colly, and with a file the
// in-flight mark and the done commit), not a network's.
func BenchmarkRun(b *testing.B) {
	for _, d := range durability {
		b.Run(d.name, func(b *testing.B) {
			c := colly.NewCollector(colly.AllowURLRevisit())
			c.WithTransport(instant{})
			ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Default: polite.Rule{Rate: 1e6, InitialRate: 1e6}})
			cfg := d.cfg(b.TempDir())
			cfg.Threads = 8
			q, err := frontier.New(ctrl, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			batch := make([]string, 0, 1000)
			for i := range b.N {
				if batch = append(batch, benchURL(i)); len(batch) == cap(batch) || i == b.N-1 {
					if _, err := q.AddURLs(batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := q.Run(c); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "urls/s")
			if q.Size() != 0 {
				b.Fatalf("%d left", q.Size())
			}
		})
	}
}

// The heap of a queue in a file holding FRONTIER_HEAP_URLS URLs (1,000,000
// by default) over FRONTIER_HEAP_SCOPES scopes (100,000): the file holds
// the FIFOs, the heap a window of each. Run it once: -benchtime=1x.
func BenchmarkFileHeap(b *testing.B) {
	urls, scopes := envInt("FRONTIER_HEAP_URLS", 1_000_000), envInt("FRONTIER_HEAP_SCOPES", 100_000)
	path := filepath.Join(b.TempDir(), "q.db")
	ctrl, err := polite.New(polite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	open := func() *frontier.Queue {
		q, err := frontier.New(ctrl, frontier.Config{Path: path, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		return q
	}
	for b.Loop() {
		q := open()
		batch := make([]string, 0, 10_000)
		start := time.Now()
		for i := range urls {
			batch = append(batch, fmt.Sprintf("http://host-%d.test/page/%d", i%scopes, i))
			if len(batch) == cap(batch) || i == urls-1 {
				if _, err := q.AddURLs(batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		added := time.Since(start)
		heap := heapMiB()
		q.Close()
		fi, _ := os.Stat(path)
		start = time.Now()
		q = open() // what a restart reads
		opened := time.Since(start)
		reopened := heapMiB()
		if q.Size() != urls {
			b.Fatalf("%d queued after the restart, want %d", q.Size(), urls)
		}
		b.ReportMetric(heap, "heap-MiB")
		b.ReportMetric(reopened, "heap-after-restart-MiB")
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
		b.ReportMetric(added.Seconds(), "add-s")
		b.ReportMetric(opened.Seconds(), "open-s")
		runtime.KeepAlive(q)
		q.Close()
	}
}

func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// The first pages of a crawl of new hosts: FRONTIER_HOSTS hosts (1,000 by
// default) × 10 pages on loopback test-server hosts (a 10-ms round trip
// for a page and for robots.txt), 64 threads, with robots.txt off and on, through a
// synchronous and an Async collector. Run it once: -benchtime=1x.
// FRONTIER_ROBOTS_AHEAD sets Config.RobotsAhead (-1: read on a thread).
func BenchmarkNewHosts(b *testing.B) {
	n := envInt("FRONTIER_HOSTS", 1000)
	for _, mode := range []struct {
		async, robots bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		async, robots := mode.async, mode.robots
		b.Run(fmt.Sprintf("async=%v/robots=%v", async, robots), func(b *testing.B) {
			hosts := map[string]testserver.Policy{}
			for i := range n {
				// a round trip of 10 ms: pages and robots.txt alike (Base would time pages only)
				hosts[fmt.Sprintf("h%d.test", i)] = testserver.Policy{Latency: testserver.Latency{RTT: 10 * time.Millisecond}}
			}
			srv, err := testserver.New(testserver.Config{Network: testserver.Loopback, Hosts: hosts})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			for b.Loop() {
				c := colly.NewCollector(colly.Async(async))
				c.WithTransport(srv.Transport())
				ctrl := adaptive.Attach(c, polite.Config{Robots: new(robots)})
				ahead, _ := strconv.Atoi(os.Getenv("FRONTIER_ROBOTS_AHEAD")) // -1: robots.txt read on a thread
				q, err := frontier.New(ctrl, frontier.Config{Threads: 64, RobotsAhead: ahead})
				if err != nil {
					b.Fatal(err)
				}
				for p := range 10 { // a page of each host, then the next: as a crawl discovers them
					for h := range n {
						if err := q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(fmt.Sprintf("h%d.test", h)), p)); err != nil {
							b.Fatal(err)
						}
					}
				}
				start := time.Now()
				if err := q.Run(c); err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				p := q.Progress()
				if p.Done+p.Failed != 10*n {
					b.Fatalf("%d done, %d failed of %d", p.Done, p.Failed, 10*n)
				}
				b.ReportMetric(took.Seconds(), "s/crawl")
				ctrl.Close()
				fetched := 0
				for h := range hosts {
					fetched += srv.Stats(h).Robots
				}
				if want := map[bool]int{true: n}[robots]; fetched < want {
					b.Fatalf("%d robots.txt fetched, want %d", fetched, want)
				}
				b.ReportMetric(float64(fetched), "robots.txt")
			}
		})
	}
}
