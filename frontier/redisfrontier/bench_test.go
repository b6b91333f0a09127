package redisfrontier_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/frontier/redisfrontier"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/redisstore"
)

// instant answers every request at once, in memory.
type instant struct{}

func (instant) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// Run hands out b.N URLs over 1,000 scopes queued in a loopback Redis to
// 8 threads against a transport that answers at once: the shared queue's
// own cost per URL (a take and an end, one script each, shared by the
// scopes asked at once), without and with the fleet's send slot
// (redisstore: two more round trips per send).
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
			b.ResetTimer()
			if err := q.Run(c); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "urls/s")
			if p := q.Progress(); p.Done != b.N {
				b.Fatalf("%d done of %d", p.Done, b.N)
			}
		})
	}
}
