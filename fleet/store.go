package fleet

import (
	"context"
	"math"
	"time"
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
	// no slot for long. The process stays live (Lease.Live) as long as it
	// renews, without a want it stated long ago coming back: one whose
	// want is older than WantFresh is counted as wanting nothing more
	// than it holds.
	Renew(ctx context.Context, scope, process string, leases []string, ttl time.Duration) error
}

// Notifier is a Store that tells its clients at once of what they would
// otherwise learn only when they next ask: a pause shared, so that a send
// waiting for its slot does not go out into it (a fleet-wide pause voids
// the slots handed out before it), and a lease given back that is another
// process's turn, so that the process owed it asks now instead of at its
// next try. Subscribe calls fn for every notice from now on, until cancel
// is called; fn must not block. Notices are hints: a client that misses
// one still asks again by itself.
type Notifier interface {
	Subscribe(fn func(Notice)) (cancel func())
}

// Notice is what a Notifier tells: a pause shared on Scope (Pause > 0), or
// that a lease on Scope is free for process Turn.
type Notice struct {
	Scope  string
	Pause  time.Duration
	Reason Reason
	Turn   string
}

// WantFresh is how long the demand a LeaseRequest states (Want) counts for
// in the fleet's shares: a process refused asks again before it ends, one
// that stopped asking has no share held for it after it.
const WantFresh = 2 * time.Second

// LeaseRequest asks for one send (Store.Lease).
//
// The fleet's concurrency limit is shared fairly between the processes
// that want it: max-min, as a link is shared between flows. Each process
// that asked lately (within WantFresh) has a demand, the leases it holds
// and the sends it has waiting (Want); the limit is divided so that no
// process gets more than its demand and what some leave is shared equally
// among the others. A lease is granted when one is free and the process
// holds less than its part; a process over its part waits for one of its
// own to come back even if a slot is free, because that slot is owed to a
// process under its part, which is told (Notifier) and asks at once.
type LeaseRequest struct {
	Scope   string
	Process string // the caller's name in the fleet, unique per process
	// ID names the lease to take, unique in the fleet (the process's name
	// and a counter): a caller whose call failed can give it back, in
	// case the store took it. "" lets the store name it. The lease is
	// held by Process whatever its name (it counts for Process's part):
	// give it back and renew it as Process.
	ID string
	// Rate is the rate the fleet sends at as the caller knows it, req/s:
	// its law's, under the site's ceilings (Crawl-delay, quota) and the
	// fleet's configured ceiling. Ceiling is the caller's own configured
	// ceiling (0: none): it bounds the caller's sends, which it paces
	// itself, and the fleet's ceiling is the highest of its live
	// processes' (none if one has none), so that a process with a lower
	// ceiling leaves the rest to the others. A Rate or Ceiling that is
	// not a finite number above 0 is 0.
	Rate    float64
	Ceiling float64
	Limit   int // the fleet's concurrency limit, as the caller knows it (0: none); the fleet keeps to the highest limit asked within WantFresh
	// Want is how many sends of the caller wait for a lease on the scope,
	// this one included: its demand beyond what it holds. 0 means 1;
	// above 999 is 999.
	Want int
	// Version is the version of the law state the caller holds (0: none);
	// Seed its state, stored if the fleet has none. A first state stored
	// on a scope (a new scope, or one a restart emptied, seeded or
	// committed on version 0) starts a new epoch of versions, taken from
	// the store's clock, not 1: a caller that held version N before the
	// restart never finds the new numbering at N, so it neither looks up
	// to date nor commits over the fleet's state.
	Version uint64
	Seed    []byte
	// TTL is how long the lease lives unless renewed (below a second is
	// a second); the process is counted live on the scope for three times
	// as long.
	TTL time.Duration
	// MaxWait is the longest the caller waits for its slot (0 or less:
	// no bound). A slot further away is neither granted nor taken from
	// the schedule: the answer holds no lease, and its Delay is the wait
	// the slot would have cost. (Taken, each refused ask would push the
	// schedule a slot further, and a schedule once past MaxWait would
	// refuse every ask of the fleet for as long as it asks.)
	MaxWait time.Duration
}

// The bounds every store reads a request's numbers within (fleet/storetest
// holds a store to them): a want of at most maxWant, a lease life of at
// least minTTL, a rate or ceiling that is a finite number above 0 (else 0:
// a NaN or an infinity never reaches a store's arithmetic).
const (
	maxWant = 999
	minTTL  = time.Second
)

// Clamped is a as a store reads it: Want within [1, 999], TTL at least
// LeaseTTL's bound, Rate and Ceiling finite numbers above 0, or 0 (none).
func (a LeaseRequest) Clamped() LeaseRequest {
	a.Want = min(max(a.Want, 1), maxWant)
	a.TTL = LeaseTTL(a.TTL)
	a.Rate, a.Ceiling = clampRate(a.Rate), clampRate(a.Ceiling)
	a.MaxWait = max(a.MaxWait, 0)
	return a
}

// LeaseTTL is a lease's life as a store reads it (a request's TTL, or
// Renew's): at least a second.
func LeaseTTL(ttl time.Duration) time.Duration { return max(ttl, minTTL) }

func clampRate(r float64) float64 {
	if r > 0 && !math.IsInf(r, 1) {
		return r
	}
	return 0
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
	// Held is how many leases the fleet held on the scope with this one
	// when it was granted (0 with none). The schedule is one sequence: a
	// lease given with no Delay comes after every slot granted before it,
	// so Held is then the fleet's requests in flight with this one; with
	// a Delay it also counts the leases of the sends waiting for their
	// slots ahead of it, a bound.
	Held int
	// Ceiling is the fleet's configured ceiling, req/s (0: none), the
	// schedule's: see LeaseRequest.
	Ceiling float64
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
	// where each process alone sees only its part. -1 until a second has
	// passed since the first accepted answer the store counted on the
	// scope (a new scope, or a store restarted empty; a Return that is not
	// Accepted starts nothing): a part of a second is no measure of a
	// rate.
	Accepted float64
}

// Reason is why a shared pause was taken, as the controller names it
// (polite's pause reasons): a store keeps it with the pause and hands it
// back, and never reads it.
type Reason uint8
