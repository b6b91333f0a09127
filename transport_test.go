package polite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/testserver"
)

// roundTripFunc is a RoundTripper made of a function: an origin with no
// network at all.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func page(status int, body string) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
}

// A block page served with 200 is found by its body markers, counted as a
// block, and the caller still reads the whole body.
func TestBlockBodyMarkers(t *testing.T) {
	body := strings.Repeat("x", 20<<10) + "<h1>Access Denied</h1> please solve the CAPTCHA"
	tr, err := polite.New(polite.Config{BlockBodyMarkers: []string{"solve the captcha"},
		Default: polite.Rule{BlockThreshold: -1}},
	)
	require.NoError(t, err)
	events := tr.Events()
	client := &http.Client{Transport: tr.Transport(page(200, "<p>"+strings.Repeat("y", 100)+"please SOLVE THE CAPTCHA</p>"))}
	resp, err := client.Get("http://a.test/")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Contains(t, string(b), "SOLVE THE CAPTCHA", "the body is whole after the peek")
	snap, ok := tr.Snapshot("a.test")
	require.True(t, ok)
	assert.Equal(t, uint64(1), snap.Counts[classify.Blocked])
	assert.Equal(t, 1, countEvents(events, classify.Blocked))

	// markers past the first 16 KiB are not looked for (documented bound);
	// the body still arrives whole
	client = &http.Client{Transport: tr.Transport(page(200, body))}
	resp, err = client.Get("http://b.test/")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Len(t, b, len(body))
	snap, _ = tr.Snapshot("b.test")
	assert.Equal(t, uint64(1), snap.Counts[classify.Success])
	assert.Equal(t, 0, snap.InFlight)
}

// Without body detectors nothing is peeked: an ordinary page is a success.
func TestNoPeekWithoutDetectors(t *testing.T) {
	tr := polite.NewTransport(page(200, "please solve the captcha"))
	resp, err := (&http.Client{Transport: tr}).Get("http://a.test/")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	snap, _ := tr.Controller().Snapshot("a.test")
	assert.Equal(t, uint64(1), snap.Counts[classify.Success])
}

// The logger receives the decision time series: one JSON record per signal
// with time, scope, limit, in flight, rate and event.
func TestLoggerTimeSeries(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	ctrl, err := polite.New(polite.Config{Logger: logger, MaxPause: time.Nanosecond})
	require.NoError(t, err)
	client := &http.Client{Transport: ctrl.Transport(page(429, ""))}
	_, err = client.Get("http://a.test/")
	require.Error(t, err, "the pause is above the (tiny) maximum: fail fast")
	line := strings.SplitN(buf.String(), "\n", 2)[0]
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
	for _, k := range []string{"time", "scope", "limit", "inflight", "rate", "msg"} {
		assert.Contains(t, rec, k)
	}
	assert.Equal(t, "a.test", rec["scope"])
	assert.Equal(t, "decrease:throttled", rec["msg"])
}

// Never a leaked slot.
func TestNoLeakedSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixedWindow(50), Latency: testserver.Latency{Base: 10 * time.Millisecond}},
			"b.test": {},
		}})
		c, ctrl := newCollector(t, srv, polite.Config{Robots: new(false)})
		a, b := srv.HostURL("a.test"), srv.HostURL("b.test")
		var n atomic.Int64
		c.OnRequest(func(r *colly.Request) {
			if r.URL.RawQuery == "abort-req" {
				r.Abort()
			}
		})
		c.OnResponseHeaders(func(r *colly.Response) {
			if r.Request.URL.RawQuery == "abort-headers" {
				r.Request.Abort()
			}
		})
		c.OnResponse(func(r *colly.Response) {
			n.Add(1)
			if r.Request.URL.RawQuery == "panic" {
				panic("user callback")
			}
		})
		_ = c.Visit(a + "/page/1?abort-req")
		_ = c.Visit(a + "/page/2?abort-headers")
		func() {
			defer func() { _ = recover() }()
			_ = c.Visit(a + "/page/3?panic")
		}()
		// redirects across hosts: each hop is a request to its own host
		_ = c.Visit(a + "/redirect?to=" + url.QueryEscape(b+"/page/1"))
		_ = c.Visit(a + "/redirect/hop?n=4&hosts=a.test,b.test")
		// cache hits
		dir := t.TempDir()
		cc := c.Clone()
		cc.CacheDir = dir
		_ = cc.Visit(a + "/page/4")
		_ = cc.Visit(a + "/page/4")
		// context cancelled while waiting: a paused scope and a short deadline
		ctx, cancel := context.WithCancel(context.Background())
		hc := &http.Client{Transport: ctrl.Transport(srv.Transport())}
		req, _ := http.NewRequestWithContext(ctx, "GET", a+"/page/ctx", nil)
		cancel()
		_, err := hc.Do(req)
		assert.ErrorIs(t, err, context.Canceled)
		// async with Wait
		ac := c.Clone()
		ac.Async = true
		for i := 0; i < 30; i++ {
			_ = ac.Visit(a + "/page/" + strconv.Itoa(10+i))
		}
		ac.Wait()
		// the queue package
		q, err := queue.New(4, &queue.InMemoryQueueStorage{MaxSize: 1000})
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			require.NoError(t, q.AddURL(b+"/page/"+strconv.Itoa(50+i)))
		}
		require.NoError(t, q.Run(c))
		assert.Positive(t, n.Load())
		assertIdle(t, ctrl)
	})
}

// Polite waiting does not use up the request timeout; a
// hanging origin still times out per attempt.
func TestPauseDoesNotUseTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 12 * time.Second}},
			"b.test": {Latency: testserver.Latency{Base: time.Hour}},
		}})
		c, _ := newCollector(t, srv, polite.Config{Robots: new(false), Default: polite.Rule{MaxRetries: 1}})
		a := srv.HostURL("a.test")
		require.NoError(t, c.Visit(a+"/page/1"))
		start := time.Now()
		require.NoError(t, c.Visit(a+"/page/2"), "succeeds after the 12 s pause")
		assert.GreaterOrEqual(t, time.Since(start), 12*time.Second)
		assert.Zero(t, srv.Stats("a.test").PauseViolations)

		start = time.Now()
		err := c.Visit(srv.HostURL("b.test") + "/page/1")
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline"), err)
		assert.Less(t, time.Since(start), 25*time.Second, "two attempts of 10 s, plus backoff")
	})
}

// drip is a body that gives one byte per interval, forever; Close ends a
// read in progress, as net/http's bodies do.
type drip struct {
	every  time.Duration
	closed chan struct{}
	once   sync.Once
}

func newDrip(every time.Duration) *drip { return &drip{every: every, closed: make(chan struct{})} }

func (d *drip) Read(p []byte) (int, error) {
	t := time.NewTimer(d.every)
	defer t.Stop()
	select {
	case <-d.closed:
		return 0, errors.New("read on closed body")
	case <-t.C:
	}
	p[0] = 'x'
	return 1, nil
}

func (d *drip) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

// A refusal whose body drips (429, Retry-After: 1, one byte per 100 ms)
// does not hold the request: the bodies the transport reads and does not
// hand on (the retried refusals it drains, the part block-page detectors
// see) are bounded in time, their connections closed past the bound. The
// request ends after its send and 3 retries with the last 429, long before
// the caller's 45-s deadline, and holds no slot. (The fault it guards
// against: the request returned at that deadline after one send, holding
// the slot throughout.)
func TestSlowRefusalBodyDoesNotHang(t *testing.T) {
	for _, markers := range []bool{false, true} {
		t.Run(fmt.Sprintf("detectors %v", markers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sends atomic.Int32
				rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					sends.Add(1)
					return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}},
						Body: newDrip(100 * time.Millisecond), Request: r}, nil
				})
				opts := []polite.Config{{JitterSeed: 1}}
				if markers {
					opts = append(opts, polite.Config{BlockBodyMarkers: []string{"captcha"}})
				}
				tr := polite.NewTransport(rt, cfgOf(opts...))
				ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, "GET", "http://a.test/page/1", nil)
				require.NoError(t, err)
				start := time.Now()
				resp, err := (&http.Client{Transport: tr}).Do(req)
				elapsed := time.Since(start)
				require.NoError(t, err)
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the caller gets the refusal")
				require.NoError(t, resp.Body.Close())
				assert.EqualValues(t, 4, sends.Load(), "the send and its 3 retries")
				assert.Less(t, elapsed, 15*time.Second, "not the caller's deadline")
				t.Logf("4 refusals answered in %v", elapsed)
				assertIdle(t, tr.Controller())
			})
		})
	}
}

// A body that resets or stalls inside the first 16 KiB, seen by the body
// peek, is a transport failure: every attempt releases its slot, and the
// host is not locked for the requests that follow.
func TestPeekFailureReleasesSlot(t *testing.T) {
	for name, adv := range map[string]testserver.Adversary{
		"reset": {Kind: testserver.ResetMidBody, Bytes: 100},
		"stall": {Kind: testserver.DripBody, Bytes: 20 << 10, Interval: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, oneHost(testserver.Policy{Adversary: adv}))
				ctrl, err := polite.New(polite.Config{Default: polite.Rule{StartConcurrency: 3, MaxConcurrency: 3, InitialRate: 100},
					BlockBodyMarkers: []string{"access denied"},
					AttemptTimeout:   2 * time.Second,
					JitterSeed:       1},
				)
				require.NoError(t, err)
				client := &http.Client{Transport: ctrl.Transport(srv.Transport())}
				for i := range 4 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					_, err := get(ctx, client, srv.HostURL("a.test")+fmt.Sprintf("/page/%d", i))
					cancel()
					require.Error(t, err, "request %d", i)
					snap, ok := ctrl.Snapshot("a.test")
					require.True(t, ok)
					assert.Zero(t, snap.InFlight, "slots held after request %d", i)
				}
				assert.Equal(t, 16, srv.Stats("a.test").Requests, "each of 4 requests sent 4 times (3 retries)")
			})
		})
	}
}

// A refusal the transport retries gives its connection back for reuse: its
// body is drained before the attempt's context ends. (The fault it guards
// against: the context was cancelled first, so net/http closed every
// connection that carried a 429 or a 503. Each refusal then cost a new
// connection, a handshake more on a real network; and after a pause the
// sends that waited for one arrived a round trip late, bunched with the
// next, where a sliding window of 30/s counted 36 in a second and refused
// again.)
func TestRetriedRefusalKeepsItsConnection(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
					"a.test": {Limit: fixedWindow(1), Excess: testserver.Excess{Status: status, FixedRetryAfter: time.Second}},
				}})
				tr := srv.Transport().Clone()
				t.Cleanup(tr.CloseIdleConnections)
				var dials atomic.Int32
				dial := tr.DialContext
				tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					return dial(ctx, network, addr)
				}
				c := colly.NewCollector(colly.AllowURLRevisit())
				c.WithTransport(tr)
				ctrl := adaptive.Attach(c, polite.Config{Robots: new(false), JitterSeed: 1, Default: polite.Rule{MaxRetries: 3}})
				require.NoError(t, ctrl.Err())
				a := srv.HostURL("a.test")
				for i := range 3 {
					require.NoError(t, c.Visit(fmt.Sprintf("%s/page/%d", a, i)))
				}
				st := srv.Stats("a.test")
				require.NotEmpty(t, st.Rejected, "the window refused a send, and the transport retried it")
				assert.EqualValues(t, 1, dials.Load(), "one connection for the sends one after another, refusals and all")
				assertIdle(t, ctrl)
			})
		})
	}
}

// truncated is a body that gives n bytes and then fails as a connection
// closed before its Content-Length.
type truncated struct{ n int }

func (b *truncated) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), b.n)
	clear(p[:k])
	b.n -= k
	return k, nil
}

func (b *truncated) Close() error { return nil }

// With body detectors on, a refusal whose body fails inside the part they
// see keeps its status: a 429 with Retry-After: 30 whose body stops after
// 3 bytes is a throttle, and the retry waits the 30 s. Before, the read
// error dropped the response and the answer counted as a transport
// failure, retried at once (3 sends in 3.2 s).
func TestRefusalBodyFailingInPeekKeepsItsStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends []time.Duration
		start := time.Now()
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sends = append(sends, time.Since(start))
			h := http.Header{"Retry-After": {"30"}}
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, ContentLength: 100, Body: &truncated{n: 3}, Request: r}, nil
		})
		ctrl, err := polite.New(polite.Config{Robots: new(false), BlockBodyMarkers: []string{"access denied"}, JitterSeed: 1})
		require.NoError(t, err)
		client := &http.Client{Transport: ctrl.Transport(origin)}
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		_, err = get(ctx, client, "http://a.test/page")
		t.Logf("sends at %v: %v", sends, err)
		require.GreaterOrEqual(t, len(sends), 2)
		assert.GreaterOrEqual(t, sends[1]-sends[0], 30*time.Second, "the retry waits the Retry-After")
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(len(sends)), snap.Counts[classify.Throttled], "each a throttle")
		assert.Zero(t, snap.InFlight)
	})
}

// A refusal's class is its status's, however its body ends: a 403 block
// page that drips past the peek's bound, read to its cut, is a block; a
// 404 that does the same is neutral. Before, the cut read as a transport
// failure when the caller read it (an overload signal: the 404 cut the
// rate, and a tarpitting block page never counted towards a park).
func TestSlowRefusalBodyKeepsItsClass(t *testing.T) {
	for status, class := range map[int]classify.Class{http.StatusForbidden: classify.Blocked, http.StatusNotFound: classify.Neutral} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: status, Header: http.Header{}, Body: newDrip(100 * time.Millisecond), Request: r}, nil
				})
				ctrl, err := polite.New(polite.Config{Robots: new(false), BlockBodyMarkers: []string{"access denied"}, JitterSeed: 1})
				require.NoError(t, err)
				client := &http.Client{Transport: ctrl.Transport(origin)}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err = get(ctx, client, "http://a.test/page")
				require.NoError(t, err, "the answer is handed on; its body ends at the cut")
				snap, ok := ctrl.Snapshot("a.test")
				require.True(t, ok)
				assert.Equal(t, uint64(1), snap.Counts[class], "the answer's class: %v", snap.Counts)
				assert.Zero(t, snap.Counts[classify.TransportFailure])
				assert.Zero(t, snap.InFlight)
			})
		})
	}
}

// A transport below that panics on the robots.txt fetch leaves the origin
// as it was: the next request reads robots.txt again and goes on. Before,
// the origin stayed "fetching" forever, and every later request to it
// waited for a fetch that would never end.
func TestRobotsFetchPanicLeavesNoOriginWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var panicked atomic.Bool
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/robots.txt" && panicked.CompareAndSwap(false, true) {
				panic("transport below")
			}
			return page(http.StatusOK, "ok")(r)
		})
		ctrl, err := polite.New(polite.Config{Robots: new(true), JitterSeed: 1})
		require.NoError(t, err)
		tr := ctrl.Transport(origin)
		send := func() (resp *http.Response, err error, p any) {
			defer func() { p = recover() }()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://a.test/page", nil)
			ctx, cancel := context.WithTimeout(req.Context(), time.Minute)
			defer cancel()
			resp, err = tr.RoundTrip(req.WithContext(ctx))
			if resp != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			return resp, err, nil
		}
		_, _, p := send()
		require.NotNil(t, p, "the first send's robots.txt fetch panicked")
		resp, err, p := send()
		require.Nil(t, p)
		require.NoError(t, err, "the next request is not left waiting on the fetch that panicked")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})
}

// A request that never reaches the transport below has its body closed,
// as a RoundTripper must (net/http's client does not when RoundTrip
// fails): here a POST whose context ended before its slot came.
func TestRefusedRequestBodyClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1})
		require.NoError(t, err)
		pr, pw := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://a.test/form", pr)
		_, err = ctrl.Transport(page(http.StatusOK, "ok")).RoundTrip(req)
		require.Error(t, err)
		_, err = pw.Write([]byte("x"))
		assert.ErrorIs(t, err, io.ErrClosedPipe, "the body was closed: its writer is not left waiting")
	})
}

// A response with a nil Body from the transport below (net/http's client
// allows it) is handed on with an empty one, and its slot comes back at
// its end.
func TestNilResponseBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, markers := range [][]string{nil, {"access denied"}} {
			origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r}, nil
			})
			ctrl, err := polite.New(polite.Config{Robots: new(false), BlockBodyMarkers: markers, JitterSeed: 1})
			require.NoError(t, err)
			client := &http.Client{Transport: ctrl.Transport(origin)}
			status, err := get(t.Context(), client, "http://a.test/page")
			require.NoError(t, err, "markers %v", markers)
			assert.Equal(t, http.StatusOK, status)
			snap, ok := ctrl.Snapshot("a.test")
			require.True(t, ok)
			assert.Zero(t, snap.InFlight, "markers %v: the slot came back", markers)
		}
	})
}

// A quota spent with no reset time (X-RateLimit-Remaining: 0 alone,
// Shopify's "40/40", RateLimit's r=0 with a window only) is no less strict
// than one with a request left: the scope pauses, for the window when one
// is stated, else a second. Before, it was read as no quota at all: 2,047
// sends in 10 s, as with no header.
func TestSpentQuotaWithoutReset(t *testing.T) {
	for name, h := range map[string]http.Header{
		"X-RateLimit":   {"X-Ratelimit-Remaining": {"0"}},
		"Shopify":       {"X-Shopify-Shop-Api-Call-Limit": {"40/40"}},
		"RateLimit r=0": {"Ratelimit": {`"d";r=0`}, "Ratelimit-Policy": {`"d";q=10;w=2`}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sends atomic.Int64
				origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					sends.Add(1)
					return &http.Response{StatusCode: http.StatusOK, Header: h.Clone(), Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
				})
				ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1, Default: polite.Rule{InitialRate: 100}})
				require.NoError(t, err)
				client := &http.Client{Transport: ctrl.Transport(origin)}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				getUntilError(ctx, client, "http://a.test/page")
				t.Logf("%d sends in 10 s", sends.Load())
				assert.LessOrEqual(t, sends.Load(), int64(11), "one a second at most")
			})
		})
	}
}

// A block page (a challenge a detector recognises) on a 429 that says
// Retry-After: 60 is taken for a throttle, and its Retry-After is waited
// out. Before, a detector's match dropped the header: 4 sends in 50 s,
// then a park after three blocks.
func TestBlockPageRetryAfterHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends []time.Duration
		start := time.Now()
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sends = append(sends, time.Since(start))
			h := http.Header{"Retry-After": {"60"}, "Cf-Mitigated": {"challenge"}}
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1})
		require.NoError(t, err)
		client := &http.Client{Transport: ctrl.Transport(origin)}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		getUntilError(ctx, client, "http://a.test/page")
		t.Logf("sends at %v", sends)
		assert.Len(t, sends, 1, "one send, then the 60 s asked for")
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(1), snap.Counts[classify.Blocked])
	})
}

// A refusal the transport retries may set a cookie (a challenge's token,
// a load balancer's session): the retry carries it, and the client's jar
// keeps it, as if the client had seen the refusal. Before, the retry went
// without it (refused again) and the jar never heard of it.
func TestRetriedRefusalCookies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends []string
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c, _ := r.Cookie("token")
			v := ""
			if c != nil {
				v = c.Value
			}
			sends = append(sends, v)
			if v != "abc" {
				h := http.Header{"Retry-After": {"1"}, "Set-Cookie": {"token=abc; Path=/", "gone=1; Max-Age=0"}}
				return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
			}
			return page(http.StatusOK, "ok")(r)
		})
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1})
		require.NoError(t, err)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		client := &http.Client{Transport: ctrl.Transport(origin), Jar: jar}
		status, err := get(t.Context(), client, "http://a.test/page")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status, "the retry carried the token")
		assert.Equal(t, []string{"", "abc"}, sends)
		u, _ := url.Parse("http://a.test/other")
		require.Len(t, jar.Cookies(u), 1, "the jar kept it")
		assert.Equal(t, "abc", jar.Cookies(u)[0].Value)
	})
}

// A request built on a response's context (a follow-up made from
// resp.Request.Context(), to paginate, say) goes through the controller:
// the mark that lets an attempt's own request pass a wrapped copy of the
// controller's transport holds only while that attempt is under way, and
// the response hands back the caller's request, not the marked one.
// Before, such follow-ups skipped every wait: five of them in 255 µs
// under a MinGap of 3 s.
func TestFollowUpOnAResponsesContextIsPoliced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin, times := timedPages()
		ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: 1, Default: polite.Rule{MinGap: 3 * time.Second}})
		require.NoError(t, err)
		tr := ctrl.Transport(origin)
		req, _ := http.NewRequest(http.MethodGet, "http://a.test/1", nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Same(t, req, resp.Request, "the caller's request")
		ctx := resp.Request.Context()
		for i := range 5 {
			next, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://a.test/%d", i+2), nil)
			r, err := tr.RoundTrip(next)
			require.NoError(t, err)
			_ = r.Body.Close()
		}
		_ = resp.Body.Close()
		sent := *times
		require.Len(t, sent, 6)
		assert.GreaterOrEqual(t, sent[5]-sent[0], 15*time.Second-50*time.Millisecond, "each 3 s apart: %v", sent)
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, uint64(6), snap.Counts[classify.Success], "each recorded")
	})
}

// A robots.txt request from above (Colly's own robots.txt handling) that
// the controller tees as its fetch is bounded as the controller's own
// fetch is, when no AttemptTimeout is set: a server that never answers it
// leaves neither that request nor the origin's pages waiting for good.
// (An unreachable robots.txt then disallows the origin for a while, as RFC
// 9309 asks: the page ends with ErrDisallowed, not a hang.)
func TestTeedRobotsFetchBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/robots.txt" {
				<-r.Context().Done() // never answers
				return nil, r.Context().Err()
			}
			return page(http.StatusOK, "ok")(r)
		})
		ctrl, err := polite.New(polite.Config{Robots: new(true), JitterSeed: 1})
		require.NoError(t, err)
		tr := ctrl.Transport(origin)
		robotsErr := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, "http://a.test/robots.txt", nil) // no deadline of its own
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			robotsErr <- err
		}()
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://a.test/page", nil)
		_, err = tr.RoundTrip(req)
		require.ErrorIs(t, err, polite.ErrDisallowed, "the page is not held by a robots.txt that never comes")
		assert.LessOrEqual(t, time.Since(start), time.Minute)
		assert.Error(t, <-robotsErr, "the teed robots.txt request ends")
	})
}
