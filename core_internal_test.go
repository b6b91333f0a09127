package polite

import (
	"testing"
	"time"

	"github.com/colly-polite/polite/classify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// The core's decisions, one look at a time: a fresh scope sends; its
// concurrency limit in use makes the next wait for a release; a 429 with
// Retry-After pauses the scope until its end (plus jitter) and a wait past
// MaxPause fails at once with the pause's reason; the pause's end lets it
// send again.
func TestCoreDecide(t *testing.T) {
	st, err := Config{JitterSeed: 1, MaxPause: 10 * time.Second}.resolve()
	require.NoError(t, err)
	r, errs := Rule{StartConcurrency: 2, InitialRate: 1000}.resolve("Default")
	require.Empty(t, errs)
	var c core
	c.init("a.test", &r, 0, 1)
	now := time.Duration(0)

	d := c.decide(now, st)
	require.Equal(t, sendNow, d.kind)
	t1 := c.take(now)
	now += 10 * time.Millisecond
	require.Equal(t, sendNow, c.decide(now, st).kind)
	t2 := c.take(now)
	assert.Equal(t, waitRelease, c.decide(now, st).kind, "two in flight: the limit")

	now += 100 * time.Millisecond
	re := c.record(now, t1, &outcome{class: classify.Throttled, status: 429, retryAfter: 3 * time.Second, hasRA: true, rtt: 100 * time.Millisecond}, st)
	assert.True(t, re.decreased, "the first throttle ends slow start")
	assert.GreaterOrEqual(t, re.until, now+3*time.Second)
	d = c.decide(now, st)
	assert.Equal(t, waitUntil, d.kind)
	assert.Equal(t, re.until, d.wake, "the head wakes at the pause's end")

	re = c.record(now, t2, &outcome{class: classify.Throttled, status: 429, retryAfter: 60 * time.Second, hasRA: true}, st)
	assert.False(t, re.decreased, "the tail of the same burst")
	d = c.decide(now, st)
	assert.Equal(t, fail, d.kind, "a pause past MaxPause fails at once")
	assert.Equal(t, pauseRetryAfter, d.why.pause)
	assert.ErrorIs(t, d.why.err, ErrPaused)

	paused := now
	now = d.why.until
	assert.Equal(t, sendNow, c.decide(now, st).kind, "the pause over")
	assert.Equal(t, now-paused, c.pausedTotal(now), "paused from the first throttle to the end")
}

// A 403 that follows a success is taken for a throttle: the rate is cut
// and the scope pauses; the next ones, with no success between, are
// blocks, and the third in a row parks the scope. A park runs out with one
// probe at a time.
func TestBlockAfterSuccessIsThrottle(t *testing.T) {
	st, err := Config{JitterSeed: 1, Jitter: -1}.resolve()
	require.NoError(t, err)
	r, errs := Rule{StartConcurrency: 4, InitialRate: 1000}.resolve("Default")
	require.Empty(t, errs)
	var c core
	c.init("a.test", &r, 0, 1)
	now := time.Duration(0)
	forbidden := &outcome{class: classify.Blocked, status: 403, rtt: 50 * time.Millisecond}
	c.record(now+50*time.Millisecond, c.take(now), &outcome{class: classify.Success, status: 200, rtt: 50 * time.Millisecond}, st)
	now += 100 * time.Millisecond
	tail := c.take(now)
	re := c.record(now+50*time.Millisecond, c.take(now), forbidden, st)
	assert.True(t, re.decreased, "the first 403 after a success cuts the rate")
	assert.Positive(t, re.paused, "and pauses the scope")
	assert.False(t, re.parked)
	re = c.record(now+50*time.Millisecond, tail, forbidden, st)
	assert.False(t, re.decreased, "the tail of the burst")
	assert.Equal(t, uint16(1), c.gate.blockRow, "counts for nothing")

	now = max(now, c.gate.pausedUntil) + time.Second
	for i := range 2 {
		re = c.record(now+50*time.Millisecond, c.take(now), forbidden, st)
		assert.False(t, re.decreased, "block %d: no success since the last 403: a block", i+2)
		now += 100 * time.Millisecond
	}
	assert.True(t, re.parked, "three in a row park")
	assert.Equal(t, now-100*time.Millisecond+50*time.Millisecond+firstPark, c.gate.parkedUntil)
	assert.Equal(t, fail, c.decide(now, st).kind)
	now = c.gate.parkedUntil
	require.Equal(t, sendNow, c.decide(now, st).kind, "the park ran out")
	p := c.take(now)
	assert.True(t, p.probe)
	assert.Equal(t, waitRelease, c.decide(now, st).kind, "one probe at a time")
	c.record(now+50*time.Millisecond, p, &outcome{class: classify.Success, status: 200, rtt: 50 * time.Millisecond}, st)
	assert.Greater(t, c.limit(), 1, "its success resumes the scope")
}

// A lockout longer than its Retry-After (a penalty box): refused again
// right after each Retry-After was waited, the scope pauses twice as long
// each time, and the law cuts nothing for those refusals; a success ends
// the episode, and the next throttle is a throttle again.
func TestRetryAfterNotEnough(t *testing.T) {
	st, err := Config{JitterSeed: 1, Jitter: -1}.resolve()
	require.NoError(t, err)
	r, errs := Rule{InitialRate: 10}.resolve("Default")
	require.Empty(t, errs)
	var c core
	c.init("a.test", &r, 0, 1)
	// send sends as soon as the scope lets it from now, and returns when
	send := func(now time.Duration) (stamp, time.Duration) {
		t.Helper()
		d := c.decide(now, st)
		if d.kind == waitUntil {
			now = d.wake
			d = c.decide(now, st)
		}
		require.Equal(t, sendNow, d.kind, "at %v: %+v", now, d)
		return c.take(now), now
	}
	throttled := &outcome{class: classify.Throttled, status: 429, retryAfter: time.Second, hasRA: true, rtt: 10 * time.Millisecond}
	tk, now := send(0)
	require.True(t, c.record(now, tk, throttled, st).decreased, "the first ends slow start")
	est := c.law.Estimate()
	for _, pause := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		tk, now = send(c.gate.pausedUntil)
		re := c.record(now, tk, throttled, st)
		assert.True(t, re.refused, "at %v: refused", now)
		assert.False(t, re.decreased, "at %v: nothing cut", now)
		assert.Equal(t, now+pause, c.gate.pausedUntil, "at %v: the pause doubled", now)
		assert.Equal(t, est, c.law.Estimate(), "at %v: the estimate stands", now)
	}
	tk, now = send(c.gate.pausedUntil)
	c.record(now, tk, &outcome{class: classify.Success, status: 200, rtt: 10 * time.Millisecond}, st)
	tk, now = send(now + time.Second)
	re := c.record(now, tk, throttled, st)
	assert.False(t, re.refused, "a success ended the episode")
	assert.True(t, re.decreased, "a throttle again")
	assert.Equal(t, now+time.Second, c.gate.pausedUntil)
}
