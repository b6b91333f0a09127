package tokenbucket

import (
	"math"
	"time"

	"github.com/colly-polite/polite/internal/sat"
)

// MaxCredit bounds how much lateness a late send gives back: the schedule
// lets a send go up to this much (and at most a quarter of the interval)
// before its theoretical time, never more. It is what keeps a scope at its
// rate when every timer fires a little late (at 30 sends per second, a
// schedule that restarted from each actual send lost about 6 %).
const MaxCredit = 10 * time.Millisecond

// MaxInterval is the longest gap between two sends a Bucket keeps: a rate
// below one per century (or zero) is a closed bucket whose next send is a
// century away, far enough that adding to it cannot overflow.
const MaxInterval = sat.Forever

// Bucket is the send schedule of one scope. The zero value is closed (rate
// 0): SetRate opens it. A Bucket is a small value; it is not safe for
// concurrent use (the caller's lock guards it).
type Bucket struct {
	rate float64
	tat  time.Duration // theoretical time of the next send
	last time.Duration // when the last send went
	// drained is when the drain ends: the first send after it goes one
	// interval (at the rate then in force) later
	drained time.Duration
	drain   bool // drained is set
	sent    bool // last is set
	strict  bool // no credit: the rate is a minimum gap
	// extra is the random gap Defer put before the next send, kept when
	// the rate changes and cleared by the send
	extra time.Duration
	// the schedule before the last Take, for Untake: its next send and
	// its last (prevSent: it had one)
	prevTat, prevLast time.Duration
	prevSent          bool
	undone            bool // the last Take was given back: none to give back until the next
}

// Rate is the rate in force, sends per second.
func (b *Bucket) Rate() float64 { return b.rate }

// SetRate changes the rate at once: the next send is re-priced from the
// last one, so a cut reaches the very next send and a rise does not wait
// out the old interval. r <= 0 (or NaN) closes the bucket.
func (b *Bucket) SetRate(r float64) {
	b.rate = r
	if b.sent {
		b.tat = b.last + interval(r) + b.extra
	}
}

// Defer moves the next send d later than the schedule says (a random
// extra gap drawn per send, as after colly.LimitRule's RandomDelay); the
// sends after it keep their spacing from it, so the rate never rises above
// the one in force. A rate change before the next send keeps the extra;
// the next Take clears it. d <= 0, or a bucket that has not sent yet, is
// left as it is.
func (b *Bucket) Defer(d time.Duration) {
	if d <= 0 || !b.sent {
		return
	}
	d = min(d, MaxInterval)
	b.extra += d
	b.tat += d
}

// SetStrict makes the rate a minimum gap between sends (robots.txt's
// Crawl-delay asks for one): no credit for lateness while it is set.
func (b *Bucket) SetStrict(strict bool) { b.strict = strict }

// Next is the earliest time the next send may go (for a closed bucket, a
// century after its last send).
func (b *Bucket) Next() time.Duration {
	if !(b.rate > 0) {
		return b.last + MaxInterval
	}
	return max(b.tat, b.resume())
}

// resume is when a drain lets the first send go.
func (b *Bucket) resume() time.Duration {
	if !b.drain {
		return math.MinInt64
	}
	return b.drained + interval(b.rate)
}

// Take records a send at now and reports true if the schedule allows one;
// otherwise it changes nothing.
func (b *Bucket) Take(now time.Duration) bool {
	if !(b.rate > 0) || now < b.Next() {
		return false
	}
	t := interval(b.rate)
	credit := min(t/4, MaxCredit)
	if b.strict {
		credit = 0
	}
	from := max(now-credit, b.resume())
	if b.sent {
		from = max(from, b.tat)
	}
	b.prevTat, b.prevLast, b.prevSent, b.undone = b.tat, b.last, b.sent, false
	b.tat = from + t
	b.last, b.sent, b.extra = now, true, 0
	return true
}

// Untake gives back the send Take recorded at at, which was not made (its
// request never left), if it is the last one taken: the schedule is as
// before it, re-priced at the rate in force (a rate cut since then
// spaces the next send from the send before it at the new interval, not
// from the one given back). A send that is not the last is not given
// back: its slot stays used (capacity lost, never a gap shortened). What
// Take allows stays bounded as before: one send given back at most, never
// a burst.
func (b *Bucket) Untake(at time.Duration) {
	if !b.sent || b.last != at || b.undone {
		return
	}
	b.undone = true
	b.last, b.sent, b.tat = b.prevLast, b.prevSent, b.prevTat
	if b.sent {
		// (the extra a Defer drew after the send given back is kept)
		b.tat = max(b.prevTat, b.last+interval(b.rate)) + b.extra
	}
}

// Moved says that the send Take recorded at from, the last one, went at
// to instead (a slot claimed ahead and used later): the sends after it
// are spaced from to. Anything else is left as it is.
func (b *Bucket) Moved(from, to time.Duration) {
	if !b.sent || b.last != from || to <= from {
		return
	}
	b.last = to
	b.tat += to - from
}

// Drain stops the schedule for a pause that ends at until: the first send
// goes at until (one interval after the drain ends), the next ones an
// interval apart, with no burst of saved sends. Should the rate change
// before until, the first send moves with it (it comes one new interval
// after the drain's end). The longest drain wins.
func (b *Bucket) Drain(until time.Duration) {
	if end := until - interval(b.rate); !b.drain || end > b.drained {
		b.drained, b.drain = end, true
	}
}

// Resume ends a drain at now (the pause was lifted early): the first send
// goes one interval later.
func (b *Bucket) Resume(now time.Duration) {
	if b.drain && now < b.drained {
		b.drained = now
	}
}

// interval is the gap between sends at rate r, at most MaxInterval.
func interval(r float64) time.Duration { return sat.Interval(r) }
