package testserver_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

func workerPool(workers, queue int) testserver.Limit {
	return testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: workers, Queue: queue}
}

// answerTimes sends n requests to url at once and returns when each was
// answered (status 200 required), sorted, measured from start.
func answerTimes(t *testing.T, c *http.Client, url string, start time.Time, n int) []time.Duration {
	t.Helper()
	got := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := fetch(c, url)
			assert.NoError(t, r.err)
			assert.Equal(t, 200, r.status)
			got[i] = time.Since(start)
		})
	}
	wg.Wait()
	slices.Sort(got)
	return got
}

// Two workers of 100 ms serve six simultaneous requests two at a time; the
// others wait in the queue and nobody is refused. With an RTT, the answers
// come RTT later, and Stats, on the host's clock, are the same but for the
// arrival times.
func TestWorkerPool(t *testing.T) {
	for _, tc := range []struct {
		rtt     time.Duration
		answers []time.Duration
	}{
		{0, ms(100, 100, 200, 200, 300, 300)},
		{rtt, ms(300, 300, 400, 400, 500, 500)},
	} {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:   workerPool(2, 0),
					Latency: testserver.Latency{RTT: tc.rtt, Base: 100 * time.Millisecond},
				}))
				assert.Equal(t, tc.answers, answerTimes(t, srv.Client(), srv.URL+"/", start, 6))
				st := srv.Stats("a.test")
				assert.Equal(t, ms(100, 100, 200, 200, 300, 300), st.Latencies)
				assert.Equal(t, 4, st.MaxQueued)
				assert.Equal(t, 2, st.MaxInFlight)
				assert.Equal(t, map[int]int{200: 6}, st.ByStatus)
				assert.Equal(t, slices.Repeat([]time.Duration{tc.rtt / 2}, 6), st.Accepted)
				assert.Empty(t, st.Rejected)
			})
		})
	}
}

// PerInFlight counts the other requests in service when a request's
// service starts, not those queued.
func TestWorkerPoolPerInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:   workerPool(2, 0),
			Latency: testserver.Latency{Base: 100 * time.Millisecond, PerInFlight: 10 * time.Millisecond},
		}))
		// Services of 100 and 110 ms start at 0; at 100 ms the third starts
		// beside the second (110 ms, to 210), at 110 ms the fourth beside the
		// third (to 220).
		assert.Equal(t, ms(100, 110, 210, 220), answerTimes(t, srv.Client(), srv.URL+"/", start, 4))
		assert.Equal(t, ms(100, 110, 210, 220), srv.Stats("a.test").Latencies)
	})
}

// With a bounded queue, the requests beyond it are answered as excess (503
// by default, with a Retry-After of a second), at once.
func TestWorkerPoolQueueBound(t *testing.T) {
	for _, tc := range []struct {
		excess testserver.Excess
		status int
	}{
		{testserver.Excess{}, 503},
		{testserver.Excess{Status: 429}, 429},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:   workerPool(1, 2),
					Latency: testserver.Latency{Base: time.Second},
					Excess:  tc.excess,
				}))
				c := srv.Client()
				done := make(chan time.Duration, 3)
				for range 3 { // one in service, two queued
					go func() {
						assert.Equal(t, 200, fetch(c, srv.URL+"/").status)
						done <- time.Since(start)
					}()
					synctest.Wait() // in arrival order
				}
				r := get(t, c, srv.URL+"/")
				assert.Equal(t, tc.status, r.status)
				assert.Equal(t, "1", r.header.Get("Retry-After"))
				assert.Equal(t, time.Duration(0), time.Since(start))
				for _, want := range ms(1000, 2000, 3000) {
					assert.Equal(t, want, <-done)
				}
				st := srv.Stats("a.test")
				assert.Equal(t, ms(0), st.Rejected)
				assert.Equal(t, 2, st.MaxQueued)
				assert.Equal(t, ms(1000, 2000, 3000), st.Latencies)
			})
		})
	}
}

// A client that gives up while queued leaves the queue and frees no worker:
// the next in line is served when the worker in service finishes, not
// sooner.
func TestWorkerPoolCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:   workerPool(1, 0),
			Latency: testserver.Latency{Base: time.Second},
		}))
		c := srv.Client()
		answered := map[string]time.Duration{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		send := func(name string, at time.Duration, ctx context.Context) {
			wg.Go(func() {
				sleepUntil(start, at)
				req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/", nil)
				require.NoError(t, err)
				resp, err := c.Do(req)
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled, name)
					return
				}
				resp.Body.Close()
				mu.Lock()
				answered[name] = time.Since(start)
				mu.Unlock()
			})
		}
		ctx, cancel := context.WithCancel(context.Background())
		send("A", 0, context.Background())  // served 0 to 1 s
		send("B", 10*time.Millisecond, ctx) // queued, gives up at 500 ms
		send("C", 20*time.Millisecond, context.Background())
		send("D", 1500*time.Millisecond, context.Background())
		sleepUntil(start, 500*time.Millisecond)
		cancel()
		wg.Wait()
		assert.Equal(t, map[string]time.Duration{"A": time.Second, "C": 2 * time.Second, "D": 3 * time.Second}, answered)
		st := srv.Stats("a.test")
		assert.Equal(t, []time.Duration{time.Second, 1980 * time.Millisecond, 1500 * time.Millisecond}, st.Latencies)
		assert.Equal(t, 2, st.MaxQueued)
		assert.Equal(t, 1, st.MaxInFlight)
		assert.Len(t, st.Accepted, 4, "B was admitted before it gave up")
	})
}

// Close ends queued requests at once.
func TestWorkerPoolClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv, err := testserver.New(testserver.Config{Network: testserver.Memory, Hosts: map[string]testserver.Policy{
			"a.test": {Limit: workerPool(1, 0), Latency: testserver.Latency{Base: time.Hour}},
		}})
		require.NoError(t, err)
		c := srv.Client()
		errs := make(chan error, 3)
		for range 3 {
			go func() { errs <- fetch(c, srv.URL+"/").err }()
		}
		synctest.Wait()
		assert.Equal(t, 2, srv.Stats("a.test").MaxQueued)
		srv.Close()
		for range 3 {
			assert.Error(t, <-errs)
		}
		assert.Equal(t, time.Duration(0), time.Since(start))
		assert.Empty(t, srv.Stats("a.test").Latencies)
	})
}

// Under sustained load a pool serves MaxConcurrent / Base requests per
// second, and the latency is the queue wait plus the service: 16 clients
// in a closed loop on 4 workers of 100 ms get 40 answers per second, each
// after 16 / 4 × 100 ms = 400 ms once the first round is through.
func TestWorkerPoolThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:   workerPool(4, 0),
			Latency: testserver.Latency{Base: 100 * time.Millisecond},
		}))
		c := srv.Client()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/", nil)
					if resp, err := c.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			})
		}
		sleepUntil(start, 10*time.Second+50*time.Millisecond)
		st := srv.Stats("a.test")
		cancel()
		wg.Wait()

		require.Len(t, st.Latencies, 400, "40 per second for 10 s")
		first := slices.Concat(
			slices.Repeat(ms(100), 4), slices.Repeat(ms(200), 4),
			slices.Repeat(ms(300), 4), slices.Repeat(ms(400), 4))
		assert.Equal(t, first, st.Latencies[:16])
		assert.Equal(t, slices.Repeat(ms(400), 400-16), st.Latencies[16:])
		assert.Equal(t, 4, st.MaxInFlight)
		assert.Equal(t, 12, st.MaxQueued)
		assert.Len(t, st.Accepted, 416, "the 400 answered and the 16 waiting")
	})
}

// A schedule changes the number of workers: queued requests are served by
// the pool in force from the step's instant on.
func TestWorkerPoolSchedule(t *testing.T) {
	step := func(at time.Duration, l testserver.Limit) []testserver.Step {
		return []testserver.Step{{At: at, Limit: l}}
	}
	for _, tc := range []struct {
		name     string
		limit    testserver.Limit
		schedule []testserver.Step
		n        int
		answers  []time.Duration
		inFlight int
	}{
		// 2 in service from 0, 2 more from the step at 500 ms, then two
		// by two as workers free.
		{"more workers", workerPool(2, 0), step(500*time.Millisecond, workerPool(4, 0)), 8,
			ms(1000, 1000, 1500, 1500, 2000, 2000, 2500, 2500), 4},
		// The four in service finish; then one at a time.
		{"fewer workers", workerPool(4, 0), step(500*time.Millisecond, workerPool(1, 0)), 6,
			ms(1000, 1000, 1000, 1000, 2000, 3000), 4},
		// Without a pool, queued requests start at once.
		{"no pool", workerPool(1, 0), step(500*time.Millisecond, testserver.Limit{}), 3,
			ms(1000, 1500, 1500), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:    tc.limit,
					Schedule: tc.schedule,
					Latency:  testserver.Latency{Base: time.Second},
				}))
				assert.Equal(t, tc.answers, answerTimes(t, srv.Client(), srv.URL+"/", start, tc.n))
				st := srv.Stats("a.test")
				assert.Equal(t, tc.inFlight, st.MaxInFlight)
				assert.Equal(t, tc.answers, st.Latencies)
			})
		})
	}
}
