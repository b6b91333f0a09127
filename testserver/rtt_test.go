package testserver_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

const rtt = 200 * time.Millisecond

// noRedirects is srv's client without following redirects.
func noRedirects(srv *testserver.Server) *http.Client {
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// Every answer, whatever it is, reaches the client one RTT after the
// request was sent, plus the origin's processing time if it was admitted.
func TestRTTEveryAnswer(t *testing.T) {
	lat := testserver.Latency{RTT: rtt}
	for _, tc := range []struct {
		name   string
		p      testserver.Policy
		before func(c *http.Client, url string) // requests that set the scene
		path   string
		status int
		took   time.Duration
	}{
		{name: "admitted", p: testserver.Policy{Latency: lat}, path: "/", status: 200, took: rtt},
		{name: "admitted with processing time", p: testserver.Policy{Latency: testserver.Latency{RTT: rtt, Base: 50 * time.Millisecond}},
			path: "/page/1", status: 200, took: rtt + 50*time.Millisecond},
		{name: "429", p: testserver.Policy{Limit: fixed(1, time.Hour), Latency: lat},
			before: func(c *http.Client, url string) { fetch(c, url) }, path: "/", status: 429, took: rtt},
		{name: "503 of a Concurrency limit", p: testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 1},
			Latency: testserver.Latency{RTT: rtt, Base: time.Hour},
		}, before: func(c *http.Client, url string) {
			go fetch(c, url) // in service for an hour; Close ends it
			time.Sleep(rtt)  // it has arrived
		}, path: "/", status: 503, took: rtt},
		{name: "503 of a full WorkerPool queue", p: testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 1, Queue: 1},
			Latency: testserver.Latency{RTT: rtt, Base: time.Hour},
		}, before: func(c *http.Client, url string) {
			go fetch(c, url) // in service
			go fetch(c, url) // queued
			time.Sleep(rtt)
		}, path: "/", status: 503, took: rtt},
		{name: "403 of a ban", p: testserver.Policy{Limit: fixed(1, time.Hour), Latency: lat, Ban: &testserver.Ban{After: 1}},
			before: func(c *http.Client, url string) { fetch(c, url); fetch(c, url) }, path: "/", status: 403, took: rtt},
		{name: "robots.txt", p: testserver.Policy{Latency: testserver.Latency{RTT: rtt, Base: time.Hour}},
			path: "/robots.txt", status: 200, took: rtt},
		{name: "redirect", p: testserver.Policy{Latency: lat}, path: "/redirect/loop", status: 302, took: rtt},
		{name: "404", p: testserver.Policy{Latency: lat}, path: "/page/abc", status: 404, took: rtt},
		{name: "400", p: testserver.Policy{Latency: lat}, path: "/redirect?to=ftp://x", status: 400, took: rtt},
		{name: "adversary", p: testserver.Policy{Latency: lat, Adversary: testserver.Adversary{Kind: testserver.ResetMidBody, Bytes: 5}},
			path: "/", status: 200, took: rtt},
		{name: "odd RTT", p: testserver.Policy{Limit: fixed(1, time.Hour), Latency: testserver.Latency{RTT: 3}},
			before: func(c *http.Client, url string) { fetch(c, url) }, path: "/", status: 429, took: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, one(tc.p))
				c := noRedirects(srv)
				if tc.before != nil {
					tc.before(c, srv.URL+"/")
				}
				sent := time.Now()
				resp, err := c.Get(srv.URL + tc.path)
				require.NoError(t, err)
				took := time.Since(sent)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, tc.took, took, "from sending to the headers")
			})
		})
	}
}

// The host decides when the request arrives, half an RTT after it was
// sent: of two requests sent 1 ms apart just before a fixed window's edge,
// the first arrives in the full window and is rejected, the second in the
// next one and is admitted. Stats hold arrival times.
func TestRTTDecisionAtArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(1, time.Second), Latency: testserver.Latency{RTT: rtt}}))
		c := srv.Client()
		require.Equal(t, 200, get(t, c, srv.URL+"/").status) // arrives at 100 ms
		assert.Equal(t, rtt, time.Since(start))

		var wg sync.WaitGroup
		got := map[time.Duration]int{} // sent at → status
		var mu sync.Mutex
		for _, at := range ms(899, 900) {
			wg.Go(func() {
				sleepUntil(start, at)
				r := fetch(c, srv.URL+"/")
				assert.Equal(t, at+rtt, time.Since(start), "answered one RTT after sending")
				mu.Lock()
				got[at] = r.status
				mu.Unlock()
			})
		}
		wg.Wait()
		assert.Equal(t, map[time.Duration]int{899 * time.Millisecond: 429, 900 * time.Millisecond: 200}, got)
		st := srv.Stats("a.test")
		assert.Equal(t, ms(100, 1000), st.Accepted)
		assert.Equal(t, ms(999), st.Rejected)
		assert.Equal(t, []int{1, 1}, st.PerSecond)
	})
}

// When a limit fills, the requests already on the wire come back rejected,
// one RTT after they were sent: a client sending 10 requests per second
// into a window of 5 learns of the first 429 only after it has sent
// RTT × rate more, all rejected.
func TestRTTRequestsOnTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(5, time.Minute), Latency: testserver.Latency{RTT: 500 * time.Millisecond}}))
		c := srv.Client()
		var mu sync.Mutex
		var first429 time.Duration
		sentBefore := 0
		var wg sync.WaitGroup
		for i := range 10 {
			sleepUntil(start, time.Duration(i)*100*time.Millisecond)
			wg.Go(func() {
				r := fetch(c, srv.URL+"/")
				mu.Lock()
				defer mu.Unlock()
				if r.status == 429 && first429 == 0 {
					first429 = time.Since(start)
				}
			})
			mu.Lock()
			if first429 == 0 {
				sentBefore++
			}
			mu.Unlock()
		}
		wg.Wait()
		// The 6th request (sent at 500 ms, arriving at 750 ms) is the first
		// rejected; its 429 is back at 1 s, when all 10 have been sent.
		assert.Equal(t, time.Second, first429)
		assert.Equal(t, 10, sentBefore)
		st := srv.Stats("a.test")
		assert.Equal(t, map[int]int{200: 5, 429: 5}, st.ByStatus)
		assert.Equal(t, ms(750, 850, 950, 1050, 1150), st.Rejected)
	})
}

// Pause violations under RTT: the instant is the arrival at the host. A
// request arriving up to one RTT after the announcing decision was sent
// before the client could know; the pause ends when a request sent at the
// client's deadline arrives.
func TestPauseViolationsRTT(t *testing.T) {
	for _, tc := range []struct {
		mode     testserver.RetryAfterMode
		deadline time.Duration // on the client's clock (send times)
	}{
		// The 429 is decided at 600 ms and reaches the client at 700 ms,
		// with "Retry-After: 5" (4.5 s rounded up): 700 ms + 5 s.
		{testserver.RetryAfterSeconds, 5700 * time.Millisecond},
		// The date is 600 ms + 4.5 s, rounded up to the whole second.
		{testserver.RetryAfterHTTPDate, 6 * time.Second},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:   fixed(1, 100*time.Second),
					Excess:  testserver.Excess{RetryAfter: tc.mode, FixedRetryAfter: 4500 * time.Millisecond},
					Latency: testserver.Latency{RTT: rtt},
				}))
				c := srv.Client()
				page, probe := srv.URL+"/", srv.URL+"/robots.txt"
				violations := func() int { return srv.Stats("a.test").PauseViolations }

				require.Equal(t, 200, get(t, c, page).status)
				// A probe sent at 600 ms, while the 429 is on its way back.
				var wg sync.WaitGroup
				wg.Go(func() {
					sleepUntil(start, 600*time.Millisecond)
					fetch(c, probe) // arrives at 700 ms
				})
				sleepUntil(start, 500*time.Millisecond)
				require.Equal(t, 429, get(t, c, page).status) // decided at 600 ms
				require.Equal(t, 700*time.Millisecond, time.Since(start))
				get(t, c, probe) // sent as the 429 arrives: arrives at 800 ms
				wg.Wait()
				assert.Equal(t, 0, violations(), "sent before, or the instant, the 429 arrived")
				sleepUntil(start, time.Second)
				get(t, c, probe)
				assert.Equal(t, 1, violations(), "during the pause")
				sleepUntil(start, tc.deadline-time.Millisecond)
				get(t, c, probe)
				assert.Equal(t, 2, violations(), "sent just before the deadline")
				sleepUntil(start, tc.deadline)
				get(t, c, probe)
				assert.Equal(t, 2, violations(), "sent at the deadline")
			})
		})
	}
}

// RTT works on real sockets too. Real time: only lower bounds, which
// timers guarantee.
func TestRTTLoopback(t *testing.T) {
	const rtt = 40 * time.Millisecond
	srv, err := testserver.New(testserver.Config{Hosts: map[string]testserver.Policy{
		"a.test": {Limit: fixed(1, time.Hour), Latency: testserver.Latency{RTT: rtt}},
	}})
	require.NoError(t, err)
	defer srv.Close()
	c := srv.Client()
	for _, want := range []int{200, 429} {
		sent := time.Now()
		assert.Equal(t, want, get(t, c, srv.URL+"/").status)
		assert.GreaterOrEqual(t, time.Since(sent), rtt)
	}
	st := srv.Stats("a.test")
	require.Len(t, st.Accepted, 1)
	assert.GreaterOrEqual(t, st.Accepted[0], rtt/2, "arrival, not sending")
}

// Close does not wait for requests on the wire.
func TestRTTClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv, err := testserver.New(testserver.Config{Network: testserver.Memory, Hosts: map[string]testserver.Policy{
			"a.test": {Latency: testserver.Latency{RTT: time.Hour}},
		}})
		require.NoError(t, err)
		errs := make(chan error, 2)
		for _, path := range []string{"/", "/robots.txt"} {
			go func() { errs <- fetch(srv.Client(), srv.URL+path).err }()
		}
		synctest.Wait()
		srv.Close()
		assert.Error(t, <-errs)
		assert.Error(t, <-errs)
		assert.Equal(t, time.Duration(0), time.Since(start))
		assert.Equal(t, 0, srv.Stats("a.test").Requests, "neither arrived")
	})
}

// A client that gave up on a request before its 429 arrived never learned
// of the pause the 429 announced: nothing it sends later is a violation.
// One that received it is held to it.
func TestPauseAnnouncedOnlyWhenDelivered(t *testing.T) {
	for _, cancelled := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {
				Limit:   testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: 10 * time.Second},
				Latency: testserver.Latency{RTT: rtt},
			}}})
			c := srv.Client()
			u := srv.HostURL("a.test") + "/page/1"
			resp, err := c.Get(u) // takes the window's one request
			require.NoError(t, err)
			resp.Body.Close()
			ctx, cancel := context.WithCancel(context.Background())
			if cancelled {
				time.AfterFunc(rtt/4, cancel) // the 429 is decided at rtt/2, delivered at rtt
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if resp, err := c.Do(req); err == nil {
				require.False(t, cancelled)
				require.Equal(t, 429, resp.StatusCode)
				resp.Body.Close()
			}
			cancel()
			time.Sleep(2 * rtt)
			resp, err = c.Get(u) // inside the window's pause
			require.NoError(t, err)
			resp.Body.Close()
			want := 1
			if cancelled {
				want = 0
			}
			assert.Equal(t, want, srv.Stats("a.test").PauseViolations)
		})
	}
}
