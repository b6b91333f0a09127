package frontier

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite/internal/sat"
)

// Progress is how far a crawl is, a plain value: the whole queue's counts
// and, for each scope with requests queued or running, its own.
type Progress struct {
	Queued  int // waiting in the queue
	Running int // handed to a thread, not done
	Done    int // ended without an error (Colly's refusals, such as a revisit, included)
	Failed  int // ended with an error (OnError)
	// Rate is the requests ended per second, recently (a mean over about
	// half a minute).
	Rate float64
	// Added is the requests added per second since the crawl began (its
	// first hand-out; with a Shared, since this queue's first read of the
	// fleet's counts), recently, a mean as Rate is; repeats the queue
	// drops are not counted, nor what was queued before. While a crawl
	// that finds its URLs as it goes adds about as many as it ends, it
	// has not found them all yet, and ETA, which counts what the queue
	// holds, is a lower bound.
	Added float64
	// ETA is how long until nothing is left, if the rates hold: the
	// slowest scope's ETA, or the whole backlog over the whole rate if
	// that is longer (the threads, not the scopes, may be what binds). 0
	// when nothing is left; Unknown while a scope with a backlog has no
	// rate yet. It counts the requests the queue holds, not those a
	// crawl has still to find (see Added).
	ETA    time.Duration
	Scopes []ScopeProgress // sorted by ETA, the slowest first, then by scope
}

// ScopeProgress is one scope's part of a Progress.
type ScopeProgress struct {
	Scope                         string
	Queued, Running, Done, Failed int
	Rate                          float64       // requests ended per second, recently
	ETA                           time.Duration // its backlog over its rate; Unknown without a rate
}

// Unknown is the ETA of a backlog whose rate is not known yet.
const Unknown time.Duration = -1

// Progress is shorthand for ProgressAt(time.Now()).
func (q *Queue) Progress() Progress { return q.ProgressAt(time.Now()) }

// ProgressAt is the queue's progress at now. Done and Failed count since
// the queue was made (with a file: since it was opened); a scope's counts
// are kept while it has requests queued or running.
//
// With a Shared it is the whole fleet's, as last read (every quarter of a
// second while Run runs): queued, leased (Running: handed to a thread, or
// held at a scope's head by a process), done and failed over the fleet,
// and the fleet's rates; a scope's Done counts its requests ended, done
// or failed, and Failed is 0.
func (q *Queue) ProgressAt(now time.Time) Progress {
	q.mu.Lock()
	var p Progress
	if q.sh != nil {
		p = q.fleetProgress(now)
	} else {
		p = Progress{Queued: q.size, Running: q.running, Done: q.done, Failed: q.failed, Rate: q.meter.rate(now), Added: q.added.rate(now)}
		p.Scopes = make([]ScopeProgress, 0, len(q.subs))
		for _, s := range q.subs {
			sp := ScopeProgress{
				Scope: s.key, Queued: len(s.items) + s.disk, Running: s.running,
				Done: s.done, Failed: s.failed, Rate: s.meter.rate(now),
			}
			sp.ETA = eta(sp.Queued+sp.Running, sp.Rate)
			p.Scopes = append(p.Scopes, sp)
		}
	}
	q.mu.Unlock()
	sort.Slice(p.Scopes, func(i, j int) bool {
		a, b := p.Scopes[i], p.Scopes[j]
		if a.ETA != b.ETA {
			return a.ETA == Unknown || b.ETA != Unknown && a.ETA > b.ETA
		}
		return a.Scope < b.Scope
	})
	p.ETA = eta(p.Queued+p.Running, p.Rate)
	if len(p.Scopes) > 0 && p.ETA != Unknown {
		if slowest := p.Scopes[0].ETA; slowest == Unknown || slowest > p.ETA {
			p.ETA = slowest
		}
	}
	return p
}

// fleetProgress is the fleet's progress, from its counts as last read.
// Called with mu held.
func (q *Queue) fleetProgress(now time.Time) Progress {
	f := &q.fleet
	p := Progress{Queued: f.c.Queued, Running: f.c.Leased, Done: int(f.c.Done), Failed: int(f.c.Failed), Rate: f.meter.rate(now), Added: f.added.rate(now)}
	p.Scopes = make([]ScopeProgress, 0, len(f.c.Scopes))
	for key, sc := range f.c.Scopes {
		sp := ScopeProgress{Scope: key, Queued: sc.Queued, Done: int(sc.Ended)}
		if s := q.subs[key]; s != nil {
			sp.Running = s.running + len(s.items)
		}
		if fs := f.scopes[key]; fs != nil {
			sp.Rate = fs.meter.rate(now)
		}
		sp.ETA = eta(sp.Queued+sp.Running, sp.Rate)
		p.Scopes = append(p.Scopes, sp)
	}
	return p
}

func eta(backlog int, rate float64) time.Duration {
	switch {
	case backlog == 0:
		return 0
	case rate <= 0:
		return Unknown
	}
	// a rate decayed near zero (no end for ten minutes while a backlog
	// waits: a long Retry-After, a stopped crawl) gave a count of
	// nanoseconds past int64, which wrapped to a negative ETA; past a
	// century it is not known
	if d := float64(backlog) / rate * float64(time.Second); d < float64(sat.Forever) {
		return time.Duration(d)
	}
	return Unknown
}

// meterTau is how fast a meter forgets: an event's weight falls by e
// every meterTau.
const meterTau = 30 * time.Second

// meter is a rate of events, exponentially decayed, from the first time it
// was started: a closed type with an explicit now.
type meter struct {
	start, last time.Time
	n           float64 // events, decayed to last
}

// begin marks when the work whose events it counts began, once.
func (m *meter) begin(now time.Time) {
	if m.start.IsZero() {
		m.start, m.last = now, now
	}
}

// add counts one event at now.
func (m *meter) add(now time.Time) { m.addN(now, 1) }

// addN counts n events at now.
func (m *meter) addN(now time.Time, n float64) {
	m.begin(now)
	m.n = m.n*decay(now.Sub(m.last)) + n
	if now.After(m.last) {
		m.last = now
	}
}

// rate is the events per second at now: the decayed count over the
// decayed span since start (at least a second, so that a first event
// does not read as a burst).
func (m *meter) rate(now time.Time) float64 {
	if m.start.IsZero() || m.n == 0 {
		return 0
	}
	span := max(now.Sub(m.start), time.Second)
	norm := meterTau.Seconds() * (1 - decay(span))
	return m.n * decay(now.Sub(m.last)) / norm
}

func decay(d time.Duration) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp(-d.Seconds() / meterTau.Seconds())
}

// failed reports whether err, from Do, is a request that failed rather
// than one Colly chose not to send (a revisit, a filter, a depth).
func failed(err error) bool {
	var visited *colly.AlreadyVisitedError
	if err == nil || errors.As(err, &visited) {
		return false
	}
	for _, refusal := range []error{
		colly.ErrMaxDepth, colly.ErrMaxRequests, colly.ErrForbiddenDomain,
		colly.ErrForbiddenURL, colly.ErrNoURLFiltersMatch, colly.ErrRobotsTxtBlocked, colly.ErrMissingURL,
	} {
		if errors.Is(err, refusal) {
			return false
		}
	}
	return true
}
