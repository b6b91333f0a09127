package polite

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// scope is the state of one scope (a host, a domain, a proxy...): its
// decision core and the line of callers waiting on it. The Controller holds
// one per scope key (the map holds the key; callers pass it along).
type scope struct {
	mu sync.Mutex
	// guarded by mu:
	core     core
	queue    queue
	lastUsed time.Duration
	created  time.Duration
	codes    [statusSlots]uint32 // responses by status code (statusSlot)
	retries  uint32
	memGen   uint32      // the memory generation the Crawl-delay was last read at
	dead     bool        // evicted: look the key up again (set under Controller.mu too)
	fl       *scopeFleet // with a Store: the fleet's view, nil until used
	// reservations are slots taken ahead of their requests (Controller.Reserve),
	// oldest first; their sends are counted in flight
	reservations []reserved
	// atFleet counts this process's sends waiting for the fleet's lease
	// and slot (Store): while one waits, reserve hands out no other
	atFleet int32
}

func newScope(key string, r *rule, now time.Duration, seed uint64) *scope {
	s := &scope{lastUsed: now, created: now}
	s.core.init(key, r, now, seed)
	return s
}

// acquire waits politely for a send slot. Only the head of the line waits
// for the scope; a wait of the head longer than MaxPause (a pause, or the
// gap a ceiling puts between sends) fails at once, while a place in the
// line does not. crawlDelay is the Crawl-delay of the request's origin: the
// scope's ceiling is at least that strict. Each look at the core is one
// transition, which its observers (the decision log) hear of once the lock is
// released.
func (s *scope) acquire(ctx context.Context, c *Controller, cl call, now time.Duration) (stamp, error) {
	entry := now
	key := cl.key
	s.mu.Lock()
	s.lastUsed = now
	tr := s.begin(c, now)
	s.adoptRule(c, cl.rule, now)
	q := cause{op: opAcquire, crawlDelay: s.pullCeilings(c, key, now, cl.crawlDelay)}
	if t, ok := s.useReservation(c, now); ok {
		q.granted, q.reserved = true, true
		s.publish(c, key, &tr, &q)
		return t, nil
	}
	if len(s.queue) == 0 {
		switch d := s.decide(c, now); d.kind {
		case sendNow:
			t := s.take(now)
			q.granted = true
			s.publish(c, key, &tr, &q)
			return t, nil
		case fail:
			s.publish(c, key, &tr, &q)
			return stamp{}, s.refused(c, key, d.why)
		}
	}
	w := newWaiter()
	s.queue = append(s.queue, w)
	s.end(&tr)
	if tr.obs != nil {
		// the observers hear it with no lock held; without any, the head
		// looks again at once (its wait may be over), the lock kept
		s.mu.Unlock()
		c.observe(key, &tr, &q)
		s.mu.Lock()
	}
	for {
		if s.queue.head() != w {
			s.mu.Unlock()
			select {
			case <-w.ch:
			case <-ctx.Done():
				return stamp{}, s.leave(c, key, w, ctx.Err())
			}
			s.mu.Lock()
			continue
		}
		now = c.now()
		tr = s.begin(c, now)
		d := s.decide(c, now)
		switch d.kind {
		case sendNow:
			t := s.take(now)
			s.queue.pop()
			s.publish(c, key, &tr, &cause{op: opAcquire, granted: true, wait: now - entry})
			c.notify(key) // the line moved: a frontier may reserve again
			return t, nil
		case fail:
			s.publish(c, key, &tr, &cause{op: opAcquire})
			return stamp{}, s.leave(c, key, w, s.refused(c, key, d.why))
		}
		s.publish(c, key, &tr, &cause{op: opAcquire})
		var wake time.Time // zero: wait for a nudge
		if d.kind == waitUntil {
			wake = c.at(d.wake)
		}
		if err := sleep(ctx, w, c.at(now), wake); err != nil {
			return stamp{}, s.leave(c, key, w, err)
		}
		s.mu.Lock()
	}
}

// publish ends transition tr, releases mu and tells its observers what
// it changed, as q. Called with mu held.
func (s *scope) publish(c *Controller, key string, tr *transition, q *cause) {
	s.end(tr)
	s.mu.Unlock()
	c.observe(key, tr, q)
}

// decide is the core's decision under the controller's global ceiling
// (Config.GlobalRate): a send goes only when both allow it. Called with mu
// held; takes the global ceiling's lock, a leaf.
func (s *scope) decide(c *Controller, now time.Duration) decision {
	g := c.global
	if g == nil {
		return s.core.decide(now, c.st)
	}
	if why, ok := s.core.refusal(now, c.st.MaxPause); ok {
		return decision{kind: fail, why: why}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.b.Next(); w > now {
		if w-now > c.st.MaxPause {
			return decision{kind: fail, why: refusal{ceiling: ceilGlobal, until: w, err: ErrPaused}}
		}
		return decision{kind: waitUntil, wake: w}
	}
	d := s.core.decide(now, c.st)
	if d.kind == sendNow {
		g.b.Take(now)
	}
	return d
}

// take grants the send decide allowed, and draws the random gap before the
// next one (from the scope's one random source, the gate's). Called with mu
// held.
func (s *scope) take(now time.Duration) stamp {
	t := s.core.take(now)
	s.core.sentRandomGap()
	return t
}

// adoptRule makes the scope keep to r as well as to its rule: a scope
// whose hosts match different rules (a scope per registered domain or per
// proxy, a key of the user's) keeps to the strictest of those it has met,
// each ceiling the lowest, each gap the longest. Else the rule of its
// first request would rule them all, and a host's own ceiling would be
// dropped whenever another host of its scope came first. Called with
// s.mu held.
func (s *scope) adoptRule(c *Controller, r *rule, now time.Duration) {
	if r == nil || r == s.core.rule {
		return
	}
	if m := c.mergeRules(s.core.rule, r); m != s.core.rule {
		s.core.adoptRule(m, now)
	}
}

// pullCeilings reads what memory knows of the scope's Crawl-delay when it
// changed since the last look, and applies the Crawl-delay of the
// request's origin. It returns the Crawl-delay that changed the ceiling (0:
// none did). Called with mu held.
func (s *scope) pullCeilings(c *Controller, key string, now time.Duration, crawlDelay time.Duration) time.Duration {
	var remembered time.Duration
	var ok bool
	if g := c.known.generation(); g != s.memGen {
		s.memGen = g
		remembered, ok = c.known.crawlDelay(key)
	}
	d, changed := s.core.crawlDelays(now, remembered, ok, crawlDelay)
	if !changed {
		return 0
	}
	return d
}

func (s *scope) refused(c *Controller, key string, r refusal) error {
	e := &ScopeError{Scope: key, Pause: r.pause.public(), Ceiling: r.ceiling.public(), Err: r.err}
	if r.until != 0 {
		e.Until = c.at(r.until)
	}
	return e
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
		return fmt.Errorf("polite: the polite wait would pass the context deadline: %w", context.DeadlineExceeded)
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

// leave takes w out of the line after a failed wait. The line moved: a
// frontier told to wait for it (Reserve's Notify, while the line was not
// empty) hears of it, as when a waiter sends.
func (s *scope) leave(c *Controller, key string, w *waiter, err error) error {
	s.mu.Lock()
	s.queue.remove(w)
	s.mu.Unlock()
	c.notify(key)
	return err
}

// record returns the slot of t and applies its outcome, as transition tr. With
// a fleet, it also returns the law's shared part if it changed (nil
// otherwise) and the fleet version it derives from.
func (s *scope) record(c *Controller, now time.Duration, t stamp, o *outcome, tr *transition) (reaction, []byte, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = now
	*tr = s.begin(c, now)
	r := s.core.record(now, t, o, c.st)
	if o.status != 0 {
		s.codes[statusSlot(o.status)]++
	}
	s.end(tr)
	s.queue.nudgeHead()
	if c.fleet == nil {
		return r, nil, 0
	}
	changed, version := s.sharedChange(now)
	return r, changed, version
}

// untake gives back a slot granted but not used (the scope was evicted
// meanwhile, or a shared pause started): no outcome is recorded.
func (s *scope) untake(c *Controller, t stamp, now time.Duration) {
	s.mu.Lock()
	s.giveBack(c, t, now)
	s.queue.nudgeHead()
	s.mu.Unlock()
}

// giveBack gives back a send granted but not made: the scope's slots
// (core.untake) and the controller-wide ceiling's. Called with mu held.
func (s *scope) giveBack(c *Controller, t stamp, now time.Duration) {
	s.core.untake(t, now)
	c.global.untake(t, now)
}

// fleetTransition runs fn under mu as one transition of the decision log: a change
// the fleet decided (a pause it shared, its law's state adopted), told as
// such.
func (s *scope) fleetTransition(c *Controller, key string, fn func(now time.Duration)) {
	s.mu.Lock()
	tr := s.begin(c, c.now())
	fn(tr.now)
	s.publish(c, key, &tr, &cause{op: opAdopt})
}

// unpark lifts a park and any pause (Controller.Unpark).
func (s *scope) unpark(c *Controller, key string) {
	s.mu.Lock()
	tr := s.begin(c, c.now())
	s.core.unpark(tr.now)
	s.queue.nudgeHead()
	s.publish(c, key, &tr, &cause{op: opUnpark})
}

// retried counts a retry: an attempt after the first of one request.
func (s *scope) retried() {
	s.mu.Lock()
	s.retries++
	s.mu.Unlock()
}

// idle reports whether the scope can be evicted at now: nothing in flight,
// nobody waiting, no pause or park in force, untouched for ttl. Called with
// mu held.
func (s *scope) idle(now, ttl time.Duration) bool {
	return len(s.queue) == 0 && now-s.lastUsed >= ttl && s.core.idle(now)
}

// deferred tells the law that the send t stamps waits for the fleet
// before it goes (core.deferred).
func (s *scope) deferred(t *stamp) {
	s.mu.Lock()
	s.core.deferred(t)
	s.atFleet++
	s.mu.Unlock()
}

// fleetAnswered: a send deferred has its answer from the fleet (a lease
// and its slot, or an error). It reports whether none waits there now.
func (s *scope) fleetAnswered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.atFleet--
	return s.atFleet == 0
}

// went tells the law that the send t stamps, deferred, goes at now
// (core.went).
func (s *scope) went(t *stamp, now time.Duration, paced bool) {
	s.mu.Lock()
	s.core.went(t, now, paced)
	s.mu.Unlock()
}
