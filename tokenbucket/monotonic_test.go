package tokenbucket_test

import (
	"strings"
	"testing"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hasMono reports whether t carries a monotonic clock reading, which
// Time.String shows as "m=±<seconds>".
func hasMono(t time.Time) bool { return strings.Contains(t.String(), " m=") }

// TestMonotonicReadings documents which times carry the monotonic reading
// that makes a Bucket immune to wall-clock jumps. Between two times that both
// carry one, Sub, Before and After use it, and a step of the wall clock (NTP,
// an administrator, a suspended VM's catch-up) is invisible: no burst, no
// stall. The Bucket never strips it: it only compares, subtracts and Adds.
func TestMonotonicReadings(t *testing.T) {
	now := time.Now()
	require.True(t, hasMono(now), "time.Now carries a monotonic reading")
	assert.True(t, hasMono(now.Add(time.Hour)), "Add keeps it")
	assert.True(t, hasMono(now.Add(-time.Hour)), "Add keeps it")

	// These strip it: the result is wall clock only.
	assert.False(t, hasMono(now.Round(0)), "Round(0) strips it")
	assert.False(t, hasMono(now.Truncate(time.Second)), "Truncate strips it")
	assert.False(t, hasMono(now.UTC()) && !hasMono(now), "UTC keeps it")
	assert.False(t, hasMono(now.In(time.UTC).Round(0)))
	parsed, err := time.Parse(time.RFC3339Nano, now.Format(time.RFC3339Nano))
	require.NoError(t, err)
	assert.False(t, hasMono(parsed), "a formatted and parsed time (an HTTP date) has none")
	assert.False(t, hasMono(time.Unix(now.Unix(), 0)), "time.Unix has none")
}

// TestDrainDeadlineIsPinnedToTheMonotonicClock: a deadline without a
// monotonic reading, such as a Retry-After HTTP date, is converted on entry
// to now plus its wall-clock distance, so that the drain is then measured on
// now's monotonic clock and a later wall-clock step does not move it.
func TestDrainDeadlineIsPinnedToTheMonotonicClock(t *testing.T) {
	now := time.Now()
	wallUntil := now.Round(0).Add(30 * time.Second)
	require.False(t, hasMono(wallUntil))

	b := tokenbucket.NewBucket(10, 1)
	b.DrainAt(now, wallUntil)
	got := b.DrainedUntil()
	assert.True(t, hasMono(got), "the deadline carries now's monotonic reading")
	assert.Equal(t, now.Add(30*time.Second), got)

	r, err := tokenbucket.New(tokenbucket.Config{Rate: 1})
	require.NoError(t, err)
	r.DrainAt("k", now, wallUntil)
	assert.True(t, hasMono(r.GetAt("k", now).DrainedUntil()))
}

// TestWallClockOnlyTimes documents what happens when a caller passes times
// without a monotonic reading and the wall clock jumps between them. The
// Bucket's arithmetic (x/time/rate) then sees the jump, and bounds it:
// forward, the bucket can do no more than fill up, which it would have done
// anyway after an idle spell, so the burst is at most Burst; backward, it
// takes the earlier time as its new reference and carries on, so there is no
// stall.
func TestWallClockOnlyTimes(t *testing.T) {
	wall := time.Now().Round(0)
	b := tokenbucket.NewBucket(1, 2)
	require.True(t, b.AllowAt(wall))
	require.True(t, b.AllowAt(wall))
	require.False(t, b.AllowAt(wall))

	// Forward one hour: at most Burst tokens, not 3,600.
	ahead := wall.Add(time.Hour)
	assert.Equal(t, 2.0, b.TokensAt(ahead))
	assert.True(t, b.AllowAt(ahead))
	assert.True(t, b.AllowAt(ahead))
	assert.False(t, b.AllowAt(ahead))

	// Back two hours: no stall of two hours; the next token comes one
	// token's time after the jump.
	back := ahead.Add(-2 * time.Hour)
	assert.False(t, b.AllowAt(back))
	assert.True(t, b.AllowAt(back.Add(time.Second)))
	assert.False(t, b.AllowAt(back.Add(time.Second)))

	// With monotonic readings, the same sequence of calls cannot see a
	// jump at all: ahead and back would be an hour ahead and an hour back
	// on the monotonic clock, which only moves forward with real time.
}
