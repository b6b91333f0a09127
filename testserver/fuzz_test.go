package testserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Whatever the Host header, path and query, a request is answered with one
// of the statuses the policy can produce, a redirect goes to an absolute
// http(s) URL or to the loop, and nothing panics.
func FuzzRequest(f *testing.F) {
	for _, seed := range [][3]string{
		{"a.test", "/", ""}, {"a.test", "/page/3", "utm=1"}, {"A.TEST.:80", "/robots.txt", ""},
		{"[::1]:80", "/page/99999999999", ""}, {"", "", ""}, {"b.test", "/page/007", ""},
		{"a.test", "/redirect", "to=http://b.test/page/1"}, {"a.test", "/redirect", "to=ftp://x"},
		{"b.test", "/redirect/loop", ""}, {"a.test", "/redirect/hop", "n=3&hosts=a.test,b.test"},
		{"b.test", "/redirect/hop", "n=0&hosts=a.test,a.test"}, {"a.test", "/redirect", "to=%0d%0a"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	s, err := New(Config{Network: Memory, Hosts: map[string]Policy{
		"a.test": {
			Limit:  Limit{Kind: SlidingWindow, N: 2, Window: time.Second},
			Excess: Excess{QuotaHeaders: true, RetryAfter: RetryAfterHTTPDate},
			Ban:    &Ban{After: 3},
			Site:   Site{Pages: 10, FanOut: 3},
		},
		"b.test": {
			Limit: Limit{Kind: TokenBucket, Rate: 1, Burst: 1},
			Excess: Excess{RawRetryAfter: []string{"-1", "Thu, 01 Jan 1970 00:00:00 GMT"},
				CloseConnection: true, QuotaLie: QuotaLieResetDate},
			Robots: Robots{Size: 1 << 16, ContentType: "text/html"},
		},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, host, path, query string) {
		req := &http.Request{Method: "GET", URL: &url.URL{Path: path, RawQuery: query}, Host: host, Header: http.Header{}}
		w := httptest.NewRecorder()
		s.route(w, req)
		switch w.Code {
		case 200, 302, 400, 403, 404, 421, 429:
		default:
			t.Fatalf("Host %q path %q query %q: status %d", host, path, query, w.Code)
		}
		if w.Code == 200 && path != "/robots.txt" && !strings.Contains(w.Body.String(), "<html>") {
			t.Fatalf("Host %q path %q query %q: body %q", host, path, query, w.Body.String())
		}
		loc := w.Header().Values("Location")
		if w.Code != 302 {
			if len(loc) != 0 {
				t.Fatalf("Host %q path %q query %q: %d with Location %q", host, path, query, w.Code, loc)
			}
			return
		}
		if len(loc) != 1 || strings.ContainsAny(loc[0], "\r\n") {
			t.Fatalf("Host %q path %q query %q: Location %q", host, path, query, loc)
		}
		if loc[0] == "/redirect/loop" {
			return
		}
		u, err := url.Parse(loc[0])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Fatalf("Host %q path %q query %q: Location %q is not an absolute http(s) URL", host, path, query, loc[0])
		}
	})
}
