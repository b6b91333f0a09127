package adaptive

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/colly-polite/polite/adaptive/internal/law"
	"github.com/colly-polite/polite/classify"
)

// core is the decision core of one scope: the control law, the pacer and
// the gate, with an explicit now (the time since the controller's origin).
// It never sleeps, locks or reads a clock. The scope calls it under its
// mutex; the simulator (sim_test.go) drives it directly. Not safe for
// concurrent use.
type core struct {
	law      law.Law
	pace     pacer
	gate     gate
	rule     *rule
	inflight int32
	counts   [classCount]uint32
	held     bool // the pacer held the head back since the last send
}

func (c *core) init(key string, r *rule, now time.Duration, seed uint64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	c.rule = r
	c.gate.rng = *rand.NewPCG(seed, h.Sum64())
	c.law.Init(&r.law, now)
	c.pace.sync(now, c)
}

// ticket is one granted send: what the law needs to judge its answer, and
// whether it is the half-open breaker's probe. It is a value.
type ticket struct {
	law   law.Ticket
	probe bool
}

// Kinds of decision.
const (
	sendNow     = iota // take a ticket
	waitUntil          // look again at wake
	waitRelease        // look again when a send ends
	fail               // refuse: a pause, park or gap longer than MaxPause
)

// decision is what the head of the scope's line does at now.
type decision struct {
	kind int
	wake time.Duration
	why  refusal
}

// decide is what the head of the line does at now: send (the caller then
// calls take), wait, or fail. A wait for the pacer tells the law that the
// rate was the bottleneck.
func (c *core) decide(now time.Duration, st *settings) decision {
	if c.gate.tick(now) {
		c.pace.sync(now, c)
	}
	if why, ok := c.gate.refuse(now, st.MaxPause); ok {
		return decision{kind: fail, why: why}
	}
	switch {
	case c.gate.paused(now):
		return decision{kind: waitUntil, wake: c.gate.pausedUntil}
	case int(c.inflight) >= c.limit() || !c.gate.ready():
		return decision{kind: waitRelease}
	case c.pace.b.Take(now):
		return decision{kind: sendNow}
	}
	c.held = true
	wake := max(c.pace.b.Next(), now+time.Microsecond)
	if wake-now > st.MaxPause {
		return decision{kind: fail, why: refusal{c.pace.why, wake, ErrPaused}}
	}
	return decision{kind: waitUntil, wake: wake}
}

// limit is the concurrency limit in force.
func (c *core) limit() int { return c.gate.limit(c.law.Limit()) }

// take grants a send that decide allowed.
func (c *core) take(now time.Duration) ticket {
	c.inflight++
	t := ticket{law: c.law.Sent(now, c.pace.rate(), int(c.inflight), int(c.inflight) >= c.limit(), c.held)}
	c.held = false
	if c.gate.breaker == BreakerHalfOpen {
		c.gate.probeOut, t.probe = true, true
	}
	return t
}

// unpark lifts a park and any pause (the user's word): no hold is left.
func (c *core) unpark(now time.Duration) {
	c.gate.unpark()
	c.law.Resumed(now)
	c.pace.b.Resume(now)
}

// untake gives back a send granted but not made.
func (c *core) untake(t ticket) {
	c.inflight--
	if t.probe {
		c.gate.probeOut = false
	}
}

// outcome is what one attempt produced, as the core needs it.
type outcome struct {
	class      classify.Class
	status     int
	retryAfter time.Duration
	hasRA      bool
	quota      classify.Quota
	hasQuota   bool
	rtt        time.Duration // to the response headers; 0 without a response
}

// reaction is what record decided, for events, logs and the Store.
type reaction struct {
	decreased bool
	cut       law.Cut // how the rate was cut, if it was
	paused    time.Duration
	parked    bool
	opened    bool
	limit     float64
	rate      float64
	inflight  int
	until     time.Duration
	reason    Reason
	// share is a pause (or park) decided here, without jitter, for the
	// Store; 0 when none was
	share       time.Duration
	shareReason Reason
}

// record returns the slot of t and applies what its outcome says.
func (c *core) record(now time.Duration, t ticket, o *outcome, st *settings) reaction {
	c.inflight--
	c.counts[o.class]++
	if t.probe {
		c.gate.probeOut = false
	}
	var r reaction
	c.law.RoundTrip(o.rtt)
	if o.hasQuota {
		c.quota(now, o.quota, st, &r)
	}
	switch o.class {
	case classify.Success:
		c.law.Observe(now, t.law, law.Success)
		if c.gate.succeeded(t.probe) {
			c.law.Resumed(now)
		}
	case classify.Throttled, classify.Overloaded, classify.TransportFailure:
		// 429 is a rate signal; 503/502/504 and transport failures are a
		// concurrency signal (Little's law couples the two, so a rate
		// limiter answering 503 is still held under its rate). The gate
		// pauses first, so that the law sizes its next probe by the pause.
		sig := law.Overloaded
		if o.class == classify.Throttled {
			sig = law.Throttled
		}
		d, opened := c.gate.signal(now, o, c.law.Fresh(t.law, sig), c.pace.rate(), st, &r)
		r.paused, r.opened = d, opened
		if d > 0 && d <= st.MaxPause {
			c.law.Paused(now, c.gate.pausedUntil, d)
		}
		v := c.law.Observe(now, t.law, sig)
		r.decreased, r.cut = v.Decreased, v.Cut
		if sig == law.Overloaded {
			// increases stay held for OverloadHold after the pause ends
			c.law.Hold(max(now, c.gate.pausedUntil) + st.OverloadHold)
		}
	case classify.Blocked:
		if c.gate.blocked(now, c.rule.Block, &r) {
			r.parked, r.reason, r.until = true, ReasonBlocked, c.gate.parkedUntil
		}
	}
	// nothing is sent during a pause, and the first send after it goes at
	// its end, with no burst of saved sends
	c.pace.b.Drain(c.gate.pausedUntil)
	c.pace.sync(now, c)
	r.limit, r.rate, r.inflight = c.law.Limit(), c.pace.rate(), int(c.inflight)
	if r.until == 0 && !r.parked {
		r.until = c.gate.pausedUntil
	}
	return r
}

// quota turns honest quota headers into a ceiling: spread what remains of
// the window over the time left in it, so the quota is never exhausted. A
// quota spent pauses the scope until it resets.
func (c *core) quota(now time.Duration, q classify.Quota, st *settings, r *reaction) {
	if q.Remaining <= 0 {
		if q.Reset > 0 {
			c.gate.pause(now, now+min(max(q.Reset, st.MinRetryAfter), longestPause), ReasonQuota, st, r)
		}
		return
	}
	if q.Limit > 0 && q.Window > 0 {
		// an honest policy states the capacity: start at it (no slow start)
		c.law.Seed(now, float64(q.Limit)/q.Window.Seconds())
	}
	reset := q.Reset
	if reset <= 0 {
		reset = q.Window
	}
	if reset <= 0 {
		return
	}
	left := float64(q.Remaining) - float64(c.inflight)
	c.pace.setQuota(math.Max(left, 1)/reset.Seconds(), now+min(reset, longestPause))
}
