package polite_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/testserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Crawl-delay and quota ceilings outlive the eviction of an idle scope, and
// under ScopeDomain the strictest Crawl-delay of the origins wins.
func TestCeilingsSurviveEviction(t *testing.T) {
	gapsAtLeast := func(t *testing.T, acc []time.Duration, d time.Duration) {
		t.Helper()
		acc = append([]time.Duration(nil), acc...)
		sort.Slice(acc, func(i, j int) bool { return acc[i] < acc[j] })
		require.GreaterOrEqual(t, len(acc), 3)
		for i := 1; i < len(acc); i++ {
			assert.GreaterOrEqual(t, acc[i]-acc[i-1], d, "gap between sends %d and %d", i-1, i)
		}
	}
	t.Run("crawl-delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
				"a.test": {Limit: fixedWindow(20), Robots: testserver.Robots{CrawlDelay: 2 * time.Second}},
				"b.test": {},
			}})
			c, ctrl := newCollector(t, srv, polite.Config{IdleTTL: time.Minute, JitterSeed: 1})
			crawl(t, c, 4, 10*time.Second, srv.HostURL("a.test"))
			before := len(srv.Stats("a.test").Accepted)
			time.Sleep(2 * time.Minute)
			require.NoError(t, c.Visit(srv.HostURL("b.test")+"/page/1")) // sweeps
			_, live := ctrl.Snapshot("a.test")
			require.False(t, live, "a.test evicted")
			crawl(t, c, 4, 10*time.Second, srv.HostURL("a.test"))
			st := srv.Stats("a.test")
			require.Equal(t, 1, st.Robots, "robots.txt still fresh: not fetched again")
			gapsAtLeast(t, st.Accepted[before:], 2*time.Second)
		})
	})
	t.Run("domain", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
				"a.x.test": {Limit: fixedWindow(20), Robots: testserver.Robots{CrawlDelay: 2 * time.Second}},
				"b.x.test": {Limit: fixedWindow(20)},
			}})
			c, _ := newCollector(t, srv, polite.Config{Scope: polite.ScopeDomain})
			require.NoError(t, c.Visit(srv.HostURL("a.x.test")+"/page/1"))
			require.NoError(t, c.Visit(srv.HostURL("b.x.test")+"/page/1"))
			crawl(t, c, 4, 20*time.Second, srv.HostURL("a.x.test"), srv.HostURL("b.x.test"))
			acc := append(srv.Stats("a.x.test").Accepted, srv.Stats("b.x.test").Accepted...)
			gapsAtLeast(t, acc, 2*time.Second)
		})
	})
	t.Run("quota", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var sends atomic.Int64
			origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sends.Add(1)
				time.Sleep(time.Second)
				h := http.Header{}
				h.Set("X-RateLimit-Remaining", "10")
				h.Set("X-RateLimit-Reset", "600")
				return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			ctrl, err := polite.New(polite.Config{IdleTTL: time.Minute, JitterSeed: 1})
			require.NoError(t, err)
			client := &http.Client{Transport: ctrl.Transport(origin)}
			_, err = get(context.Background(), client, "http://a.test/1")
			require.NoError(t, err)
			time.Sleep(2 * time.Minute)
			_, err = get(context.Background(), client, "http://b.test/1") // sweeps
			require.NoError(t, err)
			_, live := ctrl.Snapshot("a.test")
			require.False(t, live, "a.test evicted")
			before := sends.Load()
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_, _ = get(ctx, client, fmt.Sprintf("http://a.test/%d", i))
				})
			}
			wg.Wait()
			// the quota allows 10 in 600 s: one send per minute
			assert.Equal(t, int64(1), sends.Load()-before, "sends in the 10 s after eviction")
		})
	})
}

// A scope that spans hosts of different rules (a scope per registered
// domain) keeps to the strictest of the rules it has met: the MinGap of
// slow.example.com's rule spaces its requests whichever host of the
// domain came first. Before, the scope kept the rule of its first
// request: three requests to slow.example.com took 6 s when it came
// first and 56 ms when www.example.com did.
func TestScopeKeepsTheStrictestRule(t *testing.T) {
	for _, first := range []string{"slow", "www"} {
		t.Run(first+" first", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent []time.Duration
				start := time.Now()
				origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if r.URL.Host == "slow.example.com" {
						sent = append(sent, time.Since(start))
					}
					return page(http.StatusOK, "ok")(r)
				})
				ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1, Scope: polite.ScopeDomain,
					Rules: []polite.Rule{{Domain: "slow.example.com", MinGap: 2 * time.Second}}})
				require.NoError(t, err)
				client := &http.Client{Transport: ctrl.Transport(origin)}
				urls := []string{"http://www.example.com/", "http://slow.example.com/1", "http://slow.example.com/2", "http://slow.example.com/3"}
				if first == "slow" {
					urls[0], urls[1] = urls[1], urls[0]
				}
				for _, u := range urls {
					_, err := get(t.Context(), client, u)
					require.NoError(t, err)
				}
				require.Len(t, sent, 3)
				for i := 1; i < len(sent); i++ {
					assert.GreaterOrEqual(t, sent[i]-sent[i-1], 2*time.Second, "slow.example.com's requests %d and %d: %v", i-1, i, sent)
				}
			})
		})
	}
}

// A rule's Domain glob written with capitals matches its host, which is
// matched in lower case. Before, "API.Example.com" matched no host, and
// its Rate: 1 fell silently to Default's.
func TestRuleDomainCase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin, times := timedPages()
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1,
			Rules: []polite.Rule{{Domain: "API.Example.com", Rate: 1}}})
		require.NoError(t, err)
		client := &http.Client{Transport: ctrl.Transport(origin)}
		for range 3 {
			_, err := get(t.Context(), client, "http://api.example.com/")
			require.NoError(t, err)
		}
		sent := *times
		require.Len(t, sent, 3)
		assert.GreaterOrEqual(t, sent[2]-sent[0], 2*time.Second-50*time.Millisecond, "one a second: %v", sent)
	})
}
