// Package fleetclient is a controller's side of a shared fleet.Store: the
// protocol that makes a fleet of processes one polite client. One round
// trip to the store before each send (a lease, the slot of the fleet's
// schedule, the fleet's law when newer: Before) and one after (the lease
// back, the pause and the law decided here: After); leases renewed while
// held; a conservative share when the store is down, said once, and the
// fleet's view taken again by itself when it answers, with every lease the
// store may still hold for this process given back.
//
// While the fleet's concurrency is in use for this process (its part is
// held elsewhere), one send of the process asks the store for the
// process, and its others wait behind it in order: the store's shares
// count them (LeaseRequest.Want), a turn it announces (a Notifier) wakes
// the asking send at once, and each lease granted hands the turn to the
// next waiting send.
//
// The client knows nothing of the law or the pacer: what it needs of a
// scope it asks through Local, which the controller implements over the
// scope's decision core. Process-wide state (the store's health, the
// leases held) is the client's; per-scope state is the scope's.
package fleetclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/sat"
)

// Local is what the client asks of one scope of this process. Each method
// takes the scope's own lock; the client holds none of its own while it
// calls one.
type Local interface {
	// Ask is what a lease request carries, at now: the rate the fleet
	// sends at and its concurrency limit as this process knows them, the
	// version of the fleet's law state held (0: none) and the state to
	// seed a store that has none with: the fleet's as last shared, or
	// without one this process's own.
	Ask(now time.Duration) Ask
	// Rate is the rate the fleet sends at as this process knows it now
	// (Ask's, without the rest).
	Rate() float64
	// Granted takes what a lease brought: the fleet's law state (nil when
	// the version held is current) at version, the processes live on the
	// scope and the fleet's configured ceiling (0: none). The scope keeps
	// to the fleet's schedule again.
	Granted(state []byte, version uint64, live int, ceiling float64, rejoining bool)
	// Random draws a number in [0, 1) from the scope's seeded source.
	Random() float64
	// Alone puts the scope on its own share of the fleet's rate (the
	// store is unreachable). It reports whether the share was not in force
	// before.
	Alone() bool
	// Waited is told at now that a send waited for the fleet's slot. It
	// reports whether a pause is in force (one shared meanwhile voids the
	// slot).
	Waited(now time.Duration) (paused bool)
	// Settled takes what the store answered to After, and the law state
	// the report sent (nil for none). It returns a law state to commit at
	// once on version (nil for none): after a commit the store refused,
	// a change the fleet has not seen (a throttle of this process's,
	// applied to the fleet's state).
	Settled(st fleet.Settlement, sent []byte) (again []byte, version uint64)
}

// Ask is what a lease request carries of a scope (Local.Ask).
type Ask struct {
	Rate    float64
	Ceiling float64 // this process's own configured ceiling (0: none)
	Limit   int
	Version uint64
	Seed    []byte
}

// Send is what Before granted: the lease ("" when the store is down and
// the local view decides), whether the fleet's concurrency is all in use
// with it, whether its rate held it back, and when it goes (0: when its
// local slot was granted).
type Send struct {
	Lease string
	Full  bool
	// Paced: the rate was this send's bottleneck, the fleet's schedule
	// held it back or, having waited for no turn of the fleet's
	// concurrency, the local pacer did; neither counts if its slot was
	// spaced at a rate the fleet has since doubled. A send that waited
	// for a turn was held by the concurrency: had the pacer held it too,
	// the pacer's wait is not what kept it (as in one process, a send let
	// out by an answer that freed a slot is not paced), and rounds of
	// such sends, read as the rate's, would double the rate where the
	// fleet carried a fraction of it.
	Paced     bool
	Scheduled bool // it waited for its slot of the fleet's schedule (or a pause)
	// InFlight is the fleet's requests in flight with this one as the
	// store counted them (fleet.Lease.Held; 0 when the store is down):
	// exact when it was not Scheduled, a bound when it was.
	InFlight int
	At       time.Duration
}

// Report is what one send decided, for the fleet (After): the lease back,
// a pause to share (without jitter; 0: none) and why, the law's shared part
// if it changed (nil otherwise) and the version it derives from, and
// whether the answer was accepted (counted in the fleet's accepted rate).
type Report struct {
	Lease    string
	Pause    time.Duration
	Reason   fleet.Reason
	State    []byte
	Version  uint64
	Accepted bool
}

// ErrAgain: the send cannot go as granted (a pause voided its slot, the
// share changed); the caller gives the local slot back and asks again.
var ErrAgain = errors.New("fleetclient: fleet slot void")

// TooLongError: the fleet's slot is further away than the caller may wait
// (a shared pause, the fleet's schedule); the lease is given back.
type TooLongError struct {
	Wait   time.Duration
	Paused bool // the wait is a shared pause
	Reason fleet.Reason
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("fleetclient: the fleet's slot is %v away", e.Wait)
}

// Config is what a Client needs of its controller.
type Config struct {
	// TTL is the life of a lease not renewed; 0 means DefaultTTL.
	TTL time.Duration
	// MaxPause is the longest wait for a slot; past it Before fails with
	// a *TooLongError.
	MaxPause time.Duration
	Logger   *slog.Logger
	// Now is the controller's clock.
	Now func() time.Duration
}

// Client is a controller's side of a fleet.Store. Make one with New; it is
// safe for concurrent use.
type Client struct {
	store    fleet.Store
	process  string
	ttl      time.Duration
	maxPause time.Duration
	logger   *slog.Logger
	now      func() time.Duration

	seq atomic.Uint64 // numbers this process's leases

	mu      sync.Mutex
	down    atomic.Bool           // the last call failed (read without mu on every send; written with mu held)
	backAt  atomic.Int64          // when the store last answered again after failing (c.now(); 0: never failed)
	retryAt time.Duration         // guarded by mu: while down, the store is not asked before then
	backoff time.Duration         // guarded by mu: the wait before the next try while down
	tryAt   time.Duration         // guarded by mu: while down, when the try under way began (0: none)
	leases  map[string]heldLease  // guarded by mu: the leases held
	turns   map[string]*turnState // guarded by mu: per scope, while the fleet is busy for this process
	pending map[string]int        // guarded by mu: per scope, the sends in Before (the process's demand)
	// owed are leases the store may hold for this process that it does
	// not use (a call that failed may have taken or kept one): given back
	// once the store answers again. Guarded by mu.
	owed     []owedLease
	flushing bool           // guarded by mu: a goroutine gives the owed leases back
	flushes  sync.WaitGroup // the goroutines giving owed leases back
	closed   bool           // guarded by mu: Close was called (no flush starts after it)
	shut     atomic.Bool    // Close was called: no send asks the store again
	// life ends with Close: it bounds the calls of the goroutine giving
	// owed leases back
	life context.Context
	stop context.CancelFunc
	// unsubscribe ends the Notifier's subscription, if the store is one
	unsubscribe func()
}

// turnState is one scope's queue while the fleet's concurrency is in use
// for this process: one send asks the store (asking), woken early when
// the store says it is this process's turn; the others wait in order.
type turnState struct {
	asking  bool            // a send asks for the process now
	woken   chan struct{}   // closed when a turn is announced while the asker waits
	turn    bool            // a turn was announced while nobody waited for it
	waiters []chan struct{} // the sends waiting behind the asker, oldest first
}

type owedLease struct {
	scope, lease string
	at           time.Duration // when it was taken or last known held
}

// maxOwed bounds the leases kept to give back: beyond, the oldest are
// forgotten (they expire in the store by themselves).
const maxOwed = 4096

// maxRecommits bounds the store calls one return makes to commit a
// decrease the store refused, each refusal a commit by another process
// within the last call's round trip: contention, which a bound keeps off
// the return's path (the return is off the send's path, but a worker
// waits for it).
const maxRecommits = 3

type heldLease struct {
	scope string
	renew *time.Timer
}

// DefaultTTL is the life of a lease not renewed: how long a slot stays
// taken in the store after its holder died or the call that would have
// given it back was lost. A lease held longer (a slow download) is renewed
// every third of it, so a short life costs a renewal per second of such a
// send and no more.
const DefaultTTL = 3 * time.Second

// storeTimeout bounds one call to the Store. A slow store delays a send by
// at most this much; an error falls back to the local view, never to no
// limit at all.
const storeTimeout = time.Second

// While the store is down it is asked again after storeRetryMin, then
// twice as long each time it fails again, up to storeRetryMax: in between,
// sends do not wait on a store that does not answer (at most one send per
// try waits, storeTimeout at most), and a store back is shared again
// within storeRetryMax. Pauses are not shared while a process runs on its
// own: the bound keeps that short.
const (
	storeRetryMin = time.Second
	storeRetryMax = 2 * time.Second
)

// New returns a client of store for one controller: its process's name
// in the fleet is unique (host, pid and a random part).
func New(store fleet.Store, cfg Config) *Client {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	life, stop := context.WithCancel(context.Background())
	return &Client{
		life:     life,
		stop:     stop,
		store:    store,
		process:  ProcessName(host, os.Getpid(), b),
		ttl:      cfg.TTL,
		maxPause: cfg.MaxPause,
		logger:   cfg.Logger,
		now:      cfg.Now,
		leases:   map[string]heldLease{},
		turns:    map[string]*turnState{},
		pending:  map[string]int{},
	}
}

// hostPart is the most of the host name a process's name keeps.
const hostPart = 20

// ProcessName is the name of a process in the fleet: the start of its
// host name (hostPart bytes at most: it is for a reader), its pid and four
// random bytes (what makes it unique). Its length is bounded, 37 bytes at
// most, because a store keeps it in every scope the process asked on: a
// whole host name of 56 bytes or more took the processes' set past the
// 64-byte members Redis packs, and an idle scope from 600 B to 1,464 B.
func ProcessName(host string, pid int, rnd [4]byte) string {
	if len(host) > hostPart {
		host = host[:hostPart]
	}
	return fmt.Sprintf("%s-%d-%s", host, pid, hex.EncodeToString(rnd[:]))
}

// Subscribe has fn hear every pause the fleet shares, and the client every
// turn announced for this process, when the store is a fleet.Notifier (it
// reports whether it is), until Close.
func (c *Client) Subscribe(fn func(scope string, pause time.Duration, reason fleet.Reason)) bool {
	n, ok := c.store.(fleet.Notifier)
	if ok {
		c.unsubscribe = n.Subscribe(func(m fleet.Notice) {
			switch {
			case m.Turn == c.process:
				c.wake(m.Scope, true)
			case m.Turn == "" && m.Pause > 0:
				fn(m.Scope, m.Pause, m.Reason)
			}
		})
	}
	return ok
}

// wake tells scope's asking send that it is this process's turn:
// announced by the store, or a lease of this process's own given back.
func (c *Client) wake(scope string, announced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.turns[scope]
	switch {
	case st == nil && (!announced || c.pending[scope] == 0):
		// nobody of this process waits for a turn there (a notice for
		// a send that gave up since: kept, it was state for good, one
		// per host a crawl met)
	case st == nil:
		// announced before the refusal that queued this process got
		// back: the send it refused asks again at once
		c.turns[scope] = &turnState{turn: true}
	case st.woken != nil:
		close(st.woken)
		st.woken = nil
	default:
		st.turn = true // the asker is between two asks: it asks again at once
	}
}

// busyWait is how long to wait before asking again when the fleet's
// concurrency is in use, the busy-th time in a row for this send: a send
// interval at the fleet's rate (a lease comes back no faster than sends
// go), doubling with each busy answer up to eight, at most a second, with
// a jitter so that the processes waiting do not ask together. One send
// per process and scope asks; the process's others wait for its answer.
func busyWait(floor time.Duration, rate float64, busy int, rnd float64) time.Duration {
	d := time.Duration(float64(sat.Interval(rate)) * float64(uint(1)<<min(busy, 3)))
	d = min(max(d, 10*time.Millisecond), time.Second)
	return max(floor, time.Duration(float64(d)*(0.5+rnd)))
}

// Before asks the store for one send of scope, whose local slot is
// granted (paced: the local pacer held it back): it adopts the fleet's law,
// waits for the fleet's slot, and returns the lease. While the fleet's
// concurrency is in use for this process, the send keeps its local slot
// and its place: one send of the process asks the store at a time, the
// others wait behind it in the order they came, and each lease the asker
// gets, or each turn it loses, hands the asking on to the oldest. On
// ErrAgain the caller gives the local slot back and asks again; a
// *TooLongError is a refusal; a context error ends the send.
func (c *Client) Before(ctx context.Context, scope string, l Local, paced bool) (Send, error) {
	if c.skip() {
		// the store is down: the local view decides, at this process's
		// share; a slot taken before the share applied is taken again
		if l.Alone() {
			return Send{}, ErrAgain
		}
		return Send{Paced: paced}, nil
	}
	want, wait, asker := c.queue(scope)
	counted := true // in the process's demand until it holds a lease
	defer func() {
		if counted {
			c.done(scope)
		}
	}()
	waited := wait != nil
	if waited {
		// the fleet is busy for this process and another of its sends
		// asks: wait behind it until the asking is handed on to this one
		if err := c.waitBehind(ctx, scope, wait); err != nil {
			return Send{}, err
		}
		asker = true
	}
	for busy := 0; ; busy++ {
		if (waited || busy > 0) && c.skip() {
			// the store failed while this send waited its turn
			c.asked(scope, false, asker)
			l.Alone()
			return Send{}, ErrAgain
		}
		if waited || busy > 0 {
			want = c.want(scope) // the demand now, after a wait
		}
		lease, ask, err := c.lease(ctx, scope, l, want, asker)
		if err != nil {
			return Send{}, err
		}
		if lease.ID == "" {
			// the fleet's concurrency is in use for this process: this
			// send asks again later, or when told it is the process's
			// turn; the process's others wait behind it
			if lease.Delay > c.maxPause {
				c.asked(scope, false, asker)
				return Send{}, &TooLongError{Wait: lease.Delay, Paused: lease.Paused > 0, Reason: lease.Reason}
			}
			if err := pastDeadline(ctx, lease.Delay); err != nil {
				// the slot is past the send's deadline: it fails now, as
				// a local wait that would pass it does
				c.asked(scope, false, asker)
				return Send{}, err
			}
			if err := c.refused(ctx, scope, &asker, busyWait(lease.Delay, ask.Rate, busy, l.Random())); err != nil {
				return Send{}, err
			}
			continue
		}
		c.asked(scope, true, asker)
		c.done(scope) // it holds a lease: no longer a demand beyond the leases held
		counted = false
		turned := waited || busy > 0 // it waited for a turn of the fleet's concurrency
		if ask.Limit > 0 {
			// a store's count is untrusted: never more than the limit
			// asked (too many in flight would read every overload as a
			// burst, and cut no rate)
			lease.Held = min(lease.Held, ask.Limit)
		}
		return c.hold(ctx, scope, l, lease, ask.Rate, paced && !turned)
	}
}

// lease asks the store for a lease of scope, as the process's asker or
// not. An error is ErrAgain (the store failed: the slot again, at this
// process's share) or ctx's.
func (c *Client) lease(ctx context.Context, scope string, l Local, want int, asker bool) (fleet.Lease, Ask, error) {
	ask := l.Ask(c.now())
	id := c.process + "/" + strconv.FormatUint(c.seq.Add(1), 10)
	req := fleet.LeaseRequest{Scope: scope, Process: c.process, ID: id, Rate: ask.Rate, Ceiling: ask.Ceiling, Limit: ask.Limit, Want: want,
		Version: ask.Version, Seed: ask.Seed, TTL: c.ttl, MaxWait: maxWait(ctx, c.maxPause)}
	settled := false
	defer func() {
		if settled {
			return
		}
		// the Store or Granted panicked (a Store is the user's code, and
		// the controller lets its panic go on): the asking is handed on,
		// or every other send of the process on scope would wait behind
		// an asker that is gone until its context ends; the lease the
		// store may have granted goes back
		c.owe(scope, id)
		c.asked(scope, false, asker)
		c.giveBackOwed()
	}()
	if !c.try() {
		// another send makes the store's try: this one goes on its share
		settled = true
		c.asked(scope, false, asker)
		l.Alone()
		return fleet.Lease{}, ask, ErrAgain
	}
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	lease, err := c.store.Lease(cctx, req)
	if err != nil {
		settled = true
		// the store may have taken the lease before the call failed
		c.owe(scope, id)
		c.asked(scope, false, asker)
		if ctx.Err() != nil {
			// the caller gave up, not the store: nothing else would give
			// the lease back before it expires (owed leases go back when a
			// store that failed answers again), and it would hold one of
			// the fleet's slots till then, for every send given up. A try
			// it made is over: the next send may make one
			c.mu.Lock()
			c.tryAt = 0
			c.mu.Unlock()
			c.giveBackOwed()
			return fleet.Lease{}, ask, ctx.Err()
		}
		c.failed(scope, err)
		l.Alone()
		return fleet.Lease{}, ask, ErrAgain
	}
	c.ok(scope)
	l.Granted(lease.State, lease.Version, max(lease.Live, 1), lease.Ceiling, c.rejoining())
	settled = true
	return lease, ask, nil
}

// staleRise is how far the fleet's rate must have risen while a send
// waited for its slot for the slot to count as spaced at a rate the fleet
// has left: a doubling of slow start's (or of a search after a drop), not
// a probe's step. A probe's first step is 3 %: slots spaced at the
// estimate it left are near enough, and at a few requests a second their
// queue (the limit over the rate) fills whole rounds of the probe, which
// read as not paced could never confirm it (with a 1 % slack, a review
// counted 164 of 164 probes unconfirmed at 3/s with 8 processes in virtual
// time, against 5 of 6 before).
const staleRise = 1.5

// hold keeps the lease a send was granted until its slot of the fleet's
// schedule, spaced at rate, and returns the send (paced: the local pacer
// held it, and it waited for no turn).
func (c *Client) hold(ctx context.Context, scope string, l Local, lease fleet.Lease, rate float64, paced bool) (Send, error) {
	if lease.Delay > c.maxPause {
		c.GiveBack(scope, l, lease.ID)
		return Send{}, &TooLongError{Wait: lease.Delay, Paused: lease.Paused > 0, Reason: lease.Reason}
	}
	if err := pastDeadline(ctx, lease.Delay); err != nil {
		c.GiveBack(scope, l, lease.ID)
		return Send{}, err
	}
	c.keep(scope, lease.ID)
	if err := sleep(ctx, lease.Delay); err != nil {
		c.GiveBack(scope, l, lease.ID)
		return Send{}, err
	}
	// a pause shared while this send waited for its slot voids the slot
	// (the Notifier told this scope's gate): wait for the pause instead
	now := c.now()
	// the fleet's schedule held it back: the rate bound it, unless its
	// slot was spaced at a rate the fleet has since doubled (slow start
	// doubled it while the send waited behind slots spaced at the old),
	// which is no evidence that the new rate binds, whatever held it
	// before. Read as such, a fleet whose schedule ran seconds behind its
	// rate (the leases of the slots ahead holding its concurrency) doubled
	// it each round while the wire kept to the rate of two doublings
	// before, and slow start ended at three times the capacity.
	bySchedule := lease.Delay > 0 && lease.Paused == 0 // (Send.Scheduled counts a pause too)
	stale := bySchedule && l.Rate() > rate*staleRise
	if l.Waited(now) || (lease.Delay > 0 && c.down.Load()) {
		// (a slot of a schedule whose store failed since is void too:
		// this process is on its share now, and the slot is taken again
		// at it)
		c.GiveBack(scope, l, lease.ID)
		return Send{}, ErrAgain
	}
	return Send{Lease: lease.ID, Full: lease.Full, Paced: (paced || bySchedule) && !stale, Scheduled: lease.Delay > 0, InFlight: lease.Held, At: now}, nil
}

// queue counts a send in Before on scope (done uncounts it) and returns
// how many sends of this process want a lease there, this one included,
// and, when another send asks for the process while the fleet is busy for
// it, the channel to wait on behind it (nil: this send asks; asker: for
// the process, the fleet being busy for it).
func (c *Client) queue(scope string) (want int, wait chan struct{}, asker bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[scope]++
	want = c.pending[scope]
	st := c.turns[scope]
	if st == nil {
		return want, nil, false
	}
	if st.asking {
		wait = make(chan struct{})
		st.waiters = append(st.waiters, wait)
		return want, wait, false
	}
	st.asking = true
	return want, nil, true
}

// want is how many sends of this process want a lease of scope now: its
// demand, as the store counts it.
func (c *Client) want(scope string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.pending[scope], 1)
}

// done uncounts a send that leaves Before.
func (c *Client) done(scope string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[scope]--; c.pending[scope] <= 0 {
		delete(c.pending, scope)
	}
}

// waitBehind waits on wait, scope's queue behind its asking send, until
// the asking is handed on to this send (then it is the asker), or until
// ctx ends. Should the asking be left with nobody (a hand-on lost), the
// send takes it after WantFresh, keeping its place otherwise.
func (c *Client) waitBehind(ctx context.Context, scope string, wait chan struct{}) error {
	t := time.NewTimer(fleet.WantFresh)
	defer t.Stop()
	for {
		select {
		case <-wait:
			return nil
		case <-t.C:
		case <-ctx.Done():
		}
		c.mu.Lock()
		st := c.turns[scope]
		select {
		case <-wait: // handed on meanwhile
			c.mu.Unlock()
			return nil
		default:
		}
		if ctx.Err() == nil && st != nil && st.asking {
			c.mu.Unlock()
			t.Reset(fleet.WantFresh)
			continue
		}
		if st != nil {
			if i := slices.Index(st.waiters, wait); i >= 0 {
				st.waiters = slices.Delete(st.waiters, i, i+1)
			}
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return err
		}
		if st == nil {
			st = &turnState{}
			c.turns[scope] = st
		}
		st.asking = true // nobody asks: this send does
		c.mu.Unlock()
		return nil
	}
}

// refused waits out a refusal of the fleet, for wait at most or until it
// announces this process's turn, as scope's asking send (a send refused
// while another asks queues behind it, then asks when handed on: asker
// then becomes true). It returns ctx's error, if it ended, having handed
// the asking on.
func (c *Client) refused(ctx context.Context, scope string, asker *bool, wait time.Duration) error {
	c.mu.Lock()
	st := c.turns[scope]
	if st == nil {
		st = &turnState{}
		c.turns[scope] = st
	}
	if st.asking && !*asker {
		ch := make(chan struct{})
		st.waiters = append(st.waiters, ch)
		c.mu.Unlock()
		if err := c.waitBehind(ctx, scope, ch); err != nil {
			return err
		}
		*asker = true
		return nil
	}
	st.asking, *asker = true, true
	woken := make(chan struct{})
	if st.turn {
		st.turn = false
		close(woken) // announced while this send was on its way back
	} else {
		st.woken = woken
	}
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-woken:
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.woken == woken {
		st.woken = nil
	}
	if err != nil {
		st.asking = false
		c.handOn(scope, st) // the next send asks instead
	}
	return err
}

// asked ends an ask of scope by the process's asker: granted, or failed.
// The asking goes to the oldest send waiting behind it.
func (c *Client) asked(scope string, granted, asker bool) {
	if !asker {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.turns[scope]
	if st == nil {
		return
	}
	st.asking = false
	if granted && len(st.waiters) == 0 {
		delete(c.turns, scope)
		return
	}
	c.handOn(scope, st)
}

// handOn gives the asking to the oldest send waiting on scope: it asks
// next. Called with c.mu held, st.asking false.
func (c *Client) handOn(scope string, st *turnState) {
	if len(st.waiters) == 0 {
		if st.woken == nil {
			delete(c.turns, scope)
		}
		return
	}
	st.asking = true // taken for the send woken: a newcomer queues behind it
	close(st.waiters[0])
	st.waiters = slices.Delete(st.waiters, 0, 1)
}

// After publishes what a send of scope decided (nothing when there is
// nothing to say) and has l take the fleet's answer.
func (c *Client) After(scope string, l Local, r Report) {
	if r.Lease == "" && r.Pause == 0 && r.State == nil {
		return
	}
	c.put(scope, l, fleet.Return{Scope: scope, Lease: r.Lease, Pause: r.Pause, Reason: r.Reason, State: r.State, Version: r.Version, Accepted: r.Accepted})
}

// GiveBack gives a lease back unused.
func (c *Client) GiveBack(scope string, l Local, lease string) {
	c.put(scope, l, fleet.Return{Scope: scope, Lease: lease})
}

func (c *Client) put(scope string, l Local, r fleet.Return) {
	r.Process = c.process
	c.drop(r.Lease)
	for pass := 1; ; pass++ {
		if c.skip() {
			// the store is down: the lease goes back when it answers
			// again (or expires there first)
			c.owe(scope, r.Lease)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		st, err := c.store.Return(ctx, r)
		cancel()
		if err != nil {
			c.owe(scope, r.Lease)
			c.failed(scope, err)
			l.Alone()
			return
		}
		c.ok(scope)
		if r.Lease != "" {
			c.wake(scope, false) // a lease of this process's back: its asker may take it
		}
		state, version := l.Settled(st, r.State)
		if state == nil || pass > maxRecommits {
			return
		}
		// a decrease the store refused is committed now, on the fleet's
		// version, not at this process's next return: that comes after
		// the decrease's pause, by when the others have doubled again on
		// the fleet's state. Again if refused again (another commit
		// within this round trip: the Local judges the decrease on that
		// one too), a few times at most: the Local counts what it hands
		// back as sent, so a decrease refused more often than that, each
		// time by a commit within the last's round trip, is lost
		r = fleet.Return{Scope: scope, Process: c.process, State: state, Version: version}
	}
}

// owe notes a lease the store may hold for this process that it does not
// use, to give back once the store answers again.
func (c *Client) owe(scope, lease string) {
	if lease == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.owed) >= maxOwed {
		c.owed = slices.Delete(c.owed, 0, len(c.owed)-maxOwed+1)
	}
	c.owed = append(c.owed, owedLease{scope: scope, lease: lease, at: c.now()})
}

// flush gives back the leases owed, those that have not expired in the
// store meanwhile, one call each; a call that fails keeps the rest for
// the next time the store answers.
func (c *Client) flush() {
	defer c.flushes.Done()
	for {
		c.mu.Lock()
		now := c.now()
		for len(c.owed) > 0 && now-c.owed[0].at > c.ttl {
			c.owed = c.owed[1:] // expired there by now
		}
		if len(c.owed) == 0 || c.down.Load() {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		o := c.owed[0]
		c.owed = c.owed[1:]
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.life, storeTimeout)
		_, err := c.store.Return(ctx, fleet.Return{Scope: o.scope, Process: c.process, Lease: o.lease})
		cancel()
		if err != nil {
			c.mu.Lock()
			c.owed = append([]owedLease{o}, c.owed...)
			closing := c.life.Err() != nil
			if closing {
				c.flushing = false
			}
			c.mu.Unlock()
			if closing {
				return // Close gives the rest back
			}
			c.failed(o.scope, err)
		}
	}
}

// rejoining reports whether the store answered again, after failing,
// less than storeRetryMax ago: the other processes of the fleet may still
// run on their shares, not knowing it is back, until their next try. Till
// then this process keeps to its share too, so that the fleet's schedule
// and their shares do not add up to more than the fleet's rate.
func (c *Client) rejoining() bool {
	at := time.Duration(c.backAt.Load())
	return at != 0 && c.now()-at < storeRetryMax
}

// Down reports whether the last call to the store failed.
func (c *Client) Down() bool { return c.down.Load() }

// skip reports whether the store is down and not yet due for another try.
func (c *Client) skip() bool {
	if c.shut.Load() {
		// closed: the controller goes on, on its own at its share; a
		// lease taken now would never be renewed, and would lapse under
		// a send still in flight
		return true
	}
	if !c.down.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down.Load() && !c.dueLocked(c.now())
}

// dueLocked reports whether the store, down, is due for a try at now: its
// backoff is over, and no try is under way (one that ended without saying
// so, a Store that panicked, is over after twice a call's bound). Called
// with mu held.
func (c *Client) dueLocked(now time.Duration) bool {
	return now >= c.retryAt && (c.tryAt == 0 || now-c.tryAt >= 2*storeTimeout)
}

// try reports whether a call to the store may be made now: the store is
// up, or down and due for a try, which this call then makes (the others
// go on their shares until it ends: one send waits on a store that may
// not answer, not every send that found the try due).
func (c *Client) try() bool {
	if !c.down.Load() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.down.Load() {
		return true
	}
	if !c.dueLocked(now) {
		return false
	}
	c.tryAt = max(now, 1)
	return true
}

// failed marks the store down after a failed call on scope (saying so
// once) and backs off the next try. Calls that were under way together
// fail together: only a try made when one was due backs off further.
func (c *Client) failed(scope string, err error) {
	c.mu.Lock()
	was, now := c.down.Load(), c.now()
	switch {
	case !was:
		c.backoff, c.retryAt = storeRetryMin, now+storeRetryMin
	case c.tryAt > 0:
		// the try failed: the next comes a backoff after it began, not
		// after it ended (a slow store's tries came every 3 s, not 2)
		c.backoff = min(2*c.backoff, storeRetryMax)
		c.retryAt = c.tryAt + c.backoff
		c.tryAt = 0
	}
	c.down.Store(true)
	c.mu.Unlock()
	if !was {
		c.logger.Warn("polite: shared store unreachable; each scope falls back to its share of the fleet", "scope", scope, "err", err)
	}
}

// ok marks the store up after a call on scope succeeded, and gives back
// the leases owed since it failed.
func (c *Client) ok(scope string) {
	if !c.down.Load() {
		return // the usual case: no lock on the send's path
	}
	c.mu.Lock()
	was := c.down.Swap(false)
	c.tryAt = 0
	if was {
		c.backAt.Store(int64(max(c.now(), 1)))
	}
	if was {
		c.flushLocked()
	}
	c.mu.Unlock()
	if was {
		c.logger.Info("polite: shared store back; the fleet's schedule and law are shared again", "scope", scope)
	}
}

// giveBackOwed gives the leases owed back now, off the caller's path,
// unless the store is down (they go back when it answers again).
func (c *Client) giveBackOwed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down.Load() {
		c.flushLocked()
	}
}

// flushLocked starts the goroutine that gives the owed leases back, if
// there are any and none runs. Called with c.mu held.
func (c *Client) flushLocked() {
	if len(c.owed) > 0 && !c.flushing && !c.closed {
		c.flushing = true
		c.flushes.Add(1)
		go c.flush()
	}
}

// keep keeps a lease alive while it is held (a long download): a timer
// renews it every third of its life, with no goroutine between renewals.
func (c *Client) keep(scope, lease string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return // not renewed after Close: it expires there by itself
	}
	var t *time.Timer
	t = time.AfterFunc(c.ttl/3, func() {
		// renewed even while the store is down (off the sends' path, one
		// bounded call a third of a life): a store that failed one call
		// keeps the leases of the sends under way, and the first renewal
		// it answers shares it again
		start := c.now()
		ctx, cancel := context.WithTimeout(c.life, storeTimeout)
		err := c.store.Renew(ctx, scope, c.process, []string{lease}, c.ttl)
		cancel()
		switch {
		case err == nil:
			c.ok(scope)
		case c.life.Err() != nil: // closed meanwhile
		case !c.down.Load():
			c.failed(scope, err)
		}
		c.mu.Lock()
		if c.leases[lease].renew == t {
			// a third of the life from when this renewal started, not
			// from when its call ended: a slow call does not push the
			// next one past the lease's end
			t.Reset(max(c.ttl/3-(c.now()-start), 0))
		}
		c.mu.Unlock()
	})
	c.leases[lease] = heldLease{scope, t}
}

// drop stops renewing a lease given back.
func (c *Client) drop(lease string) {
	if lease == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.leases[lease]; ok {
		h.renew.Stop()
		delete(c.leases, lease)
	}
}

// Close stops renewing, gives every lease held back and ends the
// subscription to the store's pauses.
func (c *Client) Close() {
	c.shut.Store(true)
	c.mu.Lock()
	c.closed = true
	held := c.leases
	c.leases = map[string]heldLease{}
	c.mu.Unlock()
	c.stop() // a goroutine giving owed leases back stops: Close gives them
	c.flushes.Wait()
	c.mu.Lock()
	owed := c.owed
	c.owed = nil
	c.mu.Unlock()
	// one bound for all: a store that does not answer holds Close a
	// second, whatever the leases (they expire there by themselves)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for l, h := range held {
		h.renew.Stop()
		if ctx.Err() == nil {
			_, _ = c.store.Return(ctx, fleet.Return{Scope: h.scope, Process: c.process, Lease: l})
		}
	}
	for _, o := range owed {
		if ctx.Err() != nil || c.now()-o.at > c.ttl {
			continue
		}
		_, _ = c.store.Return(ctx, fleet.Return{Scope: o.scope, Process: c.process, Lease: o.lease})
	}
	if c.unsubscribe != nil {
		c.unsubscribe()
	}
}

// sleep waits d, or until ctx ends.
// maxWait is the longest a send of ctx waits for its slot: maxPause, or
// half the time ctx's deadline leaves when that is less (the other half
// for the request itself). A store then neither grants nor takes a slot
// further away. A slot granted past the deadline, or so near it that the
// request had no time left, was given back unused, and a slot given back
// is lost to the whole fleet (the schedule does not take it back): each
// pushed the schedule further out, until every slot was past every send's
// deadline and the fleet sent nothing (two processes with 3-s deadlines at
// 2/s: slots 41 s away, 0 sends a second).
func maxWait(ctx context.Context, maxPause time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(min(maxPause, time.Until(dl)/2), time.Nanosecond)
	}
	return maxPause
}

// pastDeadline is the error of a wait of d for a slot that maxWait would
// not take (wrapping context.DeadlineExceeded), or nil: the send fails at
// once, as a local wait past its deadline does.
func pastDeadline(ctx context.Context, d time.Duration) error {
	if _, ok := ctx.Deadline(); ok && d > maxWait(ctx, d) {
		return fmt.Errorf("polite: the fleet's slot would leave the send less than half the time to its context deadline: %w", context.DeadlineExceeded)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
