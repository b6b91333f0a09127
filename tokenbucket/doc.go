// Package tokenbucket is the pacer of a polite crawler's scope: a send
// schedule at a rate that changes at run time, drained by a pause.
//
//	var b tokenbucket.Bucket
//	b.SetRate(5) // 5 sends per second
//	if b.Take(now) {
//		send()
//	} else {
//		sleepUntil(b.Next())
//	}
//	b.Drain(pauseEnd) // Retry-After: nothing before pauseEnd, then ramp
//
// A Bucket is a token bucket in its GCRA form: it keeps the theoretical
// time of the next send, one interval after the previous one was due. A
// late send gives its lateness back (up to a small credit) instead of
// losing it, so timers that fire late do not slow the schedule down.
// Times are durations since an origin of the caller's choosing, read from a
// monotonic clock; nothing here reads a clock, sleeps or locks. See
// BENCHMARKS.md for its cost and why it is not built on
// golang.org/x/time/rate.
package tokenbucket
