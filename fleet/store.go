package fleet

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/colly-polite/polite/internal/sat"
)

// Store is what a fleet of collectors, in one process or many, shares for
// each scope so that the fleet is one polite client: one send schedule at
// one rate, one law (its estimate and the epochs that make a throttle count
// once across the fleet), one pause, one concurrency budget as leases that
// expire. Every duration is on the store's own clock: no deadline is
// compared against another machine's clock.
//
// The law's state travels as an opaque, versioned value: the store keeps
// it and compares versions, the collectors compute it (there is one law,
// in Go). MemoryStore serves collectors in one process; package redisstore
// serves processes on many machines. Implementations must be safe for
// concurrent use.
type Store interface {
	// Lease asks for one send on a scope: a lease on one of the fleet's
	// concurrency slots, the next slot of the scope's send schedule at the
	// rate asked, and the wait before it (a shared pause in force
	// included). It also returns the fleet's law state when its version
	// differs from the caller's, and stores the caller's (Seed) when the
	// fleet has none (a store restarted empty re-seeds from its clients).
	Lease(ctx context.Context, r LeaseRequest) (Lease, error)
	// Return gives a lease back (if any) and publishes what the caller
	// decided: a pause to extend, a law state to commit if the stored one
	// is still the version it was derived from.
	Return(ctx context.Context, r Return) (Settlement, error)
	// Renew extends the leases a process holds on a scope (a long
	// download): leases not renewed expire, so a process that dies holds
	// no slot for long.
	Renew(ctx context.Context, scope, process string, leases []string, ttl time.Duration) error
}

// Notifier is a Store that tells its clients of a pause as soon as one is
// shared, so that a send waiting for its slot does not go out into it (a
// fleet-wide pause voids the slots handed out before it). Subscribe calls
// fn for every pause shared from now on, until cancel is called; fn must
// not block.
type Notifier interface {
	Subscribe(fn func(scope string, pause time.Duration, reason Reason)) (cancel func())
}

// LeaseRequest asks for one send (Store.Lease).
type LeaseRequest struct {
	Scope   string
	Process string  // the caller's name in the fleet, unique per process
	Rate    float64 // the rate the fleet sends at, as the caller knows it (its ceilings applied), req/s
	Limit   int     // the fleet's concurrency limit, as the caller knows it
	// Version is the version of the law state the caller holds (0: none);
	// Seed its state, stored if the fleet has none.
	Version uint64
	Seed    []byte
	// TTL is how long the lease lives unless renewed; the process is
	// counted live on the scope for three times as long.
	TTL time.Duration
}

// Lease is what Store.Lease gave: one of the fleet's concurrency slots,
// held for one send and expiring unless renewed, and the slot of the
// scope's send schedule.
type Lease struct {
	// ID names the lease taken; "" when the fleet's limit is in use: ask
	// again after Delay.
	ID string
	// Delay is how long to wait before sending (or before asking again).
	Delay time.Duration
	// Paused is the part of Delay that is a shared pause, and Reason why.
	Paused time.Duration
	Reason Reason
	// State and Version are the fleet's law state when Version differs
	// from the one asked with (State nil otherwise).
	State   []byte
	Version uint64
	// Live is how many processes acquired on the scope lately, this one
	// included.
	Live int
	// Full: with this lease, the fleet's concurrency limit is all in use
	// (the leases held are at the limit asked).
	Full bool
}

// Return gives a lease back and publishes decisions (Store.Return).
type Return struct {
	Scope   string
	Process string
	Lease   string // "" for none
	// Pause extends the shared pause to at least this long from now (0:
	// none); no jitter: every collector adds its own.
	Pause  time.Duration
	Reason Reason
	// State, if not nil, is committed when the stored version is
	// Version; the new version is Version+1.
	State   []byte
	Version uint64
	// Accepted: the answer was a success, counted in the fleet's accepted
	// rate (Settlement.Accepted).
	Accepted bool
}

// Settlement is what Store.Return did.
type Settlement struct {
	// Committed: State was stored. Otherwise State and Version are the
	// fleet's (another process committed first).
	Committed bool
	State     []byte
	Version   uint64
	// Paused is the shared pause in force, and Reason why.
	Paused time.Duration
	Reason Reason
	// Accepted is the fleet's accepted answers over the last second (this
	// one included), per second: what the law measures a capacity by,
	// where each process alone sees only its part.
	Accepted float64
}

// MemoryStore is a Store for collectors in one process (several Controllers
// crawling the same sites). Its zero value is ready to use; it is safe for
// concurrent use. Scopes unused for ten minutes are dropped as new ones
// arrive.
type MemoryStore struct {
	mu        sync.Mutex
	m         map[string]*memoryScope                        // guarded by mu
	lastSweep time.Time                                      // guarded by mu
	seq       uint64                                         // guarded by mu: lease names
	subs      map[uint64]func(string, time.Duration, Reason) // guarded by mu
	// now reads the store's clock; nil means time.Now
	now func() time.Time
}

type memoryScope struct {
	tat        time.Time // the schedule's next slot
	pauseUntil time.Time
	reason     Reason
	state      []byte
	version    uint64
	leases     map[string]time.Time // lease -> expiry
	procs      map[string]time.Time // process -> expiry
	used       time.Time
	acc        acceptedRing
}

// acceptedRing counts accepted answers per eighth of a second, the last
// second of them.
type acceptedRing struct {
	n    [8]uint32
	tick int64 // of the newest slot
}

const acceptedSlot = time.Second / 8

// add counts n answers at tick t and returns the count over the last
// second.
func (a *acceptedRing) add(t int64, n uint32) uint32 {
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
	return sum
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
		s = &memoryScope{leases: map[string]time.Time{}, procs: map[string]time.Time{}}
		m.m[name] = s
	}
	s.used = now
	return s
}

// Lease implements Store.
func (m *MemoryStore) Lease(_ context.Context, a LeaseRequest) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	s := m.scopeLocked(a.Scope, now)
	for k, exp := range s.procs {
		if !now.Before(exp) {
			delete(s.procs, k)
		}
	}
	s.procs[a.Process] = now.Add(3 * a.TTL)
	var g Lease
	g.Live = len(s.procs)
	if s.state == nil && a.Seed != nil {
		// a store empty of this scope (new, or restarted) takes the
		// client's view; it is version 1, the client's own
		s.state, s.version = append([]byte(nil), a.Seed...), 1
		a.Version = 1
	}
	if s.version != a.Version {
		g.State, g.Version = append([]byte(nil), s.state...), s.version
	} else {
		g.Version = s.version
	}
	if now.Before(s.pauseUntil) {
		g.Paused, g.Reason = s.pauseUntil.Sub(now), s.reason
	}
	for k, exp := range s.leases {
		if !now.Before(exp) {
			delete(s.leases, k)
		}
	}
	if a.Limit > 0 && len(s.leases) >= a.Limit {
		// the fleet's limit is in use: ask again after a short while
		g.Delay = max(g.Paused, 10*time.Millisecond)
		return g, nil
	}
	m.seq++
	g.ID = a.Process + "/" + strconv.FormatUint(m.seq, 10)
	s.leases[g.ID] = now.Add(a.TTL)
	g.Full = a.Limit > 0 && len(s.leases) >= a.Limit
	slot := now
	if s.tat.After(slot) {
		slot = s.tat
	}
	if s.pauseUntil.After(slot) {
		slot = s.pauseUntil
	}
	s.tat = slot.Add(sat.Interval(a.Rate))
	g.Delay = slot.Sub(now)
	return g, nil
}

// Return implements Store.
func (m *MemoryStore) Return(_ context.Context, r Return) (Settlement, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	s := m.scopeLocked(r.Scope, now)
	if r.Lease != "" {
		delete(s.leases, r.Lease)
	}
	if r.Pause > 0 {
		if until := now.Add(r.Pause); until.After(s.pauseUntil) {
			s.pauseUntil, s.reason = until, r.Reason
			for _, fn := range m.subs {
				fn(r.Scope, r.Pause, r.Reason)
			}
		}
	}
	var st Settlement
	if r.State != nil {
		if s.version == r.Version {
			s.state, s.version = append([]byte(nil), r.State...), r.Version+1
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
	st.Accepted = float64(s.acc.add(now.UnixNano()/int64(acceptedSlot), n))
	return st, nil
}

// Subscribe implements Notifier.
func (m *MemoryStore) Subscribe(fn func(scope string, pause time.Duration, reason Reason)) (cancel func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = map[uint64]func(string, time.Duration, Reason){}
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
	s := m.scopeLocked(scope, now)
	for _, l := range leases {
		// a lease that expired is gone, swept or not
		if exp, ok := s.leases[l]; ok && now.Before(exp) {
			s.leases[l] = now.Add(ttl)
		}
	}
	s.procs[process] = now.Add(3 * ttl)
	return nil
}

// Reason is why a shared pause was taken, as the controller names it
// (polite's pause reasons): a store keeps it with the pause and hands it
// back, and never reads it.
type Reason uint8
