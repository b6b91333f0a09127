package polite

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/fleetclient"
	"github.com/colly-polite/polite/internal/law"
)

// The fleet, layered over the core: with a Store (Config.Store), a
// fleetclient.Client takes each send's turn in the fleet before it goes
// (Controller.acquire) and tells the fleet what its answer decided after
// (Controller.finish). What the client asks of a scope it asks through
// fleetScope, over the scope's core methods and its fleet view; the core
// knows nothing of the fleet.

// newFleet is the controller's fleet client over st.Store, its leases
// short-lived and renewed while held (fleetclient.DefaultTTL).
func newFleet(st *settings, now func() time.Duration) *fleetclient.Client {
	return fleetclient.New(st.Store, fleetclient.Config{MaxPause: st.MaxPause, Logger: logger(st), Now: now})
}

// scopeFleet is a scope's view of the fleet. Guarded by scope.mu.
type scopeFleet struct {
	version uint64
	live    int
	heard   bool       // the store answered for this scope
	shared  law.Shared // what was last adopted or sent to be committed
	// seed is the fleet's state as last adopted or committed, encoded: what
	// a store that lost the scope's state is seeded with (nil until there
	// is one). A state sent while the store is down is never committed,
	// and never a seed.
	seed []byte
}

// fleetView is the scope's fleet state, created on first use. Called with
// s.mu held.
func (s *scope) fleetView() *scopeFleet {
	if s.fl == nil {
		s.fl = &scopeFleet{live: 1}
	}
	return s.fl
}

// notified adopts a pause another collector shared.
func (c *Controller) notified(key string, pause time.Duration, reason fleet.Reason) {
	c.mu.RLock()
	s := c.scopes[key]
	c.mu.RUnlock()
	if s == nil {
		return
	}
	s.fleetTransition(c, key, func(now time.Duration) { s.adoptPause(now, pause, pauseKind(reason), c.st) })
}

// adoptPause takes a pause of d from now that the fleet shared, with a
// jitter of its own. Called with s.mu held.
func (s *scope) adoptPause(now, d time.Duration, reason pauseKind, st *settings) {
	if s.core.adoptPause(now, now+d, reason, st) {
		s.queue.nudgeHead()
	}
}

// fleetScope is one scope as the fleet client sees it.
type fleetScope struct {
	c   *Controller
	key string
	s   *scope
}

var _ fleetclient.Local = fleetScope{}

// Ask implements fleetclient.Local.
func (f fleetScope) Ask(now time.Duration) fleetclient.Ask {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := s.fleetView()
	// a store that has lost the scope's state (a restart, an eviction) is
	// seeded with the fleet's as this process last shared it, not with
	// this process's own, which ran on its share while the store was away;
	// without a fleet state yet, this process's own seeds an empty store
	a := fleetclient.Ask{Rate: s.core.fleetRate(), Ceiling: s.core.configured(), Limit: s.core.limit(), Version: sf.version, Seed: sf.seed}
	if a.Seed == nil {
		a.Seed = encodeShared(s.core.shared(now))
	}
	return a
}

// Rate implements fleetclient.Local.
func (f fleetScope) Rate() float64 {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.s.core.fleetRate()
}

// Granted implements fleetclient.Local: a transition of the decision log.
func (f fleetScope) Granted(state []byte, version uint64, live int, ceiling float64, rejoining bool) {
	s := f.s
	s.fleetTransition(f.c, f.key, func(now time.Duration) {
		s.core.setFleetCeiling(now, ceiling)
		sf := s.fleetView()
		if state != nil {
			s.adoptShared(now, state, version)
		} else {
			sf.version = version
		}
		sf.live, sf.heard = live, true
		for seen := f.c.fleetLive.Load(); int64(live) > seen && !f.c.fleetLive.CompareAndSwap(seen, int64(live)); {
			seen = f.c.fleetLive.Load()
		}
		s.core.setLone(now, 0)
		if !rejoining {
			s.core.setShare(now, 1)
		} else {
			s.core.rejoin(now)
		}
	})
}

// Random implements fleetclient.Local: the scope's seeded source.
func (f fleetScope) Random() float64 {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.s.core.random()
}

// Alone implements fleetclient.Local: the scope runs on its local share of
// the fleet, the rate last known divided by the processes seen on it, a
// transition of the decision log when the rate moves. The concurrency limit is
// not divided: the rate bounds the sends. A scope the store never answered
// for takes the most processes any other scope's answer counted; if the
// store never answered at all, the fleet's size is unknown, and the scope
// keeps to its rule's initial rate (Rule.InitialRate, 2/s by default) until
// it does: each process of a fleet that started with its store down would
// otherwise search the host's capacity on its own, at its full rate.
func (f fleetScope) Alone() bool {
	var changed bool
	s := f.s
	s.fleetTransition(f.c, f.key, func(now time.Duration) {
		sf := s.fleetView()
		live := sf.live
		switch {
		case !sf.heard:
			seen := f.c.fleetLive.Load()
			live = max(live, int(seen))
			lone := 0.0
			if seen == 0 {
				lone = s.core.rule.InitialRate
			}
			s.core.setLone(now, lone)
		case s.core.share() == 1:
			// going alone: the fleet's rate stays where it was last
			// shared. A process sees only its share's answers, and a
			// rise on them assumes the others rise too: each law's slow
			// start or probes, unshared, took a fleet from 4/s at the
			// fault to 193/s at its end
			s.core.setLone(now, s.core.fleetRate())
		}
		was := s.core.setShare(now, 1/float64(max(live, 1)))
		changed = live > 1 && (was == 0 || was == 1)
	})
	return changed
}

// Waited implements fleetclient.Local.
func (f fleetScope) Waited(now time.Duration) bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.s.core.paused(now)
}

// Settled implements fleetclient.Local: a transition of the decision log.
func (f fleetScope) Settled(st fleet.Settlement, sent []byte) (again []byte, version uint64) {
	s := f.s
	s.fleetTransition(f.c, f.key, func(now time.Duration) {
		sf := s.fleetView()
		if st.Committed {
			sf.version, sf.seed = st.Version, sent
		} else if st.State != nil {
			if st.Version != sf.version {
				s.adoptShared(now, st.State, st.Version)
			}
			if sent != nil {
				// a commit refused: what the fleet has not seen (a
				// decrease kept, here or when a lease brought the
				// fleet's state before this return) is committed at
				// once on the fleet's version
				again, version = s.sharedChange(now)
			}
		}
		if st.Paused > 0 {
			s.adoptPause(now, st.Paused, pauseKind(st.Reason), f.c.st)
		}
		s.core.fleetAccepted(now, st.Accepted)
	})
	return again, version
}

// unseenDecrease reports whether mine, this process's law state, holds a
// decrease that theirs, the fleet's, has not seen: a later rate epoch
// (each decrease starts one), and a rate lower than theirs and than the
// fleet's as this process last adopted or committed it (last, encoded; a
// refusal starts an epoch too, and cuts nothing). Not the state last sent
// to be committed: that is the decrease itself, once its return is sent.
func unseenDecrease(mine law.Shared, last []byte, theirs law.Shared) bool {
	before, ok := decodeShared(last)
	return mine.Epoch > theirs.Epoch && mine.Rate < theirs.Rate && (!ok || mine.Rate < before.Rate)
}

// fleetReport is what record decided, for the fleet: the lease back, a
// pause to share, the law's shared part if it changed, whether the answer
// was accepted (the fleet's accepted rate).
func fleetReport(lease string, r reaction, now time.Duration, changed []byte, version uint64, accepted bool) fleetclient.Report {
	rep := fleetclient.Report{Lease: lease, Reason: fleet.Reason(r.shareReason), State: changed, Version: version, Accepted: accepted}
	if r.share > now {
		rep.Pause = r.share - now
	}
	return rep
}

// adoptShared takes the fleet's law state, from a lease granted or a
// return settled. If this process's law holds a decrease the fleet has not
// seen (its commit not made yet, or refused because another process
// committed first what it decided before that evidence: a doubling), the
// throttle is applied to the fleet's state, at the fleet's rate
// (law.Rethrottle), and the result is committed on the fleet's version:
// at once after a return (Settled), else at the next. Adopted as it was,
// a 429 at 8/s was lost to the fleet's doubling to 16, and the fleet's
// slow start went on to 32/s on a window of 5/s; kept as it was, the cut
// read the capacity from a rate the fleet had left (3.88/s). Called with
// s.mu held.
func (s *scope) adoptShared(now time.Duration, state []byte, version uint64) {
	sf := s.fleetView()
	sh, ok := decodeShared(state)
	sf.version = version
	if !ok {
		return
	}
	if unseenDecrease(s.core.shared(now), sf.seed, sh) {
		s.core.adoptThrottled(now, sh)
		sf.shared = sh // the base the throttle's cut is committed on
		sf.seed = state
		return
	}
	sf.shared = s.core.adoptShared(now, sh)
	sf.seed = encodeShared(sf.shared)
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
	// (the relative times age by themselves: no change)
	cur.NextProbe, last.NextProbe = 0, 0
	cur.SinceDecrease, last.SinceDecrease = 0, 0
	cur.Limit, last.Limit = 0, 0
	if cur == last {
		return nil, sf.version
	}
	sf.shared = full
	return encodeShared(full), sf.version
}

// Close gives back what the controller holds in a shared fleet.Store
// (leases on concurrency slots) and stops renewing them, within a second
// whatever the store does. Without a Store it does nothing. The controller
// still works after Close, on its own: at its share of the fleet, as when
// the store is down, asking the store for no lease (one would never be
// renewed). Safe for concurrent use.
func (c *Controller) Close() error {
	if c.fleet != nil {
		c.fleet.Close()
	}
	return nil
}

// The law's shared part travels as 62 bytes: a version byte, the rate,
// the estimate, the search's top and the estimate a failed probe replaced
// (float64s), the probe's step, the step down and the limit (float32s:
// fractions and whole numbers), two uint32 epochs, the phase, and the
// next probe and the last decrease's age in milliseconds, rounded up
// (int32s, saturated: 24 days). At most 64 bytes: Redis keeps a hash's
// values of 64 bytes or less in its compact encoding
// (hash-max-listpack-value), and a longer state cost 192 B more per idle
// scope (82 bytes: 392 B for the law's key instead of 200).
const sharedVersion = 4

const sharedLen = 1 + 4*8 + 3*4 + 2*4 + 1 + 2*4

func encodeShared(s law.Shared) []byte {
	b := make([]byte, 0, sharedLen)
	b = append(b, sharedVersion)
	for _, f := range []float64{s.Rate, s.Estimate, s.Top, s.Proven} {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	}
	for _, f := range []float64{s.Step, s.DownStep, s.Limit} {
		b = binary.BigEndian.AppendUint32(b, math.Float32bits(float32(f)))
	}
	b = binary.BigEndian.AppendUint32(b, s.Epoch)
	b = binary.BigEndian.AppendUint32(b, s.CEpoch)
	b = append(b, byte(s.Phase))
	b = binary.BigEndian.AppendUint32(b, uint32(millis(s.NextProbe)))
	return binary.BigEndian.AppendUint32(b, uint32(millis(s.SinceDecrease)))
}

// millis is d in whole milliseconds, rounded up (a decrease 0.3 ms ago
// is one, not none: 0 means none; a probe is never earlier than it was
// due), saturated to an int32.
func millis(d time.Duration) int32 {
	ms := d.Milliseconds()
	if d%time.Millisecond > 0 {
		ms++
	}
	return int32(min(max(ms, math.MinInt32), math.MaxInt32))
}

// decodeShared reads what encodeShared wrote; anything else (a store's
// value is untrusted) is refused.
func decodeShared(b []byte) (law.Shared, bool) {
	if len(b) != sharedLen || b[0] != sharedVersion {
		return law.Shared{}, false
	}
	var s law.Shared
	for i, p := range []*float64{&s.Rate, &s.Estimate, &s.Top, &s.Proven} {
		*p = math.Float64frombits(binary.BigEndian.Uint64(b[1+8*i:]))
		if math.IsNaN(*p) {
			return law.Shared{}, false
		}
	}
	const f32 = 1 + 4*8 // past the version and the float64s
	for i, p := range []*float64{&s.Step, &s.DownStep, &s.Limit} {
		*p = float64(math.Float32frombits(binary.BigEndian.Uint32(b[f32+4*i:])))
		if math.IsNaN(*p) {
			return law.Shared{}, false
		}
	}
	const f = f32 + 3*4 // past the float32s
	s.Epoch = binary.BigEndian.Uint32(b[f:])
	s.CEpoch = binary.BigEndian.Uint32(b[f+4:])
	s.Phase = law.Phase(b[f+8])
	s.NextProbe = time.Duration(int32(binary.BigEndian.Uint32(b[f+9:]))) * time.Millisecond
	s.SinceDecrease = time.Duration(int32(binary.BigEndian.Uint32(b[f+13:]))) * time.Millisecond
	return s, true
}
