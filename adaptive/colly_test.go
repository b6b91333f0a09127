package adaptive_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

// A forward proxy on loopback that counts what goes through it.
func countingProxy(t *testing.T, next http.RoundTripper) (*url.URL, *atomic.Int64) {
	var n atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
		resp, err := next.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	u, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	return u, &n
}

// Proxies set before Attach keep working under the controller; SetProxyFunc
// after Attach replaces the transport (Colly's doing), and Attach again puts
// the controller back in front of it.
func TestAttachKeepsProxies(t *testing.T) {
	srv, err := testserver.New(testserver.Config{Network: testserver.Loopback})
	require.NoError(t, err)
	defer srv.Close()
	proxyURL, through := countingProxy(t, srv.Transport())
	target := srv.HostURL("a.test") + "/page/1"

	c := colly.NewCollector(colly.AllowURLRevisit())
	c.SetProxyFunc(func(*http.Request) (*url.URL, error) { return proxyURL, nil })
	ctrl := adaptive.Attach(c, adaptive.WithRobots(false))
	require.NoError(t, c.Visit(target))
	assert.Equal(t, int64(1), through.Load(), "the request went through the proxy")
	scope := adaptive.ScopeHost(mustReq(t, target))
	snap, ok := ctrl.Snapshot(scope)
	require.True(t, ok, "and through the controller")
	assert.Equal(t, uint64(1), snap.Counts[0])

	// SetProxyFunc after Attach: Colly swaps the whole transport
	c.SetProxyFunc(func(*http.Request) (*url.URL, error) { return proxyURL, nil })
	require.NoError(t, c.Visit(target))
	snap, _ = ctrl.Snapshot(scope)
	assert.Equal(t, uint64(1), snap.Counts[0], "detached: the controller did not see it")
	ctrl.Attach(c)
	require.NoError(t, c.Visit(target))
	snap, _ = ctrl.Snapshot(scope)
	assert.Equal(t, uint64(2), snap.Counts[0], "attached again")
	assert.Equal(t, int64(3), through.Load())
	assertIdle(t, ctrl)
}

// A context cancelled, or whose deadline cannot be met, while the request
// waits for a paused scope: the request fails, unsent, and leaves no slot.
func TestCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 60 * time.Second}}))
		tr := adaptive.NewTransport(srv.Transport(), adaptive.WithDefault(adaptive.Rule{MaxRetries: -1}))
		client := &http.Client{Transport: tr}
		a := srv.HostURL("a.test")
		for i := 0; i < 2; i++ { // 200, then 429: the scope pauses 60 s
			resp, err := client.Get(a + "/page/1")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		sent := srv.Stats("a.test").Requests

		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(5 * time.Second); cancel() }()
		req, _ := http.NewRequestWithContext(ctx, "GET", a+"/page/2", nil)
		start := time.Now()
		_, err := client.Do(req)
		assert.True(t, errors.Is(err, context.Canceled), err)
		assert.Equal(t, 5*time.Second, time.Since(start), "failed when cancelled")

		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel2()
		req, _ = http.NewRequestWithContext(ctx2, "GET", a+"/page/3", nil)
		start = time.Now()
		_, err = client.Do(req)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
		assert.Zero(t, time.Since(start), "a wait that would pass the deadline fails at once")

		assert.Equal(t, sent, srv.Stats("a.test").Requests, "nothing was sent")
		assertIdle(t, tr.Controller())
	})
}
