package polite

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendsInFirstSecond crawls an origin that never says no (10 ms a page)
// with 100 goroutines through tr for a virtual second and returns how many
// requests were sent.
func sendsInFirstSecond(t *testing.T, tr *Transport, sends *atomic.Int64) int64 {
	t.Helper()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://a.test/page", nil)
				resp, err := client.Do(req)
				if err != nil {
					return // the second is over, or the wait would pass it
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return sends.Load()
}

// tenMillis is an origin that answers every request after 10 ms, counting
// the requests it got before its deadline.
func tenMillis(sends *atomic.Int64) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sends.Add(1)
		select {
		case <-time.After(10 * time.Millisecond):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
}

// An imported estimate is untrusted: its rate is bounded by 1,000 req/s
// (law.MaxRate) and by every ceiling in force, its limit by MaxConcurrency,
// and one measured in the future is refused. An import of 1e12 req/s with
// a limit of 1e300 measured now ran 6,400 sends in the first second
// against a 10-ms origin (a fresh scope sends 3); under a Rate of 5, at 5.
func TestAbsurdImportBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		most int64
	}{
		// a send at either end of the closed second: rate + 1
		{"no ceiling", Config{JitterSeed: 1}, 1000 + 1},
		{"Rate 5", Config{JitterSeed: 1, Default: Rule{Rate: 5}}, 5 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sends atomic.Int64
				tr := NewTransport(tenMillis(&sends), tc.cfg)
				ctrl := tr.Controller()
				now := time.Now().UTC().Format(time.RFC3339)
				assert.ErrorIs(t, ctrl.ImportEstimates([]byte(`{"version":1,"scopes":{"a.test":{"rate":1e308,"limit":1e300,"measured":"9999-12-31T00:00:00Z"}}}`)), ErrConfig, "measured in the future")
				require.NoError(t, ctrl.ImportEstimates([]byte(`{"version":1,"scopes":{"a.test":{"rate":1e12,"limit":1e300,"measured":"`+now+`"}}}`)))
				n := sendsInFirstSecond(t, tr, &sends)
				s, _ := ctrl.Snapshot("a.test")
				t.Logf("%d sends in the first second; rate %.1f, limit %v", n, s.Rate, s.Limit)
				assert.LessOrEqual(t, n, tc.most)
				assert.LessOrEqual(t, s.Limit, 64, "at most MaxConcurrency")
			})
		})
	}
}
