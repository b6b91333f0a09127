package adaptive_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/classify"
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
	tr, err := adaptive.New(adaptive.WithConfig(adaptive.Config{
		BlockBodyMarkers: []string{"solve the captcha"},
		Default:          adaptive.Rule{Block: adaptive.BlockPolicy{Threshold: -1}},
	}))
	require.NoError(t, err)
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
	assert.Len(t, tr.Events(classify.Blocked), 1)

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
	tr := adaptive.NewTransport(page(200, "please solve the captcha"))
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
	ctrl, err := adaptive.New(adaptive.WithLogger(logger), adaptive.WithMaxPause(time.Nanosecond))
	require.NoError(t, err)
	client := &http.Client{Transport: ctrl.Transport(page(429, ""))}
	_, err = client.Get("http://a.test/")
	require.Error(t, err, "the pause is above the (tiny) maximum: fail fast")
	line := strings.SplitN(buf.String(), "\n", 2)[0]
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
	for _, k := range []string{"t", "scope", "limit", "inflight", "rate", "event"} {
		assert.Contains(t, rec, k)
	}
	assert.Equal(t, "a.test", rec["scope"])
	assert.Equal(t, "decrease:throttled", rec["event"])
}
