package adaptive

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/tokenbucket"
)

// BreakerState is the state of a scope's breaker.
type BreakerState uint8

// Breaker states, as in sony/gobreaker.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

func (b BreakerState) String() string {
	switch b {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// scope is one controller: the state of one host (or domain, proxy, ...).
type scope struct {
	key string
	mu  sync.Mutex
	law lawState

	bucket   *tokenbucket.Bucket
	curRate  float64   // rate the bucket was last set to
	lastSend time.Time // when the last permit was granted
	tat      time.Time // theoretical time of the next send (GCRA)
	ruleCeil float64   // Rule.Rate
	robCeil  float64   // robots.txt Crawl-delay
	quoCeil  float64   // quota headers
	quoUntil time.Time
	// ceilReason says which ceiling binds (ReasonRate when none does: the
	// adaptive rate), for a wait that would pass MaxPause
	ceilReason Reason

	inflight int
	queue    []*waiter // FIFO; queue[0] is the head, the only one that paces

	pausedUntil time.Time
	pauseReason Reason
	badRow      int // throttles/overloads in a row with no success: backoff and breaker

	breaker  BreakerState
	probeOut bool // half-open: the probe is in flight

	blockRow    int
	parked      bool
	parkedUntil time.Time // zero with parked: until Unpark

	rng *rand.Rand // resume jitter; guarded by mu

	counts   [classCount]uint64
	lastUsed time.Time
	dead     bool // evicted: look the key up again

}

type waiter struct {
	ch chan struct{} // buffered 1: a nudge to re-evaluate
}

func (w *waiter) nudge() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// permit is one granted send. It is a value: taking one allocates nothing.
type permit struct {
	sc          *scope
	sent        time.Time
	epoch       uint32
	cepoch      uint32
	rate        float64
	inflight    int
	concBinding bool
	probe       bool
}

func newScope(key string, r *rule, now time.Time, seed uint64) *scope {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	s := &scope{key: key, ruleCeil: r.Rate, lastUsed: now, rng: rand.New(rand.NewPCG(seed, h.Sum64()))}
	s.law.init(r, now)
	s.curRate = s.effectiveRate(now)
	s.bucket = tokenbucket.NewBucket(rate.Limit(s.curRate), paceBurst)
	return s
}

// effectiveRate is the adaptive rate under every ceiling in force.
func (s *scope) effectiveRate(now time.Time) float64 {
	c, why := 0.0, ReasonRate
	if s.ruleCeil > 0 {
		c = s.ruleCeil
	}
	if v := s.robCeil; v > 0 && (c == 0 || v < c) {
		c, why = v, ReasonCrawlDelay
	}
	if s.quoCeil > 0 && now.Before(s.quoUntil) && (c == 0 || s.quoCeil < c) {
		c, why = s.quoCeil, ReasonQuota
	}
	s.law.ceil = c
	r := math.Max(s.law.rate, s.law.rule.MinRate)
	if c > 0 && r >= c {
		r = c
	} else {
		why = ReasonRate
	}
	s.ceilReason = why
	return r
}

// syncRate pushes the effective rate to the bucket when it changed and
// nudges the head so that a waiting caller is re-priced at once.
func (s *scope) syncRate(now time.Time) {
	r := s.effectiveRate(now)
	if r == s.curRate {
		return
	}
	s.curRate = r
	s.bucket.SetRateAt(now, rate.Limit(r), paceBurst)
	// re-price the next send at the new rate, from the last one
	if !s.lastSend.IsZero() {
		s.tat = s.lastSend.Add(interval(r))
	}
	if len(s.queue) > 0 {
		s.queue[0].nudge()
	}
}

// limitNow is the concurrency limit in force.
func (s *scope) limitNow() int {
	if s.breaker == BreakerHalfOpen {
		return 1
	}
	return max(int(s.law.limit), 1)
}

// refuse reports whether a request must fail at once, and why.
func (s *scope) refuse(now time.Time, maxPause time.Duration) error {
	if s.parked {
		if s.parkedUntil.IsZero() || now.Before(s.parkedUntil) {
			return &ScopeError{Scope: s.key, Reason: ReasonBlocked, Until: s.parkedUntil, Err: ErrBlocked}
		}
		s.parked, s.blockRow = false, 0
	}
	if d := s.pausedUntil.Sub(now); d > maxPause {
		err := ErrPaused
		if s.pauseReason == ReasonBreaker {
			err = ErrBreakerOpen
		}
		return &ScopeError{Scope: s.key, Reason: s.pauseReason, Until: s.pausedUntil, Err: err}
	}
	return nil
}

// acquire waits politely for a send slot. Waiting is FIFO and single-file:
// only the head of the queue waits for a token, at the rate in force, so a
// rate cut or a pause reaches the very next send. A wait of the head longer
// than maxPause (a pause, or the gap a ceiling puts between sends) fails at
// once; a place in the queue does not. crawlDelay is the Crawl-delay of the
// request's origin: the scope's ceiling is at least that strict.
func (s *scope) acquire(ctx context.Context, now time.Time, maxPause, crawlDelay time.Duration) (permit, error) {
	s.mu.Lock()
	s.lastUsed = now
	if r := crawlDelayRate(crawlDelay); r > 0 && (s.robCeil == 0 || r < s.robCeil) {
		s.robCeil = r
		s.syncRate(now)
	}
	s.breakerTick(now)
	if len(s.queue) == 0 {
		if err := s.refuse(now, maxPause); err != nil {
			s.mu.Unlock()
			return permit{}, err
		}
		if !now.Before(s.pausedUntil) && s.inflight < s.limitNow() && s.halfOpenReady() && s.paceAllows(now) {
			p := s.take(now)
			s.mu.Unlock()
			return p, nil
		}
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	s.queue = append(s.queue, w)
	for {
		if s.queue[0] != w {
			s.mu.Unlock()
			select {
			case <-w.ch:
			case <-ctx.Done():
				return permit{}, s.leave(w, ctx.Err())
			}
			s.mu.Lock()
			continue
		}
		now = time.Now()
		s.breakerTick(now)
		if err := s.refuse(now, maxPause); err != nil {
			s.mu.Unlock()
			return permit{}, s.leave(w, err)
		}
		var wake time.Time // zero: wait for a nudge
		switch {
		case now.Before(s.pausedUntil):
			wake = s.pausedUntil
		case s.inflight >= s.limitNow() || !s.halfOpenReady():
		default:
			if s.paceAllows(now) {
				p := s.take(now)
				s.queue = s.queue[1:]
				if len(s.queue) > 0 {
					s.queue[0].nudge()
				}
				s.mu.Unlock()
				return p, nil
			}
			s.law.roundBinding = true
			wake = s.nextToken(now)
			if wake.Sub(now) > maxPause {
				err := &ScopeError{Scope: s.key, Reason: s.ceilReason, Until: wake, Err: ErrPaused}
				s.mu.Unlock()
				return permit{}, s.leave(w, err)
			}
		}
		s.mu.Unlock()
		if err := sleep(ctx, w, now, wake); err != nil {
			return permit{}, s.leave(w, err)
		}
		s.mu.Lock()
	}
}

// halfOpenReady: a half-open breaker lets one probe out at a time.
func (s *scope) halfOpenReady() bool { return s.breaker != BreakerHalfOpen || !s.probeOut }

// Pacing. The bucket (burst 2) holds the average rate and the drain of a
// pause; on top of it sends follow a theoretical schedule (GCRA): the next
// send is due one interval after the previous one was due. A timer that
// fires late would otherwise lose its lateness for good (with burst 1 every
// send starts a full interval from when it actually went, ~6 % lost at
// 30 req/s on a loaded machine); the schedule gives back up to paceCredit of
// it, never more, so a send is never more than that early on the interval.
// A Crawl-delay asks for a minimum gap: no credit while it binds.
const (
	paceBurst  = 2
	paceCredit = 10 * time.Millisecond
)

// interval is the gap between sends at rate r, at most longestPause (a rate
// of 1e-10/s would overflow time.Duration and let sends out unpaced).
func interval(r float64) time.Duration {
	if r <= 0 {
		return longestPause
	}
	return seconds(1 / r)
}

// seconds converts a number of seconds to a Duration, saturating at
// longestPause: float-to-integer conversion of a value out of range is
// platform-dependent in Go, and a negative result would mean "no wait".
func seconds(x float64) time.Duration {
	if !(x < longestPause.Seconds()) { // NaN too
		return longestPause
	}
	if x <= 0 {
		return 0
	}
	return time.Duration(x * float64(time.Second))
}

// paceAllows takes a send slot at now if the schedule and the bucket allow.
func (s *scope) paceAllows(now time.Time) bool {
	if now.Before(s.tat) || !s.bucket.AllowAt(now) {
		return false
	}
	t := interval(s.curRate)
	credit := min(t/4, paceCredit)
	if s.robCeil > 0 && s.curRate >= s.robCeil {
		credit = 0
	}
	from := s.tat
	if early := now.Add(-credit); early.After(from) {
		from = early
	}
	s.tat = from.Add(t)
	s.lastSend = now
	return true
}

// nextToken is when the next send is due: the schedule's time, or later if
// the bucket is drained or empty.
func (s *scope) nextToken(now time.Time) time.Time {
	if until := s.bucket.DrainedUntil(); now.Before(until) {
		return until
	}
	wake := now.Add(time.Microsecond)
	if need := 1 - s.bucket.TokensAt(now); need > 0 && s.curRate > 0 {
		wake = now.Add(max(seconds(need/s.curRate), time.Microsecond))
	}
	if s.tat.After(wake) {
		wake = s.tat
	}
	return wake
}

func sleep(ctx context.Context, w *waiter, now, wake time.Time) error {
	if wake.IsZero() {
		select {
		case <-w.ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if dl, ok := ctx.Deadline(); ok && wake.After(dl) {
		return fmt.Errorf("adaptive: polite wait would pass the context deadline: %w", context.DeadlineExceeded)
	}
	t := time.NewTimer(wake.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave removes w from the queue after a failed wait and passes the head
// role on.
func (s *scope) leave(w *waiter, err error) error {
	s.mu.Lock()
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			if i == 0 && len(s.queue) > 0 {
				s.queue[0].nudge()
			}
			break
		}
	}
	s.mu.Unlock()
	return err
}

func (s *scope) take(now time.Time) permit {
	s.inflight++
	p := permit{
		sc:          s,
		sent:        now,
		epoch:       s.law.epoch,
		cepoch:      s.law.cepoch,
		rate:        s.curRate,
		inflight:    s.inflight,
		concBinding: s.inflight >= s.limitNow(),
	}
	if s.breaker == BreakerHalfOpen {
		s.probeOut, p.probe = true, true
	}
	return p
}

// outcome is what one attempt produced, as the controller needs it.
type outcome struct {
	class      classify.Class
	status     int
	retryAfter time.Duration
	hasRA      bool
	quota      classify.Quota
	hasQuota   bool
	rtt        time.Duration // to the response headers; 0 without a response
}

// reaction is what release decided, for events and logs outside the lock.
type reaction struct {
	decreased bool
	paused    time.Duration
	parked    bool
	opened    bool
	limit     float64
	rate      float64
	inflight  int
	until     time.Time
	reason    Reason
	// share is a pause (or park) decided here, without jitter, for the
	// Store; zero when none was
	share       time.Time
	shareReason Reason
}

// release returns the slot of p and applies what its outcome says.
func (s *scope) release(p permit, o outcome, st *settings, now time.Time) reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = now
	s.inflight--
	s.counts[o.class]++
	if p.probe {
		s.probeOut = false
	}
	var r reaction
	if o.rtt > 0 {
		s.law.observeRTT(o.rtt)
	}
	if o.hasQuota {
		s.applyQuota(now, o.quota, st, &r)
	}
	switch o.class {
	case classify.Success:
		s.law.onSuccess(now, p.epoch, p.concBinding)
		s.badRow, s.blockRow = 0, 0
		if s.breaker == BreakerHalfOpen && p.probe {
			s.breaker = BreakerClosed
			s.law.resumed(now)
		}
	case classify.Throttled, classify.Overloaded, classify.TransportFailure:
		// 429 is a rate signal; 503/502/504 and transport failures are
		// a concurrency signal (Little's law couples the two, so a rate
		// limiter answering 503 is still held under its rate). Only a
		// signal for a request sent after the last decrease of its kind
		// is fresh: the others are the tail of a burst already answered,
		// and neither escalate the backoff nor count toward the breaker.
		fresh := p.cepoch == s.law.cepoch
		if o.class == classify.Throttled {
			fresh = p.epoch == s.law.epoch
		}
		if fresh {
			s.badRow++
		}
		s.pauseAfter(now, o, fresh, st, &r)
		if o.class == classify.Throttled {
			r.decreased = s.law.onThrottle(now, p.epoch, p.rate)
		} else {
			// increases stay held for Hold after the pause ends (a 200
			// from a struggling origin is no proof of headroom)
			r.decreased = s.law.onOverload(now, p.cepoch, p.inflight, later(now, s.pausedUntil).Add(st.Hold))
		}
	case classify.Blocked:
		s.blockRow++
		if th := s.law.rule.Block.Threshold; th > 0 && s.blockRow >= th && !s.parked {
			s.parked = true
			s.parkedUntil = time.Time{}
			if d := s.law.rule.Block.ParkFor; d > 0 {
				s.parkedUntil = now.Add(min(d, longestPause))
				r.share, r.shareReason = s.parkedUntil, ReasonBlocked
			}
			r.parked, r.reason, r.until = true, ReasonBlocked, s.parkedUntil
		}
	}
	s.syncRate(now)
	if len(s.queue) > 0 {
		s.queue[0].nudge()
	}
	r.limit, r.rate, r.inflight = s.law.limit, s.curRate, s.inflight
	if r.until.IsZero() && !r.parked {
		r.until = s.pausedUntil
	}
	return r
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pauseAfter pauses the whole scope after a throttle or overload. The
// longest deadline wins. Retry-After is honoured, whatever the signal's
// epoch (0 or a past date means MinPause, never a zero-wait loop). Without
// it, a fresh throttle pauses for a couple of send intervals and fresh
// overloads in a row back off exponentially; the tail of a burst adds
// nothing to the pause its head set.
func (s *scope) pauseAfter(now time.Time, o outcome, fresh bool, st *settings, r *reaction) {
	var d time.Duration
	reason := ReasonRetryAfter
	switch {
	case o.hasRA:
		d = max(o.retryAfter, st.MinPause)
	case !fresh:
	case o.class == classify.Throttled || s.badRow > 1:
		reason = ReasonBackoff
		base := min(max(seconds(2/math.Max(s.curRate, 0.001)), 100*time.Millisecond), st.Backoff)
		d = backoff(base, s.badRow-1, st.MaxBackoff)
	}
	if th := st.BreakerThreshold; th > 0 && fresh && s.badRow >= th && s.breaker != BreakerOpen {
		s.breaker = BreakerOpen
		d = max(d, st.BreakerCooldown)
		reason = ReasonBreaker
		r.opened = true
	}
	if d <= 0 {
		return
	}
	d = min(d, longestPause)
	s.pause(now, now.Add(d), reason, st, r)
	r.paused = d
	if d <= st.MaxPause {
		s.law.notePause(now, s.pausedUntil, d)
	}
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

// pause stops the scope until until plus a jitter of its own (the longest
// deadline wins) and tells the reaction what to share: the deadline without
// jitter, so that every collector adds its own.
func (s *scope) pause(now, until time.Time, reason Reason, st *settings, r *reaction) {
	r.reason = reason
	if until.After(r.share) {
		r.share, r.shareReason = until, reason
	}
	until = until.Add(s.jitter(until.Sub(now), st))
	if until.After(s.pausedUntil) {
		s.pausedUntil, s.pauseReason = until, reason
		s.drainTo(now, until)
	}
}

func (s *scope) jitter(d time.Duration, st *settings) time.Duration {
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
	return time.Duration(s.rng.Uint64N(uint64(j)))
}

// applyQuota turns honest quota headers into a ceiling: spread what remains
// of the window over the time left in it, so the quota is never exhausted.
func (s *scope) applyQuota(now time.Time, q classify.Quota, st *settings, r *reaction) {
	if q.Remaining <= 0 {
		if q.Reset > 0 {
			s.pause(now, now.Add(min(max(q.Reset, st.MinPause), longestPause)), ReasonQuota, st, r)
		}
		return
	}
	reset := q.Reset
	if reset <= 0 {
		reset = q.Window
	}
	if reset <= 0 {
		return
	}
	left := float64(q.Remaining) - float64(s.inflight)
	s.quoCeil = math.Max(left, 1) / reset.Seconds()
	s.quoUntil = now.Add(min(reset, longestPause))
}

// breakerTick moves an open breaker whose pause has ended to half-open.
func (s *scope) breakerTick(now time.Time) {
	if s.breaker == BreakerOpen && !now.Before(s.pausedUntil) {
		s.breaker = BreakerHalfOpen
		s.syncRate(now)
	}
}

// adoptPause adopts a pause announced elsewhere (the shared Store), with a
// jitter of this scope's own, if it ends later than the one in force here.
// It reports whether it did.
func (s *scope) adoptPause(now, until time.Time, reason Reason, st *settings) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !until.After(now) {
		return false
	}
	until = until.Add(s.jitter(until.Sub(now), st))
	if !until.After(s.pausedUntil) {
		return false
	}
	s.pausedUntil, s.pauseReason = until, reason
	s.drainTo(now, until)
	if len(s.queue) > 0 {
		s.queue[0].nudge()
	}
	return true
}

// untake gives back a slot granted by acquire but not used (the scope was
// evicted meanwhile, or a shared pause started): no outcome is recorded.
func (s *scope) untake(p permit) {
	s.mu.Lock()
	s.inflight--
	if p.probe {
		s.probeOut = false
	}
	if len(s.queue) > 0 {
		s.queue[0].nudge()
	}
	s.mu.Unlock()
}

// drainTo empties the bucket for a pause that ends at until. The drain ends
// one send interval earlier, so that the bucket holds exactly one token when
// the pause gate opens: the first request goes at the deadline, the next ones
// ramp at the rate in force (no burst of saved tokens, no extra interval).
func (s *scope) drainTo(now, until time.Time) {
	if end := until.Add(-interval(s.curRate)); end.After(now) {
		s.bucket.DrainAt(now, end)
		return
	}
	s.bucket.DrainAt(now, now)
}

// longestPause caps every pause a server can ask for (a Retry-After of
// 10^12 s, a date in year 9999): far beyond any crawl, and far enough from
// the limits of time.Duration that adding jitter cannot overflow into the
// past.
const longestPause = 100 * 365 * 24 * time.Hour
