package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"

	"github.com/colly-polite/polite"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/colly-polite/polite/metrics"
)

// registered is a controller that never waits, with a logger that takes
// nothing below Warn (the decision log off) and a collector registered and
// scraped once.
func registered(tb testing.TB) *polite.Controller {
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctrl := fastController(tb, polite.Config{Logger: quiet})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(ctrl))
	if _, err := reg.Gather(); err != nil {
		tb.Fatal(err)
	}
	return ctrl
}

// BenchmarkAcquireRecordRegistered is polite's BenchmarkAcquireRecord
// with a collector registered and the logger set but off: the hot path
// must not pay for either.
func BenchmarkAcquireRecordRegistered(b *testing.B) {
	ctrl := registered(b)
	req, _ := http.NewRequest("GET", "http://a.test/page/1", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := ctrl.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		p.Record(resp, nil)
	}
}

// The hot path allocates nothing with a collector registered and the
// logger off.
func TestHotPathAllocatesNothingRegistered(t *testing.T) {
	ctrl := registered(t)
	req, _ := http.NewRequest("GET", "http://a.test/page/1", nil)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	ctx := context.Background()
	p, _ := ctrl.Acquire(ctx, req) // create the scope
	p.Record(resp, nil)
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := ctrl.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		p.Record(resp, nil)
	})
	if allocs != 0 {
		t.Errorf("acquire + record allocates %.1f times", allocs)
	}
}

// BenchmarkScrape10kScopes is one scrape over 10,000 live scopes (100
// labelled, the rest folded).
func BenchmarkScrape10kScopes(b *testing.B) {
	ctrl := fastController(b)
	ctx := context.Background()
	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	for i := range 10_000 {
		req, _ := http.NewRequest("GET", "http://h"+strconv.Itoa(i)+".test/", nil)
		for range 10 {
			p, _ := ctrl.Acquire(ctx, req)
			p.Record(resp, nil)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(ctrl))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
