package polite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/fleetclient"
)

// Controller makes every request sent through it polite: it keeps one
// scope per scope key (a host by default), each finding its server's limit,
// and what they share: the configuration, what outlives a scope
// (robots.txt, ceilings, estimates), the event stream. Make one with New,
// NewTransport or adaptive.Attach; the zero value is not usable. A
// Controller is safe for concurrent use; most programs make one and use it
// for every request.
type Controller struct {
	st     *settings // immutable once built
	errMu  sync.Mutex
	err    error     // guarded by errMu: configuration problems Attach or NewTransport met
	origin time.Time // scopes keep time as durations since it (monotonic)
	events stream
	known  *knowledge          // what outlives a scope: robots.txt, ceilings
	fleet  *fleetclient.Client // with a Store: the fleet's side, nil otherwise
	// fleetLive is the most processes any scope's store answer counted
	// (0: the store never answered): the fleet's size for a scope the
	// store has not answered for
	fleetLive atomic.Int64
	// peekBody: detectors that may read the body are configured (block-page
	// markers, or a Classifier with Detectors of its own), so the transport
	// shows them the first 16 KiB of bodies under 500.
	peekBody bool

	global       *globalPacer  // Config.GlobalRate; nil when there is none
	reservations atomic.Uint64 // numbers reservations
	watch        watchers      // Notify's
	waits        waits         // polite waits of granted requests

	// merged holds the rules made of two (mergeRules), for scopes whose
	// hosts match different rules; bounded by the rules' combinations
	mergedMu sync.RWMutex
	merged   map[[2]*rule]*rule // guarded by mergedMu

	mu        sync.RWMutex
	scopes    map[string]*scope // guarded by mu
	lastSweep time.Duration     // guarded by mu
	evicted   evictedTotals     // guarded by mu: what evicted scopes counted
}

// New makes a controller from cfg, validating it: an invalid field is an
// error wrapping ErrConfig that names every problem.
//
//	ctrl, err := polite.New(polite.Config{Default: polite.Rule{Rate: 5}})
//	client := &http.Client{Transport: ctrl.Transport(http.DefaultTransport)}
func New(cfg Config) (*Controller, error) {
	st, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return newController(st), nil
}

func newController(st *settings) *Controller {
	c := &Controller{
		peekBody: st.Classifier.Detectors != nil,
		events:   stream{buf: st.EventBuffer},
		st:       st,
		origin:   time.Now(),
		known:    newMemory(st.MaxRemembered),
		global:   newGlobalPacer(st.GlobalRate),
		scopes:   make(map[string]*scope),
	}
	if st.Logger != nil {
		st.Logger = safeLogger(st.Logger, c.addErr)
	}
	if st.Store != nil {
		c.fleet = newFleet(st, c.now)
		c.fleet.Subscribe(c.notified)
	}
	return c
}

// failSafe is New for the one-line constructors, which have no error to
// return (NewTransport, adaptive.Attach): every valid setting is kept, each
// invalid one gets the most conservative value of its field; the problems
// are logged and reported by Err. At most one Config is given; more is a
// problem too (the first is used).
func failSafe(cfgs []Config) *Controller {
	var cfg Config
	var extra error
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	if len(cfgs) > 1 {
		extra = fmt.Errorf("%w: %d Configs given, the first is used", ErrConfig, len(cfgs))
	}
	st, err := cfg.resolve()
	c := newController(st)
	if err = errors.Join(extra, err); err != nil {
		c.err = err
		logger(st).Error("polite: invalid configuration; each invalid setting takes its most conservative value", "err", err)
	}
	return c
}

// Err reports the configuration problems NewTransport or adaptive.Attach
// met (each invalid setting took the most conservative value of its
// field), and what Attach's guard found later (a transport set on the
// collector after Attach, wrapped again), or nil. Safe for concurrent use.
func (c *Controller) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// addErr adds err to what Err reports.
func (c *Controller) addErr(err error) {
	c.errMu.Lock()
	c.err = errors.Join(c.err, err)
	c.errMu.Unlock()
}

// now is the controller's clock: the time since its origin.
func (c *Controller) now() time.Duration { return time.Since(c.origin) }

// at converts a time on the controller's clock to a time.Time.
func (c *Controller) at(d time.Duration) time.Time { return c.origin.Add(d) }

// since converts a time.Time to the controller's clock.
func (c *Controller) since(t time.Time) time.Duration { return t.Sub(c.origin) }

// call is one request's scope, resolved once per request.
type call struct {
	key        string
	rule       *rule
	crawlDelay time.Duration // of the request's origin (robots.txt), 0: none
}

// resolve works out the scope and rule of req.
func (c *Controller) resolve(req *http.Request) call {
	return call{key: c.st.Scope(req), rule: c.st.ruleFor(reqScheme(req), reqHost(req))}
}

// mergeRules is the rule a scope under rule a keeps once a request under
// rule b comes to it: the stricter of the two in each field (stricter),
// a itself when b adds nothing. Results are kept, so that a scope
// spanning hosts of different rules builds each combination once.
func (c *Controller) mergeRules(a, b *rule) *rule {
	k := [2]*rule{a, b}
	c.mergedMu.RLock()
	m := c.merged[k]
	c.mergedMu.RUnlock()
	if m != nil {
		return m
	}
	if r := stricter(a, b); r.sameLimits(a) {
		m = a
	} else {
		m = &r
	}
	c.mergedMu.Lock()
	defer c.mergedMu.Unlock()
	if c.merged == nil {
		c.merged = map[[2]*rule]*rule{}
	}
	if prev := c.merged[k]; prev != nil {
		return prev
	}
	c.merged[k] = m
	return m
}

// scope returns the scope of key, creating it with what memory holds of it.
func (c *Controller) scope(key string, r *rule, now time.Duration) *scope {
	c.mu.RLock()
	s := c.scopes[key]
	c.mu.RUnlock()
	if s != nil {
		return s
	}
	c.mu.Lock()
	if s = c.scopes[key]; s != nil {
		c.mu.Unlock()
		return s
	}
	evicted := c.sweepLocked(now)
	s = newScope(key, r, now, c.st.JitterSeed)
	tr := s.begin(c, now) // no lock needed yet: nobody else sees s
	if rate, until := c.known.quota(key); rate > 0 && now < until {
		s.core.setQuota(now, rate, until)
	}
	if est, limit, at := c.known.estimate(key); est > 0 {
		// an estimate from an evicted scope or an import: trusted less
		// the older it is
		s.core.restore(now, decayed(est, now-at), limit)
	}
	s.end(&tr)
	c.scopes[key] = s
	c.mu.Unlock()
	for _, e := range evicted {
		c.logRecord(now, slog.LevelInfo, "evicted", []slog.Attr{slog.String("scope", e.key), slog.String("cause", "idle"),
			slog.Uint64("requests", e.requests), slog.Duration("paused_total", e.paused)})
	}
	c.observe(key, &tr, &cause{op: opCreate})
	return s
}

// evictedScope is one scope evictedScope, for the log.
type evictedScope struct {
	key      string
	requests uint64
	paused   time.Duration
}

// sweepLocked evicts idle scopes (see scope.idle). It runs at most once per
// IdleTTL/4, when a scope is created, so memory stays bounded by the scopes
// used within about 1.25·IdleTTL. A quota ceiling still in force and the
// law's estimate are remembered; Crawl-delays are in memory already. What
// each scope counted is folded into c.gone. It returns the scopes evicted
// when the log takes them, to be logged without the lock.
func (c *Controller) sweepLocked(now time.Duration) []evictedScope {
	if now-c.lastSweep < c.st.IdleTTL/4 {
		return nil
	}
	c.lastSweep = now
	info, _ := c.logLevels()
	var out []evictedScope
	for k, s := range c.scopes {
		s.mu.Lock()
		idle := s.idle(now, c.st.IdleTTL)
		var qr, est, limit float64
		var qu, used time.Duration
		if idle {
			s.dead = true
			delete(c.scopes, k)
			state := s.core.state()
			c.evicted.add(s, &state, now)
			qr, qu = s.core.quotaCeiling(now)
			est, limit, used = state.estimate, state.limit, s.lastUsed
			if info {
				e := evictedScope{key: k, paused: s.core.pausedTotal(now)}
				for _, n := range state.counts {
					e.requests += uint64(n)
				}
				out = append(out, e)
			}
		}
		s.mu.Unlock()
		if qr > 0 {
			c.known.keepQuota(k, qr, qu)
		}
		if est > 0 {
			// measured, last, when the scope was last used
			c.known.keepEstimate(k, est, limit, used)
		}
	}
	return out
}

// Acquire waits politely for a send slot on the scope of req and returns a
// Permit to record the outcome with. It is the low-level API under the
// transport, for callers that send requests by other means; it waits until
// the slot, ctx's end or a refusal (a *ScopeError). Safe for concurrent
// use.
func (c *Controller) Acquire(ctx context.Context, req *http.Request) (Permit, error) {
	return c.acquire(ctx, c.resolve(req))
}

func (c *Controller) acquire(ctx context.Context, cl call) (Permit, error) {
	start := time.Duration(-1)
	for {
		if err := ctx.Err(); err != nil {
			return Permit{}, err
		}
		now := c.now()
		if start < 0 {
			start = now
		}
		s := c.scope(cl.key, cl.rule, now)
		t, err := s.acquire(ctx, c, cl, now)
		if err != nil {
			return Permit{}, err
		}
		p := Permit{c: c, s: s, key: cl.key, t: t}
		if s.dead {
			// evicted between lookup and acquire: give the slot back, retry
			s.untake(c, p.t, c.now())
			continue
		}
		if c.fleet != nil {
			send, none, err := c.fleetBefore(ctx, cl.key, s, &p.t)
			if none && err == nil {
				c.notify(cl.key) // a frontier may hand out the next (reserve)
			}
			if err != nil {
				// the slot went back; on ErrAgain (a pause the fleet
				// shared voided the slot, or the store failed) ask again
				if err == fleetclient.ErrAgain {
					continue
				}
				var long *fleetclient.TooLongError
				if errors.As(err, &long) {
					e := &ScopeError{Scope: cl.key, Until: c.at(c.now() + long.Wait), Err: ErrPaused}
					if long.Paused {
						e.Pause = pauseKind(long.Reason).public()
					}
					return Permit{}, e
				}
				return Permit{}, err
			}
			p.lease = send.Lease
			// the fleet's concurrency all in use with this send: the limit
			// may grow on its success (a process's own in-flight count is
			// only its part of the fleet's), unless the send waited for
			// the fleet's schedule: then the rate was the bottleneck, and
			// the sends (and leases) waiting for their slots, here and
			// elsewhere, are no concurrency at the server
			p.t.InUse = (p.t.InUse || send.Full) && !send.Scheduled
			if send.InFlight > 0 {
				// the fleet's in flight, not this process's part: the
				// limit an overload leaves is the fleet's
				// (a store's count, untrusted: within int32, or an
				// overload would cut the limit from a wrapped one)
				p.t.InFlight, p.t.Bound = int32(min(max(send.InFlight, 0), math.MaxInt32)), send.Scheduled
			}
			at := send.At // sent now, not when the local slot was granted
			if at == 0 {
				at = c.now() // the store is down: the local view decided
			}
			s.went(&p.t, at, send.Paced)
		}
		// sent is when it goes out: after the fleet's slot, if any
		c.waits.observe(p.t.Sent - start)
		return p, nil
	}
}

// Permit is one granted send, from the moment its scope let it go to its
// outcome. Record it exactly once, or Drop it. It is a small value; its
// zero value holds nothing (Record and Drop do nothing).
type Permit struct {
	c     *Controller
	s     *scope
	key   string
	t     stamp  // t.Sent is when it went out (after the fleet's slot)
	lease string // with a Store: the fleet's lease ("" when the store was down)
}

// Record returns the slot and feeds the outcome to the control law: resp
// is the answer (its status and headers are read, not its body), or err
// the error that took its place. Safe to call from any goroutine, once.
func (p Permit) Record(resp *http.Response, err error) {
	if p.c == nil {
		return
	}
	now := p.c.now()
	o := p.c.outcomeOf(resp, err, nil)
	if resp != nil {
		o.rtt = now - p.t.Sent
	}
	p.c.finish(p, &o, resp, err, now)
}

// Drop returns the slot without feeding the control law (the request was
// never sent, or its answer says nothing about the server). Safe to call
// from any goroutine, once.
func (p Permit) Drop() {
	if p.c == nil {
		return
	}
	p.c.finish(p, &outcome{class: classify.Canceled}, nil, nil, p.c.now())
}

// retried counts a retry on p's scope: the transport calls it for each
// attempt after the first of a request.
func (p Permit) retried() {
	if p.c != nil {
		p.s.retried()
	}
}

// outcomeOf classifies one attempt: resp (nil for a transport error err),
// and the first bytes of its body when detectors read them.
func (c *Controller) outcomeOf(resp *http.Response, err error, body []byte) outcome {
	var o outcome
	if resp == nil {
		o.class = c.st.Classifier.Classify(classify.Outcome{Err: err})
		return o
	}
	now := time.Now()
	o.status = resp.StatusCode
	o.class = c.st.Classifier.Classify(classify.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: body, Err: err})
	if o.class == classify.Throttled || o.class == classify.Overloaded || o.class == classify.Blocked {
		// a value too large to represent comes back as classify.Forever:
		// longer than any pause we wait for, so it parks. (A block's too:
		// a challenge page on a 429 still says how long to wait, when
		// the block is taken for a throttle.)
		o.retryAfter, o.hasRA = classify.RetryAfter(resp.Header, now)
	}
	o.quota, o.hasQuota = classify.ParseQuota(resp.Header, now)
	return o
}

// finish records the outcome of grant g at now, then tells the Store,
// the event streams and the log what it decided.
func (c *Controller) finish(p Permit, o *outcome, resp *http.Response, err error, now time.Duration) {
	var tr transition
	r, changed, version := p.s.record(c, now, p.t, o, &tr)
	q := cause{op: opRecord, class: o.class, status: o.status, decreased: r.decreased, cut: r.cut, refused: r.refused, rtt: o.rtt}
	if o.hasRA {
		q.retryAfter = o.retryAfter
	}
	c.observe(p.key, &tr, &q)
	if c.fleet != nil {
		c.fleet.After(p.key, fleetScope{c, p.key, p.s}, fleetReport(p.lease, r, now, changed, version, o.class == classify.Success))
	}
	c.notify(p.key) // after the fleet's answer, which may move the rate
	if !o.class.Signal() && o.class != classify.Blocked {
		return
	}
	e := Event{
		Time: c.at(now), Scope: p.key, Class: o.class, Status: o.status,
		Limit: int(r.limit), Rate: r.rate,
	}
	if r.until != 0 {
		e.PausedUntil = c.at(r.until)
	}
	if o.hasRA {
		e.RetryAfter = o.retryAfter
	}
	if resp != nil && resp.Request != nil && resp.Request.URL != nil {
		e.URL = resp.Request.URL.String()
	}
	if resp == nil {
		e.Err = err
	}
	c.events.emit(e)
}

// fleetBefore asks the fleet for the send t stamps on scope s (a lease, its
// slot of the shared schedule): t waits there, counted in the law's round
// it goes in. none: no send of the scope waits for the fleet now. On an
// error t's local slot goes back. A Store is the user's code: if it
// panics, the scope is told that t no longer waits and the slot goes back
// before the panic goes on, so that the scope is neither held open nor a
// slot short for good.
func (c *Controller) fleetBefore(ctx context.Context, key string, s *scope, t *stamp) (send fleetclient.Send, none bool, err error) {
	s.deferred(t)
	answered := false
	defer func() {
		if !answered {
			s.fleetAnswered()
		}
		if !answered || err != nil {
			s.untake(c, *t, c.now())
			c.notify(key)
		}
	}()
	send, err = c.fleet.Before(ctx, key, fleetScope{c, key, s}, t.Paced)
	answered = true
	return send, s.fleetAnswered(), err
}

// Events returns the controller's stream of load signals: every throttle,
// block, overload and transport failure, each Event carrying its Class, so
// that a consumer takes one class or all. The stream is made on the first
// call (Config.EventBuffer events deep; until then events cost nothing) and
// every call returns it. Delivery never blocks the crawl: an event that
// finds the stream full is dropped and counted (Report.DroppedEvents).
func (c *Controller) Events() <-chan Event { return c.events.events() }

// Unpark releases a scope parked after blocks (after rotating a proxy, say)
// and clears its pause. It reports whether the scope existed. Safe for
// concurrent use.
func (c *Controller) Unpark(scopeKey string) bool {
	c.mu.RLock()
	s := c.scopes[scopeKey]
	c.mu.RUnlock()
	if s == nil {
		return false
	}
	s.unpark(c, scopeKey)
	c.notify(scopeKey)
	return true
}

// logger is the controller's logger: Config.Logger, or slog's default.
func logger(st *settings) *slog.Logger {
	if st.Logger != nil {
		return st.Logger
	}
	return slog.Default()
}
