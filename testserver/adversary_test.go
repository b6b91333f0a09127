package testserver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

// timeoutClient is a plain client of srv that gives up after d.
func timeoutClient(srv *testserver.Server, d time.Duration) *http.Client {
	return &http.Client{Transport: srv.Transport(), Timeout: d}
}

// page1 is the body an honest a.test sends for /page/1 (10 pages, fan-out
// 5, as adversarial hosts below have).
func page1(t *testing.T) string {
	t.Helper()
	var body string
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Site: testserver.Site{Pages: 10}}))
		body = get(t, srv.Client(), srv.URL+"/page/1").body
	})
	return body
}

// The headers and the first Bytes bytes arrive, then the connection closes:
// the client has a 200 with the full Content-Length and its body read ends
// in io.ErrUnexpectedEOF. Every request is reset the same way, on a new
// connection, and counted with its status.
func TestResetMidBody(t *testing.T) {
	page := page1(t)
	require.Greater(t, len(page), 100)
	for _, tc := range []struct {
		name  string
		bytes int
		want  int // bytes delivered
	}{
		{"right after the headers", 0, 0},
		{"after 10 bytes", 10, 10},
		{"all but the last byte", 1 << 20, len(page) - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Site:      testserver.Site{Pages: 10},
					Latency:   testserver.Latency{Base: time.Second},
					Adversary: testserver.Adversary{Kind: testserver.ResetMidBody, Bytes: tc.bytes},
				}))
				c := srv.Client()
				for i := range 2 {
					resp, err := c.Get(srv.URL + "/page/1")
					require.NoError(t, err)
					assert.Equal(t, 200, resp.StatusCode)
					assert.Equal(t, int64(len(page)), resp.ContentLength, "announces the whole body")
					assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
					assert.Equal(t, page[:tc.want], string(b))
					assert.Equal(t, time.Duration(i+1)*time.Second, time.Since(start), "after the latency")
				}
				assert.Equal(t, 404, fetch(c, srv.URL+"/nope").status, "a 404 is cut short too")
				st := srv.Stats("a.test")
				assert.Equal(t, 3, st.Requests)
				assert.Equal(t, map[int]int{200: 2, 404: 1}, st.ByStatus)
				assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, st.Accepted)
			})
		})
	}
}

// readTimed reads body to its end and returns what it read, the offset
// from start at which each byte arrived, and the error that ended it (nil
// at EOF).
func readTimed(body io.Reader, start time.Time) ([]byte, []time.Duration, error) {
	var got []byte
	var at []time.Duration
	buf := make([]byte, 64)
	for {
		n, err := body.Read(buf)
		got = append(got, buf[:n]...)
		for range n {
			at = append(at, time.Since(start))
		}
		if err == io.EOF {
			return got, at, nil
		}
		if err != nil {
			return got, at, err
		}
	}
}

// The headers come at once (after the latency), then one byte per Interval:
// exact virtual times, whatever the status.
func TestDripBody(t *testing.T) {
	page := page1(t)
	for _, tc := range []struct {
		name     string
		adv      testserver.Adversary
		latency  time.Duration
		path     string
		status   int
		want     string
		interval time.Duration
	}{
		{"default interval, 5 bytes", testserver.Adversary{Bytes: 5}, 0, "/page/1", 200, page[:5], time.Second},
		{"after the latency", testserver.Adversary{Bytes: 3}, 500 * time.Millisecond, "/page/1", 200, page[:3], time.Second},
		{"whole body, 10 ms", testserver.Adversary{Interval: 10 * time.Millisecond}, 0, "/page/1", 200, page, 10 * time.Millisecond},
		{"404 padded with spaces", testserver.Adversary{Bytes: 22, Interval: 250 * time.Millisecond}, 0, "/nope", 404, "404 page not found\n   ", 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				adv := tc.adv
				adv.Kind = testserver.DripBody
				srv := testserver.NewTest(t, one(testserver.Policy{
					Site:      testserver.Site{Pages: 10},
					Latency:   testserver.Latency{Base: tc.latency},
					Adversary: adv,
				}))
				resp, err := srv.Client().Get(srv.URL + tc.path)
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, tc.latency, time.Since(start), "headers at once")
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, int64(len(tc.want)), resp.ContentLength)
				got, at, err := readTimed(resp.Body, start)
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(got))
				want := make([]time.Duration, len(tc.want))
				for i := range want {
					want[i] = tc.latency + time.Duration(i+1)*tc.interval
				}
				assert.Equal(t, want, at)
				assert.Equal(t, map[int]int{tc.status: 1}, srv.Stats("a.test").ByStatus)
			})
		})
	}
}

// A client with a 3.5 s timeout gets 3 bytes of a 10-byte drip, then a
// timeout error at exactly 3.5 s; the server notices and stops dripping.
// Close in the middle of a drip ends it at once.
func TestDripBodyGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Adversary: testserver.Adversary{Kind: testserver.DripBody, Bytes: 10},
		}))
		resp, err := timeoutClient(srv, 3500*time.Millisecond).Get(srv.URL + "/")
		require.NoError(t, err)
		got, at, err := readTimed(resp.Body, start)
		resp.Body.Close()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, "<!D", string(got))
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, at)
		assert.Equal(t, 3500*time.Millisecond, time.Since(start))

		resp, err = srv.Client().Get(srv.URL + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		done := make(chan error, 1)
		go func() {
			_, _, err := readTimed(resp.Body, start)
			done <- err
		}()
		time.Sleep(2500 * time.Millisecond)
		srv.Close()
		assert.ErrorIs(t, <-done, io.ErrUnexpectedEOF)
		assert.Equal(t, 6*time.Second, time.Since(start), "Close does not wait for the drip")
		assert.Equal(t, map[int]int{200: 2}, srv.Stats("a.test").ByStatus)
	})
}

// The headers never come: a client with a 5 s timeout fails after exactly
// 5 s with a timeout error. The hanging request holds its slot of a
// Concurrency limit until the client gives up; it is counted as a request
// and as admitted, but with no status.
func TestHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:     testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 1},
			Adversary: testserver.Adversary{Kind: testserver.Hang},
		}))
		errc := make(chan error, 1)
		go func() {
			_, err := timeoutClient(srv, 5*time.Second).Get(srv.URL + "/")
			errc <- err
		}()
		synctest.Wait()
		assert.Equal(t, 503, get(t, srv.Client(), srv.URL+"/").status, "the hanging request holds the only slot")
		err := <-errc
		assert.Equal(t, 5*time.Second, time.Since(start))
		var ue *url.Error
		require.ErrorAs(t, err, &ue)
		assert.True(t, ue.Timeout())
		assert.ErrorIs(t, err, context.DeadlineExceeded)

		synctest.Wait() // the server sees the client go and frees the slot
		_, err = timeoutClient(srv, time.Second).Get(srv.URL + "/page/1")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "admitted, not 503: the slot was freed")
		assert.Equal(t, 6*time.Second, time.Since(start))

		assert.Equal(t, 200, get(t, srv.Client(), srv.URL+"/robots.txt").status, "robots.txt is answered")
		st := srv.Stats("a.test")
		assert.Equal(t, 4, st.Requests)
		assert.Equal(t, map[int]int{503: 1, 200: 1}, st.ByStatus, "no status for the hanging requests; 200 is robots.txt")
		assert.Equal(t, []time.Duration{0, 5 * time.Second}, st.Accepted)
		assert.Equal(t, []time.Duration{0}, st.Rejected)
		assert.Equal(t, 1, st.MaxInFlight)
	})
}

// Close wakes hanging handlers: the clients, which have no timeout, fail at
// once, and nothing is left running.
func TestHangClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv, err := testserver.New(testserver.Config{Network: testserver.Memory, Hosts: map[string]testserver.Policy{
			"a.test": {Adversary: testserver.Adversary{Kind: testserver.Hang}},
		}})
		require.NoError(t, err)
		errs := make(chan error, 3)
		for range 3 {
			go func() { errs <- fetch(srv.Client(), srv.URL+"/").err }()
		}
		time.Sleep(time.Hour)
		srv.Close()
		for range 3 {
			assert.Error(t, <-errs)
		}
		assert.Equal(t, time.Hour, time.Since(start))
		st := srv.Stats("a.test")
		assert.Equal(t, 3, st.Requests)
		assert.Empty(t, st.ByStatus)
		assert.Equal(t, 3, st.MaxInFlight)
	})
}

// connTrace records, per request, whether it went on a reused connection.
type connTrace struct{ reused []bool }

func (ct *connTrace) get(t *testing.T, c *http.Client, u string) result {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	require.NoError(t, err)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { ct.reused = append(ct.reused, i.Reused) },
	}))
	resp, err := c.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	r := result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.Close {
		r.header = r.header.Clone()
		r.header.Set("X-Test-Closed", "1")
	}
	return r
}

// A 429 with an empty body on a closed connection: no Content-Type, a zero
// Content-Length, "Connection: close", and the next request needs a new
// connection.
func TestExcessCloseConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:  fixed(1, time.Hour),
			Excess: testserver.Excess{CloseConnection: true},
		}))
		c := srv.Client()
		var ct connTrace
		assert.Equal(t, 200, ct.get(t, c, srv.URL+"/").status)
		for range 2 {
			r := ct.get(t, c, srv.URL+"/")
			assert.Equal(t, 429, r.status)
			assert.Empty(t, r.body)
			assert.Equal(t, "0", r.header.Get("Content-Length"))
			assert.Empty(t, r.header.Values("Content-Type"))
			assert.Equal(t, "1", r.header.Get("X-Test-Closed"), "the client sees Connection: close")
			assert.Equal(t, []string{"3600"}, r.header.Values("Retry-After"))
		}
		assert.Equal(t, []bool{false, true, false}, ct.reused, "the connection of a 429 is not reused")
		assert.Equal(t, map[int]int{200: 1, 429: 2}, srv.Stats("a.test").ByStatus)
		assert.Equal(t, 3, srv.Stats("a.test").Requests)
	})
}

// Raw Retry-After lines arrive verbatim and in order; only a single line
// that means a future deadline announces a pause (probed at 1 s with
// robots.txt).
func TestRawRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		raw       []string
		violation bool
	}{
		{"plain", []string{"120"}, true},
		{"huge", []string{"1000000000000"}, true},
		{"beyond uint64", []string{"99999999999999999999999"}, true},
		{"zero", []string{"0"}, false},
		{"negative", []string{"-1"}, false},
		{"fraction", []string{"1.5"}, false},
		{"garbage", []string{"in a while"}, false},
		{"empty", []string{""}, false},
		{"conflicting", []string{"5", "3600"}, false},
		{"same twice", []string{"120", "120"}, false},
		{"date long past", []string{"Thu, 01 Jan 1970 00:00:00 GMT"}, false},
		{"date far ahead", []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, true},
		{"RFC 850 date ahead", []string{"Sunday, 31-Dec-34 23:59:59 GMT"}, true},
		{"asctime date ahead", []string{"Fri Dec 31 23:59:59 2099"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:  fixed(1, time.Hour),
					Excess: testserver.Excess{RawRetryAfter: tc.raw},
				}))
				c := srv.Client()
				require.Equal(t, 200, get(t, c, srv.URL+"/").status)
				r := get(t, c, srv.URL+"/")
				require.Equal(t, 429, r.status)
				assert.Equal(t, tc.raw, r.header.Values("Retry-After"))
				sleepUntil(start, time.Second)
				get(t, c, srv.URL+"/robots.txt")
				want := 0
				if tc.violation {
					want = 1
				}
				st := srv.Stats("a.test")
				assert.Equal(t, want, st.PauseViolations)
				assert.Equal(t, map[int]int{200: 2, 429: 1}, st.ByStatus)
			})
		})
	}
}

// The pause of a raw delay ends where the client computes it, as with the
// modes; and raw lines go with a closed connection too.
func TestRawRetryAfterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := testserver.NewTest(t, one(testserver.Policy{
			Limit:  fixed(1, time.Hour),
			Excess: testserver.Excess{RawRetryAfter: []string{"30"}, CloseConnection: true},
		}))
		c := srv.Client()
		require.Equal(t, 200, get(t, c, srv.URL+"/").status)
		sleepUntil(start, 500*time.Millisecond)
		r := get(t, c, srv.URL+"/")
		require.Equal(t, 429, r.status)
		assert.Empty(t, r.body)
		assert.Equal(t, []string{"30"}, r.header.Values("Retry-After"))
		sleepUntil(start, 30499*time.Millisecond)
		get(t, c, srv.URL+"/robots.txt")
		assert.Equal(t, 1, srv.Stats("a.test").PauseViolations, "before the deadline")
		sleepUntil(start, 30500*time.Millisecond)
		get(t, c, srv.URL+"/robots.txt")
		assert.Equal(t, 1, srv.Stats("a.test").PauseViolations, "at the deadline")
	})
}

// Quota headers that lie: nothing left and a reset already past, on every
// response (pages, rejections, robots.txt), forever, while requests are
// admitted as usual.
func TestQuotaLie(t *testing.T) {
	for _, tc := range []struct {
		mode  testserver.QuotaLieMode
		reset func(now time.Time) string
	}{
		{testserver.QuotaLieResetZero, func(time.Time) string { return "0" }},
		{testserver.QuotaLieResetEpoch, func(now time.Time) string {
			return strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)
		}},
		{testserver.QuotaLieResetDate, func(now time.Time) string {
			return now.Add(-time.Hour).UTC().Format(http.TimeFormat)
		}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
					"a.test": {Limit: fixed(3, time.Second), Excess: testserver.Excess{QuotaLie: tc.mode}},
					"b.test": {Excess: testserver.Excess{QuotaLie: tc.mode}},
				}})
				c := srv.Client()
				check := func(r result, limited bool) {
					t.Helper()
					h := r.header
					assert.Equal(t, `"default";r=0;t=0`, h.Get("RateLimit"))
					assert.Equal(t, "0", h.Get("X-RateLimit-Remaining"))
					assert.Equal(t, tc.reset(time.Now()), h.Get("X-RateLimit-Reset"))
					if limited {
						assert.Equal(t, `"default";q=3;w=1`, h.Get("RateLimit-Policy"))
						assert.Equal(t, "3", h.Get("X-RateLimit-Limit"))
					} else {
						assert.Empty(t, h.Values("RateLimit-Policy"))
						assert.Empty(t, h.Values("X-RateLimit-Limit"))
					}
				}
				for _, at := range []time.Duration{0, 1500 * time.Millisecond, time.Hour} {
					sleepUntil(start, at)
					for range 3 {
						r := get(t, c, "http://a.test/")
						assert.Equal(t, 200, r.status, "remaining 0, yet admitted")
						check(r, true)
					}
					r := get(t, c, "http://a.test/")
					assert.Equal(t, 429, r.status)
					check(r, true)
					check(get(t, c, "http://a.test/robots.txt"), true)
					check(get(t, c, "http://b.test/"), false)
				}
				assert.Equal(t, map[int]int{200: 12, 429: 3}, srv.Stats("a.test").ByStatus)
				if tc.mode == testserver.QuotaLieResetEpoch {
					reset, err := strconv.ParseInt(tc.reset(time.Now()), 10, 64)
					require.NoError(t, err)
					assert.Less(t, reset, int64(1e9), "in a bubble (year 2000) the Unix time is below 10^9")
				}
			})
		})
	}
}

// robots.txt that a parser must survive: odd Crawl-delay values, a BOM and
// an HTML page are verbatim bodies (Body, ContentType), served as
// configured and counted as robots.txt.
func TestAdversarialRobots(t *testing.T) {
	const html = "<!DOCTYPE html>\n<html><head><title>Welcome</title></head><body><p>User-agent: *</p></body></html>\n"
	for _, tc := range []struct {
		name   string
		robots testserver.Robots
		body   string
		ctype  string
	}{
		{"Crawl-delay 1e9", testserver.Robots{Body: "User-agent: *\nCrawl-delay: 1e9\nDisallow:\n"}, "User-agent: *\nCrawl-delay: 1e9\nDisallow:\n", ""},
		{"Crawl-delay -1", testserver.Robots{Body: "User-agent: *\nCrawl-delay: -1\nDisallow:\n"}, "User-agent: *\nCrawl-delay: -1\nDisallow:\n", ""},
		{"Crawl-delay abc", testserver.Robots{Body: "User-agent: *\nCrawl-delay: abc\nDisallow:\n"}, "User-agent: *\nCrawl-delay: abc\nDisallow:\n", ""},
		{"BOM", testserver.Robots{Body: "\ufeffUser-agent: *\nDisallow: /private\n"}, "\xef\xbb\xbfUser-agent: *\nDisallow: /private\n", ""},
		{"HTML", testserver.Robots{Body: html, ContentType: "text/html; charset=utf-8"}, html, "text/html; charset=utf-8"},
		{"HTML, 404", testserver.Robots{Status: 404, Body: html, ContentType: "text/html"}, html, "text/html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, one(testserver.Policy{Robots: tc.robots}))
				r := get(t, srv.Client(), srv.URL+"/robots.txt")
				status := 200
				if tc.robots.Status != 0 {
					status = tc.robots.Status
				}
				assert.Equal(t, status, r.status)
				assert.Equal(t, tc.body, r.body)
				ctype := tc.ctype
				if ctype == "" {
					ctype = "text/plain; charset=utf-8"
				}
				assert.Equal(t, ctype, r.header.Get("Content-Type"))
				st := srv.Stats("a.test")
				assert.Equal(t, 1, st.Robots)
				assert.Equal(t, map[int]int{status: 1}, st.ByStatus)
			})
		})
	}
}

// A 10 MB robots.txt: exactly the advertised size, the rules first, then
// comment lines; streamed, so that serving it allocates a small fraction of
// its size.
func TestLargeRobots(t *testing.T) {
	const size = 10 << 20
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Robots: testserver.Robots{
			Size: size, Disallow: []string{"/private"},
		}}))
		c := srv.Client()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := c.Get(srv.URL + "/robots.txt")
		require.NoError(t, err)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		assert.Equal(t, int64(size), resp.ContentLength)
		assert.Equal(t, int64(size), n)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "streamed, not held")

		r := get(t, c, srv.URL+"/robots.txt")
		require.Len(t, r.body, size)
		rules := "User-agent: *\nDisallow: /private\n"
		require.True(t, strings.HasPrefix(r.body, rules))
		lines := strings.Split(r.body[len(rules):], "\n")
		for i, l := range lines {
			require.True(t, strings.HasPrefix(l, "#"), "line %d: %q", i, l)
		}
		assert.Equal(t, 2, srv.Stats("a.test").Robots)
	})
}

// Size pads a verbatim body too, after a line break if it lacks one; and a
// client that stops reading a large robots.txt does not keep Close waiting.
func TestLargeRobotsVerbatimAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Robots: testserver.Robots{
			Body: "User-agent: *\nDisallow: /x", Size: 100,
		}}))
		r := get(t, srv.Client(), srv.URL+"/robots.txt")
		require.Len(t, r.body, 100)
		assert.True(t, strings.HasPrefix(r.body, "User-agent: *\nDisallow: /x\n# "), r.body)

		big := testserver.NewTest(t, one(testserver.Policy{Robots: testserver.Robots{Size: 1 << 30}}))
		resp, err := big.Client().Get(big.URL + "/robots.txt")
		require.NoError(t, err)
		assert.Equal(t, int64(1<<30), resp.ContentLength)
		start := time.Now()
		big.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		assert.Error(t, err)
		resp.Body.Close()
		assert.Equal(t, time.Duration(0), time.Since(start))
	})
}

func TestAdversaryConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    testserver.Policy
		want string
	}{
		{"unknown kind", testserver.Policy{Adversary: testserver.Adversary{Kind: 9}}, "unknown AdversaryKind 9"},
		{"negative bytes", testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.DripBody, Bytes: -1}}, "negative"},
		{"negative interval", testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.DripBody, Interval: -1}}, "negative"},
		{"bytes without kind", testserver.Policy{Adversary: testserver.Adversary{Bytes: 3}}, "does not use"},
		{"interval on reset", testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.ResetMidBody, Interval: time.Second}}, "does not use"},
		{"bytes on hang", testserver.Policy{Adversary: testserver.Adversary{Kind: testserver.Hang, Bytes: 1}}, "does not use"},
		{"raw and mode", testserver.Policy{Excess: testserver.Excess{RawRetryAfter: []string{"5"}, RetryAfter: testserver.RetryAfterHTTPDate}}, "RawRetryAfter replaces"},
		{"raw and fixed", testserver.Policy{Excess: testserver.Excess{RawRetryAfter: []string{"5"}, FixedRetryAfter: time.Second}}, "RawRetryAfter replaces"},
		{"raw line break", testserver.Policy{Excess: testserver.Excess{RawRetryAfter: []string{"5", "5\r\nSet-Cookie: x=1"}}}, "RawRetryAfter[1]"},
		{"raw NUL", testserver.Policy{Excess: testserver.Excess{RawRetryAfter: []string{"\x00"}}}, "control character"},
		{"quota lie mode", testserver.Policy{Excess: testserver.Excess{QuotaLie: 7}}, "unknown QuotaLieMode 7"},
		{"lie and honest", testserver.Policy{Excess: testserver.Excess{QuotaLie: testserver.QuotaLieResetZero, QuotaHeaders: true}}, "set one of them"},
		{"robots size negative", testserver.Policy{Robots: testserver.Robots{Size: -1}}, "Robots.Size"},
		{"robots size below body", testserver.Policy{Robots: testserver.Robots{Body: "User-agent: *\n", Size: 5}}, "below the body's 14 bytes"},
		{"robots content type", testserver.Policy{Robots: testserver.Robots{ContentType: "text/html\r\nX: y"}}, "Robots.ContentType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := testserver.New(one(tc.p))
			require.Error(t, err)
			assert.Nil(t, srv)
			assert.ErrorIs(t, err, testserver.ErrConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// Tabs are allowed, as HTTP allows them.
	srv, err := testserver.New(one(testserver.Policy{Excess: testserver.Excess{RawRetryAfter: []string{"\t5"}}}))
	require.NoError(t, err)
	srv.Close()
}

func TestAdversaryStringers(t *testing.T) {
	assert.Equal(t, "DripBody", testserver.DripBody.String())
	assert.Equal(t, "AdversaryKind(9)", testserver.AdversaryKind(9).String())
	assert.Equal(t, "QuotaLieResetDate", testserver.QuotaLieResetDate.String())
	assert.Equal(t, "QuotaLieMode(9)", testserver.QuotaLieMode(9).String())
}

// waitFor polls cond in real time. Loopback cannot run in a synctest
// bubble, and a request in flight on a real socket has no other signal.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "condition not met in 10 s")
	}
}

// Every adversary works on real sockets too, and Close ends a hanging
// request. Real time: no durations are asserted, only what arrives.
func TestAdversariesLoopback(t *testing.T) {
	srv, err := testserver.New(testserver.Config{Hosts: map[string]testserver.Policy{
		"reset.test": {Adversary: testserver.Adversary{Kind: testserver.ResetMidBody, Bytes: 10}},
		"drip.test":  {Adversary: testserver.Adversary{Kind: testserver.DripBody, Bytes: 4, Interval: time.Millisecond}},
		"hang.test":  {Adversary: testserver.Adversary{Kind: testserver.Hang}},
		"close.test": {Limit: fixed(1, time.Hour), Excess: testserver.Excess{
			CloseConnection: true, RawRetryAfter: []string{"-1", "Fri, 31 Dec 9999 23:59:59 GMT"},
		}},
		"lie.test":    {Excess: testserver.Excess{QuotaLie: testserver.QuotaLieResetDate}},
		"robots.test": {Robots: testserver.Robots{Size: 10 << 20, Body: "\ufeffUser-agent: *\nCrawl-delay: abc\n", ContentType: "text/html"}},
	}})
	require.NoError(t, err)
	defer srv.Close()
	c := srv.Client()

	r := fetch(c, "http://reset.test/")
	assert.Equal(t, 200, r.status)
	assert.ErrorIs(t, r.err, io.ErrUnexpectedEOF)
	assert.Equal(t, "<!DOCTYPE ", r.body)

	r = get(t, c, "http://drip.test/")
	assert.Equal(t, "<!DO", r.body)

	_, err = timeoutClient(srv, 100*time.Millisecond).Get("http://hang.test/")
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	require.Equal(t, 200, get(t, c, "http://close.test/").status)
	r = get(t, c, "http://close.test/")
	assert.Equal(t, 429, r.status)
	assert.Empty(t, r.body)
	assert.Equal(t, []string{"-1", "Fri, 31 Dec 9999 23:59:59 GMT"}, r.header.Values("Retry-After"))

	r = get(t, c, "http://lie.test/")
	assert.Equal(t, "0", r.header.Get("X-RateLimit-Remaining"))
	reset, err := http.ParseTime(r.header.Get("X-RateLimit-Reset"))
	require.NoError(t, err)
	assert.True(t, reset.Before(time.Now()), "reset in the past")

	r = get(t, c, "http://robots.test/robots.txt")
	assert.Len(t, r.body, 10<<20)
	assert.True(t, strings.HasPrefix(r.body, "\xef\xbb\xbfUser-agent: *\nCrawl-delay: abc\n#"))
	assert.Equal(t, "text/html", r.header.Get("Content-Type"))

	// A hanging request with no timeout: Close ends it.
	errc := make(chan error, 1)
	go func() { errc <- fetch(c, "http://hang.test/").err }()
	waitFor(t, func() bool { return srv.Stats("hang.test").Requests == 2 })
	srv.Close()
	assert.Error(t, <-errc)

	for host, want := range map[string]map[int]int{
		"reset.test": {200: 1}, "drip.test": {200: 1}, "hang.test": {},
		"close.test": {200: 1, 429: 1}, "lie.test": {200: 1}, "robots.test": {200: 1},
	} {
		assert.Equal(t, want, srv.Stats(host).ByStatus, host)
	}
	assert.Equal(t, 2, srv.Stats("hang.test").Requests)
	assert.Len(t, srv.Stats("hang.test").Accepted, 2)
}
