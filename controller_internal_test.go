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

// stricter keeps to both rules in every field, and mergeRules builds a
// combination once and gives a rule back as it is when the other adds
// nothing.
func TestStricterRule(t *testing.T) {
	resolve := func(r Rule) *rule {
		out, errs := r.resolve("test")
		require.Empty(t, errs)
		return &out
	}
	a := resolve(Rule{Rate: 10, MinGap: time.Second, MaxConcurrency: 8, BlockThreshold: -1, ParkFor: time.Minute, MaxRetries: 2})
	b := resolve(Rule{Rate: 0, RandomGap: time.Second, MaxConcurrency: 4, MinConcurrency: 2, BlockThreshold: 5, ParkFor: -1, InitialRate: 0.5})
	m := stricter(a, b)
	assert.Equal(t, 10.0, m.Rate, "a rate ceiling kept where the other has none")
	assert.Equal(t, time.Second, m.MinGap)
	assert.Equal(t, time.Second, m.RandomGap)
	assert.Equal(t, 4, m.MaxConcurrency)
	assert.Equal(t, 1, m.MinConcurrency)
	assert.Equal(t, 5, m.BlockThreshold, "a rule that parks beats one that never does")
	assert.Equal(t, time.Duration(-1), m.ParkFor, "a park until Unpark is the longest")
	assert.Equal(t, 0.5, m.InitialRate)
	assert.Equal(t, gapRate(time.Second), m.gapRate, "the gap's ceiling follows")
	assert.Equal(t, 4, m.law.MaxConcurrency, "and the law's bounds")
	assert.Equal(t, a.retries, m.retries)

	var c Controller
	ab := c.mergeRules(a, b)
	assert.Same(t, ab, c.mergeRules(a, b), "built once")
	assert.Same(t, ab, c.mergeRules(ab, b), "b adds nothing to their merge")
	assert.Same(t, ab, c.mergeRules(ab, a))
	assert.Same(t, a, c.mergeRules(a, a))
}

// A scope is not evicted before its next send is due: made again, its
// schedule would be fresh and send at once. Under MinGap 30 s with an
// IdleTTL of 1 s, the second send to a host still waits its 30 s after
// other hosts' requests swept idle scopes. (Before, it went 2 s after the
// first.) And a timed park that is over no longer keeps its scope for
// good.
func TestEvictionKeepsTheNextSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := New(Config{IdleTTL: time.Second, Robots: new(false), Default: Rule{MinGap: 30 * time.Second}})
		require.NoError(t, err)
		ctx := context.Background()
		send := func(host string) time.Time {
			req, _ := http.NewRequest("GET", "http://"+host+"/", nil)
			p, err := ctrl.Acquire(ctx, req)
			require.NoError(t, err)
			at := time.Now()
			p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
			return at
		}
		first := send("s.test")
		time.Sleep(2 * time.Second)
		send("other.test") // sweeps what is idle
		second := send("s.test")
		assert.GreaterOrEqual(t, second.Sub(first), 30*time.Second-10*time.Millisecond, "the gap kept across a sweep")

		// a host that blocked three times is parked for 30 s; an hour
		// later, swept, its scope is gone
		for range 3 {
			req, _ := http.NewRequest("GET", "http://blk.test/", nil)
			p, err := ctrl.Acquire(ctx, req)
			require.NoError(t, err)
			p.Record(&http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}}, nil)
		}
		time.Sleep(time.Hour)
		send("other2.test")
		ctrl.mu.RLock()
		_, kept := ctrl.scopes["blk.test"]
		ctrl.mu.RUnlock()
		assert.False(t, kept, "a park that is over holds nothing")
	})
}
