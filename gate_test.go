package polite_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// After an overload, additive increase is held for Config.Hold after the
// pause ends, not for a multiple of the pause; and a breaker opened by
// overloads leaves no hold behind once it closes.
func TestOverloadHoldBounded(t *testing.T) {
	t.Run("retry-after", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int64
			origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				h := http.Header{}
				st := 200
				if n.Add(1) == 1 {
					st = 503
					h.Set("Retry-After", "1")
				}
				time.Sleep(time.Second)
				return &http.Response{StatusCode: st, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			tr := polite.NewTransport(origin, polite.Config{JitterSeed: 1, Default: polite.Rule{MaxRetries: -1}})
			client := &http.Client{Transport: tr}
			start := time.Now()
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					for i := 0; time.Since(start) < 30*time.Second; i++ {
						_, _ = get(context.Background(), client, "http://a.test/")
					}
				})
			}
			time.Sleep(2 * time.Second)
			after, _ := tr.Controller().Snapshot("a.test")
			time.Sleep(18 * time.Second) // the 1 s pause, the 10 s hold, and some
			later, _ := tr.Controller().Snapshot("a.test")
			wg.Wait()
			assert.Greater(t, later.Limit, after.Limit, "the limit grows again after the hold (%v at 2 s, %v at 20 s)", after.Limit, later.Limit)
		})
	})
	t.Run("breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int64
			origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				st := 200
				if n.Add(1) <= 6 {
					st = 503
				}
				time.Sleep(200 * time.Millisecond)
				return &http.Response{StatusCode: st, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			tr := polite.NewTransport(origin, polite.Config{JitterSeed: 1, Default: polite.Rule{MaxRetries: -1}})
			client := &http.Client{Transport: tr}
			start := time.Now()
			var wg sync.WaitGroup
			var opened atomic.Bool
			for range 20 {
				wg.Go(func() {
					for time.Since(start) < 3*time.Minute {
						if _, err := get(context.Background(), client, "http://a.test/"); err != nil {
							time.Sleep(100 * time.Millisecond)
						}
						if s, _ := tr.Controller().Snapshot("a.test"); s.Breaker == polite.BreakerOpen {
							opened.Store(true)
						}
					}
				})
			}
			wg.Wait()
			require.True(t, opened.Load(), "six 503s in a row opened the breaker")
			snap, _ := tr.Controller().Snapshot("a.test")
			assert.Equal(t, polite.BreakerClosed, snap.Breaker)
			assert.Greater(t, snap.Rate, 2.0, "the rate recovered after the breaker closed")
			assert.Greater(t, snap.Limit, 1, "the limit recovered after the breaker closed")
		})
	})
}

// retryAfterOrigin answers 429 with the given header lines the first time,
// then 200, recording send times.
func retryAfterOrigin(times *[]time.Time, mu *sync.Mutex, header http.Header) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		*times = append(*times, time.Now())
		first := len(*times) == 1
		mu.Unlock()
		h := http.Header{}
		st := 200
		if first {
			st = 429
			for k, vs := range header {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
		}
		return &http.Response{StatusCode: st, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}
}

// Retry-After: a list merged by a proxy takes its largest member; delay
// seconds too large to represent park the scope; an HTTP-date is read
// against the response's Date (the server's clock), not ours.
func TestRetryAfterForms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(now time.Time) http.Header
		gap    time.Duration // at least, between the 429 and the retry
		paused bool          // the retry fails fast with ErrPaused
	}{
		{"list", func(time.Time) http.Header { return http.Header{"Retry-After": {"3, 5"}} }, 5 * time.Second, false},
		{"huge", func(time.Time) http.Header { return http.Header{"Retry-After": {"9999999999"}} }, 0, true},
		{"skewed clock", func(now time.Time) http.Header {
			server := now.Add(-time.Hour) // the server's clock is an hour behind ours
			return http.Header{
				"Date":        {server.UTC().Format(http.TimeFormat)},
				"Retry-After": {server.Add(30 * time.Second).UTC().Format(http.TimeFormat)},
			}
		}, 30 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var times []time.Time
				tr := polite.NewTransport(retryAfterOrigin(&times, &mu, tc.header(time.Now())), polite.Config{JitterSeed: 1})
				_, err := get(context.Background(), &http.Client{Transport: tr}, "http://a.test/")
				mu.Lock()
				defer mu.Unlock()
				if tc.paused {
					assert.ErrorIs(t, err, polite.ErrPaused)
					assert.Len(t, times, 1)
					return
				}
				require.NoError(t, err)
				require.Len(t, times, 2)
				assert.GreaterOrEqual(t, times[1].Sub(times[0]), tc.gap)
			})
		})
	}
}
