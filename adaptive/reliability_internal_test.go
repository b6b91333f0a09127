package adaptive

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/sat"
)

// Conversions to Duration saturate: float-to-integer conversion out of range
// is platform-dependent in Go, and a negative wait means none.
func TestDurationsSaturate(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want time.Duration
	}{
		{0, 0}, {-1, 0}, {1.5, 1500 * time.Millisecond},
		{math.Inf(1), longestPause}, {math.NaN(), longestPause}, {1e300, longestPause},
		{longestPause.Seconds() * 2, longestPause},
	} {
		assert.Equal(t, tc.want, sat.Seconds(tc.in), "sat.Seconds(%v)", tc.in)
	}
	for _, tc := range []struct {
		base time.Duration
		n    int
		max  time.Duration
		want time.Duration
	}{
		{time.Second, 0, time.Minute, time.Second},
		{time.Second, 3, time.Minute, 8 * time.Second},
		{time.Second, 10, time.Minute, time.Minute},
		{time.Hour, 1000, longestPause, longestPause},
		{time.Duration(math.MaxInt64 / 3), 5, time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)},
	} {
		assert.Equal(t, tc.want, backoff(tc.base, tc.n, tc.max), "backoff(%v, %d, %v)", tc.base, tc.n, tc.max)
	}
}

// An overload whose Retry-After is years long holds increases until the
// pause ends plus Hold: no overflow into a hold that ends at once.
func TestHoldAfterHugePause(t *testing.T) {
	st, err := Config{JitterSeed: 1}.resolve()
	require.NoError(t, err)
	var c core
	c.init("a.test", &st.def, 0, 1)
	tenYears := 10 * 365 * 24 * time.Hour
	c.record(0, c.take(0), &outcome{class: classify.Overloaded, status: 503, retryAfter: tenYears, hasRA: true}, st)
	assert.GreaterOrEqual(t, c.gate.pausedUntil, tenYears)
	assert.Equal(t, c.gate.pausedUntil+st.OverloadHold, c.law.HeldUntil())
}

// What outlives scopes is bounded: robots.txt of 5,000 origins under a cap
// of 1,000 keeps at most 1,000 entries.
func TestMemoryBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := New(WithConfig(Config{MaxRemembered: 1000, JitterSeed: 1}), WithRobots(true))
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

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
