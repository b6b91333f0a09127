package adaptive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/proxy"
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

// The order of Attach and what a user sets on the collector does not
// matter: a transport, proxy function (Colly's own, and its round-robin
// switcher) or client set after Attach is wrapped again before the next
// request, with the user's transport and proxy underneath. Against a host
// whose robots.txt says Crawl-delay: 0.15, every order reads robots.txt
// once and keeps the delay between pages, ControllerOf finds the
// controller, and a transport replaced after Attach is logged once and
// reported by Err. (Before the guard, a transport set after Attach sent
// all pages at once and read no robots.txt.) Real loopback sockets: a
// proxy function makes Colly build its own http.Transport.
func TestAttachOrderDoesNotMatter(t *testing.T) {
	const delay = 150 * time.Millisecond
	const pages = 4
	// each case sets things on c, given the server and two proxies to it
	type env struct {
		srv    *testserver.Server
		p1, p2 *url.URL
	}
	withTransport := func(c *colly.Collector, e env) { c.WithTransport(e.srv.Transport()) }
	setClient := func(c *colly.Collector, e env) {
		c.SetClient(&http.Client{Transport: e.srv.Transport(), Timeout: 5 * time.Second})
	}
	setProxyFunc := func(c *colly.Collector, e env) { c.SetProxyFunc(http.ProxyURL(e.p1)) }
	setProxy := func(c *colly.Collector, e env) { require.NoError(t, c.SetProxy(e.p1.String())) }
	roundRobin := func(c *colly.Collector, e env) {
		rr, err := proxy.RoundRobinProxySwitcher(e.p1.String(), e.p2.String())
		require.NoError(t, err)
		c.SetProxyFunc(rr)
	}
	for _, tc := range []struct {
		name          string
		before, after func(*colly.Collector, env)
		proxied       bool
	}{
		{name: "WithTransport, then Attach", before: withTransport},
		{name: "Attach, then WithTransport", after: withTransport},
		{name: "SetClient, then Attach", before: setClient},
		{name: "Attach, then SetClient", after: setClient},
		{name: "SetProxyFunc, then Attach", before: setProxyFunc, proxied: true},
		{name: "Attach, then SetProxyFunc", after: setProxyFunc, proxied: true},
		{name: "round-robin, then Attach", before: roundRobin, proxied: true},
		{name: "Attach, then round-robin", after: roundRobin, proxied: true},
		{name: "Attach, then SetProxy", after: setProxy, proxied: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // real time: a server and two proxies each
			srv, err := testserver.New(testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{
				"a.test": {Robots: testserver.Robots{CrawlDelay: delay}},
			}})
			require.NoError(t, err)
			defer srv.Close()
			e := env{srv: srv}
			var through1, through2 *atomic.Int64
			e.p1, through1 = countingProxy(t, srv.Transport())
			e.p2, through2 = countingProxy(t, srv.Transport())
			var mu sync.Mutex
			var log bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &log}, nil))

			c := colly.NewCollector(colly.AllowURLRevisit())
			if tc.before != nil {
				tc.before(c, e)
			}
			ctrl := adaptive.Attach(c, polite.Config{Logger: logger})
			if tc.after != nil {
				tc.after(c, e)
			}
			assert.Same(t, ctrl, adaptive.ControllerOf(c), "ControllerOf finds it whatever was set after")
			for i := range pages {
				require.NoError(t, c.Visit(fmt.Sprintf("http://a.test/page/%d", i)))
			}
			st := srv.Stats("a.test")
			assert.Equal(t, 1, st.Robots, "robots.txt read once, through the controller")
			assert.Equal(t, pages+1, st.Requests)
			require.Len(t, st.Accepted, pages)
			for i := 1; i < pages; i++ {
				// sent at least the Crawl-delay apart; on loopback the way
				// there varies by far less than half of it
				gap := st.Accepted[i] - st.Accepted[i-1]
				assert.Greater(t, gap, delay/2, "page %d came %v after the one before", i, gap)
			}
			if tc.proxied {
				assert.Equal(t, int64(pages+1), through1.Load()+through2.Load(), "the user's proxies carried every request")
			}
			replaced := strings.Count(log.String(), "replaced after Attach")
			if tc.after != nil {
				assert.ErrorIs(t, ctrl.Err(), adaptive.ErrAttach, "Err says what happened")
				assert.Equal(t, 1, replaced, "logged once")
			} else {
				assert.NoError(t, ctrl.Err())
				assert.Zero(t, replaced)
			}
			assertIdle(t, ctrl)
		})
	}
}

// A context cancelled, or whose deadline cannot be met, while the request
// waits for a paused scope: the request fails, unsent, and leaves no slot.
func TestCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 60 * time.Second}}))
		tr := polite.NewTransport(srv.Transport(), polite.Config{Default: polite.Rule{MaxRetries: -1}})
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
