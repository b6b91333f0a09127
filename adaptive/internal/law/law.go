// Package law is the control law of one scope: it decides the pacing rate
// and the concurrency limit from the answers to what was sent.
//
//	var l law.Law
//	l.Init(&cfg, now)
//	t := l.Sent(now, rate, inflight, limitInUse) // a send goes out
//	l.RoundTrip(rtt)                             // its answer comes back
//	v := l.Observe(later, t, law.Throttled)
//	rate, limit := l.Rate(), l.Limit()
//
// A Law never sleeps, locks or reads a clock: every method takes now, the
// time since an origin of the caller's choosing (monotonic). Not safe for
// concurrent use: the caller's lock guards it. See README.md in this
// directory for the law itself.
package law

import (
	"math"
	"time"
)

// Config is what the law needs of the rule in force. The caller keeps it
// alive and unchanged while the Law uses it.
type Config struct {
	InitialRate      float64 // where slow start begins, req/s
	MinRate          float64 // the floor of the rate, req/s
	StartConcurrency int
	MinConcurrency   int
	MaxConcurrency   int
}

// Constants of the law. None is tuned to a scenario; each says why.
const (
	margin       = 0.03 // how far under the estimate the rate sits
	firstStep    = 0.03 // first probe above the estimate
	probeBudget  = 0.01 // share of time failed probes may cost in pauses
	minProbeGap  = 10 * time.Second
	ringSlots    = 8 // accepted-rate ring: 8 slots of 125 ms, the last second
	slotDur      = 125 * time.Millisecond
	measureSlots = 8   // the last second
	bigDrop      = 0.7 // a measurement under this share of the estimate is a capacity drop
	probeRounds  = 3   // clean rounds a probe must hold before the estimate moves
)

// Phase is where the rate search stands.
type Phase uint8

// Phases.
const (
	SlowStart Phase = iota // no estimate yet: the rate doubles per clean round
	Steady                 // at the estimate, waiting for the next probe
	Probing                // a round above the estimate
)

func (p Phase) String() string {
	switch p {
	case Steady:
		return "steady"
	case Probing:
		return "probing"
	}
	return "slow-start"
}

// Signal is what one answer says about load.
type Signal uint8

// Signals. Blocks and neutral answers say nothing about load: they never
// reach the law.
const (
	Success    Signal = iota // accepted
	Throttled                // 429: a rate signal
	Overloaded               // 503 / 502 / 504, timeouts, resets: a concurrency signal
)

// Ticket is what the law needs to judge the answer to one send. It is a
// value: taking one allocates nothing.
type Ticket struct {
	Sent     time.Duration
	Rate     float64 // the pacing rate in force when it was sent
	Epoch    uint32  // rate decreases before it was sent
	CEpoch   uint32  // concurrency decreases before it was sent
	InFlight int32   // requests in flight when it was sent, itself included
	InUse    bool    // the concurrency limit was in use when it was sent
}

// Verdict is what the law made of one answer.
type Verdict struct {
	// Fresh: the signal is for a request sent after the last decrease of
	// its kind. The others are the tail of a burst already answered.
	Fresh bool
	// Decreased: the law cut the rate (throttle) or the limit (overload).
	Decreased bool
}

// Law is the control state of one scope. The zero value is not usable:
// call Init.
type Law struct {
	cfg *Config

	limit      float64 // concurrency limit
	rate       float64 // pacing rate, req/s (before ceilings)
	est        float64 // capacity estimate, 0 = unknown
	step       float64 // the next probe's step above the estimate
	downStep   float64 // the last small step down
	ceil       float64 // the lowest ceiling in force, 0 = none
	nextProbe  time.Duration
	lastDecr   time.Duration
	lastPause  time.Duration
	roundStart time.Duration
	holdUntil  time.Duration
	srtt       time.Duration
	ringTick   int64   // slot number of ring's newest slot
	ssthresh   float32 // slow start of the limit ends here (whole numbers)
	epoch      uint32  // rate decreases so far
	cepoch     uint32  // concurrency decreases so far
	roundEpoch uint32
	overRow    uint16 // overloads in a row with no success between
	ph         Phase
	probeRds   uint8 // clean rounds the current probe has held
	fastProbe  bool
	roundBusy  bool // the pacer held a send back in this round
	roundBad   bool // a signal arrived for a request sent in this round
	// accepted answers by completion time, for the capacity measurement
	ring [ringSlots]uint16
}

// Init starts the law at now.
func (l *Law) Init(c *Config, now time.Duration) {
	*l = Law{
		cfg:        c,
		limit:      float64(c.StartConcurrency),
		ssthresh:   float32(c.MaxConcurrency),
		rate:       c.InitialRate,
		step:       firstStep,
		downStep:   margin,
		roundStart: now,
	}
}

// Rate is the pacing rate the law wants, req/s, never below MinRate (the
// caller applies ceilings).
func (l *Law) Rate() float64 { return math.Max(l.rate, l.cfg.MinRate) }

// Limit is the concurrency limit, at least 1.
func (l *Law) Limit() float64 { return l.limit }

// Estimate is the capacity estimate, req/s (0: not measured yet).
func (l *Law) Estimate() float64 { return l.est }

// RTT is the smoothed round trip to the response headers.
func (l *Law) RTT() time.Duration { return l.srtt }

// Phase is where the rate search stands.
func (l *Law) Phase() Phase { return l.ph }

// SetCeiling tells the law the lowest ceiling in force (0: none), so that
// slow start never doubles past it. The caller applies ceilings.
func (l *Law) SetCeiling(c float64) { l.ceil = c }

// Sent records a send at now at rate (the pacing rate in force), with
// inflight requests in flight (itself included) and the concurrency limit in
// use or not, and returns its ticket.
func (l *Law) Sent(now time.Duration, rate float64, inflight int, inUse bool) Ticket {
	return Ticket{Sent: now, Rate: rate, Epoch: l.epoch, CEpoch: l.cepoch, InFlight: int32(inflight), InUse: inUse}
}

// Held tells the law that the pacer held a send back at now: the rate was
// the bottleneck of this round (slow start and probes move only then).
func (l *Law) Held(now time.Duration) { l.roundBusy = true }

// RoundTrip folds the round trip of one answer (to its response headers)
// into the smoothed RTT that sizes the law's rounds.
func (l *Law) RoundTrip(rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	if l.srtt == 0 {
		l.srtt = rtt
		return
	}
	l.srtt += (rtt - l.srtt) / 8
}

// Fresh reports whether signal s for ticket t is fresh: sent after the last
// decrease of its kind (a throttle for the rate, an overload for the
// concurrency). The others are the tail of a burst already answered.
func (l *Law) Fresh(t Ticket, s Signal) bool {
	switch s {
	case Throttled:
		return t.Epoch == l.epoch
	case Overloaded:
		return t.CEpoch == l.cepoch
	}
	return true
}

// Observe feeds the law the answer to ticket t, of signal s, at now.
func (l *Law) Observe(now time.Duration, t Ticket, s Signal) Verdict {
	v := Verdict{Fresh: l.Fresh(t, s)}
	switch s {
	case Throttled:
		v.Decreased = l.onThrottle(now, t.Epoch, t.Rate)
	case Overloaded:
		v.Decreased = l.onOverload(t.CEpoch, int(t.InFlight))
	default:
		l.onSuccess(now, t.InUse)
	}
	return v
}

// Hold holds every increase until until (a 200 from a struggling origin is
// no proof of headroom). A later hold wins.
func (l *Law) Hold(until time.Duration) {
	if until > l.holdUntil {
		l.holdUntil = until
	}
}

// HeldUntil is when the hold on increases ends (0: none).
func (l *Law) HeldUntil() time.Duration { return l.holdUntil }

// Paused records a pause of d, from now until until, that a throttle cost:
// nothing is sent during it, and it sizes the interval between probes.
func (l *Law) Paused(now, until, d time.Duration) {
	l.lastPause = d
	if until > l.roundStart {
		l.roundStart = until
	}
	if next := now + l.probeGap(); next > l.nextProbe {
		l.nextProbe = next
	}
}

// Resumed: the scope resumes after its breaker closed or the user
// unparked it. The estimate (cut by every fresh throttle that opened the
// breaker) stands; no hold is left over.
func (l *Law) Resumed(now time.Duration) {
	l.holdUntil = 0
	l.newRound(now)
}

func (l *Law) newRound(now time.Duration) {
	l.roundStart, l.roundEpoch, l.roundBusy, l.roundBad = now, l.epoch, false, false
}

func (l *Law) roundLen() time.Duration { return max(time.Second, 2*l.srtt) }

func tick(now time.Duration) int64 { return int64(now / slotDur) }

// addAccepted counts one accepted answer at now.
func (l *Law) addAccepted(now time.Duration) {
	t := tick(now)
	l.advance(t)
	if c := &l.ring[t%ringSlots]; *c < math.MaxUint16 {
		*c++
	}
}

func (l *Law) advance(t int64) {
	if t <= l.ringTick {
		return
	}
	for i := int64(1); i <= min(t-l.ringTick, ringSlots); i++ {
		l.ring[(l.ringTick+i)%ringSlots] = 0
	}
	l.ringTick = t
}

// accepted is the accepted rate over the last second, req/s.
func (l *Law) accepted(now time.Duration) float64 {
	t := tick(now)
	l.advance(t)
	var n int
	for i := int64(0); i < measureSlots; i++ {
		n += int(l.ring[(t-i+ringSlots)%ringSlots])
	}
	// the newest slot is partly elapsed
	elapsed := time.Duration(measureSlots-1)*slotDur + now%slotDur
	return float64(n) / elapsed.Seconds()
}

func (l *Law) onSuccess(now time.Duration, inUse bool) {
	l.addAccepted(now)
	l.overRow = 0
	maxc := float64(l.cfg.MaxConcurrency)
	if inUse && now >= l.holdUntil && l.limit < maxc {
		if l.limit < float64(l.ssthresh) {
			l.limit++
		} else {
			l.limit += 1 / l.limit
		}
		l.limit = math.Min(l.limit, maxc)
	}
	l.endRound(now)
}

// endRound closes the current round when it has lasted long enough and
// applies the increase it earned.
func (l *Law) endRound(now time.Duration) {
	if now-l.roundStart < l.roundLen() {
		return
	}
	clean, busy := !l.roundBad && l.roundEpoch == l.epoch, l.roundBusy
	l.newRound(now)
	if !clean || now < l.holdUntil {
		return
	}
	switch l.ph {
	case SlowStart:
		if busy && (l.ceil == 0 || l.rate < l.ceil) {
			l.rate *= 2
			if l.ceil > 0 {
				l.rate = math.Min(l.rate, l.ceil)
			}
		}
	case Steady:
		if now >= l.nextProbe && busy {
			l.ph = Probing
			l.probeRds = 0
			l.rate = l.est * (1 + l.step)
		} else if l.rate < l.est {
			l.rate = l.est
		}
	case Probing:
		if busy && l.probeRds+1 < probeRounds {
			// a burst allowance flatters a short clean interval: hold
			// the probe rate for several rounds before believing it
			l.probeRds++
			return
		}
		l.probeRds = 0
		if busy {
			// the probe rate held for a whole round: the capacity is at
			// least that
			l.est *= 1 + l.step
			l.step = math.Min(l.step*2, 1)
			l.fastProbe = true
		}
		l.ph = Steady
		l.rate = l.est
		l.nextProbe = now + l.probeGap()
	}
}

// probeGap is the wait before the next probe. Clean probes are cheap, so
// after one (or after a large drop) the next comes after two rounds; a failed
// probe costs a pause, so after a throttle the gap keeps that cost under
// probeBudget of the time.
func (l *Law) probeGap() time.Duration {
	if l.fastProbe {
		return 2 * l.roundLen()
	}
	return max(minProbeGap, seconds(l.lastPause.Seconds()/probeBudget))
}

// onThrottle reacts to a throttle for a request sent in epoch at rate
// sentRate. It returns true when it decreased (a fresh signal), false for
// the tail of a burst already answered.
func (l *Law) onThrottle(now time.Duration, epoch uint32, sentRate float64) bool {
	l.roundBad = true
	if epoch != l.epoch {
		return false
	}
	a := l.accepted(now)
	fast := false // probe again soon: the estimate is a fresh lower bound
	switch {
	case l.est == 0:
		// slow start overshoots by at most 2x; the accepted rate can read
		// high when its second straddles two server windows, and the rate
		// just throttled is over the capacity whatever was measured
		l.est = math.Max(math.Min(a, sentRate), sentRate/2) * (1 - margin)
	case sentRate > l.est*(1+margin/2):
		// a probe above the estimate failed: the estimate stands, and the
		// next probe waits the long gap (a failed probe costs a pause)
	case a > 0 && a < l.est*bigDrop:
		// the capacity fell: the measurement is a lower bound of the new
		// one, so probe up again soon. (Nothing accepted in the last
		// second is no measurement: right after a pause nothing was sent.)
		l.est = math.Max(a, l.est/8)
		fast = true
	default:
		// a rate judged clean was throttled (a burst allowance flattered
		// it, or the capacity moved a little): a small step down. A
		// throttle that follows the last decrease within a few rounds says
		// that step was not enough: each such step grows by the margin.
		if now-l.lastDecr < 4*l.roundLen() {
			l.downStep = math.Min(l.downStep+margin, 0.5)
		} else {
			l.downStep = margin
		}
		l.est = math.Min(l.est, sentRate) * (1 - l.downStep)
	}
	l.lastDecr = now
	l.est = math.Max(l.est, l.cfg.MinRate)
	l.rate = l.est
	l.step = firstStep
	l.ph = Steady
	l.fastProbe = fast
	l.nextProbe = now + l.probeGap()
	l.epoch++
	l.newRound(now)
	return true
}

// onOverload reacts to an overload for a request sent in cepoch with
// inflight requests in flight (itself included).
func (l *Law) onOverload(cepoch uint32, inflight int) bool {
	if cepoch != l.cepoch {
		return false
	}
	if l.overRow < math.MaxUint16 {
		l.overRow++
	}
	nl := math.Min(l.limit, float64(inflight-1))
	if l.overRow > 1 {
		nl = math.Min(nl, l.limit/2)
	}
	l.limit = math.Max(math.Floor(nl), float64(l.cfg.MinConcurrency))
	l.ssthresh = float32(l.limit)
	l.cepoch++
	return true
}

// seconds converts seconds to a Duration, saturating at a century.
func seconds(x float64) time.Duration {
	const most = 100 * 365 * 24 * time.Hour
	if !(x < most.Seconds()) {
		return most
	}
	if x <= 0 {
		return 0
	}
	return time.Duration(x * float64(time.Second))
}
