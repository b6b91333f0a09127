package testserver

import (
	"net/http/httptest"
	"testing"
	"time"
)

// The request path without a network: the cost the server adds to
// net/http.
func BenchmarkServeHTTP(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    Policy
	}{
		{"unlimited", Policy{}},
		{"sliding", Policy{Limit: Limit{Kind: SlidingWindow, N: 100, Window: time.Second}}},
		{"gcra+quota", Policy{Limit: Limit{Kind: TokenBucket, Rate: 1000, Burst: 10}, Excess: Excess{QuotaHeaders: true}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := New(Config{Network: Memory, Hosts: map[string]Policy{"a.test": tc.p}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			req := httptest.NewRequest("GET", "http://a.test/page/1", nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s.route(httptest.NewRecorder(), req)
				}
			})
		})
	}
}
