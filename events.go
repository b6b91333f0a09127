package polite

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/classify"
)

// PauseReason says why a scope is paused (sends nothing until a time) or
// parked. Its zero value, PauseNone, is the empty string.
type PauseReason string

// Pause reasons.
const (
	PauseNone       PauseReason = ""
	PauseRetryAfter PauseReason = "retry-after" // the server's Retry-After
	PauseBackoff    PauseReason = "backoff"     // a throttle or overload without Retry-After
	PauseQuota      PauseReason = "quota"       // quota headers: nothing left of the window
	PauseBreaker    PauseReason = "breaker"     // sustained throttling opened the breaker
	PauseBlocked    PauseReason = "blocked"     // repeated blocks parked the scope
)

// Ceiling names a rate a scope never sends above. Its zero value,
// CeilingNone, is the empty string: none binds, the law's own rate is lower.
type Ceiling string

// Ceilings.
const (
	CeilingNone       Ceiling = ""
	CeilingConfigured Ceiling = "configured"  // the rule's Rate or MinGap (a LimitRule's Delay), the stricter
	CeilingCrawlDelay Ceiling = "crawl-delay" // robots.txt's Crawl-delay
	CeilingQuota      Ceiling = "quota"       // quota headers: what remains of the window, spread over it
	CeilingGlobal     Ceiling = "global"      // Config.GlobalRate, across scopes (a refusal's, never a scope's own)
)

// Phase is where a scope's search for its server's capacity stands. Its
// zero value is the empty string (no scope has it).
type Phase string

// Phases.
const (
	PhaseSlowStart Phase = "slow-start" // no estimate yet, or the search after a drop: the rate doubles per clean round
	PhaseSteady    Phase = "steady"     // at the estimate, waiting for the next probe
	PhaseProbing   Phase = "probing"    // a round above the estimate
)

// BreakerState is the state of a scope's breaker, as in sony/gobreaker. Its
// zero value is the empty string (no scope has it).
type BreakerState string

// Breaker states.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"      // no send until the cooldown ends
	BreakerHalfOpen BreakerState = "half-open" // one probe at a time
)

// The core keeps small codes; a shared store carries pause codes as
// numbers: keep their values.

// pauseKind is a PauseReason as the core keeps it.
type pauseKind uint8

const (
	pauseNone pauseKind = iota
	pauseRetryAfter
	pauseBackoff
	pauseQuota
	pauseBreaker
	pauseBlocked
)

var pauseNames = [...]PauseReason{PauseNone, PauseRetryAfter, PauseBackoff, PauseQuota, PauseBreaker, PauseBlocked}

// public is k's name (PauseNone for a code it does not know).
func (k pauseKind) public() PauseReason {
	if int(k) < len(pauseNames) {
		return pauseNames[k]
	}
	return PauseNone
}

func (k pauseKind) String() string {
	if k == pauseNone {
		return "none"
	}
	return string(k.public())
}

// ceilingKind is a Ceiling as the core keeps it.
type ceilingKind uint8

const (
	ceilNone ceilingKind = iota
	ceilConfigured
	ceilCrawlDelay
	ceilQuota
	ceilGlobal
)

var ceilingNames = [...]Ceiling{CeilingNone, CeilingConfigured, CeilingCrawlDelay, CeilingQuota, CeilingGlobal}

func (k ceilingKind) public() Ceiling { return ceilingNames[k] }

func (k ceilingKind) String() string {
	if k == ceilNone {
		return "none"
	}
	return string(k.public())
}

// breakerState is a BreakerState as the core keeps it.
type breakerState uint8

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

var breakerNames = [...]BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen}

func (b breakerState) public() BreakerState { return breakerNames[b] }

func (b breakerState) String() string { return string(b.public()) }

// Event is one load signal seen on a scope: a throttle, a block, an
// overload or a transport failure (Class says which), with the scope's
// state just after the controller reacted. A plain value, the receiver's
// own; its zero value is no event.
type Event struct {
	Time       time.Time
	Scope      string
	URL        string
	Class      classify.Class
	Status     int           // 0 for transport failures
	RetryAfter time.Duration // as announced, 0 if absent
	Err        error         // transport failures only
	Limit      int           // concurrency limit after the reaction
	Rate       float64       // pacing rate after the reaction, req/s
	// PausedUntil is when the scope's pause (or park) in force ends; zero
	// when there is none, or a park lasts until Unpark.
	PausedUntil time.Time
}

// stream is the controller's one event stream, made on the first call to
// Events: until then an event costs one atomic load. A send never blocks:
// an event that finds the stream full is counted as dropped.
type stream struct {
	once    sync.Once
	ch      atomic.Pointer[chan Event]
	buf     int
	dropped atomic.Uint64
}

const classCount = int(classify.Canceled) + 1

func (s *stream) events() <-chan Event {
	s.once.Do(func() {
		ch := make(chan Event, s.buf)
		s.ch.Store(&ch)
	})
	return *s.ch.Load()
}

func (s *stream) emit(e Event) {
	p := s.ch.Load()
	if p == nil {
		return
	}
	select {
	case *p <- e:
	default:
		s.dropped.Add(1)
	}
}
