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
// (records of a few dozen bytes for a plain GET) and a record comes back
// exactly as it was added. A Shared must be safe for concurrent use. Its
// errors are the store's faults (a timeout, a server down, a reply it
// cannot read): the queue tries again, except ErrLost.
type Shared interface {
	// Add puts each item at the tail of its scope's FIFO unless an item
	// with its Key was added before (it reports which were added). An
	// error means none may have been added (the caller is told).
	Add(ctx context.Context, items []SharedItem) (added []bool, err error)
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
	// and the totals.
	Counts(ctx context.Context) (SharedCounts, error)
}

// ErrLost is returned by a Shared whose store lost the queue (a Redis
// restarted empty): the queue stops with it rather than carry on empty.
var ErrLost = errors.New("frontier: the shared queue's store lost it")

// SharedItem is one request to add to a Shared.
type SharedItem struct {
	Scope  string
	Key    []byte // what makes two requests the same (method, URL, body)
	Record []byte // the request, as the frontier encodes it
}

// SharedAsk asks a Shared for the head of Scope under the lease Lease.
type SharedAsk struct {
	Scope, Lease string
}

// Leased is what Take handed out for one ask: nil Record for nothing.
type Leased struct {
	Record []byte
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
}

// ScopeCounts is one scope's part of SharedCounts.
type ScopeCounts struct {
	Queued int
	Ended  int64
}
