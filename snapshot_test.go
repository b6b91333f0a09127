package polite_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/testserver"
)

// record acquires a slot for url on c and records status with header h
// (key, value pairs).
func record(t *testing.T, c *polite.Controller, url string, status int, h ...string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	p, err := c.Acquire(context.Background(), req)
	require.NoError(t, err)
	resp := &http.Response{StatusCode: status, Header: http.Header{}}
	for i := 0; i+1 < len(h); i += 2 {
		resp.Header.Set(h[i], h[i+1])
	}
	p.Record(resp, nil)
}

// A snapshot counts per status code (the less common codes together), the
// time paused, and which ceiling binds; the controller's histogram of
// polite waits holds every granted request.
func TestSnapshotCountsAndCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c, err := polite.New(polite.Config{Jitter: -1, Default: polite.Rule{Rate: 1}})
		require.NoError(t, err)
		for _, code := range []int{200, 200, 404, 418} {
			record(t, c, "http://a.test/", code)
		}
		snap, _ := c.Snapshot("a.test")
		assert.Equal(t, polite.CeilingConfigured, snap.Ceiling, "the configured rate binds")
		assert.Equal(t, 1.0, snap.CeilingRate)
		assert.Equal(t, polite.PhaseSlowStart, snap.Phase)
		record(t, c, "http://a.test/", 503)
		snap, _ = c.Snapshot("a.test")
		// law v2: a fresh overload cuts the rate too (Little's law)
		assert.Equal(t, polite.CeilingNone, snap.Ceiling, "the overload cut the rate below the configured ceiling")
		assert.Equal(t, polite.PhaseSteady, snap.Phase)
		record(t, c, "http://a.test/", 429, "Retry-After", "3")
		time.Sleep(time.Second)
		mid, _ := c.Snapshot("a.test")
		time.Sleep(5 * time.Second)
		snap, _ = c.Snapshot("a.test")
		assert.Equal(t, map[int]uint64{200: 2, 404: 1, polite.StatusOther: 1, 503: 1, 429: 1}, snap.Statuses)
		assert.Equal(t, time.Second, mid.PausedTotal, "a pause counts as it is served")
		assert.Equal(t, 3*time.Second, snap.PausedTotal)
		assert.Equal(t, start, snap.Created)
		assert.Equal(t, polite.CeilingNone, snap.Ceiling, "the throttle cut the rate below the configured ceiling")
		assert.Zero(t, snap.CeilingRate)
		r := c.Report()
		var waits uint64
		for _, n := range r.WaitCounts {
			waits += n
		}
		assert.Equal(t, uint64(6), waits)
		assert.Equal(t, uint64(1), r.WaitCounts[0], "the first request did not wait")
	})
}

// Report counts every scope once, live or evicted: the totals summed over
// both stay the same across an eviction.
func TestReportKeepsEvictedCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := polite.New(polite.Config{IdleTTL: time.Minute, Jitter: -1, Default: polite.Rule{InitialRate: 1e9}})
		require.NoError(t, err)
		for i := range 10 {
			host := "http://h" + strconv.Itoa(i) + ".test/"
			record(t, c, host, 200)
			record(t, c, host, 404)
		}
		record(t, c, "http://h0.test/", 429, "Retry-After", "2")
		sum := func(r polite.Report) (ok, notFound, throttled uint64, paused time.Duration) {
			ok, notFound, throttled, paused = r.Evicted.Statuses[200], r.Evicted.Statuses[404], r.Evicted.Counts[classify.Throttled], r.Evicted.PausedTotal
			for _, s := range r.Scopes {
				ok += s.Statuses[200]
				notFound += s.Statuses[404]
				throttled += s.Counts[classify.Throttled]
				paused += s.PausedTotal
			}
			return
		}
		time.Sleep(2 * time.Minute)
		before := c.Report()
		record(t, c, "http://late.test/", 200) // sweeps the idle scopes out
		after := c.Report()
		require.Len(t, after.Scopes, 1)
		assert.Equal(t, uint64(10), after.EvictedScopes)
		ok, nf, thr, paused := sum(before)
		ok2, nf2, thr2, paused2 := sum(after)
		assert.Equal(t, []uint64{10, 10, 1}, []uint64{ok, nf, thr})
		assert.Equal(t, []uint64{11, 10, 1}, []uint64{ok2, nf2, thr2})
		assert.Equal(t, 2*time.Second, paused)
		assert.Equal(t, paused, paused2)
	})
}

// Snapshot: the pause reason ends with the pause; RTT is measured to the
// response headers, not to the end of the body.
func TestSnapshotAfterPauseAndRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:     testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: time.Minute},
			Excess:    testserver.Excess{FixedRetryAfter: 3 * time.Second},
			Latency:   testserver.Latency{Base: 10 * time.Millisecond},
			Adversary: testserver.Adversary{Kind: testserver.DripBody, Bytes: 10, Interval: 100 * time.Millisecond},
		}))
		tr := polite.NewTransport(srv.Transport(), polite.Config{JitterSeed: 1, Default: polite.Rule{MaxRetries: -1}})
		client := &http.Client{Transport: tr}
		st, err := get(context.Background(), client, srv.HostURL("a.test")+"/page/1")
		require.NoError(t, err)
		require.Equal(t, 200, st)
		snap, _ := tr.Controller().Snapshot("a.test")
		assert.Equal(t, 10*time.Millisecond, snap.RTT, "RTT to the headers, not the 1 s body")
		st, err = get(context.Background(), client, srv.HostURL("a.test")+"/page/2")
		require.NoError(t, err)
		require.Equal(t, 429, st)
		snap, _ = tr.Controller().Snapshot("a.test")
		require.Equal(t, polite.PauseRetryAfter, snap.PauseReason)
		time.Sleep(5 * time.Second)
		snap, _ = tr.Controller().Snapshot("a.test")
		assert.Equal(t, polite.PauseNone, snap.PauseReason, "the pause has ended")
	})
}
