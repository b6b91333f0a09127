package redisfrontier_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/frontier/redisfrontier"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/redisstore"
)

// redisCPU is the CPU time the redis-server has used (INFO cpu: user and
// system), to tell what a URL costs Redis apart from the client's cost
// and the machine's other work.
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var t float64
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q", l)
			}
			t += f
		}
	}
	return time.Duration(t * float64(time.Second))
}

// instant answers every request at once, in memory.
type instant struct{}

func (instant) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// Run hands out b.N URLs over 1,000 scopes queued in a loopback Redis to
// 8 threads against a transport that answers at once: the shared queue's
// own cost per URL (a take and an end, one script each, shared by the
// scopes asked at once), without and with the fleet's send slot
// (redisstore: two more round trips per send); redis-µs/url is the CPU
// the redis-server spent per URL, which binds first with the send slot.
//
//	go test ./frontier/redisfrontier -run '^$' -bench Run -benchtime 20000x
func BenchmarkRun(b *testing.B) {
	rs := redistest.Start(b)
	for _, withStore := range []bool{false, true} {
		name := "queue"
		if withStore {
			name = "queue+fleet-store"
		}
		b.Run(name, func(b *testing.B) {
			rdb := rs.Client(b)
			prefix := fmt.Sprint("bench-", withStore, b.N)
			sh, err := redisfrontier.New(context.Background(), rdb, redisfrontier.Options{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			c := colly.NewCollector(colly.AllowURLRevisit())
			c.WithTransport(instant{})
			pc := polite.Config{Robots: new(false), Default: polite.Rule{Rate: 1e6, InitialRate: 1e6}}
			if withStore {
				pc.Store = redisstore.New(rdb, redisstore.Options{Prefix: prefix + "-fleet"})
			}
			ctrl := adaptive.Attach(c, pc)
			defer ctrl.Close()
			q, err := frontier.New(ctrl, frontier.Config{Threads: 8, Shared: sh})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			batch := make([]string, 0, 1000)
			for i := range b.N {
				if batch = append(batch, fmt.Sprintf("http://h%d.test/page/%d", i%1000, i)); len(batch) == cap(batch) || i == b.N-1 {
					if _, err := q.AddURLs(batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			cpu0 := redisCPU(b, rdb)
			b.ResetTimer()
			if err := q.Run(c); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "urls/s")
			b.ReportMetric(float64((redisCPU(b, rdb)-cpu0).Microseconds())/float64(b.N), "redis-µs/url")
			if p := q.Progress(); p.Done != b.N {
				b.Fatalf("%d done of %d", p.Done, b.N)
			}
		})
	}
}

// Counts reads the fleet's counts (a Queue does four times a second) over
// a queue of 1,000, 10,000 and 100,000 scopes, one request each, that
// another process added:
// redis-µs/call is the CPU the redis-server spent on one call, and
// calls/pass how many calls it takes to read every scope once.
//
//	go test ./frontier/redisfrontier -run '^$' -bench Counts -benchtime 100x
func BenchmarkCounts(b *testing.B) {
	rs := redistest.Start(b)
	rdb := rs.Client(b)
	ctx := context.Background()
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprint(n, "-scopes"), func(b *testing.B) {
			prefix := fmt.Sprint("counts-", n, "-", b.N)
			adder, err := redisfrontier.New(ctx, rdb, redisfrontier.Options{Prefix: prefix}) // another process adds
			if err != nil {
				b.Fatal(err)
			}
			sh, err := redisfrontier.New(ctx, rdb, redisfrontier.Options{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			items := make([]frontier.SharedItem, 0, 1000)
			for i := range n {
				key := fmt.Appendf(nil, "%016d", i)
				items = append(items, frontier.SharedItem{Scope: fmt.Sprintf("h%d.test", i), Key: key, Record: []byte("r")})
				if len(items) == cap(items) || i == n-1 {
					if _, err := adder.Add(ctx, "bench", items); err != nil {
						b.Fatal(err)
					}
					items = items[:0]
				}
			}
			calls, pass := 0, 0
			cpu0 := redisCPU(b, rdb)
			b.ResetTimer()
			for b.Loop() {
				c, err := sh.Counts(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				calls++
				if pass == 0 && len(c.Scopes) == n {
					pass = calls
				}
			}
			b.ReportMetric(float64((redisCPU(b, rdb)-cpu0).Microseconds())/float64(calls), "redis-µs/call")
			if pass > 0 {
				b.ReportMetric(float64(pass), "calls/pass")
			}
		})
	}
}
