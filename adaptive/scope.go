package adaptive

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
	core       core
	line       line
	lastUsed   time.Duration
	created    time.Duration
	pauseStart time.Duration // see settlePause
	pausedPast time.Duration
	codes      [statusSlots]uint32 // responses by status code (statusSlot)
	retries    uint32
	memGen     uint32 // the memory generation the Crawl-delay was last read at
	dead       bool   // evicted: look the key up again (set under Controller.mu too)
}

func newScope(key string, r *rule, now time.Duration, seed uint64) *scope {
	s := &scope{lastUsed: now, created: now}
	s.core.init(key, r, now, seed)
	return s
}

// grant is one send granted by a scope. It is a value: taking one
// allocates nothing.
type grant struct {
	sc  *scope
	key string
	t   ticket
	at  time.Duration // when it was granted
}

// acquire waits politely for a send slot. Only the head of the line waits
// for the scope; a wait of the head longer than MaxPause (a pause, or the
// gap a ceiling puts between sends) fails at once, while a place in the
// line does not. crawlDelay is the Crawl-delay of the request's origin: the
// scope's ceiling is at least that strict.
func (s *scope) acquire(ctx context.Context, c *Controller, key string, now time.Duration, crawlDelay time.Duration) (grant, error) {
	st := c.st
	entry := now
	s.mu.Lock()
	s.lastUsed = now
	sp := s.begin(c, now)
	s.pullCeilings(c, key, now, crawlDelay, &sp)
	if len(s.line) == 0 {
		if d := s.core.decide(now, st); d.kind == sendNow {
			g := grant{s, key, s.core.take(now), now}
			s.end(&sp)
			s.mu.Unlock()
			if sp.tale != nil {
				c.tell(key, &sp, &cue{op: opAcquire, granted: true})
			}
			return g, nil
		} else if d.kind == fail {
			s.end(&sp)
			s.mu.Unlock()
			if sp.tale != nil {
				c.tell(key, &sp, &cue{op: opAcquire})
			}
			return grant{}, s.refused(c, key, d.why)
		}
	}
	s.end(&sp)
	w := newWaiter()
	s.line = append(s.line, w)
	if sp.tale != nil {
		s.mu.Unlock() // no I/O under the lock; w may be nudged meanwhile
		c.tell(key, &sp, &cue{op: opAcquire})
		s.mu.Lock()
	}
	for {
		if s.line.head() != w {
			s.mu.Unlock()
			select {
			case <-w.ch:
			case <-ctx.Done():
				return grant{}, s.leave(w, ctx.Err())
			}
			s.mu.Lock()
			continue
		}
		now = c.now()
		sp = s.begin(c, now)
		d := s.core.decide(now, st)
		switch d.kind {
		case sendNow:
			g := grant{s, key, s.core.take(now), now}
			s.line.pop()
			s.end(&sp)
			s.mu.Unlock()
			if sp.tale != nil {
				c.tell(key, &sp, &cue{op: opAcquire, granted: true, wait: now - entry})
			}
			return g, nil
		case fail:
			s.end(&sp)
			s.mu.Unlock()
			if sp.tale != nil {
				c.tell(key, &sp, &cue{op: opAcquire})
			}
			return grant{}, s.leave(w, s.refused(c, key, d.why))
		}
		s.end(&sp)
		s.mu.Unlock()
		if sp.tale != nil {
			c.tell(key, &sp, &cue{op: opAcquire})
		}
		var wake time.Time // zero: wait for a nudge
		if d.kind == waitUntil {
			wake = c.at(d.wake)
		}
		if err := sleep(ctx, w, c.at(now), wake); err != nil {
			return grant{}, s.leave(w, err)
		}
		s.mu.Lock()
	}
}

// pullCeilings reads what memory knows of the scope's Crawl-delay when it
// changed since the last look, and applies the Crawl-delay of the
// request's origin. Called with mu held, within step sp.
func (s *scope) pullCeilings(c *Controller, key string, now time.Duration, crawlDelay time.Duration, sp *step) {
	changed := false
	if g := c.mem.generation(); g != s.memGen {
		s.memGen = g
		if d, ok := c.mem.crawlDelay(key); ok {
			s.core.pace.robots = crawlDelayRate(d)
			changed = true
			if sp.tale != nil {
				sp.tale.crawlDelay = d
			}
		}
	}
	if s.core.pace.requireCrawlDelay(crawlDelayRate(crawlDelay)) {
		changed = true
		if sp.tale != nil {
			sp.tale.crawlDelay = crawlDelay
		}
	}
	if changed {
		s.core.pace.sync(now, &s.core)
	}
}

func (s *scope) refused(c *Controller, key string, r refusal) error {
	e := &ScopeError{Scope: key, Reason: r.reason, Err: r.err}
	if r.until != 0 {
		e.PausedUntil = c.at(r.until)
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

// leave takes w out of the line after a failed wait.
func (s *scope) leave(w *waiter, err error) error {
	s.mu.Lock()
	s.line.remove(w)
	s.mu.Unlock()
	return err
}

// record returns the slot of t and applies its outcome, as step sp.
func (s *scope) record(c *Controller, now time.Duration, t ticket, o *outcome, sp *step) reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = now
	*sp = s.begin(c, now)
	r := s.core.record(now, t, o, c.st)
	if o.status != 0 {
		s.codes[statusSlot(o.status)]++
	}
	s.end(sp)
	s.line.nudgeHead()
	return r
}

// untake gives back a slot granted but not used (the scope was evicted
// meanwhile, or a shared pause started): no outcome is recorded.
func (s *scope) untake(t ticket) {
	s.mu.Lock()
	s.core.untake(t)
	s.line.nudgeHead()
	s.mu.Unlock()
}

// adopt takes a pause announced elsewhere (the shared Store), with a jitter
// of its own. It reports whether it did.
func (s *scope) adopt(c *Controller, key string, now, until time.Duration, reason Reason) bool {
	s.mu.Lock()
	sp := s.begin(c, now)
	ok := s.core.gate.adopt(now, until, reason, c.st)
	if ok {
		s.core.pace.b.Drain(s.core.gate.pausedUntil)
		s.line.nudgeHead()
	}
	s.end(&sp)
	s.mu.Unlock()
	if sp.tale != nil {
		c.tell(key, &sp, &cue{op: opAdopt})
	}
	return ok
}

// unpark lifts a park and any pause (Controller.Unpark).
func (s *scope) unpark(c *Controller, key string) {
	s.mu.Lock()
	sp := s.begin(c, c.now())
	s.core.unpark(sp.now)
	s.line.nudgeHead()
	s.end(&sp)
	s.mu.Unlock()
	if sp.tale != nil {
		c.tell(key, &sp, &cue{op: opUnpark})
	}
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
	return s.core.inflight == 0 && len(s.line) == 0 && now-s.lastUsed >= ttl &&
		!s.core.gate.paused(now) && !s.core.gate.parked
}
