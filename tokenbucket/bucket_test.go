package tokenbucket_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/tokenbucket"
)

const ms = time.Millisecond

// step is one call on a Bucket at a time, and what it must say.
type step struct {
	at   time.Duration
	op   string // "take", "rate", "strict", "drain", "resume", "defer"
	arg  float64
	want bool          // take: granted
	next time.Duration // after the call: Next(), when checked
}

func run(t *testing.T, steps []step) {
	t.Helper()
	var b tokenbucket.Bucket
	for i, s := range steps {
		switch s.op {
		case "rate":
			b.SetRate(s.arg)
		case "strict":
			b.SetStrict(s.arg != 0)
		case "drain":
			b.Drain(time.Duration(s.arg))
		case "resume":
			b.Resume(s.at)
		case "defer":
			b.Defer(time.Duration(s.arg))
		case "take":
			assert.Equal(t, s.want, b.Take(s.at), "step %d: take at %v", i, s.at)
		}
		if s.next != 0 {
			assert.Equal(t, s.next, b.Next(), "step %d: next after %s at %v", i, s.op, s.at)
		}
	}
}

func TestBucket(t *testing.T) {
	for name, steps := range map[string][]step{
		"closed until a rate is set": {
			{at: 0, op: "take", want: false},
			{op: "rate", arg: 10},
			{at: 0, op: "take", want: true},
		},
		"one send per interval": {
			{op: "rate", arg: 10},
			{at: 0, op: "take", want: true, next: 90 * ms}, // the first send may use the credit
			{at: 50 * ms, op: "take", want: false},
			{at: 90 * ms, op: "take", want: true, next: 190 * ms},
			{at: 189 * ms, op: "take", want: false},
			{at: 190 * ms, op: "take", want: true, next: 290 * ms},
		},
		"a late send gives its lateness back, up to the credit": {
			{op: "rate", arg: 10},
			{at: 0, op: "take", want: true},
			{at: 96 * ms, op: "take", want: true, next: 190 * ms},  // 6 ms late: due at 190 still
			{at: 250 * ms, op: "take", want: true, next: 340 * ms}, // 60 ms late: only 10 ms back
		},
		"a strict rate gives no credit (Crawl-delay)": {
			{op: "rate", arg: 10}, {op: "strict", arg: 1},
			{at: 0, op: "take", want: true, next: 100 * ms},
			{at: 105 * ms, op: "take", want: true, next: 205 * ms},
		},
		"a cut reaches the next send": {
			{op: "rate", arg: 10},
			{at: 0, op: "take", want: true},
			{op: "rate", arg: 2, next: 500 * ms}, // re-priced from the last send
			{at: 90 * ms, op: "take", want: false},
			{at: 500 * ms, op: "take", want: true},
		},
		"a rise does not wait out the old interval": {
			{op: "rate", arg: 1},
			{at: 0, op: "take", want: true},
			{op: "rate", arg: 10, next: 100 * ms},
			{at: 100 * ms, op: "take", want: true},
		},
		"a drain: the first send at its end, then the rate": {
			{op: "rate", arg: 10},
			{at: 0, op: "take", want: true},
			{op: "drain", arg: float64(3 * time.Second), next: 3 * time.Second},
			{at: 2999 * ms, op: "take", want: false},
			{at: 3 * time.Second, op: "take", want: true, next: 3100 * ms}, // no credit just after a drain
		},
		"the longest drain wins": {
			{op: "rate", arg: 10},
			{op: "drain", arg: float64(3 * time.Second)},
			{op: "drain", arg: float64(time.Second), next: 3 * time.Second},
		},
		"a rate cut during a drain moves its end by the new interval": {
			{op: "rate", arg: 10},
			{op: "drain", arg: float64(time.Second)}, // ends at 900 ms + one interval
			{op: "rate", arg: 2, next: 1400 * ms},
		},
		"resume ends a drain": {
			{op: "rate", arg: 10},
			{op: "drain", arg: float64(time.Hour)},
			{at: time.Second, op: "resume", next: 1100 * ms},
			{at: 1100 * ms, op: "take", want: true},
		},
		"defer: an extra gap before the next send only": {
			{op: "rate", arg: 10}, {op: "strict", arg: 1},
			{at: 0, op: "take", want: true},
			{op: "defer", arg: float64(30 * ms), next: 130 * ms},
			{at: 129 * ms, op: "take", want: false},
			{at: 130 * ms, op: "take", want: true, next: 230 * ms}, // cleared by the send
		},
		"defer survives a rate change": {
			{op: "rate", arg: 10},
			{at: 0, op: "take", want: true},
			{op: "defer", arg: float64(30 * ms)},
			{op: "rate", arg: 5, next: 230 * ms},
		},
		"defer before the first send, or of nothing, does nothing": {
			{op: "rate", arg: 10}, {op: "strict", arg: 1},
			{op: "defer", arg: float64(time.Second)},
			{at: 0, op: "take", want: true},
			{op: "defer", arg: -1, next: 100 * ms},
		},
		"a rate of zero, NaN or one per millennium is closed": {
			{op: "rate", arg: 1},
			{at: 0, op: "take", want: true},
			{op: "rate", arg: 0, next: tokenbucket.MaxInterval},
			{op: "rate", arg: math.NaN(), next: tokenbucket.MaxInterval},
			{op: "rate", arg: 1e-12, next: tokenbucket.MaxInterval},
		},
	} {
		t.Run(name, func(t *testing.T) { run(t, steps) })
	}
}

// Over many sends whose timers fire late by up to the credit, the average
// rate stays the rate: lateness is given back, never lost and never more.
func TestBucketHoldsTheRate(t *testing.T) {
	var b tokenbucket.Bucket
	b.SetRate(30)
	now := time.Duration(0)
	n := 0
	for now < 100*time.Second {
		if b.Take(now) {
			n++
		}
		now = b.Next() + time.Duration(n%7)*ms // a timer up to 6 ms late
	}
	assert.InDelta(t, 3000, n, 1, "sends in 100 s at 30/s")
}

// A send given back lets the next go in its slot, and no earlier: only the
// last send taken is given back, once, so giving back restores no burst.
func TestUntake(t *testing.T) {
	var b tokenbucket.Bucket
	b.SetRate(10)
	b.SetStrict(true)
	assert.True(t, b.Take(0))
	assert.True(t, b.Take(100*time.Millisecond))
	assert.Equal(t, 200*time.Millisecond, b.Next())
	b.Untake(100 * time.Millisecond) // the send at 100 ms never left
	assert.Equal(t, 100*time.Millisecond, b.Next(), "its slot is free again")
	b.Untake(100 * time.Millisecond)
	b.Untake(0) // made: the send before the one given back is not given back
	assert.Equal(t, 100*time.Millisecond, b.Next(), "one send given back, not the one before it")
	assert.True(t, b.Take(150*time.Millisecond))
	assert.False(t, b.Take(150*time.Millisecond), "one send, not the three given back")
	var closed tokenbucket.Bucket
	closed.Untake(0) // nothing taken, nothing to give back
	assert.False(t, closed.Take(0))
}

// A send given back after a rate cut leaves the next one an interval at
// the new rate after the send before it, not after the one given back:
// at 10/s a send at 0 and a claim at 100 ms, then a cut to 1/s, then the
// claim given back: the next send at 1 s (before, at 100 ms).
func TestUntakeAfterCut(t *testing.T) {
	var b tokenbucket.Bucket
	b.SetRate(10)
	b.SetStrict(true)
	require.True(t, b.Take(0))
	require.True(t, b.Take(100*time.Millisecond))
	b.SetRate(1)
	assert.Equal(t, 1100*time.Millisecond, b.Next())
	b.Untake(100 * time.Millisecond)
	assert.Equal(t, time.Second, b.Next(), "an interval at the new rate after the send that was made")
}

// A send claimed at one moment and made later is moved: the next send is
// an interval after it went (a claim at 0 used at 900 ms under 1/s: the
// next at 1.9 s, not at 1 s).
func TestMoved(t *testing.T) {
	var b tokenbucket.Bucket
	b.SetRate(1)
	b.SetStrict(true)
	require.True(t, b.Take(0))
	b.Moved(0, 900*time.Millisecond)
	assert.Equal(t, 1900*time.Millisecond, b.Next())
	b.Moved(0, 2*time.Second) // not the last send any more
	assert.Equal(t, 1900*time.Millisecond, b.Next())
}
