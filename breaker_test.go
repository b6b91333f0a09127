package polite_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/classify"
)

// Six throttles in a row open the breaker for the cooldown (30 s); then a
// single probe goes out, and its success closes the breaker.
func TestBreakerOpensThenProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sendTimes []time.Duration
		var inflight, maxInflightAfterOpen atomic.Int64
		start := time.Now()
		var n atomic.Int64
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			i := n.Add(1)
			cur := inflight.Add(1)
			defer inflight.Add(-1)
			mu.Lock()
			sendTimes = append(sendTimes, time.Since(start))
			mu.Unlock()
			if i > 6 && cur > maxInflightAfterOpen.Load() {
				maxInflightAfterOpen.Store(cur)
			}
			time.Sleep(100 * time.Millisecond)
			st := 200
			if i <= 6 {
				st = 429 // no Retry-After: only the breaker's cooldown stops it
			}
			return &http.Response{StatusCode: st, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
		tr := polite.NewTransport(origin, polite.Config{JitterSeed: 1, Default: polite.Rule{MaxRetries: -1}})
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < 60*time.Second {
					resp, err := client.Get("http://a.test/")
					if err != nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					resp.Body.Close()
				}
			}()
		}
		var opened polite.Snapshot
		go func() {
			for time.Since(start) < 60*time.Second {
				time.Sleep(50 * time.Millisecond)
				if s, ok := tr.Controller().Snapshot("a.test"); ok && s.Breaker == polite.BreakerOpen && opened.Scope == "" {
					opened = s
				}
			}
		}()
		wg.Wait()
		time.Sleep(time.Second)
		require.Equal(t, polite.BreakerOpen, opened.Breaker, "the breaker opened")
		assert.Equal(t, polite.PauseBreaker, opened.PauseReason)
		mu.Lock()
		defer mu.Unlock()
		require.Greater(t, len(sendTimes), 7)
		gap := sendTimes[6] - sendTimes[5]
		assert.GreaterOrEqual(t, gap, 30*time.Second, "nothing sent during the cooldown")
		assert.Less(t, gap, 35*time.Second)
		// the probe goes alone: the 8th send waits for the 7th to come back
		assert.GreaterOrEqual(t, sendTimes[7]-sendTimes[6], 100*time.Millisecond, "one probe at a time while half-open")
		final, _ := tr.Controller().Snapshot("a.test")
		assert.Equal(t, polite.BreakerClosed, final.Breaker, "the probe's success closed it")
		assert.Equal(t, uint64(6), final.Counts[classify.Throttled])
	})
}

// The tail of one burst (every request on the wire when the limit said no)
// is one signal: it must not open the breaker.
func TestTailOfBurstKeepsBreakerClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends atomic.Int64
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sends.Add(1)
			time.Sleep(100 * time.Millisecond)
			return &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
		tr := polite.NewTransport(origin, polite.Config{JitterSeed: 1, Default: polite.Rule{MaxRetries: -1, InitialRate: 1000, StartConcurrency: 10}})
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() { _, _ = get(context.Background(), client, fmt.Sprintf("http://a.test/%d", i)) })
		}
		wg.Wait()
		require.Equal(t, int64(10), sends.Load(), "ten on the wire at once")
		snap, _ := tr.Controller().Snapshot("a.test")
		assert.Equal(t, polite.BreakerClosed, snap.Breaker, "ten 429s of one burst are one signal")
	})
}

// An open breaker whose cooldown is longer than MaxPause refuses at once:
// the request fails with ErrBreakerOpen, unsent, in a *ScopeError that says
// the breaker's pause and when it ends.
func TestBreakerOpenRefusesPastMaxPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
		tr := polite.NewTransport(origin, polite.Config{
			JitterSeed: 1, MaxPause: 10 * time.Second, BreakerCooldown: time.Minute,
			Backoff: time.Second, MaxBackoff: time.Second, // the backoffs stay under MaxPause
			Default: polite.Rule{MaxRetries: -1},
		})
		client := &http.Client{Transport: tr}
		var err error
		for range 20 {
			var resp *http.Response
			resp, err = client.Get("http://a.test/")
			if err != nil {
				break
			}
			resp.Body.Close()
		}
		require.ErrorIs(t, err, polite.ErrBreakerOpen)
		var se *polite.ScopeError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, polite.PauseBreaker, se.Pause)
		assert.Greater(t, time.Until(se.Until), 10*time.Second, "the breaker's cooldown is what refused")
		assert.EqualValues(t, 6, sent.Load(), "six throttles open the breaker; nothing is sent after")
	})
}
