package polite

import (
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/fleet"
)

// gateStep is one thing that happens to a gate at a time, and what must
// hold after it.
type gateStep struct {
	at time.Duration
	// "429", "503": a signal (fresh unless tail); ra: its Retry-After (-1:
	// none). "ok": a success (probe: the half-open probe's). "403": a
	// block (counted unless tail). "tick": time passes. "unpark".
	do    string
	ra    time.Duration
	tail  bool
	probe bool
	limit int // the gate's limit over a law's 8 (checked when not zero)

	pausedUntil time.Duration // checked when not zero
	reason      pauseKind     // checked with pausedUntil
	breaker     string        // checked when not empty
	refused     error         // the error refuse gives at this time (nil: not checked)
	sends       bool          // refuse says nothing (checked when refused is nil and sends is set)
}

func playGate(t *testing.T, cfg Config, steps []gateStep) {
	t.Helper()
	cfg.Jitter = -1 // no jitter: exact deadlines
	st, err := cfg.resolve()
	require.NoError(t, err)
	var g gate
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s at %v)", i, s.do, s.at)
		var r reaction
		switch s.do {
		case "429", "503":
			o := &outcome{class: classify.Throttled}
			if s.do == "503" {
				o.class = classify.Overloaded
			}
			if s.ra >= 0 {
				o.retryAfter, o.hasRA = s.ra, true
			}
			g.signal(s.at, o, !s.tail, 2, st, &r)
		case "ok":
			g.succeeded(s.probe)
		case "403":
			g.blocked(s.at, !s.tail, st.def.BlockThreshold, st.def.ParkFor, &r)
		case "tick":
			g.tick(s.at)
		case "unpark":
			g.unpark(s.at)
		default:
			t.Fatalf("%s: unknown step", where)
		}
		if s.pausedUntil != 0 {
			assert.Equal(t, s.pausedUntil, g.pausedUntil, "%s: paused until", where)
			assert.Equal(t, s.reason, g.reason, "%s: reason", where)
		}
		if s.breaker != "" {
			assert.Equal(t, s.breaker, g.breaker.String(), "%s: breaker", where)
		}

		why, refused := g.refuse(s.at, st.MaxPause)
		switch {
		case s.refused != nil:
			if assert.True(t, refused, "%s: refused", where) {
				assert.ErrorIs(t, why.err, s.refused, "%s", where)
			}
		case s.sends:
			assert.False(t, refused, "%s: not refused", where)
		}
		if s.limit != 0 {
			assert.Equal(t, s.limit, g.limit(8), "%s: limit", where)
		}
	}
}

const sec = time.Second

func TestGatePauses(t *testing.T) {
	for name, steps := range map[string][]gateStep{
		"Retry-After pauses the scope; the longest wins": {
			{at: 0, do: "429", ra: 3 * sec, pausedUntil: 3 * sec, reason: pauseRetryAfter},
			{at: sec, do: "429", ra: sec, tail: true, pausedUntil: 3 * sec, reason: pauseRetryAfter},
			{at: sec, do: "429", ra: 5 * sec, tail: true, pausedUntil: 6 * sec, reason: pauseRetryAfter},
		},
		"refused again after a Retry-After with no success between: the pause doubles from it": {
			{at: 0, do: "429", ra: sec, pausedUntil: sec, reason: pauseRetryAfter},
			{at: sec, do: "429", ra: sec, pausedUntil: 3 * sec, reason: pauseRetryAfter},
			{at: 3 * sec, do: "429", ra: sec, pausedUntil: 7 * sec, reason: pauseRetryAfter},
			{at: 7 * sec, do: "ok"},
			{at: 8 * sec, do: "429", ra: sec, pausedUntil: 9 * sec, reason: pauseRetryAfter},
			// refused again long after (past MaxBackoff): a new episode
			{at: 100 * sec, do: "429", ra: sec, pausedUntil: 101 * sec, reason: pauseRetryAfter},
		},
		"Retry-After: 0 is the minimum, never a zero-wait loop": {
			{at: 0, do: "429", ra: 0, pausedUntil: 500 * time.Millisecond, reason: pauseRetryAfter},
		},
		"a throttle without Retry-After backs off for two intervals; fresh ones double it": {
			{at: 0, do: "429", ra: -1, pausedUntil: sec, reason: pauseBackoff},
			{at: 2 * sec, do: "429", ra: -1, pausedUntil: 4 * sec, reason: pauseBackoff},
			{at: 5 * sec, do: "429", ra: -1, pausedUntil: 9 * sec, reason: pauseBackoff},
		},
		"the tail of a burst adds nothing": {
			{at: 0, do: "429", ra: -1, pausedUntil: sec, reason: pauseBackoff},
			{at: 10 * time.Millisecond, do: "429", ra: -1, tail: true, pausedUntil: sec, reason: pauseBackoff},
			{at: 2 * sec, do: "429", ra: -1, pausedUntil: 4 * sec, reason: pauseBackoff}, // the second fresh one
		},
		"a first overload without Retry-After does not pause; the second backs off": {
			{at: 0, do: "503", ra: -1, sends: true},
			{at: sec, do: "503", ra: -1, pausedUntil: 3 * sec, reason: pauseBackoff},
		},
		"a pause longer than MaxPause refuses at once": {
			{at: 0, do: "429", ra: time.Hour, pausedUntil: time.Hour, reason: pauseRetryAfter, refused: ErrPaused},
			{at: time.Hour - 3*time.Minute, do: "tick", refused: ErrPaused},
			{at: time.Hour - 2*time.Minute, do: "tick", sends: true}, // a wait of MaxPause, no longer
		},
	} {
		t.Run(name, func(t *testing.T) { playGate(t, Config{}, steps) })
	}
}

func TestGateBreaker(t *testing.T) {
	steps := []gateStep{}
	for i := range 5 {
		steps = append(steps, gateStep{at: time.Duration(i) * 100 * sec, do: "429", ra: sec, breaker: "closed"})
		steps = append(steps, gateStep{at: time.Duration(i)*100*sec + time.Millisecond, do: "429", ra: sec, tail: true, breaker: "closed"})
	}
	// the sixth in a row opens the breaker for its cooldown (30 s); each
	// came long after the last pause, so none doubled a Retry-After
	steps = append(steps,
		gateStep{at: 500 * sec, do: "429", ra: sec, breaker: "open", pausedUntil: 530 * sec, reason: pauseBreaker},
		gateStep{at: 529 * sec, do: "tick", breaker: "open"},
		gateStep{at: 530 * sec, do: "tick", breaker: "half-open", sends: true},
		gateStep{at: 531 * sec, do: "ok", breaker: "half-open"}, // not the probe
		gateStep{at: 531 * sec, do: "ok", probe: true, breaker: "closed"},
	)
	playGate(t, Config{}, steps)

	var g gate
	g.breaker = breakerHalfOpen
	assert.Equal(t, 1, g.limit(8), "half-open: one at a time")
	assert.True(t, g.ready())
	g.probeOut = true
	assert.False(t, g.ready(), "the probe is out")
}

func TestGateParks(t *testing.T) {
	t.Run("after three blocks in a row, for 30 s at first", func(t *testing.T) {
		playGate(t, Config{Default: Rule{BlockThreshold: 3, ParkFor: time.Minute}}, []gateStep{
			{at: 0, do: "403", sends: true},
			{at: sec, do: "403", sends: true},
			{at: 2 * sec, do: "ok", sends: true}, // a success resets the row
			{at: 3 * sec, do: "403", sends: true},
			{at: 3 * sec, do: "403", tail: true, sends: true}, // the tail of a burst does not count
			{at: 4 * sec, do: "403", sends: true},
			{at: 5 * sec, do: "403", refused: ErrBlocked},
			{at: 34 * sec, do: "tick", refused: ErrBlocked},
			{at: 35 * sec, do: "tick", sends: true, limit: 1}, // one probe
		})
	})
	t.Run("a park ends with one probe; it grows while blocks persist, to ParkFor", func(t *testing.T) {
		playGate(t, Config{Default: Rule{BlockThreshold: 1, ParkFor: 100 * sec}}, []gateStep{
			{at: 0, do: "403", refused: ErrBlocked},
			{at: 30 * sec, do: "tick", sends: true, limit: 1},
			{at: 31 * sec, do: "403", refused: ErrBlocked}, // the probe: parked again, twice as long
			{at: 90 * sec, do: "tick", refused: ErrBlocked},
			{at: 91 * sec, do: "tick", sends: true, limit: 1},
			{at: 91 * sec, do: "403", tail: true, refused: ErrBlocked}, // while probing, any block parks
			{at: 190 * sec, do: "tick", refused: ErrBlocked},           // 100 s, not 120: ParkFor bounds it
			{at: 191 * sec, do: "tick", sends: true, limit: 1},
			{at: 192 * sec, do: "ok", sends: true, limit: 8}, // the host answers again
			{at: 193 * sec, do: "403", refused: ErrBlocked},  // a new park starts short
			{at: 223 * sec, do: "tick", sends: true, limit: 1},
		})
	})
	t.Run("until Unpark", func(t *testing.T) {
		playGate(t, Config{Default: Rule{BlockThreshold: 1, ParkFor: -1}}, []gateStep{
			{at: 0, do: "403", refused: ErrBlocked},
			{at: 1000 * time.Hour, do: "tick", refused: ErrBlocked},
			{at: 1000 * time.Hour, do: "unpark", sends: true},
		})
	})
	t.Run("never, with a negative threshold", func(t *testing.T) {
		playGate(t, Config{Default: Rule{BlockThreshold: -1}}, []gateStep{
			{at: 0, do: "403", sends: true}, {at: 0, do: "403", sends: true}, {at: 0, do: "403", sends: true}, {at: 0, do: "403", sends: true},
		})
	})
}

func TestGateJitter(t *testing.T) {
	st, err := Config{}.resolve()
	require.NoError(t, err)
	var g gate
	for range 1000 {
		j := g.jitter(3*sec, st)
		require.GreaterOrEqual(t, j, time.Duration(0))
		require.Less(t, j, 300*time.Millisecond, "10 % of the pause")
		require.Less(t, g.jitter(time.Hour, st), sec, "at most 1 s")
	}
	st.Jitter = -1
	assert.Zero(t, g.jitter(time.Hour, st))
}

// A Retry-After equal to MaxPause is waited out, not refused: the rule
// ("above MaxPause fails at once") is judged on the server's value, and
// the jitter added to the pause never turns an honoured wait into a
// refusal, whether the pause was decided here or adopted from the fleet's
// store. (The fault it guards against: 120 with the default MaxPause, and 10
// with MaxPause 10 s, failed with ErrPaused for some seeds.)
func TestRetryAfterAtMaxPauseIsWaited(t *testing.T) {
	for _, tc := range []struct {
		ra              string
		pause, maxPause time.Duration
	}{{"120", 120 * time.Second, 0}, {"10", 10 * time.Second, 10 * time.Second}} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("Retry-After %s seed %d", tc.ra, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var refuse atomic.Bool // the next request gets the 429
					rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
						if refuse.Swap(false) {
							return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {tc.ra}}, Body: http.NoBody, Request: r}, nil
						}
						return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
					})
					store := &fleet.MemoryStore{}
					cfg := Config{Store: store, Default: Rule{MaxRetries: -1}, MaxPause: tc.maxPause, JitterSeed: seed}
					here := &http.Client{Transport: NewTransport(rt, cfg)}
					// another process of the fleet, with a jitter of its own
					cfg.JitterSeed = seed + 100
					there := &http.Client{Transport: NewTransport(rt, cfg)}
					get := func(c *http.Client, path string) (int, error) {
						resp, err := c.Get("http://a.test" + path)
						if err != nil {
							return 0, err
						}
						resp.Body.Close()
						return resp.StatusCode, nil
					}
					code, err := get(there, "/page/0") // its scope exists when the pause is shared
					require.NoError(t, err)
					require.Equal(t, 200, code)
					refuse.Store(true)
					code, err = get(here, "/page/1")
					require.NoError(t, err)
					require.Equal(t, 429, code)

					start := time.Now()
					code, err = get(there, "/page/2")
					assert.NoError(t, err, "the pause adopted from the store is waited out")
					assert.Equal(t, 200, code)
					code, err = get(here, "/page/3")
					assert.NoError(t, err, "the pause decided here is waited out")
					assert.Equal(t, 200, code)
					assert.GreaterOrEqual(t, time.Since(start), tc.pause, "after the pause")
				})
			})
		}
	}
}

// A backoff saturates: doubling never overflows into a negative wait,
// which would mean none.
func TestBackoffSaturates(t *testing.T) {
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
