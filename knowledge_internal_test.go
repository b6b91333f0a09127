package polite

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What outlives scopes is bounded: robots.txt of 5,000 origins under a cap
// of 1,000 keeps at most 1,000 entries.
func TestMemoryBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := New(Config{MaxRemembered: 1000, JitterSeed: 1, Robots: new(true)})
		require.NoError(t, err)
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			body := "ok"
			if r.URL.Path == "/robots.txt" {
				body = "User-agent: *\nCrawl-delay: 1\n"
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		client := &http.Client{Transport: ctrl.Transport(origin)}
		for i := range 5000 {
			resp, err := client.Get(fmt.Sprintf("http://h%d.test/", i))
			require.NoError(t, err)
			_ = resp.Body.Close()
		}
		assert.LessOrEqual(t, ctrl.known.len(), 1000)
	})
}

// A retry applies the Crawl-delay its origin has now, not the one its
// request read before its first attempt: robots.txt unreadable (a 429:
// RobotsFailDelay, 5 s, until it is read again a minute later), a request
// whose first attempt takes 70 s and ends in a 503, and robots.txt read
// again meanwhile with no Crawl-delay. Before, the retry put the 5-s
// ceiling back, and it held until the next robots.txt read (a day).
func TestRetryTakesTheCrawlDelayInForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var robots, slow atomic.Int32
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}
			switch r.URL.Path {
			case "/robots.txt":
				if robots.Add(1) == 1 {
					resp.StatusCode = http.StatusTooManyRequests
				} else {
					resp.Body = io.NopCloser(strings.NewReader("User-agent: *\nAllow: /\n"))
				}
			case "/slow":
				if slow.Add(1) == 1 {
					time.Sleep(70 * time.Second)
					resp.StatusCode = http.StatusServiceUnavailable
				}
			}
			return resp, nil
		})
		c, err := New(Config{Robots: new(true), Default: Rule{InitialRate: 50, MaxRetries: 2}})
		require.NoError(t, err)
		client := &http.Client{Transport: c.Transport(next)}
		get := func(path string) {
			resp, err := client.Get("http://a.test" + path)
			require.NoError(t, err)
			_ = resp.Body.Close()
		}
		get("/first")
		done := make(chan struct{})
		go func() { get("/slow"); close(done) }()
		time.Sleep(61 * time.Second) // robots.txt's retry is due
		get("/b")                    // reads it again: no Crawl-delay
		<-done                       // /slow's retry, after its 503
		s, ok := c.Snapshot("a.test")
		require.True(t, ok)
		assert.NotEqual(t, "crawl-delay", s.Ceiling, "no Crawl-delay is in force at a.test")
		sc := c.scopes["a.test"]
		sc.mu.Lock()
		defer sc.mu.Unlock()
		assert.Zero(t, sc.core.pace.robots, "the retry put back no Crawl-delay ceiling")
	})
}
