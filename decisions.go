package polite

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/law"
)

// The decision log: the one observer of a scope's transitions. Every
// transition of a scope (an acquire, a record, a shared pause adopted, an
// Unpark) is heard through Controller.observe with what the core showed
// before and after it (its state), and the log says each change with its
// cause: one slog record per change, so that one scope's lines tell its
// whole story. It reads only what the core shows: whatever the law's
// internals, a change is seen.
//
// With no logger, or one that takes nothing at Info, a transition costs a
// nil check and allocates nothing.

// visible is what the decision log compares: the visible state of one scope.
// Taken under scope.mu.
type visible struct {
	coreState
	waiting int32
}

func (s *scope) visible() visible { return visible{s.core.state(), int32(len(s.queue))} }

// transition is one look at a scope that may change it, between begin
// and end under scope.mu; its observers hear of it once the lock is
// released (Controller.observe).
type transition struct {
	now time.Duration
	obs *observed // what the log needs; nil when it is off
}

// observed is what a transition shows its observers. Allocated only when
// the logger takes Info.
type observed struct {
	debug         bool
	before, after visible
	// a pause that had ended by begin (its end is only seen then); without
	// one, pauseFrom is the start of the pause in force, if any
	resumed            bool
	pauseFrom, pauseTo time.Duration
	pauseWhy           pauseKind
}

// logLevels reports whether the logger takes Info and Debug records.
func (c *Controller) logLevels() (info, debug bool) {
	l := c.st.Logger
	if l == nil {
		return false, false
	}
	ctx := context.Background()
	if !l.Enabled(ctx, slog.LevelInfo) {
		return false, false
	}
	return true, l.Enabled(ctx, slog.LevelDebug)
}

// begin starts a transition at now: the core settles a pause that has ended and,
// when the log is on, the view before is taken. Called with mu held. (Small
// enough to inline: the log's work is in tell.)
func (s *scope) begin(c *Controller, now time.Duration) transition {
	tr := transition{now: now}
	from, to, ended := s.core.settle(now)
	if c.st.Logger != nil {
		s.tell(c, &tr, from, to, ended)
	}
	return tr
}

// tell starts what the observers see of transition tr when the logger takes Info.
func (s *scope) tell(c *Controller, tr *transition, from, to time.Duration, ended bool) {
	info, debug := c.logLevels()
	if !info {
		return
	}
	before := s.visible()
	if !ended {
		from = before.pauseStart // of the pause in force, if any
	}
	tr.obs = &observed{debug: debug, before: before, resumed: ended, pauseFrom: from, pauseTo: to, pauseWhy: before.reason}
}

// end ends a transition: when the log is on, the view after is taken. Called with
// mu held.
func (s *scope) end(tr *transition) {
	if tr.obs != nil {
		tr.obs.after = s.visible()
	}
}

// Kinds of transition (cause.op).
const (
	opAcquire = iota
	opRecord
	opAdopt
	opUnpark
	opCreate
	opReserve // Controller.Reserve: a slot taken ahead of its request
)

// cause is what a transition was, for the causes of what changed.
type cause struct {
	op         uint8
	granted    bool
	reserved   bool // granted a slot that Reserve took
	class      classify.Class
	status     int
	decreased  bool
	cut        law.Cut // how the law cut the rate, as it says
	refused    bool    // a 429 the law took for a lockout: paused, not cut
	retryAfter time.Duration
	rtt, wait  time.Duration
	crawlDelay time.Duration // the Crawl-delay that changed the ceiling in this step
}

// logLine is one record of the decision log.
type logLine struct {
	level      slog.Level
	event      string
	cause      string
	at         time.Duration
	before     bool // the state attributes are those before the step
	was        float64
	hasWas     bool
	from       string // the phase before
	status     int
	until      time.Duration
	hasUntil   bool
	pause      time.Duration
	retryAfter time.Duration
	rtt, wait  time.Duration
	crawlDelay time.Duration
}

// lines appends to out the lines that the transition tells: each change
// between the views, with its cause, in the order a reader follows.
func (t *observed) lines(out []logLine, now time.Duration, q *cause) []logLine {
	b, a := &t.before, &t.after
	info, debug := slog.LevelInfo, slog.LevelDebug
	if t.resumed {
		out = append(out, logLine{level: info, event: "resume", cause: t.pauseWhy.String(), at: t.pauseTo, before: true, pause: t.pauseTo - t.pauseFrom})
	}
	if t.debug {
		switch {
		case q.op == opCreate:
			out = append(out, logLine{level: debug, event: "start", cause: "new-scope", at: now})
		case q.op == opAcquire && q.granted:
			cause := "granted"
			if q.reserved {
				cause = "reserved"
			}
			out = append(out, logLine{level: debug, event: "send", cause: cause, at: now, wait: q.wait})
		case q.op == opReserve && q.granted:
			out = append(out, logLine{level: debug, event: "reserve", cause: "granted", at: now})
		case q.op == opRecord:
			out = append(out, logLine{level: debug, event: "response", cause: q.class.String(), at: now, status: q.status, rtt: q.rtt})
		}
	}
	if a.robots != b.robots {
		out = append(out, logLine{level: info, event: "robots", cause: "crawl-delay", at: now, crawlDelay: q.crawlDelay, was: b.robots, hasWas: true})
	}
	if a.quota != b.quota {
		l := logLine{level: debug, event: "quota", cause: "headers", at: now, was: b.quota, hasWas: true}
		if b.quota == 0 {
			l.level = info
		}
		if q.op == opCreate {
			l.cause = "remembered"
		}
		out = append(out, l)
	}
	out = t.signal(out, now, q)
	if a.pausedUntil > b.pausedUntil && a.pausedUntil > now {
		l := logLine{level: info, event: "pause", cause: a.reason.String(), at: now, until: a.pausedUntil, hasUntil: true, pause: a.pausedUntil - now}
		if b.pausedUntil > now {
			l.event = "pause-extended"
		}
		if q.op == opAdopt {
			l.cause += ":shared"
		}
		out = append(out, l)
	} else if a.pausedUntil < b.pausedUntil && b.pausedUntil > now {
		out = append(out, logLine{level: info, event: "resume", cause: "unpark", at: now, pause: now - t.pauseFrom})
	}
	if a.breaker != b.breaker {
		l := logLine{level: info, event: "breaker-" + a.breaker.String(), at: now}
		switch a.breaker {
		case breakerOpen:
			l.cause = q.class.String()
		case breakerHalfOpen:
			l.cause = "cooldown-ended"
		default:
			l.cause = "probe-succeeded"
		}
		out = append(out, l)
	}
	if a.parked != b.parked {
		if a.parked {
			l := logLine{level: info, event: "parked", cause: "blocked", at: now}
			if a.parkedUntil != 0 {
				l.until, l.hasUntil = a.parkedUntil, true
			}
			out = append(out, l)
		} else {
			cause := "expired"
			if q.op == opUnpark {
				cause = "unpark"
			}
			out = append(out, logLine{level: info, event: "unparked", cause: cause, at: now})
		}
	}
	if a.held > b.held && a.held > now {
		out = append(out, logLine{level: info, event: "hold", cause: q.class.String(), at: now, until: a.held, hasUntil: true})
	} else if a.held < b.held && b.held > now {
		cause := "resumed"
		if a.breaker == b.breaker && q.op == opRecord && q.class == classify.Success {
			// the law's test of the hold: a cohort sent after the
			// overload's pause answered at the unloaded round trip
			cause = "clean-cohort"
		}
		out = append(out, logLine{level: info, event: "hold-lifted", cause: cause, at: now})
	}
	out = t.search(out, now, q)
	if a.ceiling != b.ceiling {
		if a.ceiling != ceilNone {
			out = append(out, logLine{level: info, event: "ceiling", cause: a.ceiling.String(), at: now, was: b.ceilingRate, hasWas: true})
		} else {
			out = append(out, logLine{level: info, event: "ceiling-lifted", cause: b.ceiling.String(), at: now, was: b.ceilingRate, hasWas: true})
		}
	} else if a.ceilingRate != b.ceilingRate {
		out = append(out, logLine{level: debug, event: "ceiling", cause: a.ceiling.String(), at: now, was: b.ceilingRate, hasWas: true})
	}
	return out
}

// signal tells a throttle, an overload, a transport failure or a block:
// the decrease it caused, or the signal alone.
func (t *observed) signal(out []logLine, now time.Duration, q *cause) []logLine {
	if q.op != opRecord || (!q.class.Signal() && q.class != classify.Blocked) {
		return out
	}
	b, a := &t.before, &t.after
	l := logLine{level: slog.LevelInfo, event: q.class.String(), at: now, status: q.status, retryAfter: q.retryAfter}
	switch {
	case q.decreased && q.class == classify.Throttled:
		// the law says how it cut the rate: the first throttle ends slow
		// start, one for a send above the estimate is a failed probe (the
		// estimate stands, whatever the phase is by the time it arrives),
		// an accepted rate far under the estimate is a drop, the rest is a
		// step down (a large one after throttles in a row)
		l.event, l.cause, l.was, l.hasWas = "decrease:throttled", q.cut.String(), b.estimate, true
	case q.decreased:
		// an overload or a transport failure cuts the concurrency limit
		// and, when it is fresh for the rate too, the rate (Little's law):
		// one line each
		class := "decrease:" + q.class.String()
		if a.limit < b.limit || q.cut == law.NoCut {
			out = append(out, logLine{level: l.level, event: class, cause: "limit-cut", at: now, status: q.status,
				retryAfter: q.retryAfter, was: b.limit, hasWas: true})
		}
		if q.cut == law.NoCut {
			return out
		}
		l.event, l.cause, l.was, l.hasWas = class, q.cut.String(), b.estimate, true
	case q.class == classify.Blocked:
		l.cause = "block"
	case q.refused:
		// refused again after a Retry-After was waited: the pause
		// doubled, the rate stands
		l.cause = "retry-after-not-enough"
	default:
		// the law kept its state: a signal for a request sent before the
		// last decrease, the tail of a burst already answered
		l.level, l.cause = slog.LevelDebug, "tail"
	}
	return append(out, l)
}

// search tells the moves of the law that no signal caused: slow-start
// transitions, probes, increases of the limit, and any other change of phase,
// estimate or rate.
func (t *observed) search(out []logLine, now time.Duration, q *cause) []logLine {
	b, a := &t.before, &t.after
	info := slog.LevelInfo
	explained := q.decreased
	bp, ap := b.phase, a.phase
	switch {
	case q.decreased:
	case q.op == opAdopt:
		// the fleet's law, adopted: another process decided it
		if bp != ap || a.estimate != b.estimate || a.lawRate != b.lawRate {
			l := logLine{level: info, event: "adopt", cause: "fleet", at: now, was: b.estimate, hasWas: true}
			if bp != ap {
				l.from = bp.String()
			}
			out = append(out, l)
		}
		explained = true
	case b.estimate == 0 && a.estimate > 0:
		// Seed: a known capacity, no slow start
		cause := "quota-policy" // an honest RateLimit-Policy
		if q.op == opCreate {
			cause = "remembered" // an evicted scope's, or ImportEstimates
		}
		out = append(out, logLine{level: info, event: "estimate", cause: cause, at: now, was: 0, hasWas: true})
		explained = true
	case bp != law.Probing && ap == law.Probing:
		out = append(out, logLine{level: info, event: "probe-start", cause: "probe-due", at: now, was: b.estimate, hasWas: true})
		explained = true
	case bp == law.Probing && ap != law.Probing && a.estimate > b.estimate:
		out = append(out, logLine{level: info, event: "probe-success", cause: "probe-held", at: now, was: b.estimate, hasWas: true})
		explained = true
	case bp == law.Probing && ap != law.Probing:
		cause := "not-busy"
		if q.op == opUnpark {
			cause = "unpark"
		}
		out = append(out, logLine{level: info, event: "probe-end", cause: cause, at: now, was: b.estimate, hasWas: true})
		explained = true
	case bp != ap:
		out = append(out, logLine{level: info, event: "phase", cause: "law", at: now, from: bp.String()})
		explained = true
	case ap == law.SlowStart && a.lawRate > b.lawRate:
		out = append(out, logLine{level: info, event: "increase", cause: "slow-start-step", at: now, was: b.lawRate, hasWas: true})
		explained = true
	}
	if !explained && a.estimate != b.estimate {
		out = append(out, logLine{level: info, event: "estimate", cause: "law", at: now, was: b.estimate, hasWas: true})
		explained = true
	}
	if !explained && a.lawRate != b.lawRate {
		out = append(out, logLine{level: info, event: "rate", cause: "law", at: now, was: b.lawRate, hasWas: true})
	}
	if lb, la := int(b.limit), int(a.limit); la != lb && !(q.decreased && q.class != classify.Throttled) {
		// additive increase transitions are per-request detail
		l := logLine{level: slog.LevelDebug, event: "increase", cause: "additive", at: now, was: b.limit, hasWas: true}
		if la < lb {
			l.level, l.event, l.cause = info, "limit", "law"
			switch {
			case q.op == opAdopt:
				l.cause = "fleet" // a decrease another process decided
			case q.op == opRecord && q.class == classify.Success:
				// the only cut a success makes: round trips over the
				// unloaded one, the server queueing
				l.cause = "latency-knee"
			}
		}
		out = append(out, l)
	}
	return out
}

// observe is the one hook of a scope's transitions: it hears transition tr of the scope
// key, what it was (q) and what it changed, with no lock held. The
// decision log is its one observer.
func (c *Controller) observe(key string, tr *transition, q *cause) {
	if tr.obs != nil {
		c.tell(key, tr, q)
	}
}

// tell writes the lines of transition tr of the scope key to the log. Call it
// without any lock held, and only when tr.obs is set.
func (c *Controller) tell(key string, tr *transition, q *cause) {
	var buf [16]logLine
	for _, l := range tr.obs.lines(buf[:0], tr.now, q) {
		v := &tr.obs.after
		if l.before {
			v = &tr.obs.before
		}
		c.write(key, v, &l)
	}
}

// write writes one record: the time on the controller's clock, the
// scope, the event and its cause, the state (phase, rate in force, limit,
// in flight, estimate, binding ceiling) and what the event adds.
func (c *Controller) write(key string, v *visible, l *logLine) {
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs,
		slog.String("scope", key), slog.String("cause", l.cause),
		slog.String("phase", v.phase.String()), slog.Float64("rate", round(v.rate)),
		slog.Float64("limit", round(v.limit)), slog.Int("inflight", int(v.inflight)),
		slog.Float64("estimate", round(v.estimate)), slog.String("ceiling", v.ceiling.String()))
	if v.ceiling != ceilNone {
		attrs = append(attrs, slog.Float64("ceiling_rate", round(v.ceilingRate)))
	}
	if l.hasWas {
		attrs = append(attrs, slog.Float64("was", round(l.was)))
	}
	if l.from != "" {
		attrs = append(attrs, slog.String("from", l.from))
	}
	if l.status != 0 {
		attrs = append(attrs, slog.Int("status", l.status))
	}
	if l.retryAfter != 0 {
		attrs = append(attrs, slog.Duration("retry_after", l.retryAfter))
	}
	if l.pause != 0 {
		attrs = append(attrs, slog.Duration("pause", l.pause))
	}
	if l.hasUntil {
		attrs = append(attrs, slog.Time("until", c.at(l.until)))
	}
	if l.rtt != 0 {
		attrs = append(attrs, slog.Duration("rtt", l.rtt))
	}
	if l.event == "send" {
		attrs = append(attrs, slog.Duration("wait", l.wait), slog.Int("waiting", int(v.waiting)))
	}
	if l.crawlDelay != 0 {
		attrs = append(attrs, slog.Duration("crawl_delay", l.crawlDelay))
	}
	c.logRecord(l.at, l.level, l.event, attrs)
}

// logRecord writes one record to the logger: msg says what happened, and
// its time is when it happened on the controller's clock (a pause's end
// is told when the scope is next looked at).
func (c *Controller) logRecord(at time.Duration, level slog.Level, msg string, attrs []slog.Attr) {
	h := c.st.Logger.Handler()
	if !h.Enabled(context.Background(), level) {
		return // a Debug line (a quota or ceiling that moved) under an Info handler
	}
	r := slog.NewRecord(c.at(at), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(context.Background(), r)
}

// round keeps four significant digits, enough to read a log at a glance.
func round(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}
