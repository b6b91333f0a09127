package adaptive

import (
	"math"
	"time"
)

// The control law, per scope. All of it runs under the scope's mutex and
// takes an explicit now; nothing here sleeps.
//
// Rate (429 is its signal). A rate limiter accepts min(sent, capacity) per
// unit of time, and a throttle at sending rate s proves the capacity is below
// s. The law keeps est, the highest rate it believes clean, and sends at it:
//
//   - slow start: with no estimate, the rate doubles after every clean round
//     (a round lasts max(1 s, 2·RTT), long enough for the answers to the
//     requests sent at the new rate to come back) in which the rate was the
//     bottleneck;
//   - first throttle: est = max(min(A, s), s/2)·(1−margin), A being the
//     accepted rate over the last second (slow start overshoots by at most
//     2×, and A reads high when its second straddles two server windows);
//   - a throttle at a rate judged clean: a small step down from min(est, s),
//     3 %, growing by 3 % for each throttle that follows the last decrease
//     within four rounds (the step was not enough);
//   - a throttle with A below 70 % of est: the capacity fell; est = A, a
//     lower bound, and probing restarts fast;
//   - probing: after a probe gap the rate goes est·(1+step) for a round; if
//     that round is clean est moves up by step, the step doubles and the
//     next probe comes after two rounds (clean probes are cheap). A failed
//     probe leaves est as it was and resets the step. The gap after a
//     throttle keeps the pause a failed probe costs under probeBudget of
//     the time: max(10 s, last pause / probeBudget).
//
// Concurrency (503 / 502 / 504 and transport failures are its signal). AIMD:
// slow start (+1 per success) up to the first decrease, then +1 per window of
// successes (+1/limit per success), and only while the limit is in use. An
// overload sets the limit to what was in flight just before the failed
// request, halves it if overloads come in a row, and holds every increase for
// max(Config.Hold, pause / probeBudget). Little's law couples the two
// controls, so a rate limiter that answers 503 is still held under its rate.
//
// Decreases of either kind happen at most once per window: every request
// carries the epoch it was sent in, and a signal from a request sent before
// the last decrease is the tail of the same burst.
const (
	margin       = 0.03 // how far under the estimate the rate sits
	firstStep    = 0.03 // first probe above the estimate
	probeBudget  = 0.01 // share of time failed probes may cost in pauses
	minProbeGap  = 10 * time.Second
	ringSlots    = 16 // accepted-rate ring: 16 slots of 125 ms = 2 s
	slotDur      = 125 * time.Millisecond
	measureSlots = 8   // the last second
	bigDrop      = 0.7 // a measurement under this share of the estimate is a capacity drop
	probeRounds  = 3   // clean rounds a probe must hold before the estimate moves
)

type phase uint8

const (
	slowStart phase = iota
	steady
	probing
)

// lawState is the per-scope control state. Not safe for concurrent use: the
// scope's mutex guards it.
type lawState struct {
	rule *rule

	// concurrency
	limit    float64
	ssthresh float64
	cepoch   uint32
	overRow  int // overloads in a row with no success between

	// rate
	rate        float64 // pacing rate in force, req/s (before ceilings)
	est         float64 // capacity estimate, 0 = unknown
	ph          phase
	epoch       uint32
	step        float64
	nextProbe   time.Time
	fastProbe   bool
	probeRounds int // clean rounds the current probe has held

	lastDecrease time.Time
	downStep     float64 // the last small step down
	lastPause    time.Duration

	// round accounting: a round is clean if no signal arrived for a
	// request sent in it, and binding if a caller waited for a token in it.
	roundStart   time.Time
	roundEpoch   uint32
	roundBinding bool
	roundBad     bool

	holdUntil time.Time
	srtt      time.Duration
	ceil      float64 // the lowest ceiling in force (rule, robots, quota), 0 = none

	// accepted answers by completion time, for the capacity measurement
	ring     [ringSlots]uint32
	ringTick int64 // slot number (since the zero time) of ring's newest slot
}

func (l *lawState) init(r *rule, now time.Time) {
	l.rule = r
	l.limit = float64(r.StartConcurrency)
	l.ssthresh = float64(r.MaxConcurrency)
	l.rate = r.InitialRate
	l.step = firstStep
	l.downStep = margin
	l.roundStart = now
}

func (l *lawState) roundLen() time.Duration {
	return max(time.Second, 2*l.srtt)
}

func tick(now time.Time) int64 { return now.UnixNano() / int64(slotDur) }

// addAccepted counts one accepted answer at now.
func (l *lawState) addAccepted(now time.Time) {
	t := tick(now)
	l.advance(t)
	l.ring[t%ringSlots]++
}

func (l *lawState) advance(t int64) {
	if t <= l.ringTick {
		return
	}
	gap := t - l.ringTick
	if gap > ringSlots {
		gap = ringSlots
	}
	for i := int64(1); i <= gap; i++ {
		l.ring[(l.ringTick+i)%ringSlots] = 0
	}
	l.ringTick = t
}

// accepted returns the accepted rate over the last second, req/s.
func (l *lawState) accepted(now time.Time) float64 {
	t := tick(now)
	l.advance(t)
	var n uint32
	for i := int64(0); i < measureSlots; i++ {
		n += l.ring[(t-i+ringSlots)%ringSlots]
	}
	// the newest slot is partly elapsed
	elapsed := time.Duration(measureSlots-1)*slotDur + time.Duration(now.UnixNano()%int64(slotDur))
	return float64(n) / elapsed.Seconds()
}

// observeRTT folds one attempt's latency into the smoothed RTT.
func (l *lawState) observeRTT(d time.Duration) {
	if l.srtt == 0 {
		l.srtt = d
		return
	}
	l.srtt += (d - l.srtt) / 8
}

// onSuccess is called for an accepted answer to a request sent with epochs
// (epoch, cepoch), which found the concurrency limit in use when sent.
// It returns true when the rate changed.
func (l *lawState) onSuccess(now time.Time, epoch uint32, concBinding bool) (rateChanged bool) {
	l.addAccepted(now)
	l.overRow = 0
	if concBinding && !now.Before(l.holdUntil) && l.limit < float64(l.rule.MaxConcurrency) {
		if l.limit < l.ssthresh {
			l.limit++
		} else {
			l.limit += 1 / l.limit
		}
		l.limit = math.Min(l.limit, float64(l.rule.MaxConcurrency))
	}
	return l.endRound(now)
}

// endRound closes the current round when it has lasted long enough and
// applies the increase it earned.
func (l *lawState) endRound(now time.Time) bool {
	if now.Sub(l.roundStart) < l.roundLen() {
		return false
	}
	clean, binding := !l.roundBad && l.roundEpoch == l.epoch, l.roundBinding
	l.roundStart, l.roundEpoch, l.roundBinding, l.roundBad = now, l.epoch, false, false
	if !clean || now.Before(l.holdUntil) {
		return false
	}
	old := l.rate
	switch l.ph {
	case slowStart:
		if binding && (l.ceil == 0 || l.rate < l.ceil) {
			l.rate *= 2
			if l.ceil > 0 {
				l.rate = math.Min(l.rate, l.ceil)
			}
		}
	case steady:
		if !now.Before(l.nextProbe) && binding {
			l.ph = probing
			l.probeRounds = 0
			l.rate = l.est * (1 + l.step)
		} else if l.rate < l.est {
			l.rate = l.est
		}
	case probing:
		if binding && l.probeRounds+1 < probeRounds {
			// a burst allowance flatters a short clean interval: hold
			// the probe rate for several rounds before believing it
			l.probeRounds++
			return false
		}
		l.probeRounds = 0
		if binding {
			// the probe rate held for a whole round: the capacity is
			// at least that.
			l.est *= 1 + l.step
			l.step = math.Min(l.step*2, 1)
			l.fastProbe = true
		}
		l.ph = steady
		l.rate = l.est
		l.nextProbe = now.Add(l.probeGap())
	}
	return l.rate != old
}

// probeGap is the wait before the next probe. Clean probes are cheap, so
// after one (or after a large drop) the next comes after two rounds; a failed
// probe costs a pause, so after a throttle the gap keeps that cost under
// probeBudget of the time.
func (l *lawState) probeGap() time.Duration {
	if l.fastProbe {
		return 2 * l.roundLen()
	}
	return max(minProbeGap, seconds(l.lastPause.Seconds()/probeBudget))
}

// onThrottle reacts to a throttle (429) or an overload for a request sent
// in epoch at rate sentRate. It returns true when it decreased (a fresh
// signal), false for the tail of a burst already answered.
func (l *lawState) onThrottle(now time.Time, epoch uint32, sentRate float64) bool {
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
		// a probe above the estimate failed: the estimate stands, and
		// the next probe waits the long gap (a failed probe costs a pause)
	case a > 0 && a < l.est*bigDrop:
		// the capacity fell: the measurement is a lower bound of the new
		// one, so probe up again soon. (Nothing accepted in the last
		// second is no measurement: right after a pause nothing was sent.)
		l.est = math.Max(a, l.est/8)
		fast = true
	default:
		// a rate judged clean was throttled (a burst allowance flattered
		// it, or the capacity moved a little): a small step down. A
		// throttle that follows the last decrease within a few rounds
		// says that step was not enough: each such step grows by the
		// margin (3 %, 6 %, 9 % ...).
		if now.Sub(l.lastDecrease) < 4*l.roundLen() {
			l.downStep = math.Min(l.downStep+margin, 0.5)
		} else {
			l.downStep = margin
		}
		l.est = math.Min(l.est, sentRate) * (1 - l.downStep)
	}
	l.lastDecrease = now
	l.est = math.Max(l.est, l.rule.MinRate)
	l.rate = l.est
	l.step = firstStep
	l.ph = steady
	l.fastProbe = fast
	l.nextProbe = now.Add(l.probeGap())
	l.epoch++
	l.roundStart, l.roundEpoch, l.roundBinding, l.roundBad = now, l.epoch, false, false
	return true
}

// onOverload reacts to 503/502/504 or a transport failure for a request sent
// in cepoch with inflight requests in flight (itself included), holding
// increases until holdUntil.
func (l *lawState) onOverload(now time.Time, cepoch uint32, inflight int, holdUntil time.Time) bool {
	if holdUntil.After(l.holdUntil) {
		l.holdUntil = holdUntil
	}
	if cepoch != l.cepoch {
		return false
	}
	l.overRow++
	nl := math.Min(l.limit, float64(inflight-1))
	if l.overRow > 1 {
		nl = math.Min(nl, l.limit/2)
	}
	l.limit = math.Max(math.Floor(nl), float64(l.rule.MinConcurrency))
	l.ssthresh = l.limit
	l.cepoch++
	return true
}

// resumed: the half-open probe succeeded, or the user unparked the scope.
// The estimate (cut by every fresh throttle that opened the breaker)
// stands; no hold is left over.
func (l *lawState) resumed(now time.Time) {
	l.holdUntil = time.Time{}
	l.roundStart, l.roundEpoch, l.roundBinding, l.roundBad = now, l.epoch, false, false
}

// notePause records the length of a pause that a throttle cost, to size the
// interval between probes.
func (l *lawState) notePause(now, until time.Time, d time.Duration) {
	l.lastPause = d
	if until.After(l.roundStart) {
		// nothing is sent during a pause: the round starts when it ends
		l.roundStart = until
	}
	if next := now.Add(l.probeGap()); next.After(l.nextProbe) {
		l.nextProbe = next
	}
}
