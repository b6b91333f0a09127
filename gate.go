package polite

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/sat"
)

// gate decides when a scope may not send at all: pauses (Retry-After,
// backoff, quota, the breaker's cooldown), the breaker's half-open probe,
// and parks after repeated blocks (each park ends by itself with one probe,
// and lasts twice as long as the last while blocks persist). The longest
// deadline wins; a resume is
// jittered so that collectors disperse. Not safe for concurrent use:
// scope.mu guards it.
type gate struct {
	pausedUntil time.Duration
	// pauseAsked is the pause in force as asked for (by the server, the
	// backoff, the fleet), before its jitter: MaxPause is judged on it, so
	// that the jitter never turns an honoured wait into a refusal
	pauseAsked  time.Duration
	parkedUntil time.Duration // with parked: 0 means until Unpark
	reason      pauseKind     // of the pause in force
	breaker     breakerState
	parked      bool
	parkProbe   bool   // a park ran out: one probe at a time until a success or a block
	probeOut    bool   // half-open or parkProbe: the probe is in flight
	badRow      uint16 // fresh throttles and overloads in a row, no success between
	raRow       uint16 // of them, those that said Retry-After
	blockRow    uint16 // blocks in a row, no success between
	// parkLen is the last park's length (0: none since the last success):
	// the next one lasts twice as long, at most the rule's ParkFor
	parkLen time.Duration
	rng     rand.PCG // the resume jitter's source
	// pause accounting (Snapshot.PausedTotal): pausedPast is the time
	// paused before pauseStart; the pause in force runs from pauseStart to
	// pausedUntil
	pauseStart, pausedPast time.Duration
}

// refusal is why a request fails at once instead of waiting: a pause or
// park in force, or a ceiling's gap between sends.
type refusal struct {
	pause   pauseKind
	ceiling ceilingKind
	until   time.Duration // 0: until Unpark
	err     error
}

// refuse reports whether a request must fail at once at now: the scope is
// parked, or paused for longer than maxPause.
func (g *gate) refuse(now, maxPause time.Duration) (refusal, bool) {
	if g.parked {
		if g.parkedAt(now) {
			return refusal{pause: pauseBlocked, until: g.parkedUntil, err: ErrBlocked}, true
		}
		// the park is a hypothesis (this host blocks the crawl) tested
		// by one probe: its success ends it, a block parks again
		g.parked, g.parkProbe, g.blockRow = false, true, 0
	}
	if g.pauseAsked-now > maxPause {
		err := ErrPaused
		if g.reason == pauseBreaker {
			err = ErrBreakerOpen
		}
		return refusal{pause: g.reason, until: g.pausedUntil, err: err}, true
	}
	return refusal{}, false
}

// paused reports whether a pause is in force at now.
func (g *gate) paused(now time.Duration) bool { return now < g.pausedUntil }

// parkedAt reports whether a park is in force at now (a timed one that
// ran out is not, though parked stays set until a request looks).
func (g *gate) parkedAt(now time.Duration) bool {
	return g.parked && (g.parkedUntil == 0 || now < g.parkedUntil)
}

// tick moves an open breaker whose pause has ended to half-open. It
// reports whether it did.
func (g *gate) tick(now time.Duration) bool {
	if g.breaker == breakerOpen && now >= g.pausedUntil {
		g.breaker = breakerHalfOpen
		return true
	}
	return false
}

// probing: a half-open breaker, or a park that ran out, lets one probe
// out at a time.
func (g *gate) probing() bool { return g.breaker == breakerHalfOpen || g.parkProbe }

// ready: while probing, one probe is out at a time.
func (g *gate) ready() bool { return !g.probing() || !g.probeOut }

// limit is the concurrency limit in force, given the law's.
func (g *gate) limit(law float64) int {
	if g.probing() {
		return 1
	}
	return max(int(law), 1)
}

// succeeded records a success; a half-open probe's success closes the
// breaker, which it reports. Any success ends a park's probing: the host
// answers again.
func (g *gate) succeeded(probe bool) (closed bool) {
	g.badRow, g.raRow, g.blockRow = 0, 0, 0
	g.parkProbe, g.parkLen = false, 0
	if g.breaker == breakerHalfOpen && probe {
		g.breaker = breakerClosed
		return true
	}
	return false
}

// signal is a throttle or an overload (fresh: sent after the last decrease
// of its kind). It pauses the scope: Retry-After is honoured whatever the
// epoch (0 or a past date means MinRetryAfter, never a zero-wait loop),
// and a fresh one after another with no success between (that
// Retry-After was not enough) doubles the pause from it, up to
// MaxBackoff or the Retry-After if longer;
// without it, a fresh throttle pauses for a couple of send intervals at
// rate and fresh overloads in a row back off exponentially; the tail of a
// burst adds nothing. Fresh signals in a row open the breaker. It returns
// the pause (0: none) and whether the breaker opened.
func (g *gate) signal(now time.Duration, o *outcome, fresh bool, rate float64, st *settings, r *reaction) (d time.Duration, opened bool) {
	if fresh && g.badRow < math.MaxUint16 {
		g.badRow++
	}
	reason := pauseRetryAfter
	switch {
	case o.hasRA:
		d = max(o.retryAfter, st.MinRetryAfter)
		if g.raRow > 0 && now > g.pausedUntil+st.MaxBackoff {
			g.raRow = 0 // long after the last pause: a new episode
		}
		if fresh && g.raRow < math.MaxUint16 {
			g.raRow++
		}
		if fresh && g.raRow > 1 {
			// refused again after a Retry-After was waited, with no
			// success since: it was not enough (a lockout longer than
			// it says), so the pause doubles from it while refusals
			// persist, as a backoff does
			d = backoff(d, int(g.raRow)-1, max(st.MaxBackoff, d))
		}
	case !fresh:
	case o.class == classify.Throttled || g.badRow > 1:
		reason = pauseBackoff
		base := min(max(sat.Seconds(2/math.Max(rate, 0.001)), 100*time.Millisecond), st.Backoff)
		d = backoff(base, int(g.badRow)-1, st.MaxBackoff)
	}
	if th := st.BreakerThreshold; th > 0 && fresh && int(g.badRow) >= th && g.breaker != breakerOpen {
		g.breaker = breakerOpen
		d = max(d, st.BreakerCooldown)
		reason = pauseBreaker
		opened = true
	}
	if d <= 0 {
		return 0, opened
	}
	d = min(d, longestPause)
	g.pause(now, now+d, reason, st, r)
	return d, opened
}

// blocked records a block (403, block page): after threshold in a row
// with no success between (the tail of a burst already answered not
// counted: counts says whether this one counts), or at once when a park
// that ran out is probing, the scope is parked. The first park lasts
// firstPark (at most parkFor), each one after a block of its probe twice
// the last, at most parkFor (negative: until Unpark): a host that blocks
// everything costs a probe per park, a ban that lifts is found within
// twice its length. It reports whether it parked.
func (g *gate) blocked(now time.Duration, counts bool, threshold int, parkFor time.Duration, r *reaction) bool {
	if counts && g.blockRow < math.MaxUint16 {
		g.blockRow++
	}
	if threshold <= 0 || g.parked || (!g.parkProbe && (!counts || int(g.blockRow) < threshold)) {
		return false
	}
	g.parked, g.parkProbe, g.parkedUntil = true, false, 0
	if parkFor > 0 {
		d := firstPark
		if g.parkLen > 0 {
			d = g.parkLen * 2
		}
		d = min(d, parkFor, longestPause)
		g.parkLen = d
		g.parkedUntil = now + d
		r.share, r.shareReason = g.parkedUntil, pauseBlocked
	}
	return true
}

// firstPark is how long a first park lasts: long enough that a host
// blocking everything costs a few requests a minute at first, short enough
// that a block that was a passing alarm costs well under a minute. Parks
// double from it while blocks persist.
const firstPark = 30 * time.Second

// pause stops the scope until until plus a jitter of its own (the longest
// deadline wins) and tells the reaction what to share: the deadline without
// jitter, so that every collector adds its own. It reports whether the
// deadline in force moved.
func (g *gate) pause(now, until time.Duration, reason pauseKind, st *settings, r *reaction) bool {
	r.reason = reason
	if until > r.share {
		r.share, r.shareReason = until, reason
	}
	return g.hold(now, until, reason, st)
}

// hold makes the pause in force end at until (as asked) plus a jitter of
// its own, if that is later than the one in force. It reports whether the
// deadline moved.
func (g *gate) hold(now, until time.Duration, reason pauseKind, st *settings) bool {
	asked := until
	until += g.jitter(until-now, st)
	if until <= g.pausedUntil {
		return false
	}
	g.moved(now)
	g.pausedUntil, g.pauseAsked, g.reason = until, asked, reason
	return true
}

// moved accounts for the pause deadline moving at now: what was served of
// the old pause is folded, and the new one starts at now (an extension
// too: it continues at now).
func (g *gate) moved(now time.Duration) {
	g.pausedPast += max(min(now, g.pausedUntil)-g.pauseStart, 0)
	g.pauseStart = now
}

// settle folds a pause that ended by now into the time paused and returns
// it, once: the end of a pause is only seen when the scope is next looked
// at.
func (g *gate) settle(now time.Duration) (from, to time.Duration, ended bool) {
	u := g.pausedUntil
	if g.pauseStart < u && u <= now {
		from = g.pauseStart
		g.pausedPast += u - from
		g.pauseStart = u
		return from, u, true
	}
	return 0, 0, false
}

// pausedTotal is the time paused, at now.
func (g *gate) pausedTotal(now time.Duration) time.Duration {
	return g.pausedPast + max(min(now, g.pausedUntil)-g.pauseStart, 0)
}

// adopt takes a pause announced elsewhere (the shared Store), with a jitter
// of its own, if it ends later than the one in force. It reports whether it
// did.
func (g *gate) adopt(now, until time.Duration, reason pauseKind, st *settings) bool {
	if until <= now {
		return false
	}
	return g.hold(now, until, reason, st)
}

// unpark lifts a park and any pause at now.
func (g *gate) unpark(now time.Duration) {
	g.parked, g.parkProbe, g.parkedUntil, g.blockRow, g.parkLen, g.raRow = false, false, 0, 0, 0, 0
	if g.pausedUntil != 0 {
		g.moved(now)
	}
	g.pausedUntil, g.pauseAsked, g.reason = 0, 0, pauseNone
}

// jitter is a random extra in [0, J) for a pause of d: J is Config.Jitter,
// or 10 % of d (at most 1 s) when that is 0; none when it is negative.
func (g *gate) jitter(d time.Duration, st *settings) time.Duration {
	j := st.Jitter
	if j < 0 {
		return 0
	}
	if j == 0 {
		j = min(d/10, time.Second)
	}
	if j <= 0 {
		return 0
	}
	return time.Duration(rand.New(&g.rng).Uint64N(uint64(j)))
}

// backoff is base doubled n times, at most ceiling; it saturates instead of
// overflowing.
func backoff(base time.Duration, n int, ceiling time.Duration) time.Duration {
	d := base
	for i := 0; i < n && d < ceiling; i++ {
		if d > ceiling/2 {
			return ceiling
		}
		d *= 2
	}
	return min(d, ceiling)
}

// longestPause caps every pause a server can ask for (a Retry-After of
// 10^12 s, a date in year 9999): far beyond any crawl, and far enough from
// the limits of time.Duration that adding jitter cannot overflow.
const longestPause = sat.Forever
