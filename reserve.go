package polite

import (
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/internal/hook"
)

// Reservations and notifications: what a frontier (package frontier) needs
// to hand a worker only a request whose scope can send now, so that no
// worker waits politely on one scope while another scope could use it. They
// reach the frontier through package internal/hook, not the core's API.

// reserved is a reservation held by a scope: guarded by scope.mu.
type reserved struct {
	id uint64
	t  stamp
}

// cancelReservation gives reservation id of scope s back if no request
// has used it yet (the request never reached the controller: a cache hit,
// a filter, an abort); once a request used it, nothing happens.
func (c *Controller) cancelReservation(s *scope, key string, id uint64) {
	s.mu.Lock()
	i := slices.IndexFunc(s.reservations, func(x reserved) bool { return x.id == id })
	if i < 0 {
		s.mu.Unlock()
		return
	}
	t := s.reservations[i].t
	s.reservations = slices.Delete(s.reservations, i, i+1)
	if len(s.reservations) == 0 {
		s.reservations = nil
	}
	s.giveBack(c, t, c.now())
	s.queue.nudgeHead()
	s.mu.Unlock()
	c.notify(key)
}

// reserve takes a send slot on the scope of req if the scope can send now,
// without waiting, and keeps it for the next request the controller sends
// on that scope: a frontier that hands that request to a worker knows the
// worker will not wait. Cancel the reservation when the request is done.
// When the scope cannot send now, reserve takes nothing and Readiness says
// what it waits for. err is the refusal the request would meet now (a park, a
// pause beyond MaxPause, robots.txt's Disallow): sent, it fails at once.
// reserve never waits and never does I/O.
//
// With a Store (Config.Store), a reservation holds this process's slot only:
// the fleet's lease and the slot of its shared schedule are taken when the
// reserved request is sent, as for any request (reserve does no I/O). The
// request may then wait there for the fleet; if the fleet's concurrency is
// in use or a pause it shared voids the slot, the reservation's slot is
// given back and the request waits in the scope's line like any other.
// While a reserved request has not gone yet or one waits for the fleet,
// the scope reserves no other (Readiness.Notify: told once it went).
func (c *Controller) reserve(req *http.Request) (hook.Reservation, hook.Readiness, error) {
	if req == nil || req.URL == nil {
		return hook.Reservation{}, hook.Readiness{}, errNoURL
	}
	cl := c.resolve(req)
	now := c.now()
	if c.st.robots && req.URL.Path != "/robots.txt" {
		f, state := c.known.robotsState(origin(req), now)
		switch state {
		case robotsUnknown:
			return hook.Reservation{}, hook.Readiness{Probe: true}, nil
		case robotsFetching:
			return hook.Reservation{}, hook.Readiness{Notify: true}, nil
		}
		if err := c.disallowed(req, cl.key, &f); err != nil {
			return hook.Reservation{}, hook.Readiness{}, err
		}
		cl.crawlDelay = f.delay
	}
	for {
		s := c.scope(cl.key, cl.rule, now)
		s.mu.Lock()
		if s.dead { // evicted between lookup and lock: look again
			s.mu.Unlock()
			continue
		}
		s.lastUsed = now
		tr := s.begin(c, now)
		s.adoptRule(c, cl.rule, now)
		q := cause{op: opReserve, crawlDelay: s.pullCeilings(c, cl.key, now, cl.crawlDelay)}
		var (
			res  hook.Reservation
			wait hook.Readiness
			err  error
		)
		if len(s.queue) > 0 || c.fleet != nil && (s.atFleet > 0 || len(s.reservations) > 0) {
			// behind the scope's line; or, in a fleet, behind a send that
			// waits for the fleet's lease and slot (or will: reserved).
			// A frontier's worker given another would wait there too,
			// held from the scopes that could use it, while the fleet
			// shares the scope's slots between its processes anyway
			wait.Notify = true
		} else {
			switch d := s.decide(c, now); d.kind {
			case sendNow:
				id := c.reservations.Add(1)
				s.reservations = append(s.reservations, reserved{id, s.take(now)})
				key := cl.key
				res = hook.NewReservation(func() { c.cancelReservation(s, key, id) })
			case waitUntil:
				wait.Until = c.at(d.wake)
			case waitRelease:
				wait.Notify = true
			default:
				err = s.refused(c, cl.key, d.why)
			}
		}
		q.granted = res.Held()
		s.publish(c, cl.key, &tr, &q)
		return res, wait, err
	}
}

var errNoURL = errors.New("polite: a request without URL")

// useReservation hands the oldest reservation of the scope to the request
// at hand, unless a pause or a refusal came since it was taken, or the
// schedules do not allow a send now: then it is given back and the request
// goes the usual way. Called with mu held.
func (s *scope) useReservation(c *Controller, now time.Duration) (stamp, bool) {
	if len(s.reservations) == 0 {
		return stamp{}, false
	}
	cl := s.reservations[0]
	s.reservations = s.reservations[1:]
	if len(s.reservations) == 0 {
		s.reservations = nil
	}
	if _, refused := s.core.refusal(now, c.st.MaxPause); refused || s.core.paused(now) || !s.retake(c, cl.t.Sent, now) {
		s.giveBack(c, cl.t, now)
		return stamp{}, false
	}
	cl.t.Sent = now // it goes out now, not when it was reserved
	return cl.t, true
}

// retake moves a send claimed at from to now in the schedules (the
// scope's, and the controller-wide ceiling's): given back and taken again,
// under the ceilings in force now. The sends after it are then spaced from
// when it goes, not from when it was claimed (a claim used 0.9 s late under
// a MinGap of 1 s left 0.1 s before the next send), and a ceiling that
// came since (a stricter rule merged into the scope, a Crawl-delay, a
// rate cut, a pause) holds it back. False when the schedules do not allow
// a send now: the claim is then given back. Called with mu held.
func (s *scope) retake(c *Controller, from, now time.Duration) bool {
	if now == from {
		return true
	}
	b := &s.core.pace.b
	b.Untake(from)
	if !b.Take(now) {
		return false
	}
	if g := c.global; g != nil {
		g.mu.Lock()
		g.b.Untake(from)
		ok := g.b.Take(now)
		g.mu.Unlock()
		if !ok {
			b.Untake(now)
			return false
		}
	}
	return true
}

// watchers are the functions Notify registered.
type watchers struct {
	mu   sync.Mutex                   // serialises changes
	list atomic.Pointer[[]*watchFunc] // copied on change; read without lock
}

type watchFunc struct{ f func(scope string) }

// notifyFunc calls f with the key of a scope each time that scope may be
// able to send sooner than reserve said: a send ended or a reservation was cancelled,
// a request waiting in its line was granted, it was unparked, its
// robots.txt was read. f runs on the goroutine that caused it, outside the
// controller's locks; it must be quick and must not block (set a flag,
// nudge a channel of capacity one). The returned function stops the calls.
func (c *Controller) notifyFunc(f func(scope string)) (stop func()) {
	if f == nil {
		return func() {}
	}
	w := &watchFunc{f}
	c.watch.mu.Lock()
	var list []*watchFunc
	if p := c.watch.list.Load(); p != nil {
		list = slices.Clone(*p)
	}
	list = append(list, w)
	c.watch.list.Store(&list)
	c.watch.mu.Unlock()
	return func() {
		c.watch.mu.Lock()
		defer c.watch.mu.Unlock()
		p := c.watch.list.Load()
		if p == nil {
			return
		}
		list := slices.DeleteFunc(slices.Clone(*p), func(x *watchFunc) bool { return x == w })
		if len(list) == 0 {
			c.watch.list.Store(nil)
			return
		}
		c.watch.list.Store(&list)
	}
}

// notify tells the watchers that scope may send sooner. Without watchers it
// costs one atomic load.
func (c *Controller) notify(scope string) {
	p := c.watch.list.Load()
	if p == nil {
		return
	}
	for _, w := range *p {
		w.f(scope)
	}
}
