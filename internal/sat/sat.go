// Package sat converts numbers from outside (a server's header, a rate, a
// pause) to durations without overflowing: a value too large for any wait
// is a century, never a negative duration that would read as no wait at
// all. Float-to-integer conversion of a value out of range is
// platform-dependent in Go; every conversion of the module goes through
// here.
package sat

import "time"

// Forever is the longest wait any conversion gives: far beyond any crawl,
// and far enough from the limits of time.Duration that adding to it cannot
// overflow.
const Forever = 100 * 365 * 24 * time.Hour

// Seconds converts x seconds to a Duration: 0 for x <= 0, Forever for x at
// or above it (or NaN).
func Seconds(x float64) time.Duration {
	if !(x < Forever.Seconds()) { // NaN too
		return Forever
	}
	if x <= 0 {
		return 0
	}
	return time.Duration(x * float64(time.Second))
}

// Interval is the gap between sends at rate r per second: Forever for a
// rate of zero or less (or NaN), and at most Forever.
func Interval(r float64) time.Duration {
	if !(r > 0) {
		return Forever
	}
	ns := float64(time.Second) / r
	if ns >= float64(Forever) {
		return Forever
	}
	return time.Duration(ns)
}
