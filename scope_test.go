package polite_test

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BenchmarkIdleScopeBytes reports the memory one idle scope costs.
func BenchmarkIdleScopeBytes(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	for b.Loop() {
		ctrl, err := polite.New(polite.Config{})
		if err != nil {
			b.Fatal(err)
		}
		reqs := make([]*http.Request, n)
		for i := range reqs {
			reqs[i], _ = http.NewRequest("GET", "http://h"+strconv.Itoa(i)+".test/", nil)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, r := range reqs {
			p, _ := ctrl.Acquire(ctx, r)
			p.Record(okResp, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/scope")
		runtime.KeepAlive(ctrl)
		runtime.KeepAlive(reqs)
	}
}

// A scope's line is first come, first served: with one slot, requests that
// arrive one after another are granted in that order, each when the one
// before it ends, and a request that gives up in the line leaves the order
// of the others as it was.
func TestScopeLineFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1, Default: polite.Rule{StartConcurrency: 1, MaxConcurrency: 1, InitialRate: 1000}})
		require.NoError(t, err)
		req, _ := http.NewRequest("GET", "http://a.test/", nil)
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 5 {
			ctx := context.Background()
			if i == 2 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 1500*time.Millisecond) // gives up in the line
				defer cancel()
			}
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				p, err := ctrl.Acquire(ctx, req)
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Second)
				p.Record(&http.Response{StatusCode: 200, Header: http.Header{}, Request: req}, nil)
			})
		}
		wg.Wait()
		assert.Equal(t, []int{0, 1, 3, 4}, order)
	})
}
