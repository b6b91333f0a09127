package polite_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

// scripted answers with the given statuses in turn (the last one forever),
// counting the sends.
func scripted(sends *atomic.Int64, statuses ...int) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		n := int(sends.Add(1)) - 1
		st := statuses[min(n, len(statuses)-1)]
		h := http.Header{}
		if st == 429 {
			h.Set("Retry-After", "1")
		}
		return &http.Response{StatusCode: st, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}
}

func collectorOn(t *testing.T, rt http.RoundTripper, opts ...polite.Config) (*colly.Collector, *atomic.Int64, *atomic.Int64, *polite.Controller) {
	c := colly.NewCollector(colly.AllowURLRevisit())
	c.WithTransport(rt)
	ctrl := adaptive.Attach(c, cfgOf(append([]polite.Config{{Robots: new(false)}}, opts...)...))
	var ok, failed atomic.Int64
	c.OnResponse(func(*colly.Response) { ok.Add(1) })
	c.OnError(func(r *colly.Response, err error) {
		failed.Add(1)
		assert.Equal(t, 429, r.StatusCode)
	})
	return c, &ok, &failed, ctrl
}

// 429, 429, 200 is exactly three sends; the user sees one
// OnResponse and no OnError.
func TestRetriesExactSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends atomic.Int64
		c, ok, failed, ctrl := collectorOn(t, scripted(&sends, 429, 429, 200))
		start := time.Now()
		require.NoError(t, c.Visit("http://a.test/page/1"))
		assert.Equal(t, int64(3), sends.Load())
		assert.Equal(t, int64(1), ok.Load())
		assert.Zero(t, failed.Load())
		assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "each retry honoured its Retry-After")
		assertIdle(t, ctrl)
	})
}

// Attempts are bounded: a server that always says 429 gets 1 + 3 sends, and
// the user sees the 429 in OnError.
func TestRetriesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends atomic.Int64
		c, ok, failed, ctrl := collectorOn(t, scripted(&sends, 429))
		err := c.Visit("http://a.test/page/1")
		require.Error(t, err)
		assert.Equal(t, int64(4), sends.Load())
		assert.Zero(t, ok.Load())
		assert.Equal(t, int64(1), failed.Load())
		assertIdle(t, ctrl)
	})
}

// A POST without a replayable body or an idempotency key is sent once.
func TestPostNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends atomic.Int64
		tr := polite.NewTransport(scripted(&sends, 429, 200))
		req, _ := http.NewRequest("POST", "http://a.test/form", io.NopCloser(strings.NewReader("k=v")))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode, "the 429 surfaces")
		assert.Equal(t, int64(1), sends.Load())

		// with an Idempotency-Key and a replayable body it is retried
		sends.Store(0)
		req, _ = http.NewRequest("POST", "http://b.test/form", strings.NewReader("k=v"))
		req.Header.Set("Idempotency-Key", "abc")
		resp, err = (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, int64(2), sends.Load())
	})
}

// Retries.
func TestRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: time.Second}}))
		c, _ := newCollector(t, srv, polite.Config{Robots: new(false)})
		a := srv.HostURL("a.test")
		var okN, errN atomic.Int64
		c.OnResponse(func(*colly.Response) { okN.Add(1) })
		c.OnError(func(*colly.Response, error) { errN.Add(1) })
		require.NoError(t, c.Visit(a+"/page/1"))
		// within the same window: 429, then after the pause 200
		require.NoError(t, c.Visit(a+"/page/2"))
		assert.Equal(t, int64(2), okN.Load())
		assert.Zero(t, errN.Load())
		st := srv.Stats("a.test")
		assert.Equal(t, 3, st.Requests, "exactly three sends: 200, 429, 200")

		// a POST without idempotency is not retried and surfaces the 429
		before := srv.Stats("a.test").Requests
		err := c.Post(a+"/page/post", map[string]string{"k": "v"})
		err2 := c.Post(a+"/page/post", map[string]string{"k": "v"})
		assert.True(t, err != nil || err2 != nil, "one of two POSTs in a window of 1 is throttled")
		assert.Equal(t, before+2, srv.Stats("a.test").Requests, "no retry of a POST")
	})
}
