package frontier

import (
	"context"
	"errors"
	"time"
)

// Shared is a queue that the processes of a fleet consume together
// (Config.Shared): one FIFO per scope and one set of requests seen, in a
// store every process reaches; redisfrontier.New makes one on Redis. Each
// process takes the next request of a scope its controller says is ready
// (with a fleet Store, under the fleet's one schedule per scope), holding
// it under a lease that it renews while it works; a process that dies
// stops renewing, and its requests go back to their scopes' heads when
// their leases expire.
//
// Records and keys are opaque to the store: the frontier encodes them
// (records of a few dozen bytes for a plain GET, keys of 16 bytes) and a
// record comes back exactly as it was added. A Shared must be safe for
// concurrent use. Its errors are the store's faults (a timeout, a server
// down, a reply it cannot read): the queue tries again. ErrLost says the
// store lost the queue (a Redis restarted empty): each process then gives
// the store what it holds to build the queue again (Restore).
//
// Each item is added by one process, its owner (the queue, not the
// program: each Queue names itself), which keeps it until the store says
// it ended (SharedCounts.Ended): after a loss, the owners' items not
// ended are queued again, and each process's keys added and ended are the
// store's again, so that nothing is lost and nothing that ended runs
// again.
type Shared interface {
	// Add puts each item at the tail of its scope's FIFO, owner's (the
	// queue that adds it), unless an item with its Key was added before
	// (it reports which were added). An error means none may have been
	// added (the caller is told).
	Add(ctx context.Context, owner string, items []SharedItem) (added []bool, err error)
	// Take leases the head of each scope asked for ttl, under the lease
	// name given with it: one Leased per Ask, in order, with a nil Record
	// where the scope had nothing. A lease asked again under the same
	// name (a retry after a timeout) returns the request it holds.
	Take(ctx context.Context, asks []SharedAsk, ttl time.Duration) ([]Leased, error)
	// Done ends leases: their requests are done (Failed: with an error).
	// A lease that has expired meanwhile is no longer this process's: its
	// request is queued again (and counted in SharedCounts.Returned).
	Done(ctx context.Context, ends []SharedEnd) error
	// Release gives leases back unused: their requests go back to the
	// heads of their scopes' FIFOs, as they were.
	Release(ctx context.Context, leases []string) error
	// Renew extends the leases held to ttl from now.
	Renew(ctx context.Context, leases []string, ttl time.Duration) error
	// Counts is the whole fleet's queue: each scope with requests queued,
	// and the totals; and the ends of owner's requests since its last
	// call, which the store then forgets.
	Counts(ctx context.Context, owner string) (SharedCounts, error)
	// Restore builds a lost queue again: every process of the fleet
	// calls it with its part, in pieces, once its calls answer ErrLost.
	// The store starts a new queue at the first piece (N 0) unless
	// another process did, and each piece holds every take for a moment
	// (SharedCounts.Held) so that the others' parts are in before a
	// request that ended elsewhere could be taken again. A piece applied
	// twice (a retry after a lost reply) counts once. ErrLost from a later
	// piece: the queue was lost again since the first, and the part
	// starts again.
	Restore(ctx context.Context, owner string, piece SharedRestore) error
}

// ErrLost is returned by a Shared whose store lost the queue (a Redis
// restarted empty): the queue gives its part to Restore, and carries on.
var ErrLost = errors.New("frontier: the shared queue's store lost it")

// SharedRestore is one piece of a process's part of a lost queue.
type SharedRestore struct {
	N int // the piece's number, from 0: each counts once
	// Seen are keys this process added; Ended keys of requests it
	// ended (they are not taken again); Items, its own requests that
	// have not ended, queued again.
	Seen, Ended [][]byte
	Items       []SharedItem
	// Leases are the requests it holds (at a scope's head, or running),
	// leased to it again for TTL under the same names, and its own from
	// then on: their keys are not taken again, unless by way of the
	// lease (released, or expired, its request goes back to its scope's
	// head and its next take hands it out, once).
	Leases []SharedLease
	TTL    time.Duration
	// Done and Failed add to the fleet's totals: this process's ends.
	Done, Failed int64
}

// SharedLease is a request held under a lease, as SharedRestore gives it
// back.
type SharedLease struct {
	Lease string
	SharedItem
}

// SharedItem is one request to add to a Shared.
type SharedItem struct {
	Scope  string
	Key    []byte // what makes two requests the same: a hash, 16 bytes
	Record []byte // the request, as the frontier encodes it
}

// SharedAsk asks a Shared for the head of Scope under the lease Lease.
type SharedAsk struct {
	Scope, Lease string
}

// Leased is what Take handed out for one ask: nil Record for nothing.
type Leased struct {
	Key, Record []byte
}

// SharedEnd ends one lease.
type SharedEnd struct {
	Lease  string
	Failed bool
}

// SharedCounts is the fleet's queue at one moment.
type SharedCounts struct {
	// Scopes are the scopes with requests queued: queued and ended
	// (done or failed, ever) per scope.
	Scopes map[string]ScopeCounts
	// Queued, Leased: requests waiting, and held under a lease (handed
	// to a thread, or at the head of a process's scope).
	Queued, Leased int
	// Done and Failed count the ended requests; Returned those whose lease
	// expired and which were queued again (each may have been fetched
	// once already).
	Done, Failed, Returned int64
	// Added counts the requests ever added (the set of those seen), for
	// the fleet's rate of adds (Progress.Added); 0 when the Shared keeps
	// no such count. A queue built again after a loss counts again what
	// it holds: the rate counts growth past the highest count read.
	Added int64
	// Ended are keys of the asking owner's requests that ended since its
	// last call (some, not all, if many did); Held is how long takes are
	// still held after a lost queue was started again.
	Ended [][]byte
	Held  time.Duration
}

// ScopeCounts is one scope's part of SharedCounts.
type ScopeCounts struct {
	Queued int
	Ended  int64
}
