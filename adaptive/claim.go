package adaptive

import (
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Claims and notifications: what a frontier (package frontier) needs to
// hand a worker only a request whose scope can send now, so that no worker
// waits politely on one scope while another scope could use it.

// Claim is a send slot taken ahead of its request by Controller.Claim. The
// next request the controller sends on that scope uses it instead of
// waiting. Its zero value holds nothing. It is a small value, safe to copy
// and to use from any goroutine.
type Claim struct {
	s   *scope
	c   *Controller
	key string
	id  uint64
}

// claimed is a claim held by a scope: guarded by scope.mu.
type claimed struct {
	id uint64
	t  ticket
}

// Held reports whether cl holds a slot (Controller.Claim granted one).
func (cl Claim) Held() bool { return cl.s != nil }

// Release gives the slot back if no request has used it yet (the request
// never reached the controller: a cache hit, a filter, an abort); once a
// request used it, Release does nothing. Call it when the request is done,
// whatever happened; calling it twice is harmless.
func (cl Claim) Release() {
	if cl.s == nil {
		return
	}
	s := cl.s
	s.mu.Lock()
	i := slices.IndexFunc(s.claims, func(x claimed) bool { return x.id == cl.id })
	if i < 0 {
		s.mu.Unlock()
		return
	}
	t := s.claims[i].t
	s.claims = slices.Delete(s.claims, i, i+1)
	if len(s.claims) == 0 {
		s.claims = nil
	}
	s.core.untake(t)
	s.line.nudgeHead()
	s.mu.Unlock()
	cl.c.notify(cl.key)
}

// Wait says what a scope that could not be claimed waits for. At most one
// of its fields is set; the zero value waits for nothing. A plain value.
type Wait struct {
	// Until is when the scope may send (the end of a pause, the pacer's
	// next send, the global ceiling's); ask again then.
	Until time.Time
	// Release: the scope sends again only after a send ends (its
	// concurrency limit is taken, requests wait in its line, the
	// breaker's probe is out) or its robots.txt has been read. Notify
	// tells when to ask again.
	Release bool
	// Probe: robots.txt of the request's origin is not known yet. Send
	// one request of the origin without a claim (it reads robots.txt
	// first) and ask again when it ends.
	Probe bool
}

// ScopeKey returns the key of the scope req belongs to (Config.Scope).
func (c *Controller) ScopeKey(req *http.Request) string { return c.st.Scope(req) }

// Claim takes a send slot on the scope of req if the scope can send now,
// without waiting, and keeps it for the next request the controller sends
// on that scope: a frontier that hands that request to a worker knows the
// worker will not wait. Release the claim when the request is done. When
// the scope cannot send now, Claim takes nothing and Wait says what it
// waits for. err is the refusal the request would meet now (a park, a
// pause beyond MaxPause, robots.txt's Disallow): sent, it fails at once.
// Claim never waits and never does I/O.
//
// With a Store (WithStore), a claim holds this process's slot only: the
// fleet's lease and the slot of its shared schedule are taken when the
// claimed request is sent, as for any request (Claim does no I/O). The
// request may then wait there for the fleet; if the fleet's concurrency is
// in use or a pause it shared voids the slot, the claim's slot is given
// back and the request waits in the scope's line like any other.
func (c *Controller) Claim(req *http.Request) (Claim, Wait, error) {
	if req == nil || req.URL == nil {
		return Claim{}, Wait{}, errNoURL
	}
	cl := c.resolve(req)
	now := c.now()
	if c.st.robots && req.URL.Path != "/robots.txt" {
		f, state := c.mem.robotsState(origin(req), now)
		switch state {
		case robotsUnknown:
			return Claim{}, Wait{Probe: true}, nil
		case robotsFetching:
			return Claim{}, Wait{Release: true}, nil
		}
		if err := c.disallowed(req, cl.key, &f); err != nil {
			return Claim{}, Wait{}, err
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
		sp := s.begin(c, now)
		q := cue{op: opClaim, crawlDelay: s.pullCeilings(c, cl.key, now, cl.crawlDelay)}
		var (
			claim Claim
			wait  Wait
			err   error
		)
		if len(s.line) > 0 {
			wait.Release = true
		} else {
			switch d := s.decide(c, now); d.kind {
			case sendNow:
				g := s.take(cl.key, now)
				id := c.claims.Add(1)
				s.claims = append(s.claims, claimed{id, g.t})
				claim = Claim{s: s, c: c, key: cl.key, id: id}
			case waitUntil:
				wait.Until = c.at(d.wake)
			case waitRelease:
				wait.Release = true
			default:
				err = s.refused(c, cl.key, d.why)
			}
		}
		q.granted = claim.Held()
		s.leaveStep(c, cl.key, &sp, &q)
		return claim, wait, err
	}
}

var errNoURL = errors.New("adaptive: a request without URL")

// useClaim hands the oldest claim of the scope to the request at hand,
// unless a pause or a refusal came since it was taken: then that claim is
// given back and the request goes the usual way. Called with mu held.
func (s *scope) useClaim(c *Controller, key string, now time.Duration) (grant, bool) {
	if len(s.claims) == 0 {
		return grant{}, false
	}
	cl := s.claims[0]
	s.claims = s.claims[1:]
	if len(s.claims) == 0 {
		s.claims = nil
	}
	if _, refused := s.core.refusal(now, c.st.MaxPause); refused || s.core.paused(now) {
		s.core.untake(cl.t)
		return grant{}, false
	}
	cl.t.law.Sent = now // it goes out now, not when it was claimed
	return grant{sc: s, key: key, t: cl.t}, true
}

// watchers are the functions Notify registered.
type watchers struct {
	mu   sync.Mutex                   // serialises changes
	list atomic.Pointer[[]*watchFunc] // copied on change; read without lock
}

type watchFunc struct{ f func(scope string) }

// Notify calls f with the key of a scope each time that scope may be able
// to send sooner than a Claim said: a send ended or a claim was released,
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
