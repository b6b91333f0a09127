package adaptive_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

// alwaysThrottled admits one request per hour, then answers 429 with
// Retry-After: 1.
func alwaysThrottled() testserver.Config {
	return oneHost(testserver.Policy{
		Limit:  testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: time.Hour},
		Excess: testserver.Excess{FixedRetryAfter: time.Second},
	})
}

// One controller per collector family: Attach on a collector that already
// has one, or on its clone (which shares Colly's HTTP client), returns that
// controller instead of wrapping it in a second. Against a host that
// answers 429 to everything, one page costs 1 + 3 retries and robots.txt is
// read once; with controllers stacked it was 16 requests and two reads.
func TestAttachTwiceReusesController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, alwaysThrottled())
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{JitterSeed: 1})
		clone := c.Clone()
		assert.Same(t, ctrl, adaptive.Attach(clone), "the clone's controller is its parent's")
		assert.Same(t, ctrl, adaptive.Attach(c, polite.Config{Default: polite.Rule{Rate: 1}}), "a second Attach returns the first controller")
		assert.Same(t, ctrl, adaptive.ControllerOf(clone))

		a := srv.HostURL("a.test")
		require.NoError(t, c.Visit(a+"/page/1")) // the hour's one request
		before := srv.Stats("a.test").Requests
		start := time.Now()
		require.Error(t, clone.Visit(a+"/page/2"))
		st := srv.Stats("a.test")
		t.Logf("page 2: %d requests in %v; robots.txt read %d times", st.Requests-before, time.Since(start), st.Robots)
		assert.Equal(t, 4, st.Requests-before, "1 + 3 retries, not 4 x 4")
		assert.Equal(t, 1, st.Robots, "robots.txt read once")
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.Zero(t, st.PauseViolations)
		assertIdle(t, ctrl)
	})
}

// AttachTo on a collector that has another controller replaces it:
// this one wraps what that one wrapped, never a controller inside a
// controller.
func TestControllerAttachReplaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.WithTransport(srv.Transport())
		first := adaptive.Attach(c, polite.Config{Robots: new(false)})
		second, err := polite.New(polite.Config{Robots: new(false)})
		require.NoError(t, err)
		require.NoError(t, adaptive.AttachTo(c, second))
		require.NoError(t, adaptive.AttachTo(c, second), "again: left as it is")
		assert.Same(t, second, adaptive.ControllerOf(c))
		require.NoError(t, c.Visit(srv.HostURL("a.test")+"/page/1"))
		assert.Zero(t, len(first.Report().Scopes), "the first controller no longer sees requests")
		snap, ok := second.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(1), snap.Counts[0])
		assert.Equal(t, 1, srv.Stats("a.test").Requests)
	})
}

// A clone made before AttachTo replaced its family's controller reports
// the controller that polices it now, and Attach on it returns that one:
// before, the clone kept its parent's old guard and reported the first
// controller, which saw none of its requests.
func TestCloneAfterAttachToReportsTheNewController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		c := colly.NewCollector(colly.AllowURLRevisit())
		c.WithTransport(srv.Transport())
		first := adaptive.Attach(c, polite.Config{Robots: new(false)})
		clone := c.Clone()
		second, err := polite.New(polite.Config{Robots: new(false)})
		require.NoError(t, err)
		require.NoError(t, adaptive.AttachTo(c, second))
		assert.True(t, adaptive.ControllerOf(clone) == second, "the clone reports the controller that polices it")
		assert.True(t, adaptive.Attach(clone) == second, "and Attach on it returns that one")
		require.NoError(t, clone.Visit(srv.HostURL("a.test")+"/page/1"))
		assert.Zero(t, len(first.Report().Scopes), "the first controller sees nothing")
		snap, ok := second.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(1), snap.Counts[0])
	})
}

// Attach reads Colly's unexported http.Client by reflection (Colly v2.3.0
// has setters only). Against the version in go.mod the read works: the
// collector's own transport is the one wrapped, and Err is nil.
func TestAttachReadsCollyClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		var through atomic.Int64
		c := colly.NewCollector()
		c.WithTransport(countingTransport{srv.Transport(), &through})
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
		require.NoError(t, ctrl.Err(), "the read works on this Colly")
		require.NoError(t, c.Visit(srv.HostURL("a.test")+"/page/1"))
		assert.Equal(t, int64(1), through.Load(), "through the collector's own transport")
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok, "and through the controller")
		assert.Equal(t, uint64(1), snap.Counts[0])
	})
}

// A collector without an HTTP client (not made by NewCollector, or
// SetClient(nil)) or none at all: Attach says so through Err, never
// panics, and attaches nothing.
func TestAttachWithoutClient(t *testing.T) {
	for name, c := range map[string]*colly.Collector{
		"zero Collector": {},
		"nil":            nil,
		"SetClient(nil)": func() *colly.Collector { c := colly.NewCollector(); c.SetClient(nil); return c }(),
	} {
		t.Run(name, func(t *testing.T) {
			var ctrl *polite.Controller
			require.NotPanics(t, func() { ctrl = adaptive.Attach(c) })
			assert.ErrorIs(t, ctrl.Err(), adaptive.ErrAttach)
			assert.Nil(t, adaptive.ControllerOf(c))
			assert.ErrorIs(t, adaptive.AttachTo(c, ctrl), adaptive.ErrAttach)
		})
	}
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// The controller's own transport set on top of Attach's inside a wrapper
// (an instrumenting RoundTripper, say), which the guard cannot see
// through: Attach's transport wraps it again, and each request passes
// the controller twice. The second pass, its attempt's own, goes straight
// on. Before, it waited for a slot of the same scope, which the first
// pass held: with MaxConcurrency 1 the first request waited forever, and
// at any limit once the first passes held every slot.
func TestOwnTransportWrappedAfterAttach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{}))
		c := colly.NewCollector(colly.AllowURLRevisit())
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), Default: polite.Rule{MaxConcurrency: 1}})
		var through atomic.Int64
		c.WithTransport(countingTransport{ctrl.Transport(srv.Transport()), &through})
		for i := range 3 {
			require.NoError(t, c.Visit(fmt.Sprintf("%s/page/%d", srv.HostURL("a.test"), i)))
		}
		assert.Equal(t, int64(3), through.Load(), "each request through the wrapper once")
		assert.Equal(t, 3, srv.Stats("a.test").Requests)
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(3), snap.Counts[0], "each recorded once, not twice")
		assertIdle(t, ctrl)
	})
}

// Setters called after Attach are wrapped at once by a second Attach, on
// the caller's goroutine: an Async crawl with Colly's robots.txt handling
// on then runs with no write to the client while requests read it (the
// guard's own rewrite, in the first request's OnRequest, raced with
// Colly's robots.txt fetch of the next Visit; go test -race found it).
func TestAttachAgainAfterSetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts := map[string]testserver.Policy{}
		for i := range 6 {
			hosts[fmt.Sprintf("h%d.test", i)] = testserver.Policy{}
		}
		srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
		c := colly.NewCollector(colly.Async(true))
		c.WithTransport(srv.Transport())
		c.IgnoreRobotsTxt = false
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
		c.SetRequestTimeout(5 * time.Second)
		require.True(t, adaptive.Attach(c) == ctrl, "the same controller")
		for h := range hosts {
			require.NoError(t, c.Visit(srv.HostURL(h)+"/page/1"))
		}
		c.Wait()
		assert.NoError(t, ctrl.Err(), "nothing was wrapped again during the crawl")
		assert.Len(t, ctrl.Report().Scopes, len(hosts), "every request went through the controller")
	})
}
