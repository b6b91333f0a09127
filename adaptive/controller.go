package adaptive

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/colly-polite/polite/classify"
)

// Controller holds one controller per scope and the machinery they share:
// configuration, event streams, the robots.txt cache. Make one with New,
// Attach or NewTransport; the zero value is not usable. A Controller is safe
// for concurrent use.
type Controller struct {
	st      *settings
	err     error // configuration error that made Attach fall back to defaults
	streams *streams
	mem     *memory // what outlives a scope: robots.txt, ceilings
	// peekBody: detectors that may read the body are configured (block-page
	// markers, or a Classifier with Detectors of its own), so the transport
	// shows them the first 16 KiB of bodies under 500.
	peekBody bool

	mu        sync.RWMutex
	scopes    map[string]*scope
	lastSweep time.Time
}

// New makes a controller from options, validating them.
func New(opts ...Option) (*Controller, error) {
	var cfg Config
	for _, o := range opts {
		o(&cfg)
	}
	st, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return newController(st), nil
}

func newController(st *settings) *Controller {
	return &Controller{
		peekBody: st.Classifier.Detectors != nil,
		st:       st,
		streams:  newStreams(st.EventBuffer),
		mem:      newMemory(st.MaxRemembered),
		scopes:   make(map[string]*scope),
	}
}

// mustNew is New for the one-line constructors, which have no error to
// return. They fail safe: every valid setting is kept, each invalid one gets
// the most conservative value of its field; the problems are logged and
// reported by Err.
func mustNew(opts []Option, robotsDefault bool) *Controller {
	var cfg Config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Robots == nil {
		cfg.Robots = &robotsDefault
	}
	st, err := cfg.resolve()
	c := newController(st)
	if err != nil {
		c.err = err
		l := st.Logger
		if l == nil {
			l = slog.Default()
		}
		l.Error("adaptive: invalid configuration; each invalid setting takes its most conservative value", "err", err)
	}
	return c
}

// Err reports the configuration problems Attach or NewTransport met (each
// invalid setting took the most conservative value of its field), or nil.
func (c *Controller) Err() error { return c.err }

// call is one request's scope, resolved once per request.
type call struct {
	key        string
	rule       *rule
	crawlDelay time.Duration // of the request's origin (robots.txt), 0: none
}

// resolve works out the scope and rule of req.
func (c *Controller) resolve(req *http.Request) call {
	h, _ := splitHostPort(NormalizeHost(reqScheme(req), reqHost(req)))
	return call{key: c.st.Scope(req), rule: c.st.ruleFor(h)}
}

// scope returns the controller of key, creating it lazily with what memory
// holds of it.
func (c *Controller) scope(key string, r *rule, now time.Time) *scope {
	c.mu.RLock()
	s := c.scopes[key]
	c.mu.RUnlock()
	if s != nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s = c.scopes[key]; s != nil {
		return s
	}
	c.sweepLocked(now)
	s = newScope(key, r, now, c.st.Seed)
	delay, qr, qu := c.mem.scope(key)
	s.robCeil = crawlDelayRate(delay)
	if now.Before(qu) {
		s.quoCeil, s.quoUntil = qr, qu
	}
	s.syncRate(now)
	c.scopes[key] = s
	return s
}

// sweepLocked evicts idle scopes: nothing in flight, nobody waiting, no
// pause or park still in force, untouched for IdleTTL. It runs at most once
// per IdleTTL/4, when a scope is created, so memory stays bounded by the
// scopes used within about 1.25·IdleTTL. A quota ceiling still in force is
// remembered.
func (c *Controller) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < c.st.IdleTTL/4 {
		return
	}
	c.lastSweep = now
	for k, s := range c.scopes {
		s.mu.Lock()
		idle := s.inflight == 0 && len(s.queue) == 0 && now.Sub(s.lastUsed) >= c.st.IdleTTL &&
			!now.Before(s.pausedUntil) && !s.parked
		var qr float64
		var qu time.Time
		if idle {
			s.dead = true
			delete(c.scopes, k)
			if s.quoCeil > 0 && now.Before(s.quoUntil) {
				qr, qu = s.quoCeil, s.quoUntil
			}
		}
		s.mu.Unlock()
		if qr > 0 {
			c.mem.keepQuota(k, qr, qu)
		}
	}
}

// Acquire waits politely for a send slot on the scope of req and returns a
// Permit to record the outcome with. It is the low-level API under the
// transport, for callers that send requests by other means.
func (c *Controller) Acquire(ctx context.Context, req *http.Request) (Permit, error) {
	return c.acquire(ctx, c.resolve(req))
}

func (c *Controller) acquire(ctx context.Context, cl call) (Permit, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Permit{}, err
		}
		now := time.Now()
		s := c.scope(cl.key, cl.rule, now)
		p, err := s.acquire(ctx, now, c.st.MaxPause, cl.crawlDelay)
		if err != nil {
			return Permit{}, err
		}
		switch {
		case s.dead:
			// evicted between lookup and acquire: give the slot back, retry
		case c.st.Store != nil && c.sharedPause(ctx, s):
			// another collector paused this scope: wait for it here
		default:
			return Permit{c: c, p: p}, nil
		}
		s.untake(p)
	}
}

// Permit is one granted send. Record it exactly once, or Drop it.
type Permit struct {
	c *Controller
	p permit
}

// Record returns the slot and feeds the outcome to the control law.
func (p Permit) Record(resp *http.Response, err error) {
	if p.c == nil {
		return
	}
	now := time.Now()
	o := p.c.outcomeOf(resp, err, now, nil)
	if resp != nil {
		o.rtt = now.Sub(p.p.sent)
	}
	p.c.release(p.p, o, resp, err, now)
}

// Drop returns the slot without feeding the control law.
func (p Permit) Drop() {
	if p.c == nil {
		return
	}
	p.c.release(p.p, outcome{class: classify.Canceled}, nil, nil, time.Now())
}

func (c *Controller) outcomeOf(resp *http.Response, err error, now time.Time, body []byte) outcome {
	var o outcome
	if resp != nil {
		o.status = resp.StatusCode
		o.class = c.st.Classifier.Classify(classify.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: body, Err: err})
		if o.class == classify.Throttled || o.class == classify.Overloaded {
			// a value too large to represent comes back as the largest
			// Duration: longer than any pause we wait for, so it parks
			o.retryAfter, o.hasRA = classify.RetryAfter(resp.Header, now)
		}
		o.quota, o.hasQuota = classify.ParseQuota(resp.Header, now)
	} else {
		o.class = c.st.Classifier.Classify(classify.Outcome{Err: err})
	}
	return o
}

func (c *Controller) release(p permit, o outcome, resp *http.Response, err error, now time.Time) reaction {
	r := p.sc.release(p, o, c.st, now)
	if c.st.Store != nil && !r.share.IsZero() {
		c.sharePause(p.sc, r.share, r.shareReason)
	}
	if o.class.Signal() || o.class == classify.Blocked {
		e := Event{
			Time: now, Scope: p.sc.key, Class: o.class, Status: o.status,
			Limit: r.limit, Rate: r.rate, PausedTill: r.until,
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
		c.streams.emit(e)
		c.log(e, r)
	}
	return r
}

func (c *Controller) log(e Event, r reaction) {
	l := c.st.Logger
	if l == nil {
		return
	}
	event := e.Class.String()
	switch {
	case r.parked:
		event = "parked"
	case r.opened:
		event = "breaker-open"
	case r.decreased:
		event = "decrease:" + event
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, "adaptive",
		slog.Time("t", e.Time), slog.String("scope", e.Scope), slog.Float64("limit", r.limit),
		slog.Int("inflight", r.inflight),
		slog.Float64("rate", r.rate), slog.String("event", event), slog.Int("status", e.Status),
		slog.Duration("pause", r.paused))
}

// Events returns the stream of one class of signal: classify.Throttled,
// Blocked, Overloaded or TransportFailure (nil for other classes). Delivery
// never blocks the crawl: an event that finds the stream full is dropped and
// counted (Dropped).
func (c *Controller) Events(class classify.Class) <-chan Event {
	if int(class) >= classCount {
		return nil
	}
	return c.streams.ch[class]
}

// Dropped is how many events of class were dropped because nobody read them.
func (c *Controller) Dropped(class classify.Class) uint64 {
	if int(class) >= classCount {
		return 0
	}
	return c.streams.dropped[class].Load()
}

// Unpark releases a scope parked after blocks (after rotating a proxy, say)
// and clears its pause. It reports whether the scope existed.
func (c *Controller) Unpark(scopeKey string) bool {
	c.mu.RLock()
	s := c.scopes[scopeKey]
	c.mu.RUnlock()
	if s == nil {
		return false
	}
	s.mu.Lock()
	s.parked, s.parkedUntil, s.blockRow = false, time.Time{}, 0
	s.pausedUntil, s.pauseReason = time.Time{}, ReasonNone
	s.law.resumed(time.Now())
	s.bucket.ResumeAt(time.Now())
	if len(s.queue) > 0 {
		s.queue[0].nudge()
	}
	s.mu.Unlock()
	return true
}

// Snapshot is the state of one scope at one instant.
type Snapshot struct {
	Scope       string
	Limit       float64 // concurrency limit
	InFlight    int
	Waiting     int
	Rate        float64 // pacing rate in force, req/s
	Estimate    float64 // capacity estimate, req/s (0: not yet measured)
	PausedUntil time.Time
	PauseReason Reason
	Breaker     BreakerState
	Parked      bool
	RTT         time.Duration // smoothed round trip to the response headers
	Counts      map[classify.Class]uint64
	// ThrottledRatio is throttled / (throttled + success).
	ThrottledRatio float64
}

// Snapshot returns the state of one scope.
func (c *Controller) Snapshot(scopeKey string) (Snapshot, bool) {
	c.mu.RLock()
	s := c.scopes[scopeKey]
	c.mu.RUnlock()
	if s == nil {
		return Snapshot{}, false
	}
	return s.snapshot(), true
}

// Snapshots returns the state of every live scope, sorted by key.
func (c *Controller) Snapshots() []Snapshot {
	c.mu.RLock()
	list := make([]*scope, 0, len(c.scopes))
	for _, s := range c.scopes {
		list = append(list, s)
	}
	c.mu.RUnlock()
	out := make([]Snapshot, 0, len(list))
	for _, s := range list {
		out = append(out, s.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

// Len is the number of live scopes.
func (c *Controller) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.scopes)
}

func (s *scope) snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	reason := s.pauseReason
	if !time.Now().Before(s.pausedUntil) {
		reason = ReasonNone
	}
	snap := Snapshot{
		Scope: s.key, Limit: s.law.limit, InFlight: s.inflight, Waiting: len(s.queue),
		Rate: s.curRate, Estimate: s.law.est, PausedUntil: s.pausedUntil, PauseReason: reason,
		Breaker: s.breaker, Parked: s.parked, RTT: s.law.srtt, Counts: make(map[classify.Class]uint64),
	}
	for i, n := range s.counts {
		if n > 0 {
			snap.Counts[classify.Class(i)] = n
		}
	}
	if t, ok := s.counts[classify.Throttled], s.counts[classify.Success]; t+ok > 0 {
		snap.ThrottledRatio = float64(t) / float64(t+ok)
	}
	return snap
}

// sharedPause reads the scope's shared pause just before a send, outside
// any lock, and adopts it (with a jitter of this collector's own) if it ends
// later than the local one. It reports whether the send must wait.
func (c *Controller) sharedPause(ctx context.Context, s *scope) bool {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	until, reason, err := c.st.Store.Pause(ctx, s.key)
	if err != nil {
		c.storeError("read", s.key, err)
		return false
	}
	now := time.Now()
	if !until.After(now) {
		return false
	}
	return s.adoptPause(now, until, reason, c.st)
}

// sharePause writes a pause decided here (its deadline without jitter) to
// the shared Store, and adopts the store's answer if another collector's
// pause ends later.
func (c *Controller) sharePause(s *scope, until time.Time, reason Reason) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	got, gotReason, err := c.st.Store.ExtendPause(ctx, s.key, until, reason)
	if err != nil {
		c.storeError("write", s.key, err)
		return
	}
	if got.After(until) {
		s.adoptPause(time.Now(), got, gotReason, c.st)
	}
}

func (c *Controller) storeError(op, scope string, err error) {
	l := c.st.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Warn("adaptive: store "+op+" failed; the local pause gate still holds", "scope", scope, "err", err)
}
