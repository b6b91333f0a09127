package polite

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/classify"
)

// Snapshot is the state of one scope at one instant, and what it has
// counted since it was created. A plain value, the caller's own.
type Snapshot struct {
	Scope    string
	Created  time.Time // when the scope was created (a scope evicted and used again is a new one)
	Phase    Phase     // where the law's search for the capacity stands
	Limit    int       // concurrency limit
	InFlight int
	Waiting  int
	Rate     float64 // pacing rate in force, req/s
	Estimate float64 // capacity estimate, req/s (0: not yet measured)
	// Ceiling is the ceiling that binds Rate, and CeilingRate its value,
	// req/s (CeilingNone and 0 when the law's own rate is below them all).
	// Config.GlobalRate is not a scope's ceiling: it is not shown here.
	Ceiling     Ceiling
	CeilingRate float64
	// PausedUntil is when the last pause ends (or ended); PauseReason why
	// the scope is paused now (PauseNone once the pause has ended).
	PausedUntil time.Time
	PauseReason PauseReason
	Breaker     BreakerState
	Parked      bool
	RTT         time.Duration // smoothed round trip to the response headers
	// Counts are the outcomes recorded, by class.
	Counts map[classify.Class]uint64
	// Statuses are the responses by status code: 200, 301, 302, 304, 403,
	// 404, 429, 500, 502, 503 and 504 one by one, every other code under
	// StatusOther.
	Statuses map[int]uint64
	// Retries is the number of attempts after the first of a request.
	Retries uint64
	// PausedTotal is the time the scope has spent paused (Retry-After,
	// backoff, quota, breaker) since it was created.
	PausedTotal time.Duration
	// ThrottledRatio is throttled / (throttled + success).
	ThrottledRatio float64
	// The scope's view of its fleet, with a Store (all zero without one):
	// FleetProcesses is how many processes took turns on the scope lately,
	// this one included; FleetShared whether the store answered this
	// process's last call (false while it runs on its own share because
	// the store is unreachable); FleetRate the fleet's rate, req/s (Rate
	// above is this process's); FleetShare the part of it this process
	// keeps to on its own while the store is unreachable (1 while shared).
	FleetProcesses int
	FleetShared    bool
	FleetRate      float64
	FleetShare     float64
}

// statusCodes are the status codes a scope counts one by one
// (Snapshot.Statuses): a fixed array, 4 bytes per code per scope.
var statusCodes = [...]int{200, 301, 302, 304, 403, 404, 429, 500, 502, 503, 504}

// StatusOther is the key of Snapshot.Statuses under which every code
// without a count of its own is counted (a response always has a code, so
// 0 is free).
const StatusOther = 0

// statusSlots: one per code of statusCodes, and the other codes.
const statusSlots = len(statusCodes) + 1

// statusSlot is the index of code in a scope's counts.
func statusSlot(code int) int {
	for i, c := range statusCodes {
		if c == code {
			return i
		}
	}
	return len(statusCodes)
}

// statusKey is the Statuses key of slot i.
func statusKey(i int) int {
	if i < len(statusCodes) {
		return statusCodes[i]
	}
	return StatusOther
}

// Snapshot returns the state of one scope (its key: a host by default, as
// Config.Scope names it), and whether it is live. Report has every scope.
// Safe for concurrent use.
func (c *Controller) Snapshot(scopeKey string) (Snapshot, bool) {
	c.mu.RLock()
	s := c.scopes[scopeKey]
	c.mu.RUnlock()
	if s == nil {
		return Snapshot{}, false
	}
	return s.snapshot(c, scopeKey), true
}

type scopeRef struct {
	key string
	s   *scope
}

// live lists the live scopes and, if evicted, the totals of the evicted
// ones and how many they were, both under one read of the map: a scope is
// in one or the other. at is the time of that read: every scope created
// before it is listed (or evicted), none created after it.
func (c *Controller) live(evicted bool) (list []scopeRef, t Snapshot, n uint64, at time.Time) {
	c.mu.RLock()
	at = c.at(c.now())
	list = make([]scopeRef, 0, len(c.scopes))
	for k, s := range c.scopes {
		list = append(list, scopeRef{k, s})
	}
	if evicted {
		t, n = c.evicted.totals(), c.evicted.scopes
	}
	c.mu.RUnlock()
	return list, t, n, at
}

func (c *Controller) snapshots(list []scopeRef) []Snapshot {
	out := make([]Snapshot, 0, len(list))
	for _, ks := range list {
		out = append(out, ks.s.snapshot(c, ks.key))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

func (s *scope) snapshot(c *Controller, key string) Snapshot {
	now := c.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.core.state()
	snap := Snapshot{
		Scope: key, Created: c.at(s.created), Phase: Phase(k.phase.String()),
		Limit: int(k.limit), InFlight: int(k.inflight), Waiting: len(s.queue),
		Rate: k.rate, Estimate: k.estimate, Breaker: k.breaker.public(), Parked: k.parked, RTT: k.rtt,
		Ceiling: k.ceiling.public(), CeilingRate: k.ceilingRate,
		Counts: make(map[classify.Class]uint64), Statuses: make(map[int]uint64),
		Retries: uint64(s.retries), PausedTotal: s.core.pausedTotal(now),
	}
	if now < k.pausedUntil {
		snap.PauseReason = k.reason.public()
	}
	if k.pausedUntil != 0 {
		snap.PausedUntil = c.at(k.pausedUntil)
	}
	for i, n := range k.counts {
		if n > 0 {
			snap.Counts[classify.Class(i)] = uint64(n)
		}
	}
	for i, n := range s.codes {
		if n > 0 {
			snap.Statuses[statusKey(i)] = uint64(n)
		}
	}
	if t, ok := uint64(k.counts[classify.Throttled]), uint64(k.counts[classify.Success]); t+ok > 0 {
		snap.ThrottledRatio = float64(t) / float64(t+ok) // (summed in 64 bits: in 32 it wrapped, a ratio of 596)
	}
	if c.fleet != nil {
		snap.FleetProcesses, snap.FleetShared = s.fleetView().live, !c.fleet.Down()
		snap.FleetRate, snap.FleetShare = s.core.fleetRate(), s.core.share()
	}
	return snap
}

// evictedTotals sums the counts of evicted scopes. Guarded by Controller.mu.
type evictedTotals struct {
	scopes  uint64
	counts  [classCount]uint64
	codes   [statusSlots]uint64
	retries uint64
	paused  time.Duration
}

// add folds an evicted scope (its core's state k) in. Called with
// Controller.mu and s.mu held.
func (g *evictedTotals) add(s *scope, k *coreState, now time.Duration) {
	g.scopes++
	for i, n := range k.counts {
		g.counts[i] += uint64(n)
	}
	for i, n := range s.codes {
		g.codes[i] += uint64(n)
	}
	g.retries += uint64(s.retries)
	g.paused += s.core.pausedTotal(now)
}

// totals is what the evicted scopes counted, as a Snapshot of no scope.
func (g *evictedTotals) totals() Snapshot {
	t := Snapshot{Counts: map[classify.Class]uint64{}, Statuses: map[int]uint64{}, Retries: g.retries, PausedTotal: g.paused}
	for i, n := range g.counts {
		if n > 0 {
			t.Counts[classify.Class(i)] = n
		}
	}
	for i, n := range g.codes {
		if n > 0 {
			t.Statuses[statusKey(i)] = n
		}
	}
	return t
}

// Report is everything a controller has counted, at one instant: what a
// metrics exporter reads. A plain value, the caller's own.
type Report struct {
	// Time is when the list of scopes was read: it holds every scope
	// created (Snapshot.Created) before Time and not evicted, and none
	// created after it.
	Time time.Time
	// Scopes are the live scopes, sorted by key.
	Scopes []Snapshot
	// Evicted sums what the scopes evicted so far counted (its Counts,
	// Statuses, Retries and PausedTotal; the rest is zero), and
	// EvictedScopes how many they were. Every scope is counted once, in
	// Scopes or in Evicted (a scope evicted while the report is made is in
	// Scopes, with all it counted), so a count summed over both never goes
	// down from one report to the next.
	Evicted       Snapshot
	EvictedScopes uint64
	// The polite wait of every granted request, from the moment it asked
	// its scope for a slot to the moment it got one, as a histogram:
	// WaitCounts[i] waits took at most WaitBounds[i] (and more than the
	// bound before), the last count those longer than every bound;
	// WaitSum is their total. The bounds are 0 (no wait at all), 1 ms,
	// 10 ms, 50 ms, ... 2 min.
	WaitBounds []time.Duration
	WaitCounts []uint64
	WaitSum    time.Duration
	// DroppedEvents are the events Events dropped because nobody read
	// them in time.
	DroppedEvents uint64
}

// Report returns everything the controller has counted, every live scope
// included. Safe for concurrent use.
func (c *Controller) Report() Report {
	list, ev, n, at := c.live(true)
	r := Report{Time: at, Scopes: c.snapshots(list), Evicted: ev, EvictedScopes: n, DroppedEvents: c.events.dropped.Load()}
	r.WaitBounds, r.WaitCounts, r.WaitSum = c.waits.read()
	return r
}

// waitBounds are the upper bounds of the polite waits' buckets.
var waitBounds = [...]time.Duration{0, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute}

// waits is the controller's histogram of polite waits: atomics only, so
// that recording one takes no lock and allocates nothing.
type waits struct {
	counts [len(waitBounds) + 1]atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

func (w *waits) observe(d time.Duration) {
	i := 0
	for i < len(waitBounds) && d > waitBounds[i] {
		i++
	}
	w.counts[i].Add(1)
	if d > 0 {
		w.sum.Add(int64(d))
	}
}

func (w *waits) read() (bounds []time.Duration, counts []uint64, sum time.Duration) {
	counts = make([]uint64, len(w.counts))
	for i := range w.counts {
		counts[i] = w.counts[i].Load()
	}
	return waitBounds[:], counts, time.Duration(w.sum.Load())
}
