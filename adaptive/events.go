package adaptive

import (
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/classify"
)

// Reason says why a scope is paused or parked.
type Reason uint8

// Reasons.
const (
	ReasonNone       Reason = iota
	ReasonRetryAfter        // the server's Retry-After
	ReasonBackoff           // a throttle or overload without Retry-After
	ReasonQuota             // quota headers: 0 remaining, or what remains spread thinner than MaxPause
	ReasonBreaker           // sustained throttling opened the breaker
	ReasonBlocked           // repeated blocks parked the scope
	ReasonRate              // the rate in force (configured, or the adaptive floor) spaces sends further apart than MaxPause
	ReasonCrawlDelay        // robots.txt Crawl-delay spaces sends further apart than MaxPause
	ReasonRobots            // robots.txt disallows the URL, or cannot be read
)

func (r Reason) String() string {
	switch r {
	case ReasonRetryAfter:
		return "retry-after"
	case ReasonBackoff:
		return "backoff"
	case ReasonQuota:
		return "quota"
	case ReasonBreaker:
		return "breaker"
	case ReasonBlocked:
		return "blocked"
	case ReasonRate:
		return "rate"
	case ReasonCrawlDelay:
		return "crawl-delay"
	case ReasonRobots:
		return "robots"
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
