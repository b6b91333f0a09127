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

	"github.com/colly-polite/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quotaOrigin answers 200 with X-RateLimit headers, counting sends.
func quotaOrigin(sends *atomic.Int64, remaining, reset string) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		sends.Add(1)
		h := http.Header{}
		h.Set("X-RateLimit-Remaining", remaining)
		h.Set("X-RateLimit-Reset", reset)
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}
}

// A gap between sends imposed by a ceiling longer than MaxPause fails fast
// with the typed error; a place in a deep queue does not.
func TestCeilingGapBoundedByMaxPause(t *testing.T) {
	for name, reset := range map[string]string{
		"a day":          "86400",
		"far-off date":   "Fri, 31 Dec 9999 23:59:59 GMT",
		"292 years away": "9223372036",
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sends atomic.Int64
				client := &http.Client{Transport: polite.NewTransport(quotaOrigin(&sends, "1", reset), polite.Config{JitterSeed: 1})}
				_, err := get(context.Background(), client, "http://a.test/1")
				require.NoError(t, err)
				start := time.Now()
				_, err = get(context.Background(), client, "http://a.test/2")
				assert.ErrorIs(t, err, polite.ErrPaused)
				var se *polite.ScopeError
				if assert.ErrorAs(t, err, &se) {
					assert.Equal(t, polite.CeilingQuota, se.Ceiling, "the quota ceiling spaces sends too far")
				}
				assert.Zero(t, time.Since(start), "failed fast")
				assert.Equal(t, int64(1), sends.Load(), "the second request was not sent")
			})
		})
	}
	t.Run("deep queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var sends atomic.Int64
			client := &http.Client{Transport: polite.NewTransport(scripted(&sends, 200), polite.Config{JitterSeed: 1, MaxPause: 5 * time.Second, Default: polite.Rule{Rate: 1}})}
			var wg sync.WaitGroup
			var failed atomic.Int64
			for i := range 30 {
				wg.Go(func() {
					if _, err := get(context.Background(), client, fmt.Sprintf("http://a.test/%d", i)); err != nil {
						failed.Add(1)
					}
				})
			}
			wg.Wait()
			assert.Zero(t, failed.Load(), "waiting in line at 1/s is not a pause")
			assert.Equal(t, int64(30), sends.Load())
		})
	})
}
