package polite

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What outlives scopes is bounded: robots.txt of 5,000 origins under a cap
// of 1,000 keeps at most 1,000 entries.
func TestMemoryBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := New(Config{MaxRemembered: 1000, JitterSeed: 1, Robots: new(true)})
		require.NoError(t, err)
		origin := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			body := "ok"
			if r.URL.Path == "/robots.txt" {
				body = "User-agent: *\nCrawl-delay: 1\n"
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		client := &http.Client{Transport: ctrl.Transport(origin)}
		for i := range 5000 {
			resp, err := client.Get(fmt.Sprintf("http://h%d.test/", i))
			require.NoError(t, err)
			_ = resp.Body.Close()
		}
		assert.LessOrEqual(t, ctrl.known.len(), 1000)
	})
}
