package adaptive_test

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
)

// 100,000 hosts visited once each, one every 10 ms, with a one-minute idle
// TTL: the controller never holds more than the scopes touched in the last
// 1.25 TTL (its sweep runs every TTL/4), so memory stays bounded.
func TestIdleScopesEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := adaptive.New(adaptive.WithConfig(adaptive.Config{IdleTTL: time.Minute}))
		require.NoError(t, err)
		ctx := context.Background()
		req, _ := http.NewRequest("GET", "http://h.test/", nil)
		peak := 0
		for i := 0; i < 100_000; i++ {
			req.URL.Host = "h" + strconv.Itoa(i) + ".test"
			p, err := ctrl.Acquire(ctx, req)
			require.NoError(t, err)
			p.Record(okResp, nil)
			peak = max(peak, ctrl.Len())
			time.Sleep(10 * time.Millisecond)
		}
		// 1.25 min of visits at 100 per second, plus the one being created
		bound := int(1.25*float64(time.Minute)/float64(10*time.Millisecond)) + 1
		t.Logf("peak %d scopes for 100000 hosts (bound %d)", peak, bound)
		assert.LessOrEqual(t, peak, bound)
		assert.Greater(t, peak, 5000, "the sweep keeps the recent ones")
	})
}

// BenchmarkIdleScopeBytes reports the memory one idle scope costs.
func BenchmarkIdleScopeBytes(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	for b.Loop() {
		ctrl, err := adaptive.New()
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
