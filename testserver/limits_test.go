package testserver_test

import (
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

// A fixed window of 30 per second, hammered by two clients for 3 s of
// virtual time, admits exactly 30 in each second: 90.
func TestFixedWindowHammered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(30, time.Second)}))
		sent := hammer(t, srv.Client(), srv.URL+"/", start, 3*time.Second, 2*time.Millisecond, 2)

		st := srv.Stats("a.test")
		assert.Equal(t, 3000, sent)
		assert.Equal(t, sent, st.Requests)
		assert.Equal(t, 90, st.ByStatus[200])
		assert.Equal(t, sent-90, st.ByStatus[429])
		assert.Equal(t, []int{30, 30, 30}, st.PerSecond)
		require.Len(t, st.Accepted, 90)
		assert.Less(t, st.Accepted[89], 3*time.Second)
	})
}

// The window-edge effect of a fixed window: 30 requests at the end of one
// window and 30 at the start of the next are all admitted, 60 within 1 ms.
func TestFixedWindowEdgeEffect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(30, time.Second)}))
		c := srv.Client()
		sleepUntil(start, 999*time.Millisecond)
		for range 30 {
			require.Equal(t, 200, get(t, c, srv.URL+"/").status)
		}
		sleepUntil(start, time.Second)
		for range 30 {
			require.Equal(t, 200, get(t, c, srv.URL+"/").status)
		}
		assert.Equal(t, 429, get(t, c, srv.URL+"/").status)
		assert.Equal(t, []int{30, 30}, srv.Stats("a.test").PerSecond)
	})
}

// Retry-After of a fixed window is the time until the window resets,
// rounded up to whole seconds.
func TestFixedWindowRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(1, 5*time.Second)}))
		c := srv.Client()
		require.Equal(t, 200, get(t, c, srv.URL+"/").status)
		sleepUntil(start, 500*time.Millisecond)
		r := get(t, c, srv.URL+"/")
		require.Equal(t, 429, r.status)
		assert.Equal(t, "5", r.header.Get("Retry-After")) // 4.5 s, rounded up
		sleepUntil(start, 4999*time.Millisecond)
		assert.Equal(t, "1", get(t, c, srv.URL+"/").header.Get("Retry-After")) // 1 ms, at least 1
		sleepUntil(start, 5*time.Second)
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)
	})
}

// GCRA at 5/s with burst 2: two requests at the same instant, then one
// every 200 ms.
func TestTokenBucketBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: gcra(5, 2)}))
		c := srv.Client()
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)
		r := get(t, c, srv.URL+"/")
		assert.Equal(t, 429, r.status)
		assert.Equal(t, "1", r.header.Get("Retry-After")) // 200 ms, at least 1 s

		time.Sleep(10 * time.Millisecond)
		hammer(t, c, srv.URL+"/", start, 3*time.Second, 10*time.Millisecond, 1)

		st := srv.Stats("a.test")
		assert.Equal(t, ms(0, 0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800, 2000, 2200, 2400, 2600, 2800), st.Accepted)
		assert.Equal(t, []int{6, 5, 5}, st.PerSecond)
	})
}

// A slow bucket announces the time until its next token.
func TestTokenBucketRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: gcra(0.2, 1)})) // one per 5 s
		c := srv.Client()
		require.Equal(t, 200, get(t, c, srv.URL+"/").status)
		time.Sleep(time.Second)
		r := get(t, c, srv.URL+"/")
		require.Equal(t, 429, r.status)
		assert.Equal(t, "4", r.header.Get("Retry-After"))
		time.Sleep(4 * time.Second)
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)
	})
}

// With CountRejected, a client that keeps knocking stays locked out; one
// that waits the announced time gets in.
func TestCountRejected(t *testing.T) {
	for _, lim := range []testserver.Limit{
		{Kind: testserver.TokenBucket, Rate: 1, Burst: 1, CountRejected: true},
		{Kind: testserver.SlidingWindow, N: 1, Window: time.Second, CountRejected: true},
	} {
		t.Run(lim.Kind.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{Limit: lim}))
				c := srv.Client()
				hammer(t, c, srv.URL+"/", start, 5*time.Second, 500*time.Millisecond, 1)
				assert.Equal(t, 1, srv.Stats("a.test").ByStatus[200], "knocking every 500 ms")

				r := get(t, c, srv.URL+"/")
				require.Equal(t, 429, r.status)
				wait, err := strconv.Atoi(r.header.Get("Retry-After"))
				require.NoError(t, err)
				time.Sleep(time.Duration(wait) * time.Second)
				assert.Equal(t, 200, get(t, c, srv.URL+"/").status, "after waiting %ds", wait)
			})
		})
	}
}

// A sliding window of 3 per second never admits more than 3 in any second,
// whatever the alignment.
func TestSlidingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: sliding(3, time.Second)}))
		c := srv.Client()
		for _, at := range ms(0, 400, 800) {
			sleepUntil(start, at)
			require.Equal(t, 200, get(t, c, srv.URL+"/").status)
		}
		sleepUntil(start, 900*time.Millisecond)
		r := get(t, c, srv.URL+"/")
		require.Equal(t, 429, r.status)
		assert.Equal(t, "1", r.header.Get("Retry-After"))
		sleepUntil(start, time.Second) // the request at 0 leaves the window
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)
		sleepUntil(start, 1100*time.Millisecond)
		assert.Equal(t, 429, get(t, c, srv.URL+"/").status)
		sleepUntil(start, 1400*time.Millisecond)
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)

		hammer(t, c, srv.URL+"/", start, 4*time.Second, 10*time.Millisecond, 1)
		acc := srv.Stats("a.test").Accepted
		for i := 3; i < len(acc); i++ {
			assert.GreaterOrEqual(t, acc[i]-acc[i-3], time.Second, "4 admitted within 1 s: %v", acc[i-3:i+1])
		}
		assert.Equal(t, ms(0, 400, 800, 1000, 1400, 1800, 2000, 2400, 2800, 3000, 3400, 3800), acc)
	})
}

// A concurrency cap of 8: of 20 simultaneous requests, 8 are served and 12
// answered 503 at once.
func TestConcurrencyCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8},
			Latency: testserver.Latency{Base: time.Second},
		}))
		c := srv.Client()
		got := fetchAll(t, c, srv.URL+"/", 20)
		assert.Equal(t, map[int]int{200: 8, 503: 12}, got)
		assert.Equal(t, time.Second, time.Since(start))
		st := srv.Stats("a.test")
		assert.Equal(t, 8, st.MaxInFlight)
		assert.Len(t, st.Accepted, 8)

		r := fetchAll(t, c, srv.URL+"/", 8)
		assert.Equal(t, map[int]int{200: 8}, r, "the slots are free again")

		// The 503 announces a second.
		done := make(chan result)
		for range 8 {
			go func() { done <- fetch(c, srv.URL+"/") }()
		}
		synctest.Wait()
		r9 := get(t, c, srv.URL+"/")
		assert.Equal(t, 503, r9.status)
		assert.Equal(t, "1", r9.header.Get("Retry-After"))
		for range 8 {
			assert.Equal(t, 200, (<-done).status)
		}
	})
}

// The schedule switches capacity on time: 40/s, then 10/s from t=10s.
func TestSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:    fixed(40, time.Second),
			Schedule: []testserver.Step{{At: 10 * time.Second, Limit: fixed(10, time.Second)}},
		}))
		hammer(t, srv.Client(), srv.URL+"/", start, 20*time.Second, 10*time.Millisecond, 1)
		st := srv.Stats("a.test")
		assert.Equal(t, []int{40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, st.PerSecond)
		assert.Equal(t, 10*time.Second, st.Accepted[400], "the first request under the new limit")
	})
}

// Capacity rises as well as drops: 10/s, then 40/s from t=30s.
func TestScheduleRise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:    fixed(10, time.Second),
			Schedule: []testserver.Step{{At: 30 * time.Second, Limit: fixed(40, time.Second)}},
		}))
		hammer(t, srv.Client(), srv.URL+"/", start, 40*time.Second, 10*time.Millisecond, 1)
		st := srv.Stats("a.test")
		want := append(slices.Repeat([]int{10}, 30), slices.Repeat([]int{40}, 10)...)
		assert.Equal(t, want, st.PerSecond)
		assert.Equal(t, 30*time.Second, st.Accepted[300], "the first request under the new limit")
	})
}

// A schedule can lift and impose limits of different kinds.
func TestScheduleKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Schedule: []testserver.Step{
				{At: time.Second, Limit: gcra(2, 1)},
				{At: 2 * time.Second, Limit: testserver.Limit{}},
			},
		}))
		hammer(t, srv.Client(), srv.URL+"/", start, 3*time.Second, 100*time.Millisecond, 1)
		assert.Equal(t, []int{10, 2, 10}, srv.Stats("a.test").PerSecond)
	})
}
