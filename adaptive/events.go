package adaptive

import (
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/classify"
)

// PauseReason says why a scope is paused (sends nothing until a time) or
// parked. The zero value is PauseNone. A shared store carries it as a
// number: keep the values.
type PauseReason uint8

// Pause reasons.
const (
	PauseNone       PauseReason = iota
	PauseRetryAfter             // the server's Retry-After
	PauseBackoff                // a throttle or overload without Retry-After
	PauseQuota                  // quota headers: 0 remaining, or what remains spread thinner than MaxPause
	PauseBreaker                // sustained throttling opened the breaker
	PauseBlocked                // repeated blocks parked the scope
)

func (r PauseReason) String() string {
	switch r {
	case PauseRetryAfter:
		return "retry-after"
	case PauseBackoff:
		return "backoff"
	case PauseQuota:
		return "quota"
	case PauseBreaker:
		return "breaker"
	case PauseBlocked:
		return "blocked"
	}
	return "none"
}

// Ceiling names a rate a scope never sends above. The zero value is
// CeilingNone.
type Ceiling uint8

// Ceilings.
const (
	CeilingNone       Ceiling = iota // none binds: the law's own rate
	CeilingConfigured                // the rule's Rate or MinGap (a LimitRule's Delay), the stricter
	CeilingCrawlDelay                // robots.txt's Crawl-delay
	CeilingQuota                     // quota headers: what remains of the window, spread over it
	CeilingGlobal                    // Config.GlobalRate, across scopes (a refusal's, never a scope's own)
)

func (c Ceiling) String() string {
	switch c {
	case CeilingConfigured:
		return "configured"
	case CeilingCrawlDelay:
		return "crawl-delay"
	case CeilingQuota:
		return "quota"
	case CeilingGlobal:
		return "global"
	}
	return "none"
}

// Event is one load signal seen on a scope: a throttle, a block, an
// overload or a transport failure, with the controller's state just after
// it reacted.
type Event struct {
	Time       time.Time
	Scope      string
	URL        string
	Class      classify.Class
	Status     int           // 0 for transport failures
	RetryAfter time.Duration // as announced, 0 if absent
	Err        error         // transport failures only
	Limit      float64       // concurrency limit after the reaction
	Rate       float64       // pacing rate after the reaction, req/s
	// PausedUntil is when the scope's pause (or park) in force ends; zero
	// when there is none, or a park lasts until Unpark.
	PausedUntil time.Time
}

// streams holds one buffered channel per signal class. Sends never block:
// an event that finds its channel full is counted as dropped.
type streams struct {
	ch      [classCount]chan Event
	dropped [classCount]atomic.Uint64
}

const classCount = int(classify.Canceled) + 1

func newStreams(buf int) *streams {
	s := &streams{}
	for _, c := range []classify.Class{classify.Throttled, classify.Blocked, classify.Overloaded, classify.TransportFailure} {
		s.ch[c] = make(chan Event, buf)
	}
	return s
}

func (s *streams) emit(e Event) {
	ch := s.ch[e.Class]
	if ch == nil {
		return
	}
	select {
	case ch <- e:
	default:
		s.dropped[e.Class].Add(1)
	}
}
