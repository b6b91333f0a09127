package redisstore_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/redisstore"
)

// The cost of the fleet on a send's path: one Acquire before it and one
// Release after, against a real redis-server on loopback (its round trips
// and scripts), on one scope, from one goroutine and from many; a PING
// for scale.
//
//	go test ./redisstore -run '^$' -bench . -benchtime 20000x
func BenchmarkAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	s := redisstore.New(srv.Client(b), redisstore.Options{Prefix: "bench"})
	ctx := context.Background()
	send := func(proc string) {
		g, err := s.Lease(ctx, fleet.LeaseRequest{Scope: "a.test", Process: proc, Rate: 1e6, Limit: 1 << 20, TTL: time.Minute})
		if err != nil {
			b.Error(err)
			return
		}
		if _, err := s.Return(ctx, fleet.Return{Scope: "a.test", Process: proc, Lease: g.ID}); err != nil {
			b.Error(err)
		}
	}
	b.Run("ping", func(b *testing.B) { // the round trip alone, for scale
		c := srv.Client(b)
		for b.Loop() {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			send("p")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			proc := "p" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				send(proc)
			}
		})
	})
}

// What a call costs while Redis is down (a loopback port nothing listens
// on), under the controller's one-second deadline, for the client options
// redisstore's doc recommends and for go-redis's defaults; dial-lines/op
// counts the lines go-redis logs itself. go-redis fails calls at once
// after 10 × GOMAXPROCS failed dials (until a probe connects), so the
// figures are those of the first calls of an outage: keep -benchtime below.
//
//	go test ./redisstore -run '^$' -bench StoreDown -benchtime 5x
func BenchmarkStoreDown(b *testing.B) {
	addr := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(b))
	for _, bc := range []struct {
		name string
		o    redis.Options
	}{
		{"defaults", redis.Options{}},
		{"MaxRetries=-1", redis.Options{MaxRetries: -1}},
		{"MaxRetries=-1,DialerRetries=1", redis.Options{MaxRetries: -1, DialerRetries: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := bc.o
			o.Addr = addr
			rdb := redis.NewClient(&o)
			defer rdb.Close()
			s := redisstore.New(rdb, redisstore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			var lines counting
			redis.SetLogger(&lines)
			defer redis.SetLogger(quiet{})
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := s.Lease(ctx, fleet.LeaseRequest{Scope: "a.test", Process: "p", Rate: 1, Limit: 1, TTL: time.Minute})
				cancel()
				if err == nil {
					b.Fatal("a lease from a Redis that is down")
				}
			}
			b.ReportMetric(float64(lines.n.Load())/float64(b.N), "dial-lines/op")
		})
	}
}

// counting counts go-redis's own log lines.
type counting struct{ n atomic.Int64 }

func (c *counting) Printf(context.Context, string, ...any) { c.n.Add(1) }
