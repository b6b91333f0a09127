package polite

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// 100,000 hosts visited once each, one every 10 ms, with a one-minute idle
// TTL: the controller never holds more than the scopes touched in the last
// 1.25 TTL (its sweep runs every TTL/4), so memory stays bounded.
func TestIdleScopesEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := New(Config{IdleTTL: time.Minute})
		require.NoError(t, err)
		ctx := context.Background()
		req, _ := http.NewRequest("GET", "http://h.test/", nil)
		peak := 0
		for i := 0; i < 100_000; i++ {
			req.URL.Host = "h" + strconv.Itoa(i) + ".test"
			p, err := ctrl.Acquire(ctx, req)
			require.NoError(t, err)
			p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
			peak = max(peak, ctrl.scopeCount())
			time.Sleep(10 * time.Millisecond)
		}
		// 1.25 min of visits at 100 per second, plus the one being created
		bound := int(1.25*float64(time.Minute)/float64(10*time.Millisecond)) + 1
		t.Logf("peak %d scopes for 100000 hosts (bound %d)", peak, bound)
		assert.LessOrEqual(t, peak, bound)
		assert.Greater(t, peak, 5000, "the sweep keeps the recent ones")
	})
}

// scopeCount is how many scopes are live.
func (c *Controller) scopeCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.scopes)
}
