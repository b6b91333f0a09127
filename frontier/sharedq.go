package frontier

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"sync"
	"time"
)

// A queue with a Shared (Config.Shared) keeps no FIFO of its own: each
// scope's requests are in the shared store, and the queue holds a window of
// one request per scope, leased, at the scope's head, as a queue in a file
// holds one read from the file. Its counts of what is queued are the
// store's, read every pollEvery (Queue.pollShared), which is also how it learns
// of the scopes the other processes added. It renews its leases every
// third of their life; it ends them (done, failed) without waiting, in the
// background, and keeps trying while the store is down. A store fault
// never fails a request or loses one: a take that failed is tried again at
// the next poll, an end that failed is kept and sent again, and a lease
// that expired meanwhile returns its request to the queue (fetched twice,
// counted in SharedCounts.Returned).
//
// A store that lost the queue (ErrLost: a Redis restarted empty) is given
// this queue's part to build it again (Shared.Restore, in the background,
// tried until it is in): the keys it added, its requests the store has
// not said ended (it keeps each one it added until then: its record and
// scope, some 100 bytes for a plain GET, and 16 bytes of key for good),
// the keys of those it ended (16 bytes each, for good), the requests it
// holds, and its counts of ends. Its requests held then, at a scope's head
// or running, are leased to it again in the new queue, under the same
// names: each runs once, by it, or goes back to the fleet if its lease is
// released or expires, as before the loss. Ends wait while a restore
// runs: an end must find its lease in the new queue.

// pollEvery is how often a queue with a Shared reads the fleet's counts.
const pollEvery = 250 * time.Millisecond

// sharedCall bounds each call to the store.
const sharedCall = time.Second

// sharedRetry is how long a failed end or renewal waits before the next
// try.
const sharedRetry = time.Second

// sharedBackend is a queue's side of its Shared.
type sharedBackend struct {
	sh    Shared
	ttl   time.Duration
	owner string // this queue's name in the store

	mu    sync.Mutex
	held  map[string]hold // leases held, at a scope's head or running; guarded by mu
	part  part            // what this queue gives back to a store that lost the queue; guarded by mu
	lost  bool            // a restore runs; guarded by mu
	gen   uint64          // restores ended; guarded by mu
	ends  []SharedEnd     // to send; guarded by mu
	sent  int             // ends in the round being sent; guarded by mu
	busy  bool            // an ends round runs; guarded by mu
	idle  *sync.Cond      // on mu: broadcast when busy ends
	down  bool            // the last call failed; guarded by mu
	stop  chan struct{}
	wg    sync.WaitGroup
	close sync.Once
}

func newSharedBackend(sh Shared, ttl time.Duration) *sharedBackend {
	b := &sharedBackend{sh: sh, ttl: ttl, owner: leaseName()[:16], held: map[string]hold{}, stop: make(chan struct{})}
	b.part = part{mine: map[key]mine{}, added: map[key]struct{}{}, ended: map[key]struct{}{}}
	b.idle = sync.NewCond(&b.mu)
	b.wg.Go(b.renew)
	return b
}

// leaseName is a lease's name: random, unique in the fleet.
func leaseName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (b *sharedBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), sharedCall)
}

// call makes one call to the store and notes its error (failed). It
// reads the generation of restores first: the call's ErrLost is a new
// loss only if no restore ended since the call began (one that began
// before it may find the queue it asked gone, and the next one there).
func (b *sharedBackend) call(f func() error) error {
	b.mu.Lock()
	gen := b.gen
	b.mu.Unlock()
	err := f()
	b.failed(err, gen)
	return err
}

// failed notes the error of a call begun at generation gen: ErrLost
// starts a restore; every error is a fault that passes.
func (b *sharedBackend) failed(err error, gen uint64) {
	b.mu.Lock()
	b.down = err != nil
	if errors.Is(err, ErrLost) && !b.lost && gen == b.gen && !b.closed() {
		b.lost = true
		b.wg.Go(b.restore)
	}
	b.mu.Unlock()
	if err != nil {
		b.idle.Broadcast() // a flush does not wait for a store that is down
	}
}

// add writes ops' requests to the store; each op learns whether it was
// added (dup: seen before).
//
// A fault is tried again, addTries times a second apart (a link found on
// a page is lost if its add fails: the page's lease ends done): an add
// whose reply was lost may have been applied, so after a failed try a
// request the store says it has seen counts as added by this call.
func (b *sharedBackend) add(scopes []string, ops []*op) error {
	items := make([]SharedItem, len(ops))
	for i, o := range ops {
		k := keyOf(o.seen)
		items[i] = SharedItem{Scope: scopes[i], Key: k[:], Record: o.rec}
	}
	var err error
	for try := range addTries {
		if try > 0 {
			select {
			case <-b.stop:
				return err
			case <-time.After(sharedRetry):
			}
		}
		// a bound that grows with the batch: a large AddURLs is no fault
		ctx, cancel := context.WithTimeout(context.Background(), sharedCall+time.Duration(len(items))*time.Millisecond)
		var added []bool
		err = b.call(func() error {
			var err error
			if added, err = b.sh.Add(ctx, b.owner, items); err == nil && len(added) != len(items) {
				err = errors.New("frontier: the shared store answered an add with the wrong count")
			}
			return err
		})
		cancel()
		if err == nil {
			b.mu.Lock()
			for i, o := range ops {
				o.dup = !added[i] && try == 0
				if !o.dup { // a retry's "seen" may be this call's own add
					k := key(items[i].Key)
					b.part.mine[k] = mine{scope: items[i].Scope, rec: items[i].Record}
					b.part.added[k] = struct{}{}
				}
			}
			b.mu.Unlock()
			return nil
		}
	}
	return err
}

// key is a request's key in the store: a hash of what makes two requests
// the same.
type key [16]byte

func keyOf(seen []byte) key {
	h := sha256.Sum256(seen)
	return key(h[:16])
}

// mine is a request this queue added that has not ended, as far as it
// knows.
type mine struct {
	scope string
	rec   []byte
}

// hold is a request held under a lease: what a store that lost the queue
// is given to lease it again.
type hold struct {
	k     key
	scope string
	rec   []byte
	ended bool // its end is queued or being sent
}

// part is what a queue gives back to a store that lost the queue.
type part struct {
	mine         map[key]mine
	added, ended map[key]struct{}
	done, failed int64
}

// addTries is how many times an add is tried.
const addTries = 5

// take leases the head of each refill's scope; nil items where there was
// none. On an error nothing is taken (a retry under the same names would
// return what a lost reply had leased; the names are dropped instead and
// such leases expire, their requests queued again).
func (b *sharedBackend) take(refills []refill) ([][]item, error) {
	asks := make([]SharedAsk, len(refills))
	for i, r := range refills {
		asks[i] = SharedAsk{Scope: r.s.key, Lease: leaseName()}
	}
	ctx, cancel := b.ctx()
	defer cancel()
	var got []Leased
	err := b.call(func() (err error) {
		got, err = b.sh.Take(ctx, asks, b.ttl)
		return err
	})
	if err == nil && len(got) != len(asks) {
		err = errors.New("frontier: the shared store answered a take with the wrong count")
	}
	if err != nil {
		return nil, err
	}
	out := make([][]item, len(refills))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, g := range got {
		if g.Record == nil {
			continue
		}
		var k key
		copy(k[:], g.Key)
		b.held[asks[i].Lease] = hold{k: k, scope: refills[i].s.key, rec: g.Record}
		if err := checkRecord(g.Record); err != nil {
			// not the frontier's record: ended as failed, not handed out
			b.endLocked(asks[i].Lease, true)
			continue
		}
		out[i] = []item{{rec: g.Record, lease: asks[i].Lease}}
	}
	b.startEnds()
	return out, nil
}

// end ends a lease in the background; it stays held (renewed) until the
// store has the end.
func (b *sharedBackend) end(lease string, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.endLocked(lease, failed)
	b.startEnds()
}

// endLocked queues a lease's end and notes it in the part. Called with mu
// held.
func (b *sharedBackend) endLocked(lease string, failed bool) {
	b.ends = append(b.ends, SharedEnd{Lease: lease, Failed: failed})
	if h, ok := b.held[lease]; ok {
		h.ended = true
		b.held[lease] = h
		b.part.ended[h.k] = struct{}{}
		if failed {
			b.part.failed++
		} else {
			b.part.done++
		}
	}
}

// startEnds sends the pending ends unless a round runs. Called with mu
// held.
func (b *sharedBackend) startEnds() {
	if b.busy || len(b.ends) == 0 {
		return
	}
	b.busy = true
	b.wg.Go(b.sendEnds)
}

// sendEnds sends ends until none is pending, trying again while the store
// fails, until the queue closes. While a restore runs it waits: the
// leases of these ends may not be in the new queue yet, and an end that
// found none would leave its lease to expire and its request to run again.
func (b *sharedBackend) sendEnds() {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.idle.Broadcast()
	for len(b.ends) > 0 {
		if b.lost {
			b.mu.Unlock()
			stopped := b.rest()
			b.mu.Lock()
			if stopped {
				b.busy = false // shutdown's last try sends them
				return
			}
			continue
		}
		round := b.ends
		b.ends, b.sent = nil, len(round)
		b.mu.Unlock()
		ctx, cancel := b.ctx()
		err := b.call(func() error { return b.sh.Done(ctx, round) })
		cancel()
		// ErrLost: the queue was lost before these ends; they are in the
		// part a restore gives (ended, not leased again)
		if err != nil && !errors.Is(err, ErrLost) {
			stopped := b.rest()
			b.mu.Lock()
			b.ends, b.sent = append(round, b.ends...), 0
			if stopped {
				// closed with the store away: these leases expire and
				// their requests are queued again (counted, fetched twice)
				b.busy = false
				return
			}
			continue
		}
		b.mu.Lock()
		b.sent = 0
		for _, e := range round {
			delete(b.held, e.Lease)
		}
	}
	b.busy = false
}

// unsent is how many of this process's ends the store does not have yet:
// their leases are still in the fleet's count of leased requests.
func (b *sharedBackend) unsent() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ends) + b.sent
}

// rest waits sharedRetry, or until the queue stops; it reports a stop.
func (b *sharedBackend) rest() bool {
	select {
	case <-b.stop:
		return true
	case <-time.After(sharedRetry):
		return false
	}
}

// flush returns once the ends pending now are sent, or the store failed
// them: a queue that stops is not held by a store that is down, nor by a
// restore that runs.
func (b *sharedBackend) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.busy && !b.down && !b.lost {
		b.idle.Wait()
	}
}

// renew extends the leases held every third of their life.
func (b *sharedBackend) renew() {
	tick := time.NewTicker(b.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		b.mu.Lock()
		leases := make([]string, 0, len(b.held))
		for l := range b.held {
			leases = append(leases, l)
		}
		b.mu.Unlock()
		ctx, cancel := b.ctx()
		_ = b.call(func() error { return b.sh.Renew(ctx, leases, b.ttl) })
		cancel()
	}
}

// counts reads the fleet's counts, and forgets the records of this
// queue's requests that the store says ended.
func (b *sharedBackend) counts() (SharedCounts, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	var c SharedCounts
	err := b.call(func() (err error) {
		c, err = b.sh.Counts(ctx, b.owner)
		return err
	})
	if err == nil && len(c.Ended) > 0 {
		b.mu.Lock()
		for _, e := range c.Ended {
			var k key
			copy(k[:], e)
			delete(b.part.mine, k)
		}
		b.mu.Unlock()
	}
	return c, err
}

// closed reports whether the queue is closing (its goroutines stop).
func (b *sharedBackend) closed() bool {
	select {
	case <-b.stop:
		return true
	default:
		return false
	}
}

// restorePiece bounds the keys and requests in one piece of a restore.
const restorePiece = 1000

// restore gives this queue's part to a store that lost the queue, in
// pieces, trying each again while the store fails, until it is in or the
// queue closes. The part is read once: what this queue ends meanwhile was
// held then, and is in it.
func (b *sharedBackend) restore() {
	for !b.restoreOnce() {
		select {
		case <-b.stop:
			return
		case <-time.After(sharedRetry):
		}
	}
	b.mu.Lock()
	b.lost = false
	b.gen++
	b.mu.Unlock()
	b.idle.Broadcast()
}

// restoreOnce gives the part as it is now; false if the queue was lost
// again meanwhile (the part starts again), true once it is in or the queue
// closes.
func (b *sharedBackend) restoreOnce() bool {
	b.mu.Lock()
	p := SharedRestore{TTL: b.ttl, Done: b.part.done, Failed: b.part.failed}
	var pieces []SharedRestore
	next := func() *SharedRestore {
		if len(p.Seen)+len(p.Ended)+len(p.Leases)+len(p.Items) >= restorePiece {
			pieces = append(pieces, p)
			p = SharedRestore{N: len(pieces), TTL: b.ttl}
		}
		return &p
	}
	// what is held first, then what ended (their keys tombed in the
	// first pieces: a restore cut short by a stop leaves no held request
	// to run again from another process's copy); the items before the
	// keys seen, which hold theirs (restoreScript queues no item whose
	// key is seen)
	skip := maps.Clone(b.part.ended)
	for l, h := range b.held {
		if h.ended {
			continue // in Ended, and counted in Done
		}
		skip[h.k] = struct{}{}
		c := next()
		c.Leases = append(c.Leases, SharedLease{Lease: l, SharedItem: SharedItem{Scope: h.scope, Key: bytesOf(h.k), Record: h.rec}})
		// this queue's in the new queue: kept until the store says it
		// ended, as those it added
		b.part.mine[h.k] = mine{scope: h.scope, rec: h.rec}
	}
	for k := range b.part.ended {
		c := next()
		c.Ended = append(c.Ended, bytesOf(k))
	}
	for k, m := range b.part.mine {
		if _, ok := skip[k]; ok {
			continue // ended, or held: it is not queued again
		}
		c := next()
		c.Items = append(c.Items, SharedItem{Scope: m.scope, Key: bytesOf(k), Record: m.rec})
	}
	for k := range b.part.added {
		c := next()
		c.Seen = append(c.Seen, bytesOf(k))
	}
	pieces = append(pieces, p)
	b.mu.Unlock()
	for _, piece := range pieces {
		for {
			ctx, cancel := b.ctx()
			err := b.sh.Restore(ctx, b.owner, piece)
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, ErrLost) && piece.N > 0 {
				return false
			}
			select {
			case <-b.stop:
				return true
			case <-time.After(sharedRetry):
			}
		}
	}
	return true
}

// restoring reports whether this queue's part is not all in a store that
// lost the queue yet.
func (b *sharedBackend) restoring() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost
}

func bytesOf(k key) []byte { return append([]byte(nil), k[:]...) }

// shutdown gives back the leases of the requests the queue holds at its
// scopes' heads (those go back to the heads of their scopes' FIFOs at
// once, rather than when their leases expire), flushes the ends and stops
// the goroutines.
func (b *sharedBackend) shutdown(heads []string) {
	b.release(heads)
	b.flush()
	b.close.Do(func() {
		b.mu.Lock() // failed starts no restore once stop is closed
		close(b.stop)
		b.mu.Unlock()
	})
	b.wg.Wait()
	// a last try for the ends a store that was away did not take
	b.mu.Lock()
	ends := b.ends
	b.ends = nil
	b.mu.Unlock()
	if len(ends) > 0 {
		ctx, cancel := b.ctx()
		_ = b.call(func() error { return b.sh.Done(ctx, ends) })
		cancel()
	}
}

// release gives back the leases of requests held at scopes' heads.
func (b *sharedBackend) release(heads []string) {
	if len(heads) == 0 {
		return
	}
	ctx, cancel := b.ctx()
	_ = b.call(func() error { return b.sh.Release(ctx, heads) })
	cancel()
	b.mu.Lock()
	for _, l := range heads {
		delete(b.held, l)
	}
	b.mu.Unlock()
}
