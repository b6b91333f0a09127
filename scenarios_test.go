package polite_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/testserver"
)

func oneHost(p testserver.Policy) testserver.Config {
	return testserver.Config{Hosts: map[string]testserver.Policy{"a.test": p}}
}

func fixedWindow(n int) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
}

// The reference scenario S1: fixed window 30/s, 350 ms, 40
// goroutines. Judged after a 10 s warm-up, over 30 s.
func TestS1Reference(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   fixedWindow(30),
			Latency: testserver.Latency{Base: 350 * time.Millisecond},
		}))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
		warm := statsAt(srv, "a.test", 10*time.Second)
		crawl(t, c, 40, 40*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		good := float64(window(st, 10*time.Second, 40*time.Second)) / 30
		rej, sent := rejected(st, 429)-rejected(*warm, 429), st.Requests-warm.Requests
		t.Logf("after 10 s: goodput %.2f/s (%.1f %% of 30), 429s %d of %d; in warm-up %d; pause violations %d",
			good, good/30*100, rej, sent, rejected(*warm, 429), st.PauseViolations)
		assert.GreaterOrEqual(t, good, 0.95*30, "goodput after warm-up")
		assert.LessOrEqual(t, float64(rej), 0.01*float64(sent), "rejected share after warm-up")
		assert.Zero(t, st.PauseViolations)
		assertIdle(t, ctrl)
	})
}

// A limit far below 1/latency.
func TestS2StrictAndFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.TokenBucket, Rate: 5, Burst: 2},
			Latency: testserver.Latency{Base: 10 * time.Millisecond},
		}))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
		warm := statsAt(srv, "a.test", 10*time.Second)
		crawl(t, c, 40, 70*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		good := float64(window(st, 10*time.Second, 70*time.Second)) / 60
		rej, sent := rejected(st, 429)-rejected(*warm, 429), st.Requests-warm.Requests
		t.Logf("after 10 s: goodput %.2f/s (%.1f %% of 5), 429s %d of %d; in warm-up %d", good, good/5*100, rej, sent, rejected(*warm, 429))
		assert.GreaterOrEqual(t, good, 0.95*5)
		assert.LessOrEqual(t, float64(rej), 0.01*float64(sent))
		assert.Zero(t, st.PauseViolations)
		assertIdle(t, ctrl)
	})
}

// Retry-After 3 s, as seconds and as an HTTP-date.
func TestRetryAfterPausesScope(t *testing.T) {
	for _, mode := range []testserver.RetryAfterMode{testserver.RetryAfterSeconds, testserver.RetryAfterHTTPDate} {
		t.Run(map[testserver.RetryAfterMode]string{testserver.RetryAfterSeconds: "seconds", testserver.RetryAfterHTTPDate: "date"}[mode], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, oneHost(testserver.Policy{
					Limit:   fixedWindow(20),
					Latency: testserver.Latency{Base: 20 * time.Millisecond},
					Excess:  testserver.Excess{RetryAfter: mode, FixedRetryAfter: 3 * time.Second},
				}))
				c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
				crawl(t, c, 10, 20*time.Second, srv.HostURL("a.test"))
				st := srv.Stats("a.test")
				t.Logf("429s %d, accepted %d, violations %d", st.ByStatus[429], len(st.Accepted), st.PauseViolations)
				require.Positive(t, st.ByStatus[429], "the scenario must throttle")
				assert.Zero(t, st.PauseViolations)
				// resumption spreads out: no two accepted requests in the same instant
				acc := append([]time.Duration(nil), st.Accepted...)
				sort.Slice(acc, func(i, j int) bool { return acc[i] < acc[j] })
				same := 0
				for i := 1; i < len(acc); i++ {
					if acc[i] == acc[i-1] {
						same++
					}
				}
				assert.Zero(t, same, "requests resumed in one instant")
				// resumption comes within the pause plus the jitter spread
				// (10 % of 3 s) and one send interval: for each pause (the
				// last 429 of a burst + 3 s) the next accepted request
				gaps := 0
				for i, r := range st.Rejected {
					if i+1 < len(st.Rejected) && st.Rejected[i+1]-r < 3*time.Second {
						continue // not the last 429 of its burst
					}
					end := r + 3*time.Second
					if mode == testserver.RetryAfterHTTPDate && end%time.Second != 0 {
						// the date is rounded up to a whole second
						end = end.Truncate(time.Second) + time.Second
					}
					k := sort.Search(len(acc), func(j int) bool { return acc[j] >= end })
					if k == len(acc) {
						continue // the crawl ended first
					}
					gaps++
					slack := 300*time.Millisecond + 100*time.Millisecond
					if mode == testserver.RetryAfterHTTPDate {
						// a date is read against the response's Date
						// (the server's clock), which has whole seconds:
						// the wait can be up to 1 s longer, never shorter
						slack += time.Second
					}
					assert.Less(t, acc[k]-end, slack, "resume after the pause ending at %v", end)
				}
				assert.Positive(t, gaps)
				assertIdle(t, ctrl)
			})
		})
	}
}

// Retry-After 3600 fails fast with a typed error, parks the
// scope; another host keeps its speed.
func TestRetryAfterAboveCeilingFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: time.Hour}},
			"b.test": {Limit: fixedWindow(20)},
		}})
		// a high initial rate, so that the timing below is the fail-fast
		// path and not the pacing of slow start
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false), Default: polite.Rule{InitialRate: 100}})
		var mu sync.Mutex
		var errs []error
		c.OnError(func(_ *colly.Response, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
		a := srv.HostURL("a.test")
		require.NoError(t, c.Visit(a+"/page/1"))
		start := time.Now()
		err := c.Visit(a + "/page/2")
		assert.Less(t, time.Since(start), 100*time.Millisecond)
		require.Error(t, err)
		assert.ErrorIs(t, err, polite.ErrPaused)
		var se *polite.ScopeError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, polite.PauseRetryAfter, se.Pause)
		// the scope stays parked: the next request fails at once, unsent
		before := srv.Stats("a.test").Requests
		assert.ErrorIs(t, c.Visit(a+"/page/3"), polite.ErrPaused)
		assert.Equal(t, before, srv.Stats("a.test").Requests)
		// Unpark clears the pause and the drained bucket: the next request
		// goes out at once (and meets the server's hour-long window: 429)
		assert.True(t, ctrl.Unpark(se.Scope))
		t0 := time.Now()
		_ = c.Visit(a + "/page/4")
		assert.Equal(t, before+1, srv.Stats("a.test").Requests, "sent after Unpark")
		assert.Less(t, time.Since(t0), time.Second)
		mu.Lock()
		require.Len(t, errs, 3)
		assert.ErrorIs(t, errs[0], polite.ErrPaused)
		mu.Unlock()
		assertIdle(t, ctrl)
	})
	// another host keeps its full speed: b crawled beside the parked a
	// (whose workers keep knocking and failing fast) gets what it gets alone
	bAlone, bBeside := bGoodput(t, false), bGoodput(t, true)
	t.Logf("b alone %.2f/s, beside the parked host %.2f/s", bAlone, bBeside)
	assert.GreaterOrEqual(t, bBeside, 0.95*bAlone)
}

// bGoodput crawls b.test (fixed window 20/s) for 30 s, beside a.test parked
// by a Retry-After of an hour if parked, and returns b's goodput after 10 s.
func bGoodput(t *testing.T, parked bool) float64 {
	var good float64
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: time.Hour}},
			"b.test": {Limit: fixedWindow(20)},
		}})
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
		bases := []string{srv.HostURL("b.test")}
		if parked {
			bases = append(bases, srv.HostURL("a.test"))
		}
		crawl(t, c, 20, 30*time.Second, bases...)
		good = float64(window(srv.Stats("b.test"), 10*time.Second, 30*time.Second)) / 20
		assertIdle(t, ctrl)
	})
	return good
}

// 403 ban.
func TestBlocksParkScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit: fixedWindow(2),
			Ban:   &testserver.Ban{After: 1, Within: time.Minute, For: time.Hour},
		}))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false), Default: polite.Rule{BlockThreshold: 3, ParkFor: -1}})
		events := ctrl.Events()
		a := srv.HostURL("a.test")
		key := polite.ScopeHost(mustReq(t, a))
		// drive the server into its ban
		crawl(t, c, 4, 5*time.Second, a)
		snap, _ := ctrl.Snapshot(key)
		assert.True(t, snap.Parked, "parked after repeated blocks")
		assert.GreaterOrEqual(t, snap.Counts[classify.Blocked], uint64(3))
		assert.GreaterOrEqual(t, countEvents(events, classify.Blocked), 3, "blocked events emitted")
		limitAtPark := snap.Limit
		err := c.Visit(a + "/page/x")
		assert.ErrorIs(t, err, polite.ErrBlocked)
		snap2, _ := ctrl.Snapshot(key)
		assert.Equal(t, limitAtPark, snap2.Limit, "403s do not change the concurrency limit")
		assert.True(t, ctrl.Unpark(key))
		snap3, _ := ctrl.Snapshot(key)
		assert.False(t, snap3.Parked)
		// un-parked means sendable at once: no pause or drained bucket left
		assert.True(t, snap3.PausedUntil.IsZero() || !snap3.PausedUntil.After(time.Now()))
		before := srv.Stats("a.test").Requests
		start := time.Now()
		_ = c.Visit(a + "/page/7")
		assert.Equal(t, before+1, srv.Stats("a.test").Requests, "the request after Unpark is sent")
		assert.Less(t, time.Since(start), time.Second, "and not held by a leftover drain")
		assertIdle(t, ctrl)
	})
}

func mustReq(t *testing.T, u string) *http.Request {
	r, err := http.NewRequest("GET", u, nil)
	require.NoError(t, err)
	return r
}

// 503 from a concurrency-capped origin.
func TestConcurrencyCappedOrigin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8},
			Latency: testserver.Latency{Base: 100 * time.Millisecond},
		}))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
		// no additive increase during the hold after a 503: the limit 9 s
		// after the first overload is no higher than right after it
		events := ctrl.Events()
		held := make(chan [2]int, 1)
		go func() {
			e := <-events
			for e.Class != classify.Overloaded {
				e = <-events
			}
			time.Sleep(time.Until(e.Time.Add(9 * time.Second)))
			snap, _ := ctrl.Snapshot(e.Scope)
			held <- [2]int{e.Limit, snap.Limit}
		}()
		crawl(t, c, 40, 60*time.Second, srv.HostURL("a.test"))
		h := <-held
		assert.LessOrEqual(t, h[1], h[0], "limit %v right after the 503, %v 9 s later", h[0], h[1])
		st := srv.Stats("a.test")
		share := float64(st.ByStatus[503]) / float64(st.Requests)
		t.Logf("503 share %.2f %% of %d, max in flight %d", share*100, st.Requests, st.MaxInFlight)
		assert.LessOrEqual(t, share, 0.02)
		assert.LessOrEqual(t, st.MaxInFlight, 9)
		// in flight settles near 8: throughput near 8/latency after warm-up
		good := float64(window(st, 10*time.Second, 60*time.Second)) / 50
		assert.GreaterOrEqual(t, good, 0.85*80)
		assertIdle(t, ctrl)
	})
}

// Capacity drop 40/s → 10/s at t=30 s.
func TestCapacityDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:    fixedWindow(40),
			Schedule: []testserver.Step{{At: 30 * time.Second, Limit: fixedWindow(10)}},
			Latency:  testserver.Latency{Base: 50 * time.Millisecond},
		}))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
		var at35 testserver.Stats
		go func() { time.Sleep(35 * time.Second); at35 = srv.Stats("a.test") }()
		crawl(t, c, 40, 60*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		good := float64(window(st, 35*time.Second, 60*time.Second)) / 25
		late := st.ByStatus[429] - at35.ByStatus[429]
		t.Logf("after drop: goodput %.2f/s, 429s by 35 s %d, after %d", good, at35.ByStatus[429], late)
		assert.GreaterOrEqual(t, good, 0.9*10)
		// rejections stop within 5 s of the drop
		assert.LessOrEqual(t, float64(late), 0.01*float64(st.Requests-at35.Requests)+1)
		assertIdle(t, ctrl)
	})
}

// Two hosts, one hard-throttled.
func TestTwoHostsIsolation(t *testing.T) {
	alone := func(both bool) float64 {
		var good float64
		synctest.Test(t, func(t *testing.T) {
			hosts := map[string]testserver.Policy{
				"a.test": {Limit: fixedWindow(20), Latency: testserver.Latency{Base: 50 * time.Millisecond}},
			}
			if both {
				hosts["b.test"] = testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 5 * time.Second}}
			}
			srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
			c, _ := newCollector(t, srv, polite.Config{Robots: new(false)})
			bases := []string{srv.HostURL("a.test")}
			if both {
				bases = append(bases, srv.HostURL("b.test"))
			}
			crawl(t, c, 40, 40*time.Second, bases...)
			good = float64(window(srv.Stats("a.test"), 10*time.Second, 40*time.Second)) / 30
		})
		return good
	}
	solo, shared := alone(false), alone(true)
	t.Logf("a alone %.2f/s, a beside a throttled host %.2f/s", solo, shared)
	assert.GreaterOrEqual(t, shared, 0.95*solo)
}

// Honest quota headers are paced so that no 429 happens.
func TestQuotaHeadersPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 100, Window: 10 * time.Second},
			Latency: testserver.Latency{Base: 20 * time.Millisecond},
			Excess:  testserver.Excess{QuotaHeaders: true},
		}))
		client := &http.Client{Transport: polite.NewTransport(srv.Transport())}
		start := time.Now()
		for time.Since(start) < 60*time.Second {
			resp, err := client.Get(srv.HostURL("a.test") + "/page/1")
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		st := srv.Stats("a.test")
		t.Logf("accepted %d, 429s %d", len(st.Accepted), st.ByStatus[429])
		assert.Zero(t, st.ByStatus[429])
		assert.GreaterOrEqual(t, len(st.Accepted), 500)
	})
}

// Over a real round trip a window that fills has rate × RTT requests on the
// wire, and all come back rejected after the RTT: one signal, which must not
// open the breaker or escalate the backoff.
func TestRejectionsOverRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   fixedWindow(40),
			Latency: testserver.Latency{RTT: 100 * time.Millisecond},
		}))
		var buf bytes.Buffer
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, nil))
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false), Logger: logger})
		crawl(t, c, 40, 60*time.Second, srv.HostURL("a.test"))
		st := srv.Stats("a.test")
		good := float64(window(st, 15*time.Second, 60*time.Second)) / 45
		t.Logf("goodput 15-60 s: %.2f/s (%.1f %% of 40); 429s %d of %d; violations %d", good, good/40*100, st.ByStatus[429], st.Requests, st.PauseViolations)
		mu.Lock()
		log := buf.String()
		mu.Unlock()
		assert.NotContains(t, log, "breaker-open", "the tail of a burst opened the breaker")
		assert.Zero(t, st.PauseViolations)
		assert.GreaterOrEqual(t, good, 0.8*40)
		assertIdle(t, ctrl)
	})
}
