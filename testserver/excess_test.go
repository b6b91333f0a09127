package testserver_test

import (
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

// Each Retry-After form appears as configured. The rejection comes at
// t=300ms into a 2 s window (1.7 s until capacity frees), or with a fixed
// announcement of 2.5 s.
func TestRetryAfterForms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		excess testserver.Excess
		status int
		check  func(t *testing.T, start time.Time, v string, present bool)
	}{
		{"seconds", testserver.Excess{}, 429, func(t *testing.T, _ time.Time, v string, _ bool) {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			assert.Equal(t, 2, n) // 1.7 s rounded up
		}},
		{"seconds fixed", testserver.Excess{FixedRetryAfter: 2500 * time.Millisecond}, 429, func(t *testing.T, _ time.Time, v string, _ bool) {
			assert.Equal(t, "3", v)
		}},
		{"http-date", testserver.Excess{RetryAfter: testserver.RetryAfterHTTPDate}, 429, func(t *testing.T, start time.Time, v string, _ bool) {
			at, err := http.ParseTime(v)
			require.NoError(t, err)
			assert.Equal(t, start.Add(2*time.Second).UTC(), at) // 0.3 + 1.7 s
			assert.Equal(t, v, at.Format(http.TimeFormat))
		}},
		{"http-date fixed", testserver.Excess{RetryAfter: testserver.RetryAfterHTTPDate, FixedRetryAfter: 2500 * time.Millisecond}, 429, func(t *testing.T, start time.Time, v string, _ bool) {
			at, err := http.ParseTime(v)
			require.NoError(t, err)
			assert.Equal(t, start.Add(3*time.Second).UTC(), at) // 0.3 + 2.5 s, rounded up
		}},
		{"zero", testserver.Excess{RetryAfter: testserver.RetryAfterZero}, 429, func(t *testing.T, _ time.Time, v string, _ bool) {
			assert.Equal(t, "0", v)
		}},
		{"garbage", testserver.Excess{RetryAfter: testserver.RetryAfterGarbage}, 429, func(t *testing.T, _ time.Time, v string, present bool) {
			assert.True(t, present)
			_, errInt := strconv.Atoi(v)
			_, errDate := http.ParseTime(v)
			assert.Error(t, errInt)
			assert.Error(t, errDate)
		}},
		{"none", testserver.Excess{RetryAfter: testserver.RetryAfterNone}, 429, func(t *testing.T, _ time.Time, _ string, present bool) {
			assert.False(t, present)
		}},
		{"503 with", testserver.Excess{Status: 503}, 503, func(t *testing.T, _ time.Time, v string, _ bool) {
			assert.Equal(t, "2", v)
		}},
		{"503 without", testserver.Excess{Status: 503, RetryAfter: testserver.RetryAfterNone}, 503, func(t *testing.T, _ time.Time, _ string, present bool) {
			assert.False(t, present)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(1, 2*time.Second), Excess: tc.excess}))
				c := srv.Client()
				require.Equal(t, 200, get(t, c, srv.URL+"/").status)
				sleepUntil(start, 300*time.Millisecond)
				r := get(t, c, srv.URL+"/")
				require.Equal(t, tc.status, r.status)
				v, present := r.header["Retry-After"]
				value := ""
				if present {
					require.Len(t, v, 1)
					value = v[0]
				}
				tc.check(t, start, value, present)
			})
		})
	}
}

// After 3 rejections within 2 s the host bans for 30 s: 403 with a block
// page for everything but robots.txt. Rejections spread wider do not ban.
func TestBan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit: fixed(1, 100*time.Second),
			Ban:   &testserver.Ban{After: 3, Within: 2 * time.Second, For: 30 * time.Second},
		}))
		c := srv.Client()
		url := srv.URL + "/"
		require.Equal(t, 200, get(t, c, url).status)
		for _, at := range ms(100, 1100, 2100) { // span 2 s: not within 2 s
			sleepUntil(start, at)
			require.Equal(t, 429, get(t, c, url).status)
		}
		assert.False(t, srv.Stats("a.test").Banned)
		sleepUntil(start, 2500*time.Millisecond) // 1100, 2100, 2500: 1.4 s
		assert.Equal(t, 429, get(t, c, url).status, "the third rejection is still a 429")
		st := srv.Stats("a.test")
		assert.True(t, st.Banned)
		assert.Equal(t, 1, st.BanCount)

		r := get(t, c, url)
		assert.Equal(t, 403, r.status)
		assert.Contains(t, r.body, "Access Denied")
		assert.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
		assert.Equal(t, 200, get(t, c, srv.URL+"/robots.txt").status, "robots.txt is never banned")
		for range 5 {
			assert.Equal(t, 403, get(t, c, url).status)
		}

		sleepUntil(start, 32499*time.Millisecond)
		assert.Equal(t, 403, get(t, c, url).status)
		assert.True(t, srv.Stats("a.test").Banned)
		sleepUntil(start, 32500*time.Millisecond)
		assert.False(t, srv.Stats("a.test").Banned)
		assert.Equal(t, 429, get(t, c, url).status, "ban over; the window is still full")
		st = srv.Stats("a.test")
		assert.Equal(t, 1, st.BanCount, "requests during the ban do not count towards the next")
		assert.Equal(t, map[int]int{200: 2, 403: 7, 429: 5}, st.ByStatus)
	})
}

// The pause-violation counter: a request during an announced pause counts,
// one after it does not; pauses that announce nothing never count. The
// probes are robots.txt requests, which count as violations but, unlike a
// rejected page request, do not announce a new pause.
func TestPauseViolations(t *testing.T) {
	for _, tc := range []struct {
		mode  testserver.RetryAfterMode
		count bool
		end   time.Duration // the deadline the client computes
	}{
		{testserver.RetryAfterSeconds, true, 5500 * time.Millisecond}, // 0.5 s + 5 s (4.5 s rounded up)
		{testserver.RetryAfterHTTPDate, true, 5 * time.Second},        // the date 0.5 s + 4.5 s
		{testserver.RetryAfterZero, false, 5 * time.Second},
		{testserver.RetryAfterGarbage, false, 5 * time.Second},
		{testserver.RetryAfterNone, false, 5 * time.Second},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:  fixed(1, 100*time.Second),
					Excess: testserver.Excess{RetryAfter: tc.mode, FixedRetryAfter: 4500 * time.Millisecond},
				}))
				c := srv.Client()
				page, probe := srv.URL+"/", srv.URL+"/robots.txt"
				violations := func() int { return srv.Stats("a.test").PauseViolations }
				want := 0
				if tc.count {
					want = 1
				}

				require.Equal(t, 200, get(t, c, page).status)
				sleepUntil(start, 500*time.Millisecond)
				require.Equal(t, 429, get(t, c, page).status)
				assert.Equal(t, 0, violations(), "the announcing request itself")
				sleepUntil(start, time.Second)
				get(t, c, probe)
				assert.Equal(t, want, violations(), "during the pause")
				sleepUntil(start, tc.end-time.Millisecond)
				get(t, c, probe)
				assert.Equal(t, 2*want, violations(), "just before the deadline")
				sleepUntil(start, tc.end)
				get(t, c, probe)
				assert.Equal(t, 2*want, violations(), "at the deadline")

				// A page request during a pause counts too, and announces
				// a pause of its own.
				require.Equal(t, 429, get(t, c, page).status)
				time.Sleep(time.Second)
				require.Equal(t, 429, get(t, c, page).status)
				assert.Equal(t, 3*want, violations(), "page request during the pause")
			})
		})
	}
}

// A request that arrives at the same instant as the announcement on another
// connection was sent before the client could know: not a violation.
// A later pause announcement extends the pause in force.
func TestPauseViolationsConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(1, 10*time.Second)}))
		c := srv.Client()
		assert.Equal(t, map[int]int{200: 1, 429: 9}, fetchAll(t, c, srv.URL+"/", 10))
		assert.Equal(t, 0, srv.Stats("a.test").PauseViolations)

		sleepUntil(start, 9*time.Second) // pause until 10 s
		assert.Equal(t, 429, get(t, c, srv.URL+"/").status)
		assert.Equal(t, 1, srv.Stats("a.test").PauseViolations)
		sleepUntil(start, 10*time.Second)
		assert.Equal(t, 200, get(t, c, srv.URL+"/").status)
		assert.Equal(t, 1, srv.Stats("a.test").PauseViolations)
	})
}

var (
	reLimit  = regexp.MustCompile(`^"default";r=(\d+);t=(\d+)$`)
	rePolicy = regexp.MustCompile(`^"default";q=(\d+);w=(\d+)$`)
)

type quota struct{ q, w, r, t int }

// parseQuota reads both header families and checks that they agree.
func parseQuota(t *testing.T, h http.Header) quota {
	t.Helper()
	m := reLimit.FindStringSubmatch(h.Get("RateLimit"))
	require.NotNil(t, m, "RateLimit: %q", h.Get("RateLimit"))
	p := rePolicy.FindStringSubmatch(h.Get("RateLimit-Policy"))
	require.NotNil(t, p, "RateLimit-Policy: %q", h.Get("RateLimit-Policy"))
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	q := quota{q: atoi(p[1]), w: atoi(p[2]), r: atoi(m[1]), t: atoi(m[2])}
	assert.Equal(t, p[1], h.Get("X-RateLimit-Limit"))
	assert.Equal(t, m[1], h.Get("X-RateLimit-Remaining"))
	assert.Equal(t, m[2], h.Get("X-RateLimit-Reset"))
	assert.LessOrEqual(t, q.r, q.q)
	return q
}

// Quota headers are present on every response and consistent with the
// limit and with what was admitted.
func TestQuotaHeaders(t *testing.T) {
	t.Run("FixedWindow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			srv := testserver.NewTest(t, one(testserver.Policy{
				Limit:  fixed(5, 10*time.Second),
				Excess: testserver.Excess{QuotaHeaders: true},
			}))
			c := srv.Client()
			for i := range 5 {
				r := get(t, c, srv.URL+"/")
				require.Equal(t, 200, r.status)
				assert.Equal(t, quota{q: 5, w: 10, r: 4 - i, t: 10}, parseQuota(t, r.header))
			}
			sleepUntil(start, 2500*time.Millisecond)
			r := get(t, c, srv.URL+"/")
			require.Equal(t, 429, r.status)
			assert.Equal(t, quota{q: 5, w: 10, r: 0, t: 8}, parseQuota(t, r.header))
			assert.Equal(t, r.header.Get("Retry-After"), r.header.Get("X-RateLimit-Reset"))
			r = get(t, c, srv.URL+"/robots.txt")
			assert.Equal(t, quota{q: 5, w: 10, r: 0, t: 8}, parseQuota(t, r.header), "robots.txt too")
			sleepUntil(start, 10*time.Second)
			assert.Equal(t, quota{q: 5, w: 10, r: 4, t: 10}, parseQuota(t, get(t, c, srv.URL+"/").header))
		})
	})
	t.Run("TokenBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, one(testserver.Policy{
				Limit:  gcra(2, 4), // 4 at once, then one per 500 ms
				Excess: testserver.Excess{QuotaHeaders: true},
			}))
			c := srv.Client()
			for i := range 4 {
				r := get(t, c, srv.URL+"/")
				require.Equal(t, 200, r.status)
				assert.Equal(t, quota{q: 4, w: 2, r: 3 - i, t: 1 + i/2}, parseQuota(t, r.header), "request %d", i)
			}
			r := get(t, c, srv.URL+"/")
			require.Equal(t, 429, r.status)
			assert.Equal(t, quota{q: 4, w: 2, r: 0, t: 2}, parseQuota(t, r.header))
			time.Sleep(time.Second)
			// Two tokens back after 1 s; admitting one leaves one, and the
			// bucket 1.5 s from full.
			assert.Equal(t, quota{q: 4, w: 2, r: 1, t: 2}, parseQuota(t, get(t, c, srv.URL+"/").header))
		})
	})
	t.Run("SlidingWindow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			srv := testserver.NewTest(t, one(testserver.Policy{
				Limit:  sliding(3, 4*time.Second),
				Excess: testserver.Excess{QuotaHeaders: true},
			}))
			c := srv.Client()
			assert.Equal(t, quota{q: 3, w: 4, r: 2, t: 4}, parseQuota(t, get(t, c, srv.URL+"/").header))
			sleepUntil(start, time.Second)
			assert.Equal(t, quota{q: 3, w: 4, r: 1, t: 3}, parseQuota(t, get(t, c, srv.URL+"/").header))
			assert.Equal(t, quota{q: 3, w: 4, r: 0, t: 3}, parseQuota(t, get(t, c, srv.URL+"/").header))
			r := get(t, c, srv.URL+"/")
			assert.Equal(t, 429, r.status)
			assert.Equal(t, quota{q: 3, w: 4, r: 0, t: 3}, parseQuota(t, r.header))
			sleepUntil(start, 4*time.Second)
			assert.Equal(t, quota{q: 3, w: 4, r: 0, t: 1}, parseQuota(t, get(t, c, srv.URL+"/").header))
		})
	})
	t.Run("policy states the sustained capacity", func(t *testing.T) {
		for _, tc := range []struct {
			lim  testserver.Limit
			q, w int
		}{
			{gcra(5, 2), 5, 1},   // 5/s; burst 2 refills in 400 ms
			{gcra(0.2, 1), 1, 5}, // one per 5 s
			{gcra(2, 4), 4, 2},   // the burst refills in 2 s
			{gcra(100, 10), 100, 1},
			{fixed(5, 500*time.Millisecond), 10, 1},
			{sliding(3, 2500*time.Millisecond), 3, 3}, // 3.6 per 3 s, rounded down
			{fixed(30, time.Minute), 30, 60},
		} {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, one(testserver.Policy{Limit: tc.lim, Excess: testserver.Excess{QuotaHeaders: true}}))
				got := parseQuota(t, get(t, srv.Client(), srv.URL+"/").header)
				assert.Equal(t, []int{tc.q, tc.w}, []int{got.q, got.w}, "%+v", tc.lim)
			})
		}
	})
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
				"a.test": {Limit: fixed(5, time.Second)},
				"b.test": {Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 1}, Excess: testserver.Excess{QuotaHeaders: true}},
			}})
			for _, host := range srv.Hosts() {
				h := get(t, srv.Client(), srv.HostURL(host)+"/").header
				for _, k := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
					assert.Empty(t, h.Values(k), "%s: %s", host, k)
				}
			}
		})
	})
}

// latencies sends n requests at once and returns how long each took, sorted.
func latencies(t *testing.T, c *http.Client, url string, n int) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	var got []time.Duration
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start := time.Now()
			r := fetch(c, url)
			assert.NoError(t, r.err)
			assert.Equal(t, 200, r.status)
			mu.Lock()
			got = append(got, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	return got
}

func TestLatency(t *testing.T) {
	t.Run("fixed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, one(testserver.Policy{Latency: testserver.Latency{Base: 350 * time.Millisecond}}))
			assert.Equal(t, ms(350, 350, 350), latencies(t, srv.Client(), srv.URL+"/", 3))
		})
	})
	t.Run("jitter", func(t *testing.T) {
		run := func(seed int64) []time.Duration {
			var got []time.Duration
			synctest.Test(t, func(t *testing.T) {
				cfg := one(testserver.Policy{Latency: testserver.Latency{Base: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}})
				cfg.Seed = seed
				srv := testserver.NewTest(t, cfg)
				c := srv.Client()
				for range 100 {
					start := time.Now()
					require.Equal(t, 200, get(t, c, srv.URL+"/").status)
					got = append(got, time.Since(start))
				}
			})
			return got
		}
		a, b, other := run(1), run(1), run(2)
		assert.Equal(t, a, b, "same seed, same delays")
		assert.NotEqual(t, a, other, "another seed, other delays")
		distinct := map[time.Duration]bool{}
		for _, d := range a {
			assert.GreaterOrEqual(t, d, 100*time.Millisecond)
			assert.Less(t, d, 150*time.Millisecond)
			distinct[d] = true
		}
		assert.Greater(t, len(distinct), 50)
	})
	t.Run("per in-flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, one(testserver.Policy{Latency: testserver.Latency{Base: 100 * time.Millisecond, PerInFlight: 10 * time.Millisecond}}))
			c := srv.Client()
			assert.Equal(t, ms(100), latencies(t, c, srv.URL+"/", 1))
			assert.Equal(t, ms(100, 110, 120, 130, 140), latencies(t, c, srv.URL+"/", 5))
			assert.Equal(t, 5, srv.Stats("a.test").MaxInFlight)
		})
	})
	t.Run("rejections are immediate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(1, time.Second), Latency: testserver.Latency{Base: time.Hour}}))
			c := srv.Client()
			go fetch(c, srv.URL+"/") // served in an hour; Close ends it
			synctest.Wait()
			assert.Equal(t, 429, get(t, c, srv.URL+"/").status)
			assert.Equal(t, 200, get(t, c, srv.URL+"/robots.txt").status)
			assert.Equal(t, time.Duration(0), time.Since(start))
		})
	})
}
