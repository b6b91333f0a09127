package testserver_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

// noFollow returns a client of srv that hands back redirects instead of
// following them.
func noFollow(srv *testserver.Server) *http.Client {
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

func TestRedirectTo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}, "b.test": {}}})
		c := noFollow(srv)
		for _, tc := range []struct {
			query    string
			location string // "" means 400
		}{
			{"to=http://b.test/page/3", "http://b.test/page/3"},
			{"to=https%3A%2F%2Fexample.com%2Fa%3Fb%3Dc%26d%3De", "https://example.com/a?b=c&d=e"},
			{"to=HTTP://b.test/", "HTTP://b.test/"},
			{"to=http://a.test/redirect/loop&other=1", "http://a.test/redirect/loop"},
			{"", ""},
			{"to=", ""},
			{"to=ftp://b.test/x", ""},
			{"to=/page/1", ""},
			{"to=//b.test/page/1", ""},
			{"to=javascript:alert(1)", ""},
			{"to=http://", ""},
			{"to=http:b.test", ""},
			{"to=http%3A%2F%2Fb.test%2F%0D%0ASet-Cookie:%20x=1", ""},
			{"to=http://b.test/%2525zz", "http://b.test/%25zz"},
			{"to=http://b.test/%zz", ""},
			{"to=http://a.test/&to=http://b.test/", ""},
			{"%zz", ""},
		} {
			r := get(t, c, srv.URL+"/redirect?"+tc.query)
			if tc.location == "" {
				assert.Equal(t, 400, r.status, tc.query)
				assert.Empty(t, r.header.Values("Location"), tc.query)
				assert.True(t, strings.HasPrefix(r.body, "400 bad request: testserver: "), r.body)
				continue
			}
			assert.Equal(t, 302, r.status, tc.query)
			assert.Equal(t, []string{tc.location}, r.header.Values("Location"), tc.query)
		}
		// Followed, it lands on the target.
		resp, err := srv.Client().Get(srv.URL + "/redirect?to=http://b.test/page/3")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "http://b.test/page/3", resp.Request.URL.String())

		st := srv.Stats("a.test")
		assert.Equal(t, map[int]int{302: 6, 400: 12}, st.ByStatus)
		assert.Len(t, st.Accepted, 18, "redirects and 400s were admitted by the limit")
		assert.Empty(t, st.Rejected)
		assert.Equal(t, map[int]int{200: 1}, srv.Stats("b.test").ByStatus)
	})
}

func TestRedirectLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{})
		r := get(t, noFollow(srv), srv.URL+"/redirect/loop?x=1")
		assert.Equal(t, 302, r.status)
		assert.Equal(t, []string{"/redirect/loop"}, r.header.Values("Location"))

		_, err := srv.Client().Get(srv.URL + "/redirect/loop")
		require.ErrorContains(t, err, "stopped after 10 redirects")
		st := srv.Stats("a.test")
		assert.Equal(t, 11, st.Requests, "1 above, then the first 10 of the loop")
		assert.Equal(t, map[int]int{302: 11}, st.ByStatus)
	})
}

// chain follows redirects by hand from url and returns every URL requested
// and the final status.
func chain(t *testing.T, c *http.Client, url string) ([]string, int) {
	t.Helper()
	urls := []string{url}
	for range 50 {
		r := get(t, c, url)
		if r.status != 302 {
			return urls, r.status
		}
		url = r.header.Get("Location")
		urls = append(urls, url)
	}
	t.Fatalf("more than 50 redirects from %s", urls[0])
	return nil, 0
}

func TestRedirectHop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{"a.test": {}, "b.test": {}, "c.test": {}}})
		c := noFollow(srv)
		for _, tc := range []struct {
			start string
			want  []string
		}{
			{"http://a.test/redirect/hop?n=3&hosts=a.test,b.test", []string{
				"http://b.test/redirect/hop?n=2&hosts=a.test,b.test",
				"http://a.test/redirect/hop?n=1&hosts=a.test,b.test",
				"http://b.test/page/1",
			}},
			// From a host not listed, the first hop goes to the first listed.
			{"http://c.test/redirect/hop?n=2&hosts=a.test,b.test", []string{
				"http://a.test/redirect/hop?n=1&hosts=a.test,b.test",
				"http://b.test/page/1",
			}},
			{"http://a.test/redirect/hop?hosts=b.test,a.test&n=1", []string{"http://b.test/page/1"}},
			{"http://a.test/redirect/hop?n=3&hosts=c.test,a.test,b.test", []string{
				"http://b.test/redirect/hop?n=2&hosts=c.test,a.test,b.test",
				"http://c.test/redirect/hop?n=1&hosts=c.test,a.test,b.test",
				"http://a.test/page/1",
			}},
			// Without hosts, the chain stays on the answering host.
			{"http://b.test/redirect/hop?n=2", []string{
				"http://b.test/redirect/hop?n=1&hosts=b.test",
				"http://b.test/page/1",
			}},
			{"http://a.test/redirect/hop?n=1&hosts=b.test&utm=x", []string{"http://b.test/page/1"}},
		} {
			urls, status := chain(t, c, tc.start)
			assert.Equal(t, append([]string{tc.start}, tc.want...), urls)
			assert.Equal(t, 200, status, tc.start)
		}
		assert.Equal(t, map[int]int{302: 6, 200: 1}, srv.Stats("a.test").ByStatus)
		assert.Equal(t, map[int]int{302: 4, 200: 5}, srv.Stats("b.test").ByStatus)
		assert.Equal(t, map[int]int{302: 2}, srv.Stats("c.test").ByStatus)

		urls, status := chain(t, c, "http://c.test/redirect/hop?n=25")
		assert.Equal(t, 200, status)
		assert.Len(t, urls, 1+25, "longer than clients follow by default")
		r := get(t, c, "http://a.test/redirect/hop?n=1000&hosts=a.test")
		assert.Equal(t, "http://a.test/redirect/hop?n=999&hosts=a.test", r.header.Get("Location"))

		for _, q := range []string{
			"", "n=", "n=0", "n=-1", "n=abc", "n=1.5", "n=1001", "n=1&n=2",
			"n=1&hosts=", "n=1&hosts=z.test", "n=1&hosts=A.test", "n=1&hosts=a.test,",
			"n=1&hosts=a.test,a.test", "n=1&hosts=a.test&hosts=b.test",
			"n=1&hosts=a.test,b.test,c.test,d.test", "n=1;hosts=a.test", "%zz",
		} {
			r = get(t, c, "http://a.test/redirect/hop?"+q)
			assert.Equal(t, 400, r.status, q)
			assert.Empty(t, r.header.Values("Location"), q)
		}

		// Followed, it lands on the last host's page 1.
		resp, err := srv.Client().Get("http://a.test/redirect/hop?n=3&hosts=a.test,b.test")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "http://b.test/page/1", resp.Request.URL.String())
	})
}

// Redirects count against the limit, wait for their latency and can be
// rejected or banned like pages; Accepted and Rejected account for every
// request but robots.txt.
func TestRedirectsCountAgainstLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:   fixed(3, time.Second),
			Latency: testserver.Latency{Base: 100 * time.Millisecond},
			Ban:     &testserver.Ban{After: 2},
		}))
		c := srv.Client()
		// Three redirects at 0, 100 and 200 ms fill the window; the page
		// they lead to, at 300 ms, is rejected at once.
		resp, err := c.Get(srv.URL + "/redirect/hop?n=3")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode)
		assert.Equal(t, srv.URL+"/page/1", resp.Request.URL.String())
		assert.Equal(t, 300*time.Millisecond, time.Since(start))

		sleepUntil(start, time.Second)
		assert.Equal(t, 200, get(t, c, srv.URL+"/robots.txt").status, "never counted")
		assert.Equal(t, 302, get(t, noFollow(srv), srv.URL+"/redirect/loop").status) // at 1000 ms
		assert.Equal(t, 400, get(t, c, srv.URL+"/redirect?to=nowhere").status)       // at 1100 ms
		assert.Equal(t, 404, get(t, c, srv.URL+"/redirect/").status)                 // at 1200 ms
		// At 1300 ms the window is full: the second rejection starts a ban.
		assert.Equal(t, 429, get(t, c, srv.URL+"/redirect/loop").status)
		assert.Equal(t, 403, get(t, c, srv.URL+"/redirect?to=http://a.test/").status)

		st := srv.Stats("a.test")
		assert.Equal(t, map[int]int{200: 1, 302: 4, 400: 1, 404: 1, 429: 2, 403: 1}, st.ByStatus)
		assert.Equal(t, ms(0, 100, 200, 1000, 1100, 1200), st.Accepted)
		assert.Equal(t, ms(300, 1300, 1300), st.Rejected)
		assert.Equal(t, []int{3, 3}, st.PerSecond)
		assert.Equal(t, st.Requests-st.Robots, len(st.Accepted)+len(st.Rejected))
		assert.True(t, st.Banned)
		assert.Equal(t, 1, st.BanCount)
	})
}

// Rejected holds the arrival time of every refusal: the excess status, the
// 503 of a concurrency cap and the 403 of a ban.
func TestRejected(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        testserver.Policy
		run      func(t *testing.T, srv *testserver.Server, start time.Time)
		status   map[int]int
		accepted []time.Duration
		rejected []time.Duration
	}{
		{"fixed window", testserver.Policy{Limit: fixed(1, time.Second)}, func(t *testing.T, srv *testserver.Server, start time.Time) {
			c := srv.Client()
			for _, at := range ms(0, 0, 500, 1000, 1000) {
				sleepUntil(start, at)
				get(t, c, srv.URL+"/page/1")
			}
		}, map[int]int{200: 2, 429: 3}, ms(0, 1000), ms(0, 500, 1000)},
		{"excess status", testserver.Policy{Limit: gcra(1, 1), Excess: testserver.Excess{Status: 503}}, func(t *testing.T, srv *testserver.Server, start time.Time) {
			c := srv.Client()
			for _, at := range ms(0, 250, 750, 1000) {
				sleepUntil(start, at)
				get(t, c, srv.URL+"/")
			}
		}, map[int]int{200: 2, 503: 2}, ms(0, 1000), ms(250, 750)},
		{"concurrency", testserver.Policy{
			Limit:   testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 1},
			Latency: testserver.Latency{Base: time.Second},
		}, func(t *testing.T, srv *testserver.Server, start time.Time) {
			for _, at := range ms(0, 1000) {
				sleepUntil(start, at)
				assert.Equal(t, map[int]int{200: 1, 503: 1}, fetchAll(t, srv.Client(), srv.URL+"/", 2))
			}
		}, map[int]int{200: 2, 503: 2}, ms(0, 1000), ms(0, 1000)},
		{"ban", testserver.Policy{Limit: fixed(1, time.Hour), Ban: &testserver.Ban{After: 1, For: 10 * time.Second}}, func(t *testing.T, srv *testserver.Server, start time.Time) {
			c := srv.Client()
			for _, at := range ms(0, 0, 5000, 10000, 15000) {
				sleepUntil(start, at)
				get(t, c, srv.URL+"/")
			}
		}, map[int]int{200: 1, 429: 2, 403: 2}, ms(0), ms(0, 5000, 10000, 15000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(tc.p))
				tc.run(t, srv, start)
				st := srv.Stats("a.test")
				assert.Equal(t, tc.status, st.ByStatus)
				assert.Equal(t, tc.accepted, st.Accepted)
				assert.Equal(t, tc.rejected, st.Rejected)
				assert.Equal(t, st.Requests, len(st.Accepted)+len(st.Rejected))

				st.Rejected[0] = time.Hour
				assert.Equal(t, tc.rejected, srv.Stats("a.test").Rejected, "Stats returns a copy")
			})
		})
	}
}

// Crawlers add query strings: they never change the page served. Paths
// that are not pages are 404, query or not.
func TestPageQueryStrings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Site: testserver.Site{Pages: 10, FanOut: 2}}))
		c := srv.Client()
		page7, index := get(t, c, srv.URL+"/page/7"), get(t, c, srv.URL+"/")
		require.Equal(t, 200, page7.status)
		require.Contains(t, page7.body, "<title>a.test page 7</title>")
		for _, p := range []string{"/page/7?utm_source=x", "/page/7?", "/page/7?a=b&c=d;e", "/page/7?page=3", "/page/7?%zz", "/page/7#top"} {
			r := get(t, c, srv.URL+p)
			assert.Equal(t, 200, r.status, p)
			assert.Equal(t, page7.body, r.body, p)
		}
		for _, p := range []string{"/?sort=desc", "/?"} {
			r := get(t, c, srv.URL+p)
			assert.Equal(t, 200, r.status, p)
			assert.Equal(t, index.body, r.body, p)
		}
		notFound := []string{
			"/page/abc", "/page/abc?x=1", "/page/7abc", "/page/1.5", "/page/+1", "/page/-1",
			"/page/07", "/page/7/", "/page/%207", "/page/10", "/page/99999999999", "/page/",
			"/pages/1", "/PAGE/1", "/page", "/page?n=7",
		}
		for _, p := range notFound {
			r := get(t, c, srv.URL+p)
			assert.Equal(t, 404, r.status, p)
			assert.Equal(t, "404 page not found\n", r.body, p)
		}
		st := srv.Stats("a.test")
		assert.Equal(t, map[int]int{200: 10, 404: len(notFound)}, st.ByStatus)
		assert.Len(t, st.Accepted, 10+len(notFound))
	})
}
