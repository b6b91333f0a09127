package polite

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/law"
	"github.com/colly-polite/polite/internal/sat"
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

// stamp is one granted send: what the law needs to judge its answer, and
// whether it is the half-open breaker's probe. It is a value.
type stamp struct {
	law.Stamp
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
		return decision{kind: fail, why: refusal{ceiling: c.pace.why, until: wake, err: ErrPaused}}
	}
	return decision{kind: waitUntil, wake: wake}
}

// adoptRule puts the scope under rule r from now (a stricter one than
// its own: Controller.mergeRules): the pacer's ceilings and the law's
// bounds follow at once.
func (c *core) adoptRule(r *rule, now time.Duration) {
	c.rule = r
	c.law.SetConfig(&r.law)
	c.pace.sync(now, c)
}

// limit is the concurrency limit in force.
func (c *core) limit() int { return c.gate.limit(c.law.Limit()) }

// take grants a send that decide allowed.
func (c *core) take(now time.Duration) stamp {
	c.inflight++
	// the rate the send goes at, as the law judges its answer: in a fleet,
	// the fleet's, not this process's under its own ceiling or share (a
	// throttle is the fleet's, and stepping down from the rate this
	// process keeps to would take the fleet down to it)
	rate := c.pace.rate()
	if c.pace.fleetKnown {
		rate = c.pace.whole(c)
	}
	t := stamp{Stamp: c.law.Sent(now, rate, int(c.inflight), int(c.inflight) >= c.limit(), c.held)}
	c.held = false
	if c.gate.probing() {
		c.gate.probeOut, t.probe = true, true
	}
	return t
}

// unpark lifts a park and any pause (the user's word): no hold is left.
func (c *core) unpark(now time.Duration) {
	c.gate.unpark(now)
	c.law.Resumed(now)
	c.pace.b.Resume(now)
}

// untake gives back at now a send granted but not made: its slot in
// flight and, if its moment is not past (within an interval of when it
// was granted), its slot in the schedule, which the next send may take. A
// slot given back after a long wait (a store call that timed out) would
// let the sends that waited with it go at once, above the rate.
func (c *core) untake(t stamp, now time.Duration) {
	c.inflight--
	c.law.Dropped(now, t.Stamp, false)
	if now-t.Sent < sat.Interval(c.pace.rate()) {
		c.pace.b.Untake(t.Sent)
	}
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
	refused   bool    // a 429 after a Retry-After that was not enough: no cut
	paused    time.Duration
	parked    bool
	opened    bool
	limit     float64
	rate      float64
	inflight  int
	until     time.Duration
	reason    pauseKind
	// share is a pause (or park) decided here, without jitter, for the
	// Store; 0 when none was
	share       time.Duration
	shareReason pauseKind
}

// record returns the slot of t and applies what its outcome says.
func (c *core) record(now time.Duration, t stamp, o *outcome, st *settings) reaction {
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
		c.law.Observe(now, t.Stamp, law.Success)
		if c.gate.succeeded(t.probe) {
			c.law.Resumed(now)
		}
	case classify.Throttled, classify.Overloaded, classify.TransportFailure:
		// 429 is a rate signal; 503/502/504 and transport failures are a
		// concurrency signal (Little's law couples the two, so a rate
		// limiter answering 503 is still held under its rate).
		sig := law.Overloaded
		if o.class == classify.Throttled {
			sig = law.Throttled
		}
		c.signal(now, t, o, sig, st, &r)
	case classify.Blocked:
		// many sites refuse a crawl that goes too fast with 403: a block
		// for a request sent at a rate not yet judged clean (slow start's
		// doublings, a probe), or the first since a success, is taken for
		// a throttle,
		// and the law slows down and probes back as for a 429. Enough
		// blocks in a row with no success between park the scope, however
		// each was taken. The tail of a burst already answered counts for
		// neither.
		fresh := c.law.Fresh(t.Stamp, law.Throttled)
		if c.gate.blocked(now, fresh, c.rule.BlockThreshold, c.rule.ParkFor, &r) {
			r.parked, r.reason, r.until = true, pauseBlocked, c.gate.parkedUntil
			c.law.Dropped(now, t.Stamp, true)
		} else if fresh && (c.law.Rising(t.Stamp) || c.gate.blockRow == 1 && c.counts[classify.Success] > 0) {
			th := *o
			th.class = classify.Throttled
			c.signal(now, t, &th, law.Throttled, st, &r)
			break // (its Retry-After is the throttle's)
		} else {
			c.law.Dropped(now, t.Stamp, true)
		}
		if o.hasRA {
			// a block that says how long to wait (a challenge page on a
			// 429) is waited out, whatever else it counts for
			c.pauseFor(now, o.retryAfter, pauseRetryAfter, st, &r)
		}
	default:
		// a neutral answer (a 404, a DNS failure) or a canceled request
		// says nothing of the origin's load
		c.law.Dropped(now, t.Stamp, false)
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

// signal applies a throttle or an overload (sig) for t: the gate pauses
// first, so that the law sizes its next probe by the pause.
func (c *core) signal(now time.Duration, t stamp, o *outcome, sig law.Signal, st *settings, r *reaction) {
	d, opened := c.gate.signal(now, o, c.law.Fresh(t.Stamp, sig), c.pace.rate(), st, r)
	r.paused, r.opened = d, opened
	if d > 0 && d <= st.MaxPause {
		c.law.Paused(now, c.gate.pausedUntil, d)
	}
	if sig == law.Throttled && o.hasRA && r.paused > 0 && c.gate.raRow > 1 {
		// the Retry-After before it was not enough: the server refuses
		// whatever the rate, for now
		sig = law.Refused
	}
	v := c.law.Observe(now, t.Stamp, sig)
	r.decreased, r.cut, r.refused = v.Decreased, v.Cut, sig == law.Refused
	if sig == law.Overloaded {
		// increases stay held for OverloadHold at most after the pause
		// ends (the law's test of the hold may end it sooner)
		from := max(now, c.gate.pausedUntil)
		c.law.Hold(from, from+st.OverloadHold)
	}
}

// quota turns honest quota headers into a ceiling: spread what remains of
// the window over the time left in it, so the quota is never exhausted. A
// quota spent pauses the scope until it resets.
func (c *core) quota(now time.Duration, q classify.Quota, st *settings, r *reaction) {
	if q.Remaining <= 0 {
		// spent: a pause until the window resets, or for the window when
		// only its length is known, or (neither known) for a second, the
		// shortest window in common use. Before, a spent quota with no
		// reset was read as no quota, less strict than one left.
		reset := q.Reset
		if reset <= 0 {
			reset = q.Window
		}
		if reset <= 0 {
			reset = time.Second
		}
		c.pauseFor(now, reset, pauseQuota, st, r)
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

// pauseFor pauses the scope for d from now, at least MinRetryAfter (never
// a zero-wait loop) and at most longestPause.
func (c *core) pauseFor(now, d time.Duration, reason pauseKind, st *settings, r *reaction) {
	c.gate.pause(now, now+min(max(d, st.MinRetryAfter), longestPause), reason, st, r)
}

// What the scope, the controller and the fleet ask of the core: nothing
// outside this file reads or writes the law's, the pacer's or the gate's
// fields, and the pacer is re-priced (sync) here only.

// refusal reports whether a request must fail at once at now (a park, a
// pause beyond maxPause), without deciding anything else.
func (c *core) refusal(now, maxPause time.Duration) (refusal, bool) {
	return c.gate.refuse(now, maxPause)
}

// breaker is the state of the scope's breaker.
func (c *core) breaker() breakerState { return c.gate.breaker }

// paused reports whether a pause is in force at now.
func (c *core) paused(now time.Duration) bool { return c.gate.paused(now) }

// idle reports whether nothing holds the scope at now: nothing in flight,
// no pause, no park in force, and its next send due (a scope made again
// has a fresh schedule that sends at once: evicted before its next send
// was due, one under a ceiling of a send per 1,000 s sent again after
// 660 s). A timed park that is over holds nothing: such a scope was
// never evicted, one kept for every host that blocked a broad crawl.
func (c *core) idle(now time.Duration) bool {
	return c.inflight == 0 && !c.gate.paused(now) && !c.gate.parkedAt(now) && now >= c.pace.b.Next()
}

// sentRandomGap draws the random extra gap before the next send
// (Rule.RandomGap) from the scope's one random source, after a send.
func (c *core) sentRandomGap() { c.pace.sent(c.rule, &c.gate.rng) }

// random draws a number in [0, 1) from the scope's seeded source.
func (c *core) random() float64 { return rand.New(&c.gate.rng).Float64() }

// setQuota puts a quota ceiling of rate in force until until (one a scope
// evicted before still had).
func (c *core) setQuota(now time.Duration, rate float64, until time.Duration) {
	c.pace.setQuota(rate, until)
	c.pace.sync(now, c)
}

// restore starts the law from an estimate measured before (an evicted
// scope's, an import), under the ceilings in force.
func (c *core) restore(now time.Duration, est, limit float64) {
	c.pace.sync(now, c) // the law learns the ceilings in force
	c.law.Restore(now, est, limit)
	c.pace.sync(now, c)
}

// crawlDelays applies the Crawl-delay ceilings: remembered, the scope's
// (when ok; it replaces the one in force), and origin, the Crawl-delay of
// the request's origin (the ceiling is at least that strict). It returns
// the Crawl-delay that set the ceiling, and whether it changed.
func (c *core) crawlDelays(now time.Duration, remembered time.Duration, ok bool, origin time.Duration) (applied time.Duration, changed bool) {
	if ok {
		c.pace.robots = crawlDelayRate(remembered)
		applied, changed = remembered, true
	}
	if c.pace.requireCrawlDelay(crawlDelayRate(origin)) {
		applied, changed = origin, true
	}
	if changed {
		c.pace.sync(now, c)
	}
	return applied, changed
}

// estimate is the law's capacity estimate and concurrency limit.
func (c *core) estimate() (est, limit float64) { return c.law.Estimate(), c.law.Limit() }

// quotaCeiling is the quota ceiling in force at now and when it lapses
// (0 when there is none).
func (c *core) quotaCeiling(now time.Duration) (rate float64, until time.Duration) {
	if c.pace.quota > 0 && now < c.pace.quotaUntil {
		return c.pace.quota, c.pace.quotaUntil
	}
	return 0, 0
}

// adoptPause takes a pause until until that the fleet shared, with a
// jitter of its own; nothing is sent during it and the first send after it
// goes at its end. It reports whether the pause in force moved.
func (c *core) adoptPause(now, until time.Duration, reason pauseKind, st *settings) bool {
	if !c.gate.adopt(now, until, reason, st) {
		return false
	}
	c.pace.b.Drain(c.gate.pausedUntil)
	c.law.Idle(now, c.gate.pausedUntil)
	return true
}

// fleetRate is the rate in force for a whole fleet, req/s: the law's under
// the ceilings, before this process's share.
func (c *core) fleetRate() float64 { return c.pace.whole(c) }

// share is the part of the fleet's rate this process keeps to on its own
// (1 while the fleet's store answers).
func (c *core) share() float64 {
	if c.pace.share <= 0 {
		return 1
	}
	return c.pace.share
}

// setShare makes share the part of the fleet's rate this process keeps to
// (1: the store answers, the fleet's schedule decides). It reports the part
// in force before.
func (c *core) setShare(now time.Duration, share float64) (was float64) {
	was = c.pace.share
	c.pace.share, c.pace.rejoined = share, false
	c.pace.sync(now, c)
	if share > 0 && share < 1 && !(was > 0 && was < 1) {
		// on its own from now: its schedule starts a share's interval
		// from now, as the fleet's sends of the last moment, which this
		// one's schedule does not count, may have used what it would
		// catch up on
		c.pace.b.Drain(now + sat.Interval(c.pace.b.Rate()))
	}
	return was
}

// setLone holds the rate, and the law under it, at lone while the store
// is away (0: lifted): the rule's initial rate for a fleet whose store
// never answered (its size is unknown), or the fleet's rate as last
// shared for one whose store answered before.
func (c *core) setLone(now time.Duration, lone float64) {
	if lone != c.pace.lone {
		c.pace.lone = lone
		c.pace.sync(now, c)
	}
}

// rejoin: the store answers again while this process keeps to its share
// (setShare): its sends are spaced by the fleet's schedule again.
func (c *core) rejoin(now time.Duration) {
	if c.pace.share > 0 && c.pace.share < 1 && !c.pace.rejoined {
		c.pace.rejoined = true
		c.pace.sync(now, c)
	}
}

// shared is the law's part that a fleet shares, at now.
func (c *core) shared(now time.Duration) law.Shared { return c.law.Shared(now) }

// adoptShared takes the fleet's law state and returns the law's shared
// part after it.
func (c *core) adoptShared(now time.Duration, s law.Shared) law.Shared {
	c.law.Adopt(now, s)
	c.pace.sync(now, c)
	return c.law.Shared(now)
}

// adoptThrottled takes the fleet's law state and applies to it a
// throttle this process saw that the fleet has not (law.Rethrottle).
func (c *core) adoptThrottled(now time.Duration, s law.Shared) {
	c.law.Rethrottle(now, s)
	c.pace.sync(now, c)
}

// deferred tells the law that the send t stamps waits for the fleet
// before it goes.
func (c *core) deferred(t *stamp) { c.law.Deferred(&t.Stamp) }

// went tells the law that the send t stamps goes at now (paced: the rate
// was its bottleneck, fleetclient.Send.Paced), and stamps it
// again as sent then, at the rate in force then (core.take).
func (c *core) went(t *stamp, now time.Duration, paced bool) {
	rate := c.pace.rate()
	if c.pace.fleetKnown {
		rate = c.pace.whole(c)
	}
	c.law.Went(&t.Stamp, now, rate, paced)
}

// fleetAccepted tells the law the fleet's accepted rate at now.
func (c *core) fleetAccepted(now time.Duration, perSecond float64) {
	c.law.FleetAccepted(now, perSecond)
}

// coreState is what a core shows at one instant: what snapshots, the
// decision log and eviction read. A value.
type coreState struct {
	phase       law.Phase
	limit       float64
	inflight    int32
	rate        float64 // in force
	lawRate     float64 // the law's, before ceilings
	estimate    float64
	rtt         time.Duration
	ceiling     ceilingKind // the ceiling that binds
	ceilingRate float64     // its value
	robots      float64     // Crawl-delay ceiling, req/s
	quota       float64     // quota-header ceiling, req/s
	pausedUntil time.Duration
	pauseStart  time.Duration // of the pause in force (or its last extension)
	parkedUntil time.Duration
	reason      pauseKind // of the gate's last pause
	breaker     breakerState
	parked      bool
	held        time.Duration // increases held until then
	counts      [classCount]uint32
}

// state is what the core shows.
func (c *core) state() coreState {
	s := coreState{
		phase: c.law.Phase(), limit: c.law.Limit(), inflight: c.inflight, rate: c.pace.rate(), lawRate: c.law.Rate(),
		estimate: c.law.Estimate(), rtt: c.law.RTT(), robots: c.pace.robots, quota: c.pace.quota,
		pausedUntil: c.gate.pausedUntil, pauseStart: c.gate.pauseStart, parkedUntil: c.gate.parkedUntil, reason: c.gate.reason,
		breaker: c.gate.breaker, parked: c.gate.parked, held: c.law.HeldUntil(), counts: c.counts,
	}
	s.ceiling, s.ceilingRate = c.binding()
	return s
}

// binding is the ceiling that binds the rate in force and its value (0
// with ceilNone).
func (c *core) binding() (ceilingKind, float64) {
	p := &c.pace
	switch p.why {
	case ceilCrawlDelay:
		return ceilCrawlDelay, p.robots
	case ceilQuota:
		return ceilQuota, p.quota
	case ceilConfigured:
		return ceilConfigured, c.configured()
	}
	return ceilNone, 0
}

// configured is the scope's configured ceiling, req/s (0: none): the
// rule's Rate or MinGap's, the lower.
func (c *core) configured() float64 {
	r := c.rule.Rate
	if g := c.rule.gapRate; g > 0 && (r == 0 || g < r) {
		r = g
	}
	return r
}

// setFleetCeiling takes the fleet's configured ceiling (0: none) as its
// store said it.
func (c *core) setFleetCeiling(now time.Duration, ceil float64) {
	if c.pace.fleetKnown && c.pace.fleetCeil == ceil {
		return
	}
	c.pace.fleetCeil, c.pace.fleetKnown = ceil, true
	c.pace.sync(now, c)
}

// pausedTotal is the time the scope has spent paused, at now.
func (c *core) pausedTotal(now time.Duration) time.Duration { return c.gate.pausedTotal(now) }

// settle accounts for a pause that ended by now and returns it, once (see
// gate.settle).
func (c *core) settle(now time.Duration) (from, to time.Duration, ended bool) {
	return c.gate.settle(now)
}
