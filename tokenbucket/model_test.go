package tokenbucket_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// TestBucketMatchesRateLimiter: without drains, a Bucket takes the same
// decisions as a bare rate.Limiter for any sequence of takes, reservations
// and rate changes at non-decreasing times. The Bucket adds; it does not
// change the arithmetic.
func TestBucketMatchesRateLimiter(t *testing.T) {
	rates := []rate.Limit{0, 0.3, 1, 7, 1000, rate.Inf}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		r0, burst0 := rates[rng.IntN(len(rates))], rng.IntN(5)
		b := tokenbucket.NewBucket(r0, burst0)
		lim := rate.NewLimiter(r0, burst0)
		now := t0
		for step := range 300 {
			now = now.Add(time.Duration(rng.ExpFloat64() * float64(300*time.Millisecond)))
			switch rng.IntN(10) {
			case 0:
				r, burst := rates[rng.IntN(len(rates))], rng.IntN(5)
				b.SetRateAt(now, r, burst)
				lim.SetLimitAt(now, r)
				lim.SetBurstAt(now, burst)
			default:
				want := lim.AllowN(now, 1)
				require.Equal(t, want, b.AllowAt(now), "seed %d step %d", seed, step)
			}
			if lim.Limit() != rate.Inf {
				require.InDelta(t, lim.TokensAt(now), b.TokensAt(now), 1e-9, "seed %d step %d", seed, step)
			}
		}
	}
}

// TestDrainNeverOvergrants: after a drain, a Bucket never grants more than
// rate × (time since the deadline), whatever it held before and whatever
// the calls before the deadline.
func TestDrainNeverOvergrants(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 2))
		r := rate.Limit(0.5 + rng.Float64()*20)
		b := tokenbucket.NewBucket(r, 1+rng.IntN(20))
		now := t0
		for range rng.IntN(30) { // some history
			now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
			b.AllowAt(now)
		}
		until := now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		b.DrainAt(now, until)
		granted := 0
		for range 500 {
			now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
			if b.AllowAt(now) {
				granted++
				require.False(t, now.Before(until), "seed %d: granted while drained", seed)
				bound := math.Floor(float64(r)*now.Sub(until).Seconds() + 1e-9)
				require.LessOrEqual(t, float64(granted), bound, "seed %d", seed)
			}
		}
	}
}
