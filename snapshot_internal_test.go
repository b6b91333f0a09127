package polite

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A retry is counted on its scope: the transport calls Permit.retried for
// each attempt after the first. 429, 503, 200 is one request and two
// retries; a POST is never retried, so its 429 adds none.
func TestRetriesCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sends atomic.Int64
		statuses := []int{429, 503, 200, 429}
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			st := statuses[min(int(sends.Add(1))-1, len(statuses)-1)]
			h := http.Header{}
			if st != 200 {
				h.Set("Retry-After", "1")
			}
			return &http.Response{StatusCode: st, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})
		tr := NewTransport(rt, Config{Robots: new(false)})
		require.NoError(t, tr.Controller().Err())
		client := &http.Client{Transport: tr}
		resp, err := client.Get("http://a.test/")
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, int64(3), sends.Load())
		snap, _ := tr.Controller().Snapshot("a.test")
		assert.Equal(t, uint64(2), snap.Retries, "two attempts after the first")

		resp, err = client.Post("http://a.test/", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode)
		assert.Equal(t, int64(4), sends.Load())
		snap, _ = tr.Controller().Snapshot("a.test")
		assert.Equal(t, uint64(2), snap.Retries, "a POST is not retried")
		rep := tr.Controller().Report()
		require.Len(t, rep.Scopes, 1)
		assert.Equal(t, uint64(2), rep.Scopes[0].Retries+rep.Evicted.Retries, "what the metrics export")
		Permit{}.retried() // a zero Permit is a no-op, as Record and Drop are
	})
}

// statusSlot and statusKey agree, and codes outside the list share a slot.
func TestStatusSlots(t *testing.T) {
	for i, code := range statusCodes {
		assert.Equal(t, i, statusSlot(code))
		assert.Equal(t, code, statusKey(i))
	}
	assert.Equal(t, statusSlots-1, statusSlot(418))
	assert.Equal(t, StatusOther, statusKey(statusSlot(599)))
}
