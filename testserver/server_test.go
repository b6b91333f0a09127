package testserver_test

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/temoto/robotstxt"

	"github.com/colly-polite/polite/testserver"
)

// A 10-minute scenario on four hosts runs in virtual time: the assertions
// are on exact counts, which only virtual time makes possible.
func TestTenMinutesVirtual(t *testing.T) {
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		const d = 10 * time.Minute
		start := time.Now()
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixed(3, time.Second)},
			"b.test": {Limit: gcra(1, 2)},
			"c.test": {Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 2}, Latency: testserver.Latency{Base: 2 * time.Second}},
			"d.test": {Limit: fixed(1, 10*time.Second)},
		}})
		c := srv.Client()
		done := make(chan struct{})
		worker := func(host string, next func(r result) time.Duration) {
			defer func() { done <- struct{}{} }()
			for time.Since(start) < d {
				r := fetch(c, srv.HostURL(host)+"/")
				if !assert.NoError(t, r.err) {
					return
				}
				time.Sleep(next(r))
			}
		}
		every := func(p time.Duration) func(result) time.Duration {
			return func(result) time.Duration { return p }
		}
		// a: 2/s under a limit of 3/s.
		go worker("a.test", every(500*time.Millisecond))
		// b: polite, 2/s but honouring Retry-After.
		go worker("b.test", func(r result) time.Duration {
			if r.status == 429 {
				s, _ := time.ParseDuration(r.header.Get("Retry-After") + "s")
				return s
			}
			return 500 * time.Millisecond
		})
		// c: 2 sequential workers against a cap of 2, 2 s each.
		for range 2 {
			go worker("c.test", every(0))
		}
		// d: ignores Retry-After, polls every second.
		go worker("d.test", every(time.Second))
		for range 5 {
			<-done
		}

		a := srv.Stats("a.test")
		assert.Equal(t, map[int]int{200: 1200}, a.ByStatus)
		assert.Len(t, a.PerSecond, 600)
		for i, n := range a.PerSecond {
			require.Equal(t, 2, n, "second %d", i)
		}
		b := srv.Stats("b.test")
		assert.Equal(t, map[int]int{200: 601, 429: 300}, b.ByStatus)
		assert.Equal(t, 0, b.PauseViolations)
		cs := srv.Stats("c.test")
		assert.Equal(t, map[int]int{200: 600}, cs.ByStatus)
		assert.Equal(t, 2, cs.MaxInFlight)
		ds := srv.Stats("d.test")
		assert.Equal(t, map[int]int{200: 60, 429: 540}, ds.ByStatus)
		assert.Equal(t, 480, ds.PauseViolations, "8 of the 9 polls after each 429")
	})
	t.Logf("10 virtual minutes in %v of real time", time.Since(wall))
}

// The crawler of Example, tested in virtual time as a user would: exact
// counts and exact times, instantly.
func TestPoliteCrawlerVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(10, time.Second)}))
		fetched, throttled := politeFetch(srv.Client(), srv.URL, 20)
		assert.Equal(t, 20, fetched)
		assert.Equal(t, 1, throttled)
		assert.Equal(t, time.Second, time.Since(start), "one announced second of waiting")
		st := srv.Stats("a.test")
		assert.Equal(t, 0, st.PauseViolations)
		assert.Equal(t, []int{10, 10}, st.PerSecond)
	})
}

func TestConfigErrors(t *testing.T) {
	host := func(p testserver.Policy) testserver.Config { return one(p) }
	for _, tc := range []struct {
		name string
		cfg  testserver.Config
		want string
	}{
		{"negative rate", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: -1, Burst: 1}}), "Rate"},
		{"NaN rate", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: math.NaN(), Burst: 1}}), "Rate"},
		{"zero rate", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Burst: 1}}), "Rate > 0"},
		{"burst 0", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: 5}}), "Burst >= 1"},
		{"zero window", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 30}}), "Window > 0"},
		{"negative window", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.SlidingWindow, N: 30, Window: -time.Second}}), "negative Window"},
		{"zero N", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.FixedWindow, Window: time.Second}}), "N >= 1"},
		{"huge sliding N", host(testserver.Policy{Limit: sliding(1<<21, time.Second)}), "SlidingWindow N"},
		{"unknown kind", host(testserver.Policy{Limit: testserver.Limit{Kind: 42}}), "unknown LimitKind 42"},
		{"kind after WorkerPool", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.WorkerPool + 1}}), "unknown LimitKind 6"},
		{"fields without kind", host(testserver.Policy{Limit: testserver.Limit{N: 30, Window: time.Second}}), "Kind is None"},
		{"concurrency 0", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.Concurrency}}), "MaxConcurrent >= 1"},
		{"negative latency", host(testserver.Policy{Latency: testserver.Latency{Base: -time.Millisecond}}), "Latency"},
		{"negative jitter", host(testserver.Policy{Latency: testserver.Latency{Jitter: -time.Millisecond}}), "Latency.Jitter"},
		{"negative RTT", host(testserver.Policy{Latency: testserver.Latency{RTT: -time.Millisecond}}), `host "a.test": Latency.RTT: negative -1ms`},
		{"negative per in-flight", host(testserver.Policy{Latency: testserver.Latency{PerInFlight: -1}}), "Latency.PerInFlight"},
		{"pool without workers", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.WorkerPool}}), "Limit: WorkerPool needs MaxConcurrent >= 1"},
		{"pool with negative queue", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 2, Queue: -1}}), "Limit: negative Queue -1"},
		{"negative queue of another kind", host(testserver.Policy{Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 2, Queue: -1}}), "negative Queue"},
		{"queue without kind", host(testserver.Policy{Limit: testserver.Limit{Queue: 5}}), "Kind is None"},
		{"scheduled pool without workers", host(testserver.Policy{Schedule: []testserver.Step{{At: time.Second, Limit: testserver.Limit{Kind: testserver.WorkerPool, Queue: 1}}}}), "Schedule[0].Limit: WorkerPool needs MaxConcurrent"},
		{"ban after 0", host(testserver.Policy{Ban: &testserver.Ban{}}), "Ban.After"},
		{"ban negative for", host(testserver.Policy{Ban: &testserver.Ban{After: 1, For: -1}}), "Ban"},
		{"excess status", host(testserver.Policy{Excess: testserver.Excess{Status: 99}}), "Excess.Status"},
		{"retry-after mode", host(testserver.Policy{Excess: testserver.Excess{RetryAfter: 9}}), "RetryAfterMode 9"},
		{"negative fixed retry-after", host(testserver.Policy{Excess: testserver.Excess{FixedRetryAfter: -time.Second}}), "FixedRetryAfter"},
		{"schedule order", host(testserver.Policy{Schedule: []testserver.Step{{At: 2 * time.Second}, {At: time.Second}}}), "Schedule[1]"},
		{"schedule negative", host(testserver.Policy{Schedule: []testserver.Step{{At: -time.Second}}}), "Schedule[0]"},
		{"schedule bad limit", host(testserver.Policy{Schedule: []testserver.Step{{At: time.Second, Limit: testserver.Limit{Kind: testserver.TokenBucket}}}}), "Schedule[0].Limit"},
		{"negative pages", host(testserver.Policy{Site: testserver.Site{Pages: -1}}), "Site"},
		{"robots status", host(testserver.Policy{Robots: testserver.Robots{Status: 600}}), "Robots.Status"},
		{"robots crawl-delay", host(testserver.Policy{Robots: testserver.Robots{CrawlDelay: -time.Second}}), "Robots"},
		{"robots disallow newline", host(testserver.Policy{Robots: testserver.Robots{Disallow: []string{"/a\nAllow: /"}}}), "line break"},
		{"host with port", testserver.Config{Hosts: map[string]testserver.Policy{"a.test:80": {}}}, "bad host name"},
		{"upper-case host", testserver.Config{Hosts: map[string]testserver.Policy{"A.test": {}}}, "bad host name"},
		{"empty host", testserver.Config{Hosts: map[string]testserver.Policy{"": {}}}, "empty host name"},
		{"unknown network", testserver.Config{Network: 7}, "unknown Network 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := testserver.New(tc.cfg)
			require.Error(t, err)
			assert.Nil(t, srv)
			assert.ErrorIs(t, err, testserver.ErrConfig)
			assert.True(t, strings.HasPrefix(err.Error(), "testserver: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// fakeTB records a Fatal instead of stopping the test.
type fakeTB struct {
	testing.TB
	fatal    string
	cleanups int
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatal(args ...any)     { f.fatal = fmt.Sprint(args...) }
func (f *fakeTB) Cleanup(fn func())     { f.cleanups++; fn() }
func (f *fakeTB) Fatalf(string, ...any) { panic("unused") }

func TestNewTestFailsOnBadConfig(t *testing.T) {
	tb := &fakeTB{TB: t}
	srv := testserver.NewTest(tb, one(testserver.Policy{Limit: testserver.Limit{Kind: testserver.FixedWindow}}))
	assert.Nil(t, srv)
	assert.Contains(t, tb.fatal, "testserver: invalid configuration")
	assert.Zero(t, tb.cleanups)
}

func TestHostsAndRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"b.test": {Limit: fixed(1, time.Hour)},
			"a.test": {},
		}})
		assert.Equal(t, []string{"a.test", "b.test"}, srv.Hosts())
		assert.Equal(t, "http://a.test", srv.URL)
		assert.Equal(t, "http://b.test", srv.HostURL("b.test"))
		assert.Equal(t, "", srv.HostURL("c.test"))
		c := srv.Client()
		for range 3 {
			assert.Equal(t, 200, get(t, c, "http://a.test/").status)
		}
		assert.Equal(t, 200, get(t, c, "http://b.test/").status)
		assert.Equal(t, 429, get(t, c, "http://b.test/").status)

		// The Host header routes, port and case folded.
		req, err := http.NewRequest("GET", "http://a.test/", nil)
		require.NoError(t, err)
		req.Host = "B.Test:80"
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode)
		// An unknown Host header: 421, counted nowhere.
		req.Host = "c.test"
		resp, err = c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
		// An unknown host name does not resolve.
		_, err = c.Get("http://c.test/")
		var dnsErr *net.DNSError
		require.ErrorAs(t, err, &dnsErr)
		assert.True(t, dnsErr.IsNotFound)

		assert.Equal(t, map[int]int{200: 3}, srv.Stats("a.test").ByStatus)
		assert.Equal(t, map[int]int{200: 1, 429: 2}, srv.Stats("b.test").ByStatus)
		assert.Equal(t, testserver.Stats{}, srv.Stats("c.test"))
	})
}

// Close does not hang with requests in flight: sleeping handlers wake, the
// clients get errors, and nothing is left running (synctest would report
// it).
func TestCloseWithRequestsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv, err := testserver.New(testserver.Config{
			Network: testserver.Memory,
			Hosts:   map[string]testserver.Policy{"a.test": {Latency: testserver.Latency{Base: time.Hour}}},
		})
		require.NoError(t, err)
		c := srv.Client()
		errs := make(chan error, 3)
		for range 3 {
			go func() { errs <- fetch(c, srv.URL+"/").err }()
		}
		synctest.Wait()
		srv.Close()
		for range 3 {
			assert.Error(t, <-errs)
		}
		srv.Close() // idempotent
		assert.Equal(t, time.Duration(0), time.Since(start))
		_, err = c.Get(srv.URL + "/")
		assert.ErrorIs(t, err, testserver.ErrClosed)
		assert.Equal(t, 3, srv.Stats("a.test").Requests)
	})
}

// Loopback: one real listener per host, reachable by its address and, through
// Client, by its name. No waiting: it runs in real time.
func TestLoopback(t *testing.T) {
	srv, err := testserver.New(testserver.Config{Hosts: map[string]testserver.Policy{
		"a.test": {},
		"b.test": {Limit: fixed(2, time.Hour)},
	}})
	require.NoError(t, err)
	defer srv.Close()
	assert.Regexp(t, regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`), srv.URL)
	assert.Equal(t, srv.HostURL("a.test"), srv.URL)
	assert.NotEqual(t, srv.HostURL("a.test"), srv.HostURL("b.test"))
	c := srv.Client()
	assert.Equal(t, 200, get(t, c, srv.HostURL("b.test")+"/").status)
	assert.Equal(t, 200, get(t, c, "http://b.test/page/3").status)
	assert.Equal(t, 429, get(t, c, srv.HostURL("b.test")+"/").status)
	r := get(t, http.DefaultClient, srv.HostURL("a.test")+"/robots.txt")
	assert.Equal(t, 200, r.status, "a plain client reaches it too")
	assert.Equal(t, map[int]int{200: 2, 429: 1}, srv.Stats("b.test").ByStatus)
	assert.Equal(t, 1, srv.Stats("a.test").Robots)
	http.DefaultClient.CloseIdleConnections()
}

func TestSite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Site: testserver.Site{Pages: 50, FanOut: 3}}))
		c := srv.Client()
		link := regexp.MustCompile(`href="(/page/\d+)"`)

		index := get(t, c, srv.URL+"/")
		assert.Equal(t, "text/html; charset=utf-8", index.header.Get("Content-Type"))
		var queue []string
		for _, m := range link.FindAllStringSubmatch(index.body, -1) {
			queue = append(queue, m[1])
		}
		assert.Equal(t, []string{"/page/0", "/page/1", "/page/2"}, queue)
		seen := map[string]bool{}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			r := get(t, c, srv.URL+p)
			require.Equal(t, 200, r.status, p)
			links := link.FindAllStringSubmatch(r.body, -1)
			require.Len(t, links, 3, p)
			for _, m := range links {
				queue = append(queue, m[1])
			}
		}
		assert.Len(t, seen, 50, "a crawl from / reaches every page")
		assert.Equal(t, get(t, c, srv.URL+"/page/7").body, get(t, c, srv.URL+"/page/7").body, "deterministic")

		for _, p := range []string{"/page/50", "/page/01", "/page/-1", "/page/", "/nope"} {
			assert.Equal(t, 404, get(t, c, srv.URL+p).status, p)
		}
		st := srv.Stats("a.test")
		assert.Equal(t, 5, st.ByStatus[404])
		assert.Len(t, st.Accepted, 1+50+2+5, "404s were admitted by the limit too")
	})
}

func TestRobots(t *testing.T) {
	for _, tc := range []struct {
		name   string
		robots testserver.Robots
		status int
		check  func(t *testing.T, r result)
	}{
		{"default allows all", testserver.Robots{}, 200, func(t *testing.T, r result) {
			assert.Equal(t, "User-agent: *\nDisallow:\n", r.body)
		}},
		{"crawl-delay and disallow", testserver.Robots{CrawlDelay: 1500 * time.Millisecond, Disallow: []string{"/private", "/page/3"}}, 200, func(t *testing.T, r result) {
			assert.Equal(t, "User-agent: *\nCrawl-delay: 1.5\nDisallow: /private\nDisallow: /page/3\n", r.body)
			data, err := robotstxt.FromStatusAndString(r.status, r.body)
			require.NoError(t, err)
			g := data.FindGroup("polite-bot")
			assert.Equal(t, 1500*time.Millisecond, g.CrawlDelay)
			assert.False(t, g.Test("/private/x"))
			assert.False(t, g.Test("/page/3"))
			assert.True(t, g.Test("/page/4"))
		}},
		{"whole-second crawl-delay", testserver.Robots{CrawlDelay: 5 * time.Second}, 200, func(t *testing.T, r result) {
			assert.Contains(t, r.body, "Crawl-delay: 5\n")
		}},
		{"verbatim body", testserver.Robots{Body: "User-agent: *\nDisallow: /\n"}, 200, func(t *testing.T, r result) {
			assert.Equal(t, "User-agent: *\nDisallow: /\n", r.body)
		}},
		{"404", testserver.Robots{Status: 404}, 404, nil},
		{"500", testserver.Robots{Status: 500}, 500, nil},
		{"503 with Retry-After", testserver.Robots{Status: 503, RetryAfter: 30 * time.Second}, 503, func(t *testing.T, r result) {
			assert.Equal(t, "30", r.header.Get("Retry-After"))
		}},
		{"429", testserver.Robots{Status: 429}, 429, func(t *testing.T, r result) {
			assert.Empty(t, r.header.Values("Retry-After"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, one(testserver.Policy{Limit: fixed(1, time.Hour), Robots: tc.robots}))
				c := srv.Client()
				var r result
				for range 3 {
					r = get(t, c, srv.URL+"/robots.txt")
					require.Equal(t, tc.status, r.status)
				}
				assert.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
				if tc.check != nil {
					tc.check(t, r)
				}
				assert.Equal(t, 200, get(t, c, srv.URL+"/").status, "robots.txt does not count against the limit")
				st := srv.Stats("a.test")
				assert.Equal(t, 3, st.Robots)
				assert.Equal(t, 4, st.Requests)
				want := map[int]int{tc.status: 3}
				want[200]++ // the page
				assert.Equal(t, want, st.ByStatus)
				assert.Len(t, st.Accepted, 1)
			})
		})
	}
}

// 10,000 hosts in memory: a map lookup per request, state allocated on use.
func TestManyHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := testserver.HostNames(10000)
		hosts := make(map[string]testserver.Policy, len(names))
		for _, n := range names {
			hosts[n] = testserver.Policy{Limit: fixed(1, time.Second)}
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := srv.Client()
		for i := 0; i < len(names); i += 997 {
			assert.Equal(t, 200, get(t, c, srv.HostURL(names[i])+"/").status)
			assert.Equal(t, 429, get(t, c, srv.HostURL(names[i])+"/").status)
		}
		assert.Equal(t, 2, srv.Stats(names[997]).Requests)
		assert.Equal(t, 0, srv.Stats(names[998]).Requests)
		c.CloseIdleConnections()
	})
}

func TestHostNames(t *testing.T) {
	assert.Empty(t, testserver.HostNames(0))
	n := testserver.HostNames(703)
	assert.Equal(t, []string{"a.test", "b.test"}, n[:2])
	assert.Equal(t, "z.test", n[25])
	assert.Equal(t, "aa.test", n[26])
	assert.Equal(t, "zz.test", n[701])
	assert.Equal(t, "aaa.test", n[702])
	seen := map[string]bool{}
	for _, h := range n {
		assert.False(t, seen[h], h)
		seen[h] = true
	}
}

func TestStringers(t *testing.T) {
	assert.Equal(t, "TokenBucket", testserver.TokenBucket.String())
	assert.Equal(t, "LimitKind(9)", testserver.LimitKind(9).String())
	assert.Equal(t, "WorkerPool", testserver.WorkerPool.String())
	assert.Equal(t, testserver.LimitKind(4), testserver.Concurrency, "existing values keep their numbers")
	assert.Equal(t, "RetryAfterHTTPDate", testserver.RetryAfterHTTPDate.String())
	assert.Equal(t, "Memory", testserver.Memory.String())
	assert.True(t, errors.Is(fmt.Errorf("x: %w", testserver.ErrClosed), testserver.ErrClosed))
}

// Each Transport is a collector's own: a setter that changes the one it
// is given (Colly's SetProxyFunc sets its Proxy) leaves the others as they
// were, and each reaches the server.
func TestTransportsAreEachTheirOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{}))
		a, b := srv.Transport(), srv.Transport()
		require.NotSame(t, a, b)
		a.Proxy = http.ProxyURL(nil)
		assert.Nil(t, b.Proxy, "the other transport is left as it was")
		for _, tr := range []*http.Transport{a, b} {
			assert.Equal(t, 200, get(t, &http.Client{Transport: tr}, srv.URL+"/").status)
		}
	})
}
