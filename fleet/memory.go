package fleet

import (
	"context"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/colly-polite/polite/internal/sat"
)

// MemoryStore is a Store for collectors in one process (several Controllers
// crawling the same sites). Its zero value is ready to use; it is safe for
// concurrent use. Scopes unused for ten minutes are dropped as new ones
// arrive.
type MemoryStore struct {
	mu        sync.Mutex
	m         map[string]*memoryScope // guarded by mu
	lastSweep time.Time               // guarded by mu
	seq       uint64                  // guarded by mu: lease names
	subs      map[uint64]func(Notice) // guarded by mu
	// now reads the store's clock; nil means time.Now
	now func() time.Time
}

type memoryScope struct {
	tat        time.Time // the schedule's next slot
	pauseUntil time.Time
	reason     Reason
	state      []byte
	version    uint64
	leases     map[string]memoryLease
	procs      map[string]memoryProc
	// limit is the highest concurrency limit asked within WantFresh, and
	// limitAt when it was asked
	limit   int
	limitAt time.Time
	// ceil is the highest configured ceiling of the live processes, ceilAt
	// when it was asked with, and noneAt when a process last asked with none
	ceil           float64
	ceilAt, noneAt time.Time
	// queue holds the processes refused a lease while they wanted one, in
	// the order they were first refused: the next free lease is the
	// first's that is under its part
	queue []string
	used  time.Time
	acc   acceptedRing
}

type memoryLease struct {
	proc string
	exp  time.Time
}

// memoryProc is a process seen on a scope: live until exp, and its
// demand beyond what it holds (want) as stated at seen.
type memoryProc struct {
	exp  time.Time
	seen time.Time
	want int
}

// acceptedRing counts accepted answers per eighth of a second, the last
// second of them.
type acceptedRing struct {
	n     [8]uint32
	tick  int64 // of the newest slot
	first int64 // of the first count (0: none yet)
}

const acceptedSlot = time.Second / 8

// add counts n answers at tick t and returns the count over the last
// second, or -1 while the ring has counted for less than one since its
// first accepted answer. A ring whose ticks are ahead of t (a clock that
// went back) starts again.
func (a *acceptedRing) add(t int64, n uint32) float64 {
	if a.tick > t || a.first > t {
		*a = acceptedRing{}
	}
	if a.first == 0 && n > 0 {
		a.first = t
	}
	if t > a.tick {
		for i := a.tick + 1; i <= min(t, a.tick+8); i++ {
			a.n[i%8] = 0
		}
		a.tick = t
	}
	if t > a.tick-8 {
		a.n[t%8] += n
	}
	var sum uint32
	for _, v := range a.n {
		sum += v
	}
	if a.first == 0 || t-a.first < 8 {
		return -1
	}
	return float64(sum)
}

const memoryStoreIdle = 10 * time.Minute

func (m *MemoryStore) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

func (m *MemoryStore) scopeLocked(name string, now time.Time) *memoryScope {
	if m.m == nil {
		m.m = make(map[string]*memoryScope)
	}
	if now.Sub(m.lastSweep) > time.Minute {
		m.lastSweep = now
		for k, s := range m.m {
			if now.Sub(s.used) > memoryStoreIdle && !now.Before(s.pauseUntil) {
				delete(m.m, k)
			}
		}
	}
	s := m.m[name]
	if s == nil {
		s = &memoryScope{leases: map[string]memoryLease{}, procs: map[string]memoryProc{}}
		m.m[name] = s
	}
	s.used = now
	for k, l := range s.leases {
		if !now.Before(l.exp) {
			delete(s.leases, k)
		}
	}
	for k, p := range s.procs {
		if !now.Before(p.exp) || future(p.seen, now) {
			delete(s.procs, k)
		}
	}
	if future(s.limitAt, now) {
		s.limit, s.limitAt = 0, time.Time{}
	}
	if future(s.ceilAt, now) {
		s.ceil, s.ceilAt = 0, time.Time{}
	}
	if future(s.noneAt, now) {
		s.noneAt = time.Time{}
	}
	return s
}

// stampSkew is how far in the store's future a time it stored may be and
// still count: one further ahead (a clock that went back, another program
// writing) reads as absent, so that it neither holds the fleet's limits
// nor makes a process that asked then live or wanting.
const stampSkew = time.Second

// future reports whether t, a time stored, is beyond the skew allowed
// ahead of now.
func future(t, now time.Time) bool { return t.After(now.Add(stampSkew)) }

// fleetCeiling notes a process's configured ceiling (0: none) and returns
// the fleet's: the highest of the live processes' (those that asked within
// live), none if one of them asked with none.
func (s *memoryScope) fleetCeiling(now time.Time, ceil float64, live time.Duration) float64 {
	switch {
	case ceil <= 0:
		s.noneAt = now
	case ceil >= s.ceil || now.Sub(s.ceilAt) >= live:
		s.ceil, s.ceilAt = ceil, now
	}
	if !s.noneAt.IsZero() && now.Sub(s.noneAt) < live {
		return 0
	}
	return s.ceil
}

// shares returns, for the processes with a demand on s, the part of limit
// each is owed (fairShares) and the leases each holds.
func (s *memoryScope) shares(now time.Time, limit int) (owed map[string]float64, held map[string]int) {
	held = map[string]int{}
	for _, l := range s.leases {
		held[l.proc]++
	}
	names := make([]string, 0, len(held)+len(s.procs))
	var demand []float64
	for name, n := range held {
		d := n
		if p, ok := s.procs[name]; ok && now.Sub(p.seen) < WantFresh {
			d += p.want
		}
		names, demand = append(names, name), append(demand, float64(d))
	}
	for name, p := range s.procs {
		if _, ok := held[name]; !ok && s.wants(now, name) {
			names, demand = append(names, name), append(demand, float64(p.want))
		}
	}
	parts := fairShares(float64(limit), demand)
	owed = make(map[string]float64, len(names))
	for i, name := range names {
		owed[name] = parts[i]
	}
	return owed, held
}

// Lease implements Store.
func (m *MemoryStore) Lease(_ context.Context, a LeaseRequest) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	a = a.Clamped()
	s := m.scopeLocked(a.Scope, now)
	proc := s.procs[a.Process]
	proc.exp, proc.seen, proc.want = now.Add(3*a.TTL), now, a.Want
	s.procs[a.Process] = proc
	var g Lease
	g.Live = len(s.procs)
	if s.state == nil && a.Seed != nil {
		// a store empty of this scope (new, or restarted) takes the
		// client's view, at a new epoch: a client that held none has its
		// own; one that held another version gets it back as the fleet's
		s.state, s.version = append([]byte(nil), a.Seed...), storeEpoch(now)
		if a.Version == 0 {
			a.Version = s.version
		}
	}
	if s.version != a.Version {
		g.State, g.Version = append([]byte(nil), s.state...), s.version
	} else {
		g.Version = s.version
	}
	if now.Before(s.pauseUntil) {
		g.Paused, g.Reason = s.pauseUntil.Sub(now), s.reason
	}
	g.Ceiling = s.fleetCeiling(now, a.Ceiling, 3*a.TTL)
	slot := now
	if s.tat.After(slot) {
		slot = s.tat
	}
	if s.pauseUntil.After(slot) {
		slot = s.pauseUntil
	}
	if a.MaxWait > 0 && slot.Sub(now) > a.MaxWait {
		// a slot further away than the caller waits: neither granted nor
		// taken
		g.Delay = slot.Sub(now)
		return g, nil
	}
	limit := a.Limit
	if limit > 0 {
		if limit >= s.limit || now.Sub(s.limitAt) >= WantFresh {
			s.limit, s.limitAt = limit, now
		}
		limit = s.limit
		if !s.grant(now, a.Process, limit) {
			// the fleet's limit is in use, or this process holds its part:
			// ask again after a short while (or when told it is its turn)
			g.Delay = max(g.Paused, 10*time.Millisecond)
			return g, nil
		}
	}
	g.ID = a.ID
	if g.ID == "" {
		m.seq++
		g.ID = a.Process + "/" + strconv.FormatUint(m.seq, 10)
	}
	s.leases[g.ID] = memoryLease{proc: a.Process, exp: now.Add(a.TTL)}
	proc.want--
	s.procs[a.Process] = proc
	g.Held = len(s.leases)
	g.Full = limit > 0 && g.Held >= limit
	rate := a.Rate
	if g.Ceiling > 0 && (rate <= 0 || g.Ceiling < rate) {
		rate = g.Ceiling
	}
	s.tat = slot.Add(sat.Interval(rate))
	g.Delay = slot.Sub(now)
	return g, nil
}

// storeEpoch is the version a scope's first state gets (a new scope, or
// one a restart emptied): the store's clock in microseconds, so that a
// client holding a version from before never finds the new numbering at
// it (that would need more than a commit a microsecond).
func storeEpoch(now time.Time) uint64 { return uint64(max(now.UnixMicro(), 1)) }

// Return implements Store.
func (m *MemoryStore) Return(_ context.Context, r Return) (Settlement, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	s := m.scopeLocked(r.Scope, now)
	if _, ok := s.leases[r.Lease]; ok {
		delete(s.leases, r.Lease)
		if turn := s.turn(now, r.Process); turn != "" {
			m.notifyLocked(Notice{Scope: r.Scope, Turn: turn})
		}
	}
	if r.Pause > 0 {
		if until := now.Add(r.Pause); until.After(s.pauseUntil) {
			s.pauseUntil, s.reason = until, r.Reason
			m.notifyLocked(Notice{Scope: r.Scope, Pause: r.Pause, Reason: r.Reason})
		}
	}
	var st Settlement
	if r.State != nil {
		if s.version == r.Version {
			s.state, s.version = append([]byte(nil), r.State...), r.Version+1
			if r.Version == 0 {
				s.version = storeEpoch(now) // a first state starts an epoch
			}
			st.Committed = true
		}
	}
	st.Version = s.version
	if !st.Committed {
		st.State = append([]byte(nil), s.state...)
	}
	if now.Before(s.pauseUntil) {
		st.Paused, st.Reason = s.pauseUntil.Sub(now), s.reason
	}
	var n uint32
	if r.Accepted {
		n = 1
	}
	st.Accepted = s.acc.add(now.UnixNano()/int64(acceptedSlot), n)
	return st, nil
}

// queueCap is the most processes a scope's queue holds.
const queueCap = 256

// grant reports whether proc may take a lease on s now, under limit: one
// is free, proc holds less than its part (rounded up), and no process that
// waits in the queue before it, under its part, is left without one; a
// process refused joins the end of the queue, one granted leaves it.
func (s *memoryScope) grant(now time.Time, proc string, limit int) bool {
	owed, held := s.shares(now, limit)
	ahead, queued := 0, false
	live := s.queue[:0]
	for _, name := range s.queue {
		if name == proc {
			queued = true
			live = append(live, name)
			continue
		}
		if !s.wants(now, name) {
			continue // it stopped asking: out of the queue
		}
		live = append(live, name)
		if !queued && held[name] < partCap(owed[name]) {
			ahead++
		}
	}
	s.queue = live
	ok := limit-len(s.leases) > ahead && held[proc] < partCap(owed[proc])
	switch {
	case ok && queued:
		s.queue = slices.DeleteFunc(s.queue, func(n string) bool { return n == proc })
	case !ok && !queued:
		if len(s.queue) >= queueCap {
			// full: the process that asked least lately (the first of
			// those) leaves its place, so that one refused now is not
			// left out of the queue for as long as others keep it full
			stalest := 0
			for i, name := range s.queue {
				if s.procs[name].seen.UnixMilli() < s.procs[s.queue[stalest]].seen.UnixMilli() {
					stalest = i
				}
			}
			s.queue = slices.Delete(s.queue, stalest, stalest+1)
		}
		s.queue = append(s.queue, proc)
	}
	return ok
}

// wants reports whether a process asked within WantFresh with sends
// waiting.
func (s *memoryScope) wants(now time.Time, name string) bool {
	p, ok := s.procs[name]
	return ok && p.want > 0 && now.Sub(p.seen) < WantFresh
}

// partCap is the most leases a part allows: the part rounded up, so that
// fractional parts take turns.
func partCap(part float64) int { return int(math.Ceil(part - shareEpsilon)) }

// shareEpsilon is below any difference between two parts that matters (a
// part is a fraction of a limit, summed in floating point).
const shareEpsilon = 1e-9

// turn is the process other than from whose turn a lease just freed on s
// is: the first in the queue that still wants one and is under its part
// ("" for none).
func (s *memoryScope) turn(now time.Time, from string) string {
	if s.limit <= 0 || len(s.leases) >= s.limit {
		return ""
	}
	owed, held := s.shares(now, s.limit)
	for _, name := range s.queue {
		if name != from && s.wants(now, name) && held[name] < partCap(owed[name]) {
			return name
		}
	}
	return ""
}

func (m *MemoryStore) notifyLocked(n Notice) {
	for _, fn := range m.subs {
		fn(n)
	}
}

// Subscribe implements Notifier.
func (m *MemoryStore) Subscribe(fn func(Notice)) (cancel func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = map[uint64]func(Notice){}
	}
	m.seq++
	id := m.seq
	m.subs[id] = fn
	return func() {
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}
}

// Renew implements Store.
func (m *MemoryStore) Renew(_ context.Context, scope, process string, leases []string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	ttl = LeaseTTL(ttl)
	s := m.scopeLocked(scope, now)
	for _, id := range leases {
		// a lease that expired is gone, swept or not
		if l, ok := s.leases[id]; ok {
			l.exp = now.Add(ttl)
			s.leases[id] = l
		}
	}
	// the process stays live: one not seen, or whose want is stale, is
	// seen now wanting nothing more (an old want does not come back); a
	// fresh want is left as it was asked
	if p, ok := s.procs[process]; !ok || now.Sub(p.seen) >= WantFresh {
		s.procs[process] = memoryProc{exp: now.Add(3 * ttl), seen: now}
	}
	return nil
}

// fairShares divides limit between demands, max-min: no demand gets more
// than it asks, and what the smaller ones leave is shared equally among
// the larger. The parts are fractions; they sum to limit, or to the sum of
// the demands when that is less.
func fairShares(limit float64, demand []float64) []float64 {
	out := make([]float64, len(demand))
	order := make([]int, len(demand))
	for i := range order {
		order[i] = i
	}
	// smallest demand first (insertion sort: a fleet is a few processes)
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && demand[order[j]] < demand[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	left := max(limit, 0)
	for k, i := range order {
		part := left / float64(len(order)-k)
		if d := max(demand[i], 0); d < part {
			part = d
		}
		out[i] = part
		left -= part
	}
	return out
}
