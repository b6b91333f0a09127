package adaptive

import (
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reservations and notifications: what a frontier (package frontier) needs
// to hand a worker only a request whose scope can send now, so that no
// worker waits politely on one scope while another scope could use it.

// Reservation is a send slot taken ahead of its request by
// Controller.Reserve. The next request the controller sends on that scope
// uses it instead of waiting. Its zero value holds nothing. It is a small
// value, safe to copy and to use from any goroutine.
type Reservation struct {
	s   *scope
	c   *Controller
	key string
	id  uint64
}

// reserved is a reservation held by a scope: guarded by scope.mu.
type reserved struct {
	id uint64
	t  stamp
}

// Held reports whether r holds a slot (Controller.Reserve granted one).
func (r Reservation) Held() bool { return r.s != nil }

// Cancel gives the slot back if no request has used it yet (the request
// never reached the controller: a cache hit, a filter, an abort); once a
// request used it, Cancel does nothing. Call it when the request is done,
// whatever happened; calling it twice is harmless.
func (r Reservation) Cancel() {
	if r.s == nil {
		return
	}
	s := r.s
	s.mu.Lock()
	i := slices.IndexFunc(s.reservations, func(x reserved) bool { return x.id == r.id })
	if i < 0 {
		s.mu.Unlock()
		return
	}
	t := s.reservations[i].t
	s.reservations = slices.Delete(s.reservations, i, i+1)
	if len(s.reservations) == 0 {
		s.reservations = nil
	}
	s.core.untake(t)
	s.queue.nudgeHead()
	s.mu.Unlock()
	r.c.notify(r.key)
}

// Readiness says what a scope that could not be reserved waits for. At
// most one of its fields is set; the zero value waits for nothing. A plain
// value.
type Readiness struct {
	// Until is when the scope may send (the end of a pause, the pacer's
	// next send, the global ceiling's); ask again then.
	Until time.Time
	// Notify: the scope sends again only after a send ends (its
	// concurrency limit is taken, requests wait in its line, the
	// breaker's probe is out) or its robots.txt has been read. Notify
	// tells when to ask again.
	Notify bool
	// Probe: robots.txt of the request's origin is not known yet. Send
	// one request of the origin without a reservation (it reads robots.txt
	// first) and ask again when it ends.
	Probe bool
}

// ScopeKey returns the key of the scope req belongs to (Config.Scope).
func (c *Controller) ScopeKey(req *http.Request) string { return c.st.Scope(req) }

// Reserve takes a send slot on the scope of req if the scope can send now,
// without waiting, and keeps it for the next request the controller sends
// on that scope: a frontier that hands that request to a worker knows the
// worker will not wait. Cancel the reservation when the request is done.
// When the scope cannot send now, Reserve takes nothing and Readiness says
// what it waits for. err is the refusal the request would meet now (a park, a
// pause beyond MaxPause, robots.txt's Disallow): sent, it fails at once.
// Reserve never waits and never does I/O.
//
// With a Store (WithStore), a reservation holds this process's slot only:
// the fleet's lease and the slot of its shared schedule are taken when the
// reserved request is sent, as for any request (Reserve does no I/O). The
// request may then wait there for the fleet; if the fleet's concurrency is
// in use or a pause it shared voids the slot, the reservation's slot is
// given back and the request waits in the scope's line like any other.
func (c *Controller) Reserve(req *http.Request) (Reservation, Readiness, error) {
	if req == nil || req.URL == nil {
		return Reservation{}, Readiness{}, errNoURL
	}
	cl := c.resolve(req)
	now := c.now()
	if c.st.robots && req.URL.Path != "/robots.txt" {
		f, state := c.known.robotsState(origin(req), now)
		switch state {
		case robotsUnknown:
			return Reservation{}, Readiness{Probe: true}, nil
		case robotsFetching:
			return Reservation{}, Readiness{Notify: true}, nil
		}
		if err := c.disallowed(req, cl.key, &f); err != nil {
			return Reservation{}, Readiness{}, err
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
		q := cause{op: opReserve, crawlDelay: s.pullCeilings(c, cl.key, now, cl.crawlDelay)}
		var (
			res  Reservation
			wait Readiness
			err  error
		)
		if len(s.queue) > 0 {
			wait.Notify = true
		} else {
			switch d := s.decide(c, now); d.kind {
			case sendNow:
				id := c.reservations.Add(1)
				s.reservations = append(s.reservations, reserved{id, s.take(now)})
				res = Reservation{s: s, c: c, key: cl.key, id: id}
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

var errNoURL = errors.New("adaptive: a request without URL")

// useReservation hands the oldest reservation of the scope to the request
// at hand, unless a pause or a refusal came since it was taken: then it is
// given back and the request goes the usual way. Called with mu held.
func (s *scope) useReservation(now, maxPause time.Duration) (stamp, bool) {
	if len(s.reservations) == 0 {
		return stamp{}, false
	}
	cl := s.reservations[0]
	s.reservations = s.reservations[1:]
	if len(s.reservations) == 0 {
		s.reservations = nil
	}
	if _, refused := s.core.refusal(now, maxPause); refused || s.core.paused(now) {
		s.core.untake(cl.t)
		return stamp{}, false
	}
	cl.t.Sent = now // it goes out now, not when it was reserved
	return cl.t, true
}

// watchers are the functions Notify registered.
type watchers struct {
	mu   sync.Mutex                   // serialises changes
	list atomic.Pointer[[]*watchFunc] // copied on change; read without lock
}

type watchFunc struct{ f func(scope string) }

// Notify calls f with the key of a scope each time that scope may be able
// to send sooner than Reserve said: a send ended or a reservation was cancelled,
// a request waiting in its line was granted, it was unparked, its
// robots.txt was read. f runs on the goroutine that caused it, outside the
// controller's locks; it must be quick and must not block (set a flag,
// nudge a channel of capacity one). The returned function stops the calls.
func (c *Controller) Notify(f func(scope string)) (stop func()) {
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
