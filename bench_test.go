package polite_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/colly-polite/polite"
)

func benchController(b testing.TB) *polite.Controller {
	// a rate far above what a benchmark loop reaches, so that pacing never
	// waits: this measures the controller's own cost
	c, err := polite.New(polite.Config{Default: polite.Rule{InitialRate: 1e12, MaxConcurrency: 1 << 20, StartConcurrency: 1 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

var okResp = &http.Response{StatusCode: 200, Header: http.Header{}}

// BenchmarkAcquireRecord is the uncontended hot path: acquire a permit,
// record a 200.
func BenchmarkAcquireRecord(b *testing.B) {
	c := benchController(b)
	req, _ := http.NewRequest("GET", "http://a.test/page/1", nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		p.Record(okResp, nil)
	}
}

// BenchmarkAcquireRecordParallel: 64 goroutines on one scope.
func BenchmarkAcquireRecordParallel(b *testing.B) {
	c := benchController(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest("GET", "http://a.test/page/1", nil)
		for pb.Next() {
			p, err := c.Acquire(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			p.Record(okResp, nil)
		}
	})
}

// BenchmarkAcquireRecord10kScopes spreads the loop over 10,000 hosts.
func BenchmarkAcquireRecord10kScopes(b *testing.B) {
	c := benchController(b)
	reqs := make([]*http.Request, 10000)
	for i := range reqs {
		reqs[i], _ = http.NewRequest("GET", "http://h"+strconv.Itoa(i)+".test/", nil)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p, err := c.Acquire(ctx, reqs[i%len(reqs)])
		if err != nil {
			b.Fatal(err)
		}
		p.Record(okResp, nil)
		i++
	}
}

// TestHotPathAllocatesNothing pins the uncontended acquire + record at zero
// allocations.
func TestHotPathAllocatesNothing(t *testing.T) {
	c := benchController(t)
	req, _ := http.NewRequest("GET", "http://a.test/page/1", nil)
	ctx := context.Background()
	p, _ := c.Acquire(ctx, req) // create the scope
	p.Record(okResp, nil)
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := c.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		p.Record(okResp, nil)
	})
	if allocs != 0 {
		t.Errorf("acquire + record allocates %.1f times", allocs)
	}
}
