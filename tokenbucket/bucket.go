package tokenbucket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrWouldExceedDeadline is returned by Wait, at once and without waiting,
// when the token could not be granted before the context's deadline: the
// queue ahead, the rate or a drain puts it past the deadline, or the bucket
// is closed (Rate 0 or Burst 0). A caller already queued gets it as soon as a
// rate change or a drain makes its deadline unreachable. No token is spent.
var ErrWouldExceedDeadline = errors.New("tokenbucket: wait would exceed context deadline")

// errEvicted tells a Registry method that the Bucket it found was evicted
// meanwhile, so it must look the key up again.
var errEvicted = errors.New("tokenbucket: bucket evicted")

// Bucket is one token bucket with a drain deadline: the rate cap of one
// scope (a host, a proxy, an API key).
//
// A Bucket holds up to Burst tokens and gains Rate tokens per second; each
// granted event takes one. Like rate.Limiter it can be used three ways:
// AllowAt drops what exceeds the rate, ReserveAt tells the caller how long to
// sleep, and Wait blocks on a context. On top of rate.Limiter it adds:
//
//   - DrainAt, for a 429: the bucket is emptied and grants nothing until a
//     deadline (the longest deadline wins); afterwards tokens accrue from
//     zero, so the scope ramps back instead of bursting. ResumeAt ends a
//     drain early.
//   - Blocked Wait callers are re-priced: when the rate changes, the bucket
//     is drained, or a waiter ahead gives up, every queued caller gets a new
//     time at the current rate, in arrival order. A rate cut therefore takes
//     effect at once instead of after the queue has drained.
//
// Every method taking now has a shorthand without it that uses time.Now().
// Pass times from time.Now() or derived from it with Add, which carry the
// monotonic clock reading; see the package documentation.
//
// The zero value is a closed Bucket (Rate 0, Burst 0): it grants nothing
// until SetRateAt opens it, and then starts empty. NewBucket returns a full
// one. A Bucket must not be copied after first use. Bucket is safe for
// concurrent use.
type Bucket struct {
	mu sync.Mutex
	// lim does the arithmetic. Its own mutex is only ever taken with mu
	// held, so it never contends.
	lim rate.Limiter

	// until is the drain deadline; the limiter is only ever asked about
	// times at or after it (see at).
	until time.Time

	q *queue // blocked Wait callers, in reservation order; nil when none

	// Registry bookkeeping, unused for a Bucket from NewBucket.
	reg     *Registry
	key     string
	next    *Bucket // the Registry's sweep order
	touched int64   // latest use, in nanoseconds since reg.epoch
	placed  int64   // when the Bucket took its place in the sweep order
	dead    bool    // evicted: Registry methods look the key up again
}

// NewBucket returns a full Bucket that allows events up to rate r with
// bursts of at most burst, as rate.NewLimiter(r, burst) does: r == rate.Inf
// allows everything (except while drained), r == 0 allows the first burst
// events only, and burst == 0 allows nothing unless r == rate.Inf. A
// negative or NaN rate is taken as 0, a negative burst as 0.
func NewBucket(r rate.Limit, burst int) *Bucket {
	b := new(Bucket)
	b.fill(r, burst)
	return b
}

// fill sets the rate and burst of a new Bucket and fills it. rate.Limiter
// has no setter for tokens, and a Limiter must not be copied, so the tokens
// come from one nanosecond at rate.Inf, long before any real time.
func (b *Bucket) fill(r rate.Limit, burst int) {
	r, burst = sanitize(r, burst)
	var origin time.Time
	b.lim.SetBurstAt(origin, burst)
	b.lim.SetLimitAt(origin, rate.Inf)
	b.lim.SetLimitAt(origin.Add(time.Nanosecond), r)
}

func sanitize(r rate.Limit, burst int) (rate.Limit, int) {
	switch {
	case !(r > 0): // negative or NaN
		r = 0
	case r > rate.Inf: // math.Inf(1) would turn the arithmetic into NaN
		r = rate.Inf
	}
	return r, max(burst, 0)
}

// at is the time the limiter is asked about for a call at now: the drain
// deadline while drained, so that no token accrues before it.
func (b *Bucket) at(now time.Time) time.Time {
	if now.Before(b.until) {
		return b.until
	}
	return now
}

func (b *Bucket) touchLocked(now time.Time) {
	if b.reg == nil {
		return
	}
	if t := b.reg.since(now); t > b.touched {
		b.touched = t
	}
}

// Rate returns the rate in tokens per second.
func (b *Bucket) Rate() rate.Limit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lim.Limit()
}

// Burst returns the bucket size.
func (b *Bucket) Burst() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lim.Burst()
}

// Tokens is shorthand for TokensAt(time.Now()).
func (b *Bucket) Tokens() float64 { return b.TokensAt(time.Now()) }

// TokensAt returns the number of tokens available at now: zero or less while
// drained, negative while reservations are outstanding.
func (b *Bucket) TokensAt(now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lim.TokensAt(b.at(now))
}

// DrainedUntil returns the latest drain deadline, which may be in the past,
// or the zero Time if the Bucket was never drained.
func (b *Bucket) DrainedUntil() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.until
}

// Allow is shorthand for AllowAt(time.Now()).
func (b *Bucket) Allow() bool { return b.AllowAt(time.Now()) }

// AllowAt reports whether an event may happen at now, and if so takes its
// token. It never waits; use it to drop or skip what exceeds the rate.
// It reports false while the Bucket is drained.
func (b *Bucket) AllowAt(now time.Time) bool {
	b.mu.Lock()
	ok := b.allowLocked(now)
	b.mu.Unlock()
	return ok
}

func (b *Bucket) allowLocked(now time.Time) bool {
	b.touchLocked(now)
	// Blocked waiters need no check: they hold reservations, which leave
	// the limiter below one token until the last of them is due.
	if now.Before(b.until) {
		return false
	}
	if b.lim.AllowN(now, 1) {
		return true
	}
	// A refused AllowN leaves the limiter's clock where it was. Should now
	// be before it (the wall clock stepped back between times without a
	// monotonic reading), the limiter would accrue nothing until the wall
	// clock caught up: a stall. Re-anchor it at now, tokens unchanged.
	b.lim.SetBurstAt(now, b.lim.Burst())
	return false
}

// SetRate is shorthand for SetRateAt(time.Now(), r, burst).
func (b *Bucket) SetRate(r rate.Limit, burst int) { b.SetRateAt(time.Now(), r, burst) }

// SetRateAt changes the rate and the bucket size from now on (from the drain
// deadline on, while drained). Tokens already accrued are kept, up to the
// new burst. Blocked Wait callers are re-priced at the new rate at once, in
// arrival order; those whose context deadline becomes unreachable fail with
// ErrWouldExceedDeadline. Reservations from ReserveAt keep their times.
// Rate and burst are sanitised as by NewBucket.
func (b *Bucket) SetRateAt(now time.Time, r rate.Limit, burst int) {
	r, burst = sanitize(r, burst)
	b.mu.Lock()
	b.setRateLocked(now, r, burst)
	b.mu.Unlock()
}

func (b *Bucket) setRateLocked(now time.Time, r rate.Limit, burst int) {
	b.touchLocked(now)
	at := b.at(now)
	b.unreserveLocked(now, now, at)
	b.lim.SetLimitAt(at, r)
	b.lim.SetBurstAt(at, burst)
	b.reserveQueuedLocked(now, nil)
}

// Drain is shorthand for DrainAt(time.Now(), until).
func (b *Bucket) Drain(until time.Time) { b.DrainAt(time.Now(), until) }

// DrainAt empties the bucket and grants nothing before until; from until on,
// tokens accrue from zero at the current rate, so the first token after a
// drain comes one token's time (1/Rate) after until, and never a burst of
// saved tokens. The longest deadline wins: a drain ending no later than
// the one in force changes nothing (ResumeAt ends a drain early). An until
// at or before now empties the bucket without blocking it.
//
// Blocked Wait callers are re-priced behind the deadline. Reservations from
// ReserveAt keep their slot, but their DelayFrom reports at least the time
// to the deadline.
//
// An until without a monotonic clock reading (one parsed from an HTTP date,
// say) is converted to now plus the wall-clock distance to it, so that the
// deadline is kept on now's monotonic clock.
func (b *Bucket) DrainAt(now, until time.Time) {
	until = now.Add(until.Sub(now))
	b.mu.Lock()
	b.drainLocked(now, until)
	b.mu.Unlock()
}

func (b *Bucket) drainLocked(now, until time.Time) {
	b.touchLocked(now)
	if !until.After(b.until) && b.until.After(now) {
		return // a drain ending no earlier is in force and already empties the bucket
	}
	from := until
	if from.Before(now) {
		from = now
	}
	at := b.at(now) // at <= from: the limiter's clock only moves forward
	b.unreserveLocked(now, now, at)
	// Empty the bucket as of from, with no accrual before it. SetBurstAt
	// first advances to from (capped at the old burst); the second call
	// then caps what is left at zero. Outstanding debt (negative tokens)
	// is kept.
	burst := b.lim.Burst()
	b.lim.SetBurstAt(from, 0)
	b.lim.SetBurstAt(from, burst)
	if until.After(b.until) {
		b.until = until
	}
	b.reserveQueuedLocked(now, nil)
}

// Resume is shorthand for ResumeAt(time.Now()).
func (b *Bucket) Resume() { b.ResumeAt(time.Now()) }

// ResumeAt ends a drain early, for when the reason for it is gone (the
// proxy was rotated, say): the bucket grants again from now on, with tokens
// accruing from zero at now, and blocked Wait callers are re-priced. It does
// nothing if the Bucket is not drained at now. DrainAt cannot do this: a
// shorter drain never shortens the one in force.
func (b *Bucket) ResumeAt(now time.Time) {
	b.mu.Lock()
	b.resumeLocked(now)
	b.mu.Unlock()
}

func (b *Bucket) resumeLocked(now time.Time) {
	b.touchLocked(now)
	if !now.Before(b.until) {
		return
	}
	b.unreserveLocked(now, now, b.until)
	b.until = now
	// The limiter's clock stands at the old deadline; bring it back to now,
	// tokens (zero, or less for outstanding reservations) unchanged.
	b.lim.SetBurstAt(now, b.lim.Burst())
	b.reserveQueuedLocked(now, nil)
}

// Reservation is a token taken by ReserveAt for use at a given time. It is a
// small value: keep it in a variable, and cancel it through that variable.
// A Reservation is not safe for concurrent use; its Bucket is.
type Reservation struct {
	b   *Bucket
	res rate.Reservation
	act time.Time
	ok  bool
}

// Reserve is shorthand for ReserveAt(time.Now()).
func (b *Bucket) Reserve() Reservation { return b.ReserveAt(time.Now()) }

// ReserveAt takes one token for the earliest time it can be had, behind the
// blocked Wait callers and earlier reservations, and returns the
// Reservation. The caller must wait DelayFrom(now) before acting, or cancel
// the Reservation to give the token back.
//
// The Reservation is not OK when the Bucket is closed: Burst is 0 (with a
// finite rate), or Rate is 0 and no token is left. Then nothing is taken.
//
// Reservations are priced at the rate in force when they are made and are
// not re-priced by SetRateAt; a caller that wants the new rate cancels and
// reserves again (or uses Wait, which re-prices by itself).
func (b *Bucket) ReserveAt(now time.Time) Reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserveAtLocked(now)
}

func (b *Bucket) reserveAtLocked(now time.Time) Reservation {
	b.touchLocked(now)
	res, act, ok := b.reserveLocked(b.at(now))
	if !ok {
		return Reservation{}
	}
	return Reservation{b: b, res: res, act: act, ok: true}
}

// reserveLocked takes one token at at (a time from b.at). It reports false,
// taking nothing, when the bucket is closed: rate.Limiter would hand out a
// reservation some 292 years ahead at rate 0, which is no use to anyone.
func (b *Bucket) reserveLocked(at time.Time) (rate.Reservation, time.Time, bool) {
	if b.lim.Limit() == 0 && b.lim.TokensAt(at) < 1 {
		return rate.Reservation{}, time.Time{}, false
	}
	r := b.lim.ReserveN(at, 1) // inlined: r does not escape
	if !r.OK() {
		return rate.Reservation{}, time.Time{}, false
	}
	return *r, at.Add(ceilMicro(r.DelayFrom(at))), true
}

// ceilMicro rounds d up to a whole microsecond. rate.Limiter truncates its
// float arithmetic to the nanosecond, so that a wait of exactly 800ms can
// come out as 799.999999ms; rounding up keeps waits whole and never short.
func ceilMicro(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r != 0 {
		d += time.Microsecond - r
	}
	return d
}

// OK reports whether a token was reserved. It is false for a Reservation
// from a closed Bucket, for one that was canceled and for the zero value.
func (r Reservation) OK() bool { return r.ok }

// Delay is shorthand for DelayFrom(time.Now()).
func (r Reservation) Delay() time.Duration { return r.DelayFrom(time.Now()) }

// DelayFrom returns how long the holder must wait from now before acting;
// zero means act now. While the Bucket is drained it is at least the time
// to the drain deadline, even for a reservation made before the drain. It
// returns rate.InfDuration when the Reservation is not OK.
func (r Reservation) DelayFrom(now time.Time) time.Duration {
	if !r.ok {
		return rate.InfDuration
	}
	r.b.mu.Lock()
	act := r.act
	if act.Before(r.b.until) {
		act = r.b.until
	}
	r.b.mu.Unlock()
	return max(act.Sub(now), 0)
}

// Cancel is shorthand for CancelAt(time.Now()).
func (r *Reservation) Cancel() { r.CancelAt(time.Now()) }

// CancelAt tells the Bucket that the holder will not act, and gives the
// token back unless its time has already come. Blocked Wait callers queued
// behind it move up. As with rate.Reservation, the token is given back only
// as far as later reservations from ReserveAt allow, so that a gap in the
// schedule is never filled twice. The Reservation is no longer OK
// afterwards, so canceling it twice is harmless.
func (r *Reservation) CancelAt(now time.Time) {
	if !r.ok {
		return
	}
	r.ok = false
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !r.act.After(now) {
		return // due: the token has been spent
	}
	at := b.at(now)
	b.unreserveLocked(now, r.act, at)
	r.res.CancelAt(at)
	b.reserveQueuedLocked(now, nil)
}

// Wait blocks until a token is granted, and takes it. It fails at once,
// without waiting and without taking a token, with an error wrapping
// ErrWouldExceedDeadline if the token could not be granted before ctx's
// deadline, with the rate, the queue and any drain as they stand. If ctx is
// done first, Wait gives the token back (callers queued behind move up) and
// returns an error wrapping ctx.Err().
//
// Blocked callers are served in arrival order and are re-priced whenever the
// rate changes, the Bucket is drained or a caller ahead gives up. On a closed
// Bucket (Rate 0 with no token left, or Burst 0 with a finite rate) Wait
// blocks until SetRateAt opens it, or fails at once if ctx has a deadline.
func (b *Bucket) Wait(ctx context.Context) error {
	return b.wait(ctx, time.Now(), false)
}

// A waiter is one blocked Wait call. All fields are guarded by the Bucket's
// mu.
type waiter struct {
	prev, next *waiter
	res        rate.Reservation // valid when reserved
	act        time.Time        // when the reserved token may be used
	reserved   bool
	deadline   time.Time // the context's deadline; zero if none
	err        error     // set, and the waiter unlinked, when it was failed
}

type queue struct {
	head, tail *waiter
	// changed is closed, and cleared, whenever waiters are re-priced or
	// failed; a sleeping waiter then looks at its state again.
	changed chan struct{}
}

func wrapCtx(err error) error { return fmt.Errorf("tokenbucket: wait: %w", err) }

// wait implements Wait, now being time.Now(). With registry set it returns
// errEvicted, before queueing, when b has been evicted from its Registry.
func (b *Bucket) wait(ctx context.Context, now time.Time, registry bool) error {
	if err := ctx.Err(); err != nil {
		return wrapCtx(err)
	}
	deadline, _ := ctx.Deadline()

	b.mu.Lock()
	if registry && b.dead {
		b.mu.Unlock()
		return errEvicted
	}
	if b.q == nil && b.allowLocked(now) {
		b.mu.Unlock()
		return nil
	}
	b.touchLocked(now)
	if b.q == nil {
		b.q = new(queue)
	}
	w := &waiter{deadline: deadline}
	b.q.push(w)
	b.reserveQueuedLocked(now, w)
	err := w.err
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return b.sleep(ctx, w)
}

// sleep waits until w's reserved time has come, sleeping with no lock held,
// and looks again whenever w is re-priced.
func (b *Bucket) sleep(ctx context.Context, w *waiter) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if w.err != nil {
			b.mu.Unlock()
			return w.err
		}
		now := time.Now()
		act := b.at(w.act) // re-pricing keeps act at or after until; this is a guard
		reserved := w.reserved
		if reserved && !act.After(now) {
			b.removeLocked(w) // the token is ours
			b.mu.Unlock()
			return nil
		}
		changed := b.q.changedChan()
		b.mu.Unlock()

		var fire <-chan time.Time
		if reserved {
			if timer == nil {
				timer = time.NewTimer(act.Sub(now))
			} else {
				timer.Reset(act.Sub(now))
			}
			fire = timer.C
		}
		select {
		case <-fire:
		case <-changed:
		case <-ctx.Done():
			b.mu.Lock()
			if w.err == nil {
				b.cancelWaiterLocked(w, time.Now())
			}
			b.mu.Unlock()
			return wrapCtx(ctx.Err())
		}
	}
}

// cancelWaiterLocked removes w from the queue and gives its token back.
func (b *Bucket) cancelWaiterLocked(w *waiter, now time.Time) {
	if !w.reserved || !w.act.After(now) {
		b.removeLocked(w)
		return
	}
	at := b.at(now)
	b.unreserveLocked(now, w.act, at)
	w.res.CancelAt(at) // w is now the latest reservation: all of it comes back
	w.reserved = false
	b.removeLocked(w)
	b.reserveQueuedLocked(now, nil)
}

// unreserveLocked gives back, latest first, the tokens of the queued waiters
// due after both now and after. Latest first matters: rate.Limiter gives back
// in full only the latest reservation.
func (b *Bucket) unreserveLocked(now, after, at time.Time) {
	if b.q == nil {
		return
	}
	if after.Before(now) {
		after = now
	}
	for w := b.q.tail; w != nil; w = w.prev {
		if !w.reserved {
			continue // unreserved waiters (a closed bucket) sit at the tail
		}
		if !w.act.After(after) {
			break // reserved waiters are in act order
		}
		w.res.CancelAt(at)
		w.reserved = false
		b.q.wake()
	}
}

// reserveQueuedLocked reserves, in arrival order, a token for every queued
// waiter that has none, and fails those whose deadline it would pass. It
// wakes the sleeping waiters if it changed any but arrival, a waiter that is
// not sleeping yet: an arrival alone must not wake the whole queue.
func (b *Bucket) reserveQueuedLocked(now time.Time, arrival *waiter) {
	q := b.q
	if q == nil {
		return
	}
	at := b.at(now)
	changed := false
	for w := q.head; w != nil; {
		next := w.next
		if !w.reserved {
			res, act, ok := b.reserveLocked(at)
			switch {
			case ok && (w.deadline.IsZero() || !act.After(w.deadline)):
				w.res, w.act, w.reserved = res, act, true
			case ok:
				res.CancelAt(at) // the latest reservation: all of it comes back
				w.err = ErrWouldExceedDeadline
				q.unlink(w)
			case !w.deadline.IsZero():
				// Closed: no finite wait will do.
				w.err = ErrWouldExceedDeadline
				q.unlink(w)
			default:
				w = next
				continue // closed, no deadline: stays queued as it was
			}
			changed = changed || w != arrival
		}
		w = next
	}
	if changed {
		q.wake()
	}
	if q.head == nil {
		b.q = nil
	}
}

func (b *Bucket) removeLocked(w *waiter) {
	b.q.unlink(w)
	if b.q.head == nil {
		b.q.wake()
		b.q = nil
	}
}

func (q *queue) push(w *waiter) {
	w.prev = q.tail
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
}

func (q *queue) unlink(w *waiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
}

func (q *queue) changedChan() chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// wake wakes every sleeping waiter. Closing never blocks, so it is done with
// the lock held.
func (q *queue) wake() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// full reports whether b holds all the tokens it can, so that a new Bucket
// would behave the same. A Bucket at rate.Inf is always full.
func (b *Bucket) fullLocked(now time.Time) bool {
	if b.lim.Limit() == rate.Inf {
		return true
	}
	return b.lim.TokensAt(b.at(now)) >= float64(b.lim.Burst())
}
