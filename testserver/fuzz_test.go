package testserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Whatever the Host header and path, a request is answered with one of the
// statuses the policy can produce, and nothing panics.
func FuzzRequest(f *testing.F) {
	for _, seed := range [][2]string{
		{"a.test", "/"}, {"a.test", "/page/3"}, {"A.TEST.:80", "/robots.txt"},
		{"[::1]:80", "/page/99999999999"}, {"", ""}, {"b.test", "/page/007"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, err := New(Config{Network: Memory, Hosts: map[string]Policy{
		"a.test": {
			Limit:  Limit{Kind: SlidingWindow, N: 2, Window: time.Second},
			Excess: Excess{QuotaHeaders: true, RetryAfter: RetryAfterHTTPDate},
			Ban:    &Ban{After: 3},
			Site:   Site{Pages: 10, FanOut: 3},
		},
		"b.test": {Limit: Limit{Kind: TokenBucket, Rate: 1, Burst: 1}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, host, path string) {
		req := &http.Request{Method: "GET", URL: &url.URL{Path: path}, Host: host, Header: http.Header{}}
		w := httptest.NewRecorder()
		s.route(w, req)
		switch w.Code {
		case 200, 403, 404, 421, 429:
		default:
			t.Fatalf("Host %q path %q: status %d", host, path, w.Code)
		}
		if w.Code == 200 && path != "/robots.txt" && !strings.Contains(w.Body.String(), "<html>") {
			t.Fatalf("Host %q path %q: body %q", host, path, w.Body.String())
		}
	})
}
