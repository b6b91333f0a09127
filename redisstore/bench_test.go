package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/redisstore"
)

// The cost of the fleet on a send's path: one Acquire before it and one
// Release after, against a real redis-server on loopback (its round trips
// and scripts), on one scope, from one goroutine and from many; a PING
// for scale.
//
//	go test ./redisstore -run '^$' -bench . -benchtime 20000x
func BenchmarkAcquireRelease(b *testing.B) {
	srv := startServer(b)
	s := redisstore.New(srv.client(b), redisstore.Options{Prefix: "bench"})
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
		c := srv.client(b)
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
