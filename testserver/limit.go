package testserver

import (
	"math"
	"net/http"
	"time"
)

// limiter is the state of one Limit. Times are offsets from the server's
// start. It is not safe for concurrent use: the host's mutex guards it.
type limiter struct {
	lim Limit

	// FixedWindow.
	window int64 // index of the current window
	count  int   // admitted in the current window

	// TokenBucket (GCRA).
	interval time.Duration // emission interval 1/Rate
	tau      time.Duration // tolerance (Burst-1) * interval
	tat      time.Duration // theoretical arrival time

	// SlidingWindow: the last N counted arrivals, a ring in arrival order.
	ring ring
}

func newLimiter(l Limit) limiter {
	lm := limiter{lim: l}
	if l.Kind == TokenBucket {
		lm.interval = time.Duration(float64(time.Second) / l.Rate)
		if lm.interval < 1 {
			lm.interval = 1
		}
		lm.tau = time.Duration(l.Burst-1) * lm.interval
	}
	return lm
}

// admit decides on a request arriving at e while inFlight others are being
// served and queued others wait for a worker. If it refuses, wait is the
// time until capacity frees (assuming no further counted requests).
func (lm *limiter) admit(e time.Duration, inFlight, queued int) (ok bool, wait time.Duration) {
	l := &lm.lim
	switch l.Kind {
	case FixedWindow:
		k := int64(e / l.Window)
		if k != lm.window {
			lm.window, lm.count = k, 0
		}
		if lm.count < l.N {
			lm.count++
			return true, 0
		}
		return false, time.Duration(k+1)*l.Window - e
	case TokenBucket:
		tat := max(lm.tat, e)
		if tat-e <= lm.tau {
			lm.tat = tat + lm.interval
			return true, 0
		}
		if l.CountRejected {
			lm.tat = tat + lm.interval
			return false, lm.tat - lm.tau - e
		}
		return false, tat - lm.tau - e
	case SlidingWindow:
		lm.ring.init(l.N)
		if lm.ring.full() {
			if oldest := lm.ring.oldest(); oldest+l.Window > e {
				if l.CountRejected {
					lm.ring.push(e)
					return false, lm.ring.oldest() + l.Window - e
				}
				return false, oldest + l.Window - e
			}
		}
		lm.ring.push(e)
		return true, 0
	case Concurrency:
		if inFlight < l.MaxConcurrent {
			return true, 0
		}
		return false, concurrencyWait
	case WorkerPool:
		if inFlight < l.MaxConcurrent || l.Queue == 0 || queued < l.Queue {
			return true, 0
		}
		return false, concurrencyWait
	}
	return true, 0
}

// workers is the number of workers that serve what the limit admits:
// MaxConcurrent for a WorkerPool, unbounded (every admitted request starts
// at once) otherwise.
func (lm *limiter) workers() int {
	if lm.lim.Kind == WorkerPool {
		return lm.lim.MaxConcurrent
	}
	return noWorkers
}

// excessStatus is the default status of a rejection: 503 for the limits
// that count requests in flight, 429 for the others.
func (lm *limiter) excessStatus() int {
	if k := lm.lim.Kind; k == Concurrency || k == WorkerPool {
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

// quota describes the limit at e for quota headers: q requests per w whole
// seconds (the sustained capacity, never overstated by the rounding of w),
// r admissible now, t until the quota resets. ok is false for kinds that
// have no quota (None, Concurrency).
func (lm *limiter) quota(e time.Duration) (q int, w int64, r int, t time.Duration, ok bool) {
	l := &lm.lim
	switch l.Kind {
	case FixedWindow:
		k := int64(e / l.Window)
		used := lm.count
		if k != lm.window {
			used = 0
		}
		q, w = windowPolicy(l.N, l.Window)
		return q, w, l.N - used, time.Duration(k+1)*l.Window - e, true
	case TokenBucket:
		tat := max(lm.tat, e)
		if ahead := tat - e; ahead <= lm.tau {
			r = min(int((lm.tau-ahead)/lm.interval)+1, l.Burst)
		}
		// The window to refill the burst, in whole seconds; the quota is
		// what the rate brings in that time, and at least the burst.
		w = max(int64(math.Ceil(float64(l.Burst)/l.Rate)), 1)
		q = max(l.Burst, int(math.Floor(l.Rate*float64(w)+1e-9)))
		return q, w, r, tat - e, true
	case SlidingWindow:
		n, first := lm.ring.since(e - l.Window)
		if n > 0 {
			t = first + l.Window - e
		}
		q, w = windowPolicy(l.N, l.Window)
		return q, w, max(l.N-n, 0), t, true
	}
	return 0, 0, 0, 0, false
}

// windowPolicy states "n per window" in whole seconds: a 500 ms window of 5
// is 10 per second.
func windowPolicy(n int, window time.Duration) (q int, w int64) {
	w = ceilSeconds(window, 1)
	if time.Duration(w)*time.Second == window {
		return n, w
	}
	return max(n, int(float64(n)*float64(time.Duration(w)*time.Second)/float64(window))), w
}

// ring keeps the last cap(buf) timestamps in arrival order. Its zero value
// is empty and unallocated, so that idle hosts cost nothing.
type ring struct {
	buf  []time.Duration
	head int // index of the oldest entry once full
	n    int
}

func (r *ring) init(size int) {
	if r.buf == nil {
		r.buf = make([]time.Duration, size)
	}
}

func (r *ring) full() bool { return r.n == len(r.buf) }

func (r *ring) oldest() time.Duration {
	if r.n < len(r.buf) {
		return r.buf[0]
	}
	return r.buf[r.head]
}

func (r *ring) push(t time.Duration) {
	if r.n < len(r.buf) {
		r.buf[r.n] = t
		r.n++
		return
	}
	r.buf[r.head] = t
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
}

func (r *ring) reset() { r.head, r.n = 0, 0 }

// at returns the i-th oldest entry.
func (r *ring) at(i int) time.Duration {
	if r.n < len(r.buf) {
		return r.buf[i]
	}
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return r.buf[j]
}

// since returns how many entries are > after, and the oldest of them.
func (r *ring) since(after time.Duration) (n int, first time.Duration) {
	lo, hi := 0, r.n // binary search: entries are in arrival order
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.at(mid) > after {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == r.n {
		return 0, 0
	}
	return r.n - lo, r.at(lo)
}
