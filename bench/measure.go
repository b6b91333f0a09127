package main

import (
	"math"
	"slices"
	"time"

	"github.com/colly-polite/polite/internal/demo"
)

// meanCapacity is the average of capacity over [from, to), req/s, sampled
// every 10 ms (capacities here are step functions on whole seconds).
func meanCapacity(capacity func(t time.Duration) float64, from, to time.Duration) float64 {
	const step = 10 * time.Millisecond
	var sum float64
	n := 0
	for t := from; t < to; t += step {
		sum += capacity(t)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Convergence is measured on bins of the server's clock that hold at least
// binRequests requests at capacity, and must hold for holdFor.
const (
	binRequests = 10
	holdFor     = 5 * time.Second
	tolerance   = 0.10
)

// converge returns the time to converge, counted from `from`: the start of
// the first run of bins, all inside [from, to), in each of which the
// accepted rate is within ±10 % of the capacity in force, the run lasting
// at least holdFor. Bins are 1 s long, longer when the capacity is so low
// that a second holds fewer than binRequests requests (5/s: 2 s bins; 1/s:
// 10 s bins), so that ±10 % is at least one request. ok is false if the
// accepted rate never converged that way.
func converge(accepted []time.Duration, capacity func(t time.Duration) float64, from, to time.Duration) (at time.Duration, ok bool) {
	lowest := math.Inf(1)
	for t := from; t < to; t += 100 * time.Millisecond {
		lowest = math.Min(lowest, capacity(t))
	}
	if lowest <= 0 || math.IsInf(lowest, 1) {
		return 0, false
	}
	bin := time.Second * time.Duration(max(1, math.Ceil(binRequests/lowest)))
	hold := max(1, int(math.Ceil(float64(holdFor)/float64(bin))))
	n := int((to - from) / bin)
	good := make([]bool, n)
	for i := range good {
		s := from + time.Duration(i)*bin
		want := meanCapacity(capacity, s, s+bin) * bin.Seconds()
		got := float64(demo.CountIn(accepted, s, s+bin))
		good[i] = math.Abs(got-want) <= tolerance*want
	}
	for i := 0; i+hold <= n; i++ {
		if !slices.Contains(good[i:i+hold], false) {
			return time.Duration(i) * bin, true
		}
	}
	return 0, false
}

// gapViolations counts the requests that arrived less than delay after the
// one before them (times in any order).
func gapViolations(times []time.Duration, delay time.Duration) int {
	ts := slices.Clone(times)
	slices.Sort(ts)
	n := 0
	for i := 1; i < len(ts); i++ {
		if ts[i]-ts[i-1] < delay {
			n++
		}
	}
	return n
}

// median returns the median of ds (the mean of the middle two for an even
// count); ok is false when ds is empty.
func median(ds []time.Duration) (m time.Duration, ok bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}
