package polite

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// knowledge is what a controller knows beyond the life of a scope: per origin,
// its robots.txt (Crawl-delay, Allow and Disallow rules, and until when it
// is fresh); per scope, the ceilings its controller learned (Crawl-delay
// over the scope's origins, quota). A scope reads it when it is created and
// writes it when it is evicted, so an idle scope can go without taking its
// ceilings along. One LRU bounded by Config.MaxRemembered: the least
// recently used go first; the robots.txt rules it holds are bounded as well
// (rulesBudget), the least recently used read again when needed. Safe for
// concurrent use; its lock is never held while a scope's is taken.
type knowledge struct {
	mu  sync.Mutex
	lru *simplelru.LRU[memKey, any] // guarded by mu
	// rules is the estimated size of the robots.txt rules held; guarded
	// by mu
	rules int
	// gen counts the changes of scopes' Crawl-delays, so that a scope
	// reads memory again only when something changed
	gen atomic.Uint32
}

// rulesBudget bounds the robots.txt rules memory holds, estimated in bytes
// (robotsFacts.cost): beyond it the least recently used origins drop theirs,
// down to 3/4 of it, and read their robots.txt again when next needed.
const rulesBudget = 64 << 20

type memKind uint8

const (
	memOrigin memKind = iota // value *originFacts
	memScope                 // value *scopeFacts
)

type memKey struct {
	kind memKind
	name string
}

// originFacts is one origin's robots.txt. Fields other than done are
// guarded by memory.mu; done is closed when the fetch ends.
type originFacts struct {
	done      chan struct{}
	expires   time.Duration // on the controller's clock
	facts     robotsFacts
	abandoned bool // the fetch ended with its caller's context: ask again
}

// scopeFacts are the ceilings a scope learned. Guarded by memory.mu.
type scopeFacts struct {
	delays     []originDelay // origins of the scope with a Crawl-delay
	quotaRate  float64
	quotaUntil time.Duration // on the controller's clock
	estimate   float64       // the law's capacity estimate, req/s (0: none)
	limit      float64       // and its concurrency limit
	estAt      time.Duration // when, on the controller's clock
}

type originDelay struct {
	origin string
	delay  time.Duration
}

// maxDelayOrigins bounds the origins a scope remembers a Crawl-delay of
// (ScopeDomain and ScopeProxy put many origins under one scope); beyond it
// the mildest is forgotten, so the strictest always stays.
const maxDelayOrigins = 16

func newMemory(size int) *knowledge {
	m := &knowledge{}
	l, err := simplelru.NewLRU[memKey, any](size, func(_ memKey, v any) {
		if e, ok := v.(*originFacts); ok { // called with mu held
			m.rules -= e.facts.cost
		}
	})
	if err != nil { // size is validated positive
		panic(err)
	}
	m.lru = l
	return m
}

// robots returns origin's robots.txt entry. When it is missing, stale or
// abandoned, a new entry in progress is stored and mine is true: the caller
// fetches and must call robotsDone.
func (m *knowledge) robots(origin string, now time.Duration) (e *originFacts, mine bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{memOrigin, origin}
	if v, ok := m.lru.Get(k); ok {
		e = v.(*originFacts)
		select {
		case <-e.done:
			if e.fresh(now) {
				return e, false
			}
			m.rules -= e.facts.cost // replaced below
		default:
			return e, false // a fetch is under way: wait for it
		}
	}
	e = &originFacts{done: make(chan struct{})}
	m.lru.Add(k, e)
	return e, true
}

// Kinds of robots.txt knowledge.
const (
	robotsUnknown  = iota // missing or stale: the next request fetches it
	robotsFetching        // a fetch is under way
	robotsKnown
)

// robotsState is what is known of origin's robots.txt at now, without
// fetching it: its facts when they are fresh.
func (m *knowledge) robotsState(origin string, now time.Duration) (robotsFacts, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.lru.Get(memKey{memOrigin, origin})
	if !ok {
		return robotsFacts{}, robotsUnknown
	}
	e := v.(*originFacts)
	select {
	case <-e.done:
		if e.fresh(now) {
			return e.facts, robotsKnown
		}
		return robotsFacts{}, robotsUnknown
	default:
		return robotsFacts{}, robotsFetching
	}
}

// robotsExpiry is when origin's robots.txt is asked for again (0 when
// nothing is known of it).
func (m *knowledge) robotsExpiry(origin string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.lru.Peek(memKey{memOrigin, origin}); ok {
		e := v.(*originFacts)
		select {
		case <-e.done:
			return e.expires
		default:
		}
	}
	return 0
}

// fresh reports whether the fetch of e ended with facts trusted at now.
// Call it after e.done is closed.
func (e *originFacts) fresh(now time.Duration) bool { return !e.abandoned && now < e.expires }

// factsOf returns the facts of e, whose fetch has ended.
func (m *knowledge) factsOf(e *originFacts) robotsFacts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.facts
}

// robotsDone ends the fetch of e: with the facts read, trusted until
// expires, or abandoned (the next caller asks again). It returns the
// strictest Crawl-delay remembered for the scope of the origin.
func (m *knowledge) robotsDone(e *originFacts, origin, scope string, f robotsFacts, expires time.Duration, abandoned bool) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if abandoned {
		f = robotsFacts{}
	}
	delay := f.delay
	e.facts, e.expires, e.abandoned = f, expires, abandoned
	close(e.done)
	k := memKey{memOrigin, origin}
	v, ok := m.lru.Peek(k)
	current := ok && v == e
	switch {
	case abandoned && current:
		m.lru.Remove(k)
	case f.cost > 0 && current:
		m.rules += f.cost
		m.trimRulesLocked()
	case f.cost > 0: // evicted meanwhile: its waiters still read it, uncounted
		e.facts.cost = 0
	}
	sf := m.scopeLocked(scope, delay > 0) // an abandoned fetch has no delay
	if sf == nil {
		return 0
	}
	if !abandoned {
		sf.setDelay(origin, delay)
		m.gen.Add(1)
	}
	return sf.crawlDelay()
}

// trimRulesLocked drops the rules of the least recently used origins while
// they cost more than rulesBudget, down to 3/4 of it; such an origin reads
// its robots.txt again when next needed.
func (m *knowledge) trimRulesLocked() {
	if m.rules <= rulesBudget {
		return
	}
	for _, k := range m.lru.Keys() { // oldest first
		if m.rules <= rulesBudget/4*3 {
			return
		}
		if k.kind != memOrigin {
			continue
		}
		v, _ := m.lru.Peek(k)
		e := v.(*originFacts)
		select {
		case <-e.done:
		default:
			continue
		}
		if e.facts.cost > 0 {
			m.rules -= e.facts.cost
			e.facts.group, e.facts.cost = nil, 0
			e.expires = 0 // stale: read again
		}
	}
}

// generation is the number of Crawl-delay changes so far.
func (m *knowledge) generation() uint32 { return m.gen.Load() }

// crawlDelay is the strictest Crawl-delay remembered for scope; ok is false
// when nothing is remembered of it.
func (m *knowledge) crawlDelay(scope string) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.scopeLocked(scope, false)
	if f == nil {
		return 0, false
	}
	return f.crawlDelay(), true
}

// scopeLocked returns the facts of scope, creating them if create.
func (m *knowledge) scopeLocked(scope string, create bool) *scopeFacts {
	k := memKey{memScope, scope}
	if v, ok := m.lru.Get(k); ok {
		return v.(*scopeFacts)
	}
	if !create {
		return nil
	}
	f := &scopeFacts{}
	m.lru.Add(k, f)
	return f
}

// quota is the quota ceiling remembered for scope, in force until until
// (on the controller's clock); rate 0 when none is.
func (m *knowledge) quota(scope string) (rate float64, until time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.scopeLocked(scope, false)
	if f == nil {
		return 0, 0
	}
	return f.quotaRate, f.quotaUntil
}

// keepQuota remembers a quota ceiling in force until until, as a scope is
// evicted.
func (m *knowledge) keepQuota(scope string, rate float64, until time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.scopeLocked(scope, true)
	f.quotaRate, f.quotaUntil = rate, until
}

// keepEstimate remembers a scope's estimate and limit measured at at.
func (m *knowledge) keepEstimate(scope string, est, limit float64, at time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.scopeLocked(scope, true)
	f.estimate, f.limit, f.estAt = est, limit, at
}

// estimate is what is remembered of scope's estimate (0: nothing).
func (m *knowledge) estimate(scope string) (est, limit float64, at time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.scopeLocked(scope, false)
	if f == nil {
		return 0, 0, 0
	}
	return f.estimate, f.limit, f.estAt
}

// estimates calls fn for every scope with a remembered estimate.
func (m *knowledge) estimates(fn func(scope string, est, limit float64, at time.Duration)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.lru.Keys() {
		if k.kind != memScope {
			continue
		}
		if v, ok := m.lru.Peek(k); ok {
			if f := v.(*scopeFacts); f.estimate > 0 {
				fn(k.name, f.estimate, f.limit, f.estAt)
			}
		}
	}
}

// len is the number of entries, for tests.
func (m *knowledge) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}

func (f *scopeFacts) setDelay(origin string, d time.Duration) {
	for i := range f.delays {
		if f.delays[i].origin == origin {
			if d > 0 {
				f.delays[i].delay = d
			} else {
				f.delays = append(f.delays[:i], f.delays[i+1:]...)
			}
			return
		}
	}
	if d <= 0 {
		return
	}
	if len(f.delays) < maxDelayOrigins {
		f.delays = append(f.delays, originDelay{origin, d})
		return
	}
	mild := 0
	for i := range f.delays {
		if f.delays[i].delay < f.delays[mild].delay {
			mild = i
		}
	}
	if d > f.delays[mild].delay {
		f.delays[mild] = originDelay{origin, d}
	}
}

// crawlDelay is the strictest Crawl-delay of the scope's origins.
func (f *scopeFacts) crawlDelay() time.Duration {
	var d time.Duration
	for _, o := range f.delays {
		d = max(d, o.delay)
	}
	return d
}
