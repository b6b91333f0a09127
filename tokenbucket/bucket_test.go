package tokenbucket_test

import (
	"math"
	"testing"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// t0 carries a monotonic clock reading, and so does every t0.Add(d).
var t0 = time.Now()

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// step is one call in a table: at ms, AllowAt wants want.
type step struct {
	ms   int
	want bool
}

func TestBucketAllowAt(t *testing.T) {
	tests := []struct {
		name  string
		rate  rate.Limit
		burst int
		steps []step
	}{
		{"burst then rate", 10, 3, []step{
			{0, true}, {0, true}, {0, true}, {0, false},
			{99, false}, {100, true}, {100, false}, {200, true},
		}},
		{"refills to burst only", 10, 2, []step{
			{0, true}, {0, true}, {10_000, true}, {10_000, true}, {10_000, false},
		}},
		{"infinite rate ignores burst", rate.Inf, 0, []step{
			{0, true}, {0, true}, {0, true},
		}},
		{"burst zero allows nothing", 10, 0, []step{
			{0, false}, {10_000, false},
		}},
		{"rate zero allows the first burst only", 0, 2, []step{
			{0, true}, {0, true}, {0, false}, {1_000_000, false},
		}},
		{"negative rate is rate zero", -5, 1, []step{
			{0, true}, {100_000, false},
		}},
		{"NaN rate is rate zero", rate.Limit(math.NaN()), 1, []step{
			{0, true}, {100_000, false},
		}},
		{"+Inf float is rate.Inf", rate.Limit(math.Inf(1)), 1, []step{
			{0, true}, {0, true}, {0, true},
		}},
		{"negative burst is zero", 10, -3, []step{
			{0, false}, {1000, false},
		}},
		{"fractional rate", 0.5, 1, []step{
			{0, true}, {1999, false}, {2000, true}, {3999, false}, {4000, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tokenbucket.NewBucket(tt.rate, tt.burst)
			for i, s := range tt.steps {
				assert.Equal(t, s.want, b.AllowAt(at(s.ms)), "step %d at %dms", i, s.ms)
			}
		})
	}
}

func TestBucketZeroValueIsClosed(t *testing.T) {
	var b tokenbucket.Bucket
	assert.False(t, b.AllowAt(at(0)))
	assert.False(t, b.ReserveAt(at(0)).OK())
	assert.Equal(t, rate.Limit(0), b.Rate())
	assert.Equal(t, 0, b.Burst())

	// Opened, it starts empty and fills at the rate.
	b.SetRateAt(at(0), 10, 2)
	assert.False(t, b.AllowAt(at(0)))
	assert.True(t, b.AllowAt(at(100)))
	assert.False(t, b.AllowAt(at(100)))
}

func TestBucketStartsFull(t *testing.T) {
	b := tokenbucket.NewBucket(1, 5)
	assert.Equal(t, 5.0, b.TokensAt(at(0)))
	assert.Equal(t, rate.Limit(1), b.Rate())
	assert.Equal(t, 5, b.Burst())
}

func TestSetRateAt(t *testing.T) {
	b := tokenbucket.NewBucket(1, 1)
	require.True(t, b.AllowAt(at(0)))

	// Tokens accrued so far are kept; the new rate applies from now on.
	b.SetRateAt(at(500), 10, 1)
	assert.InDelta(t, 0.5, b.TokensAt(at(500)), 1e-9)
	assert.False(t, b.AllowAt(at(549)))
	assert.True(t, b.AllowAt(at(550)))

	// A smaller burst caps what is held.
	b.SetRateAt(at(10_000), 10, 5)
	assert.Equal(t, 1.0, b.TokensAt(at(10_000)))
	assert.Equal(t, 5.0, b.TokensAt(at(20_000)))
	b.SetRateAt(at(20_000), 10, 2)
	assert.Equal(t, 2.0, b.TokensAt(at(20_000)))
	assert.Equal(t, 2, b.Burst())

	// Rate 0 closes the bucket once its tokens are spent.
	b.SetRateAt(at(20_000), 0, 2)
	assert.True(t, b.AllowAt(at(20_000)))
	assert.True(t, b.AllowAt(at(20_000)))
	assert.False(t, b.AllowAt(at(1_000_000)))
	assert.False(t, b.ReserveAt(at(1_000_000)).OK())
}

func TestDrainAt(t *testing.T) {
	tests := []struct {
		name  string
		rate  rate.Limit
		burst int
		drain []int // drain deadlines in ms, each drained at 0
		steps []step
		until int // DrainedUntil, in ms
	}{
		{"blocks until the deadline, then ramps from zero", 10, 5, []int{1000}, []step{
			{0, false}, {999, false}, {1000, false}, {1099, false}, {1100, true}, {1100, false}, {1200, true},
		}, 1000},
		{"longest deadline wins", 10, 5, []int{1000, 300}, []step{
			{400, false}, {1099, false}, {1100, true},
		}, 1000},
		{"a longer drain extends", 10, 5, []int{300, 1000}, []step{
			{400, false}, {1099, false}, {1100, true},
		}, 1000},
		{"no saved tokens after a long drain", 10, 5, []int{60_000}, []step{
			{60_100, true}, {60_100, false}, {60_150, false}, {60_200, true},
		}, 60_000},
		{"a past deadline empties without blocking", 10, 5, []int{-1000}, []step{
			{0, false}, {100, true}, {100, false},
		}, -1000},
		{"infinite rate resumes at the deadline", rate.Inf, 1, []int{1000}, []step{
			{999, false}, {1000, true}, {1000, true},
		}, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tokenbucket.NewBucket(tt.rate, tt.burst)
			for _, d := range tt.drain {
				b.DrainAt(at(0), at(d))
			}
			assert.Equal(t, at(tt.until), b.DrainedUntil())
			for i, s := range tt.steps {
				assert.Equal(t, s.want, b.AllowAt(at(s.ms)), "step %d at %dms", i, s.ms)
			}
		})
	}
}

func TestDrainKeepsRateChanges(t *testing.T) {
	b := tokenbucket.NewBucket(10, 5)
	b.DrainAt(at(0), at(1000))
	// A rate change while drained applies from the deadline on, from zero.
	b.SetRateAt(at(500), 2, 5)
	assert.Equal(t, 0.0, b.TokensAt(at(500)))
	assert.Equal(t, 0.0, b.TokensAt(at(1000)))
	assert.False(t, b.AllowAt(at(1499)))
	assert.True(t, b.AllowAt(at(1500)))
}

func TestReserveAt(t *testing.T) {
	b := tokenbucket.NewBucket(2, 1)
	r1 := b.ReserveAt(at(0))
	require.True(t, r1.OK())
	assert.Equal(t, time.Duration(0), r1.DelayFrom(at(0)))

	r2 := b.ReserveAt(at(0))
	require.True(t, r2.OK())
	assert.Equal(t, 500*time.Millisecond, r2.DelayFrom(at(0)))
	assert.Equal(t, 300*time.Millisecond, r2.DelayFrom(at(200)))
	assert.Equal(t, time.Duration(0), r2.DelayFrom(at(600)))

	r3 := b.ReserveAt(at(0))
	assert.Equal(t, time.Second, r3.DelayFrom(at(0)))

	// Canceling the latest gives its token back: the next one gets its time.
	r3.CancelAt(at(100))
	assert.False(t, r3.OK())
	assert.Equal(t, rate.InfDuration, r3.DelayFrom(at(100)))
	r4 := b.ReserveAt(at(100))
	assert.Equal(t, 900*time.Millisecond, r4.DelayFrom(at(100)))

	// Canceling twice is harmless.
	r4.CancelAt(at(100))
	r4.CancelAt(at(100))
	assert.Equal(t, 900*time.Millisecond, b.ReserveAt(at(100)).DelayFrom(at(100)))

	// A due reservation cannot be given back: its token is spent.
	r2.CancelAt(at(500))
	assert.InDelta(t, -1.0, b.TokensAt(at(500)), 1e-9)
}

func TestReserveAtClosed(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rate  rate.Limit
		burst int
	}{
		{"burst zero", 10, 0},
		{"rate zero, no tokens", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tokenbucket.NewBucket(tt.rate, tt.burst)
			r := b.ReserveAt(at(0))
			assert.False(t, r.OK())
			assert.Equal(t, rate.InfDuration, r.DelayFrom(at(0)))
			r.CancelAt(at(0)) // harmless
		})
	}
	// Rate zero with a token left grants it, then closes.
	b := tokenbucket.NewBucket(0, 1)
	assert.True(t, b.ReserveAt(at(0)).OK())
	assert.False(t, b.ReserveAt(at(0)).OK())
	var zero tokenbucket.Reservation
	assert.False(t, zero.OK())
	zero.CancelAt(at(0))
}

func TestReserveAtDrained(t *testing.T) {
	b := tokenbucket.NewBucket(10, 5)
	early := b.ReserveAt(at(0)) // due at once
	b.DrainAt(at(0), at(2000))
	// A reservation from before the drain waits for its end too.
	assert.Equal(t, 2*time.Second, early.DelayFrom(at(0)))
	// One made while drained comes a token's time after it.
	r := b.ReserveAt(at(500))
	require.True(t, r.OK())
	assert.Equal(t, 1600*time.Millisecond, r.DelayFrom(at(500)))
	// Given back, the next reservation gets its slot.
	r.CancelAt(at(600))
	assert.Equal(t, 1500*time.Millisecond, b.ReserveAt(at(600)).DelayFrom(at(600)))
}

func TestResumeAt(t *testing.T) {
	b := tokenbucket.NewBucket(10, 5)
	b.ResumeAt(at(0)) // not drained: nothing happens
	assert.Equal(t, 5.0, b.TokensAt(at(0)))

	b.DrainAt(at(0), at(60_000))
	b.DrainAt(at(0), time.Time{}) // cannot shorten it
	assert.False(t, b.AllowAt(at(30_000)))

	b.ResumeAt(at(30_000))
	assert.Equal(t, at(30_000), b.DrainedUntil())
	assert.Equal(t, 0.0, b.TokensAt(at(30_000)), "resumes from zero")
	assert.False(t, b.AllowAt(at(30_099)))
	assert.True(t, b.AllowAt(at(30_100)))
	assert.Equal(t, 5.0, b.TokensAt(at(40_000)))

	r := mustNew(t, tokenbucket.Config{Rate: 1})
	r.DrainAt("k", at(0), at(60_000))
	r.ResumeAt("k", at(1000))
	assert.True(t, r.AllowAt("k", at(2000)))
}
