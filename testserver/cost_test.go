package testserver_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/testserver"
)

// Latency.Schedule changes what pages cost from each step on, with no
// load: a request whose processing starts before the step costs the old
// Base, one after it the step's Base plus its jitter.
func TestCostSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, one(testserver.Policy{Latency: testserver.Latency{
			Base: 20 * time.Millisecond,
			Schedule: []testserver.CostStep{
				{At: time.Second, Base: 600 * time.Millisecond},
				{At: 3 * time.Second, Base: 100 * time.Millisecond, Jitter: 50 * time.Millisecond},
			},
		}}))
		c := srv.Client()
		took := func() time.Duration {
			t0 := time.Now()
			require.Equal(t, 200, get(t, c, srv.URL+"/page/1").status)
			return time.Since(t0)
		}
		assert.Equal(t, 20*time.Millisecond, took())
		time.Sleep(time.Second - 20*time.Millisecond - time.Nanosecond) // just before the step
		assert.Equal(t, 20*time.Millisecond, took(), "started before the step")
		assert.Equal(t, 600*time.Millisecond, took())
		time.Sleep(3 * time.Second)
		for range 20 {
			d := took()
			assert.GreaterOrEqual(t, d, 100*time.Millisecond)
			assert.Less(t, d, 150*time.Millisecond)
		}
		assert.Len(t, srv.Stats(testserver.DefaultHost).Latencies, 23)
	})
}

func TestCostScheduleInvalid(t *testing.T) {
	for name, s := range map[string][]testserver.CostStep{
		"negative At":     {{At: -1}},
		"negative Base":   {{At: time.Second, Base: -1}},
		"negative Jitter": {{At: time.Second, Jitter: -1}},
		"not increasing":  {{At: 2 * time.Second}, {At: 2 * time.Second}},
	} {
		_, err := testserver.New(one(testserver.Policy{Latency: testserver.Latency{Schedule: s}}))
		assert.True(t, errors.Is(err, testserver.ErrConfig), "%s: %v", name, err)
	}
	_, err := testserver.New(one(testserver.Policy{Latency: testserver.Latency{ExternalRTT: -1}}))
	assert.ErrorIs(t, err, testserver.ErrConfig)
}

// A round trip outside the server (a delaying proxy) moves the window in
// which a request violates a pause: the client learns of a pause half
// that round trip after the server decided it, and what it sends at the
// pause's end arrives half a round trip later.
func TestExternalRTTPauseViolations(t *testing.T) {
	const ext = 200 * time.Millisecond
	for _, tc := range []struct {
		name      string
		after     time.Duration // from the 429's decision to the next arrival
		violation bool
	}{
		{"sent before the 429 could arrive", 150 * time.Millisecond, false},
		{"inside the pause", 500 * time.Millisecond, true},
		{"sent at the pause's end", time.Second + ext, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, one(testserver.Policy{
					Limit:   fixed(1, time.Hour),
					Latency: testserver.Latency{ExternalRTT: ext},
					Excess:  testserver.Excess{FixedRetryAfter: time.Second},
				}))
				c := srv.Client()
				get(t, c, srv.URL+"/")
				r := get(t, c, srv.URL+"/")
				require.Equal(t, 429, r.status)
				require.Equal(t, "1", r.header.Get("Retry-After"))
				time.Sleep(tc.after)
				get(t, c, srv.URL+"/")
				got := srv.Stats(testserver.DefaultHost).PauseViolations
				assert.Equal(t, tc.violation, got == 1, "violations %d", got)
			})
		})
	}
}
