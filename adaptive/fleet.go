package adaptive

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/adaptive/internal/law"
)

// fleet is the controller's side of a shared Store: one round trip to the
// store before each send (the lease, the schedule's slot, the fleet's law),
// one after (the lease back, the pause and the law decided here). When the
// store fails, the controller falls back to a conservative local share of
// what it last knew of the fleet (its rate divided by the processes seen;
// the concurrency limit stays this process's own, under that rate), says
// so once, and comes back by itself.
type fleet struct {
	store   Store
	process string
	ttl     time.Duration
	logger  *slog.Logger

	now     func() time.Duration // the controller's clock
	mu      sync.Mutex
	down    atomic.Bool          // the last call failed (read without mu on every send; written with mu held)
	retryAt time.Duration        // guarded by mu: while down, the store is not asked before then
	backoff time.Duration        // guarded by mu: the wait before the next try while down
	leases  map[string]heldLease // guarded by mu: the leases held
	// unsubscribe ends the Notifier's subscription, if the store is one
	unsubscribe func()
}

type heldLease struct {
	scope string
	renew *time.Timer
}

// scopeFleet is a scope's view of the fleet. Guarded by scope.mu.
type scopeFleet struct {
	version uint64
	live    int
	shared  law.Shared // what was last adopted or committed
	// busyUntil: the fleet's concurrency was in use; one send of this
	// process asks again then, the others wait for it
	busyUntil time.Duration
}

// notified adopts a pause another collector shared.
func (c *Controller) notified(key string, pause time.Duration, reason Reason) {
	c.mu.RLock()
	s := c.scopes[key]
	c.mu.RUnlock()
	if s == nil {
		return
	}
	s.fleetStep(c, key, func(now time.Duration) { s.adoptPause(now, pause, reason, c.st) })
}

// adoptPause takes a pause of d from now that the fleet shared, with a
// jitter of its own. Called with s.mu held.
func (s *scope) adoptPause(now, d time.Duration, reason Reason, st *settings) {
	if s.core.adoptPause(now, now+d, reason, st) {
		s.line.nudgeHead()
	}
}

// While the store is down it is asked again after storeRetryMin, then
// twice as long each time it fails again, up to storeRetryMax: in between,
// sends do not wait on a store that does not answer (at most one send per
// try waits, storeTimeout at most), and a store back is shared again
// within storeRetryMax. Pauses are not shared while a process runs on its
// own: the bound keeps that short.
const (
	storeRetryMin = time.Second
	storeRetryMax = 4 * time.Second
)

func newFleet(st *settings, now func() time.Duration) *fleet {
	ttl := time.Minute
	if st.AttemptTimeout > 0 {
		ttl = st.AttemptTimeout + 10*time.Second
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	l := logger(st)
	return &fleet{
		store:   st.Store,
		process: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:])),
		ttl:     ttl,
		logger:  l,
		now:     now,
		leases:  map[string]heldLease{},
	}
}

// errAgain: the send cannot go as granted (a pause voided its slot, the
// share changed); the caller gives the local slot back and asks again.
var errAgain = errors.New("adaptive: fleet slot void")

// errBusy: the fleet's concurrency is in use; the caller waited, gives
// the local slot back and asks again.
var errBusy = errors.New("adaptive: fleet busy")

// busyWait is how long to wait before asking again when the fleet's
// concurrency is in use, the busy-th time in a row for this send: a send
// interval at the fleet's rate (a lease comes back no faster than sends
// go), doubling with each busy answer up to eight, at most a second, with
// a jitter so that the processes waiting do not ask together. One send
// per process and scope asks; the process's others wait for its answer.
func busyWait(floor time.Duration, rate float64, busy int, rnd float64) time.Duration {
	d := time.Duration(float64(interval(rate)) * float64(uint(1)<<min(busy, 3)))
	d = min(max(d, 10*time.Millisecond), time.Second)
	return max(floor, time.Duration(float64(d)*(0.5+rnd)))
}

// acquire asks the store for a send of grant g on scope s: it adopts the
// fleet's law, waits for the slot, and returns the lease ("" when the store
// is down: the local view decides). On errAgain the caller gives the local
// slot back and asks again.
func (c *Controller) fleetAcquire(ctx context.Context, key string, s *scope, g *grant, busy int) (string, error) {
	f := c.fleet
	if f.skip() {
		// the store is down: the local view decides, at this process's
		// share; a slot taken before the share applied is taken again
		if c.fleetShare(key, s) {
			return "", errAgain
		}
		return "", nil
	}
	s.mu.Lock()
	a := Acquisition{Scope: key, Process: f.process, Rate: s.core.fleetRate(), Limit: s.core.limit(), LeaseTTL: f.ttl}
	sf := s.fleetView()
	if now := c.now(); sf.busyUntil > now {
		// another send of this process found the fleet busy and asks
		// again then: wait for that (and a little more: it asks first)
		// rather than ask too
		wait := sf.busyUntil - now + time.Duration(s.core.random()*float64(interval(a.Rate)))
		s.mu.Unlock()
		if err := sleepFor(ctx, wait); err != nil {
			return "", err
		}
		return "", errBusy
	}
	a.Version = sf.version
	if sf.version == 0 {
		a.Seed = encodeShared(s.core.shared(c.now()))
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	grant, err := f.store.Acquire(cctx, a)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		f.failed(key, err)
		c.fleetShare(key, s)
		return "", errAgain // the slot again, at this process's share
	}
	f.ok(key)
	s.fleetStep(c, key, func(now time.Duration) {
		if grant.State != nil {
			s.adoptShared(now, grant.State, grant.Version)
		} else {
			sf.version = grant.Version
		}
		sf.live = max(grant.Live, 1)
		s.core.setShare(now, 1)
	})
	now := c.now()
	if grant.Lease == "" {
		// the fleet's concurrency is in use: this send asks again later,
		// the process's others wait for it
		s.mu.Lock()
		wait := busyWait(grant.Wait, a.Rate, busy, s.core.random()) // the scope's seeded source
		sf.busyUntil = max(sf.busyUntil, now+wait)
		s.mu.Unlock()
		if err := sleepFor(ctx, wait); err != nil {
			return "", err
		}
		return "", errBusy
	}
	if grant.Wait > c.st.MaxPause {
		c.fleetGiveBack(key, s, grant.Lease)
		reason := grant.Reason
		if reason == ReasonNone {
			reason = ReasonRate
		}
		return "", &ScopeError{Scope: key, Reason: reason, PausedUntil: c.at(now + grant.Wait), Err: ErrPaused}
	}
	if grant.InUse {
		// the fleet's concurrency is all in use with this send: the limit
		// may grow on its success (a process's own in-flight count is only
		// its part of the fleet's)
		g.t.law.InUse = true
	}
	f.hold(key, grant.Lease)
	if err := sleepFor(ctx, grant.Wait); err != nil {
		c.fleetGiveBack(key, s, grant.Lease)
		return "", err
	}
	// a pause shared while this send waited for its slot voids the slot
	// (the Notifier told this scope's gate): wait for the pause instead
	now = c.now()
	s.mu.Lock()
	paused := s.core.paused(now)
	if grant.Wait > 0 && grant.Paused == 0 && !g.t.law.Paced {
		// the fleet's schedule held it back: the rate is the bottleneck
		s.core.pacedElsewhere()
		g.t.law.Paced = true
	}
	s.mu.Unlock()
	if paused || (grant.Wait > 0 && f.isDown()) {
		// (a slot of a schedule whose store failed since is void too:
		// this process is on its share now, and the slot is taken again
		// at it)
		c.fleetGiveBack(key, s, grant.Lease)
		return "", errAgain
	}
	g.t.law.Sent = now // sent now, not when the local slot was granted
	return grant.Lease, nil
}

// fleetFinish publishes what record decided: the lease back, a pause to
// share, the law's shared part if it changed, whether the answer was
// accepted (the fleet's accepted rate). It adopts the fleet's answer.
func (c *Controller) fleetFinish(key string, s *scope, lease string, r reaction, now time.Duration, changed []byte, version uint64, accepted bool) {
	rel := Release{Scope: key, Lease: lease, Reason: r.shareReason, State: changed, Version: version, Accepted: accepted}
	if r.share > now {
		rel.Pause = r.share - now
	}
	if lease == "" && rel.Pause == 0 && changed == nil {
		return
	}
	c.fleetRelease(s, rel)
}

// fleetGiveBack gives a lease back unused.
func (c *Controller) fleetGiveBack(key string, s *scope, lease string) {
	c.fleetRelease(s, Release{Scope: key, Lease: lease})
}

func (c *Controller) fleetRelease(s *scope, rel Release) {
	f := c.fleet
	key := rel.Scope
	rel.Process = f.process
	f.drop(key, rel.Lease)
	if f.skip() {
		return // the store is down: the lease expires there by itself
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	st, err := f.store.Release(ctx, rel)
	cancel()
	if err != nil {
		f.failed(key, err)
		c.fleetShare(key, s)
		return
	}
	f.ok(key)
	s.fleetStep(c, key, func(now time.Duration) {
		sf := s.fleetView()
		if st.Committed {
			sf.version = st.Version
		} else if st.State != nil && st.Version != sf.version {
			s.adoptShared(now, st.State, st.Version)
		}
		if st.Paused > 0 {
			s.adoptPause(now, st.Paused, st.Reason, c.st)
		}
		s.core.fleetAccepted(now, st.Accepted)
	})
}

// fleetShare puts scope s on its local share of the fleet: the rate last
// known, divided by the processes seen on it, a step of the decision log
// when the rate moves. The concurrency limit is not divided: the rate
// bounds the sends. It reports whether the share was not in force before.
func (c *Controller) fleetShare(key string, s *scope) bool {
	var changed bool
	s.fleetStep(c, key, func(now time.Duration) {
		live := s.fleetView().live
		was := s.core.setShare(now, 1/float64(max(live, 1)))
		changed = live > 1 && (was == 0 || was == 1)
	})
	return changed
}

// fleetView is the scope's fleet state, created on first use. Called with
// s.mu held.
func (s *scope) fleetView() *scopeFleet {
	if s.fl == nil {
		s.fl = &scopeFleet{live: 1}
	}
	return s.fl
}

// adoptShared takes the fleet's law state. Called with s.mu held.
func (s *scope) adoptShared(now time.Duration, state []byte, version uint64) {
	sf := s.fleetView()
	sh, ok := decodeShared(state)
	sf.version = version
	if !ok {
		return
	}
	sf.shared = s.core.adoptShared(now, sh)
}

// sharedChange returns the law's shared part encoded if it changed since
// it was last adopted or committed, and the version it derives from.
// Called with s.mu held.
func (s *scope) sharedChange(now time.Duration) ([]byte, uint64) {
	sf := s.fleetView()
	full := s.core.shared(now)
	cur, last := full, sf.shared
	// the limit's additive increases are each process's own (the store
	// bounds what each may hold): only a decrease (a new concurrency
	// epoch) is the fleet's business
	cur.NextProbe, last.NextProbe = 0, 0
	cur.Limit, last.Limit = 0, 0
	if cur == last {
		return nil, sf.version
	}
	sf.shared = full
	return encodeShared(full), sf.version
}

// skip reports whether the store is down and not yet due for another try.
func (f *fleet) skip() bool {
	if !f.down.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down.Load() && f.now() < f.retryAt
}

// isDown reports whether the last call to the store failed.
func (f *fleet) isDown() bool { return f.down.Load() }

// failed marks the store down after a failed call on scope (saying so
// once) and backs off the next try. Calls that were under way together
// fail together: only a try made when one was due backs off further.
func (f *fleet) failed(scope string, err error) {
	f.mu.Lock()
	was, now := f.down.Load(), f.now()
	switch {
	case !was:
		f.backoff, f.retryAt = storeRetryMin, now+storeRetryMin
	case now >= f.retryAt:
		f.backoff = min(2*f.backoff, storeRetryMax)
		f.retryAt = now + f.backoff
	}
	f.down.Store(true)
	f.mu.Unlock()
	if !was {
		f.logger.Warn("adaptive: shared store unreachable; each scope falls back to its share of the fleet", "scope", scope, "err", err)
	}
}

// ok marks the store up after a call on scope succeeded.
func (f *fleet) ok(scope string) {
	if !f.down.Load() {
		return // the usual case: no lock on the send's path
	}
	f.mu.Lock()
	was := f.down.Swap(false)
	f.mu.Unlock()
	if was {
		f.logger.Info("adaptive: shared store back; the fleet's schedule and law are shared again", "scope", scope)
	}
}

// hold keeps a lease alive while it is held (a long download): a timer
// renews it every third of its life, with no goroutine between renewals.
func (f *fleet) hold(scope, lease string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var t *time.Timer
	t = time.AfterFunc(f.ttl/3, func() {
		if !f.skip() {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			err := f.store.Renew(ctx, scope, f.process, []string{lease}, f.ttl)
			cancel()
			if err != nil {
				f.failed(scope, err)
			} else {
				f.ok(scope)
			}
		}
		f.mu.Lock()
		if f.leases[lease].renew == t {
			t.Reset(f.ttl / 3)
		}
		f.mu.Unlock()
	})
	f.leases[lease] = heldLease{scope, t}
}

// drop stops renewing a lease given back.
func (f *fleet) drop(scope, lease string) {
	if lease == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.leases[lease]; ok {
		h.renew.Stop()
		delete(f.leases, lease)
	}
}

// close stops renewing and gives every lease held back.
func (f *fleet) close() {
	f.mu.Lock()
	held := f.leases
	f.leases = map[string]heldLease{}
	f.mu.Unlock()
	// one bound for all: a store that does not answer holds Close a
	// second, whatever the leases (they expire there by themselves)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for l, h := range held {
		h.renew.Stop()
		if ctx.Err() == nil {
			_, _ = f.store.Release(ctx, Release{Scope: h.scope, Process: f.process, Lease: l})
		}
	}
}

// Close gives back what the controller holds in a shared Store (leases on
// concurrency slots) and stops renewing them. Without a Store it does
// nothing. The controller still works after Close, on its own.
func (c *Controller) Close() error {
	if c.fleet != nil {
		c.fleet.close()
		if c.fleet.unsubscribe != nil {
			c.fleet.unsubscribe()
		}
	}
	return nil
}

// sleepFor waits d, or until ctx ends.
func sleepFor(ctx context.Context, d time.Duration) error {
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

// The law's shared part travels as 61 bytes: a version byte, five
// float64s, two uint32s, the phase and the next probe in nanoseconds.
const sharedLen = 1 + 5*8 + 2*4 + 1 + 8

func encodeShared(s law.Shared) []byte {
	b := make([]byte, 0, sharedLen)
	b = append(b, 1)
	for _, f := range []float64{s.Rate, s.Estimate, s.Step, s.DownStep, s.Limit} {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	}
	b = binary.BigEndian.AppendUint32(b, s.Epoch)
	b = binary.BigEndian.AppendUint32(b, s.CEpoch)
	b = append(b, byte(s.Phase))
	return binary.BigEndian.AppendUint64(b, uint64(s.NextProbe))
}

// decodeShared reads what encodeShared wrote; anything else (a store's
// value is untrusted) is refused.
func decodeShared(b []byte) (law.Shared, bool) {
	if len(b) != sharedLen || b[0] != 1 {
		return law.Shared{}, false
	}
	var s law.Shared
	fs := []*float64{&s.Rate, &s.Estimate, &s.Step, &s.DownStep, &s.Limit}
	for i, p := range fs {
		*p = math.Float64frombits(binary.BigEndian.Uint64(b[1+8*i:]))
		if math.IsNaN(*p) {
			return law.Shared{}, false
		}
	}
	s.Epoch = binary.BigEndian.Uint32(b[41:])
	s.CEpoch = binary.BigEndian.Uint32(b[45:])
	s.Phase = law.Phase(b[49])
	s.NextProbe = time.Duration(binary.BigEndian.Uint64(b[50:]))
	return s, true
}
