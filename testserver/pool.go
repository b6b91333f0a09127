package testserver

import (
	"math"
	"time"
)

// pool is the service side of a host: how many admitted requests are in
// flight (being processed) and, for a WorkerPool, the admitted requests
// queued for a worker, in arrival order. Workers are a count, not
// goroutines: the handler of a queued request waits on its ticket.
//
// Its zero value is an idle pool. It is not safe for concurrent use: the
// host's mutex guards it, and only this file touches its fields.
type pool struct {
	inFlight, maxInFlight int
	queue                 []*ticket // FIFO; cancelled tickets stay until they reach the head
	queued, maxQueued     int       // tickets in queue that are not cancelled
}

// ticket is one queued request. Its fields are guarded by the host's
// mutex, but for ready, and delay once ready is closed.
type ticket struct {
	ready     chan struct{} // closed by the host once next granted a worker
	granted   bool
	cancelled bool
	delay     time.Duration // the service time, set by the host when granted
}

// noWorkers is the worker count of a limit that is not a WorkerPool:
// whatever it admits starts at once.
const noWorkers = math.MaxInt

// load returns the requests in flight and those queued.
func (p *pool) load() (inFlight, queued int) { return p.inFlight, p.queued }

// peaks returns the most requests that were in flight, and queued, at once.
func (p *pool) peaks() (inFlight, queued int) { return p.maxInFlight, p.maxQueued }

// enter takes a worker for an admitted request if one of workers is free
// and nobody is queued (t is nil, and others is the number of other
// requests in flight), or queues the request and returns its ticket.
func (p *pool) enter(workers int) (t *ticket, others int) {
	if p.queued == 0 && p.inFlight < workers {
		p.take()
		return nil, p.inFlight - 1
	}
	t = &ticket{ready: make(chan struct{})}
	p.queue = append(p.queue, t)
	p.queued++
	p.maxQueued = max(p.maxQueued, p.queued)
	return t, 0
}

func (p *pool) take() {
	p.inFlight++
	p.maxInFlight = max(p.maxInFlight, p.inFlight)
}

// next grants a worker to the oldest queued request if one of workers is
// free, and returns its ticket (nil if none) and the number of other
// requests in flight. The caller sets the ticket's delay and closes ready:
// a pool never blocks.
func (p *pool) next(workers int) (t *ticket, others int) {
	for len(p.queue) > 0 && p.inFlight < workers {
		t = p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if t.cancelled {
			continue
		}
		p.queued--
		p.take()
		t.granted = true
		return t, p.inFlight - 1
	}
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	return nil, 0
}

// leave frees the worker (or in-flight slot) of a request that is done.
func (p *pool) leave() { p.inFlight-- }

// cancel takes a queued request out: it leaves the queue, or, if it was
// granted a worker at the moment it gave up, frees that worker. It reports
// whether a worker was freed (the caller then calls next).
func (p *pool) cancel(t *ticket) (freed bool) {
	if t.granted {
		p.inFlight--
		return true
	}
	if !t.cancelled {
		t.cancelled = true
		p.queued--
	}
	return false
}
