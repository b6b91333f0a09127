// Package law is the control law of one scope: it decides the pacing rate
// and the concurrency limit from the answers to what was sent.
//
//	var l law.Law
//	l.Init(&cfg, now)
//	t := l.Sent(now, rate, inflight, inUse, paced) // a send goes out
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

	"github.com/colly-polite/polite/internal/sat"
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
	margin      = 0.03 // how far under the estimate the rate sits
	firstStep   = 0.03 // first probe above the estimate
	probeBudget = 0.02 // share of time failed probes may cost in pauses
	minProbeGap = 10 * time.Second
	// maxProbeGap bounds the wait between probes whatever the pauses (a
	// breaker's 30 s cooldown would mean 25 minutes): a scope clean for
	// long finds new headroom within it.
	maxProbeGap  = 2 * time.Minute
	ringSlots    = 8 // accepted-rate ring: 8 slots of 125 ms, the last second
	slotDur      = 125 * time.Millisecond
	measureSlots = 8   // the last second
	bigDrop      = 0.7 // a measurement under this share of the estimate is a capacity drop
	probeRounds  = 3   // clean rounds a probe must hold before the estimate moves

	// latencyHigh and latencyLow bracket the queueing a scope accepts:
	// servers that never say no queue instead, and their round trip grows
	// with the work waiting. Over latencyHigh times the unloaded round trip
	// the limit falls to the knee; under latencyLow it may grow. A queue of
	// a fifth of the work in service costs a fifth more latency and no
	// throughput.
	latencyHigh = 1.2
	latencyLow  = 1.1
	// minRTTSpan is how long the unloaded round trip is remembered (the
	// least over this span). A scope held at the knee always has a short
	// queue, so its round trips never show the unloaded one again: a short
	// memory would let the knee creep up by a queue's worth each time it
	// forgets. A baseline that is wrong (too low: the pages got slower, or
	// a lucky round) does not wait for it: a drain finds it out and
	// measures the baseline again (judgeLatency).
	minRTTSpan = 10 * time.Minute
	rttSlots   = 6
)

// Phase is where the rate search stands.
type Phase uint8

// Phases.
const (
	SlowStart Phase = iota // no estimate yet, or the search after a drop (est > 0): the rate doubles per clean round
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
	// Refused: a 429 refused whatever the rate, the caller judged (it
	// came after a Retry-After was waited, with no success since: a
	// lockout longer than it said). No rate signal: the round is not
	// clean, and nothing is cut.
	Refused
)

// Stamp is what the law needs to judge the answer to one send. It is a
// value: taking one allocates nothing.
type Stamp struct {
	Sent   time.Duration
	Rate   float64 // the pacing rate in force when it was sent
	Epoch  uint32  // rate decreases before it was sent
	CEpoch uint32  // concurrency decreases before it was sent
	// InFlight is the requests in flight when it was sent, itself
	// included: in a fleet, the fleet's as its store counted them, which
	// is a bound (Bound) when the send waited for its slot of the fleet's
	// schedule (the leases of the sends waiting ahead of it count too).
	InFlight int32
	InUse    bool   // the concurrency limit was in use when it was sent
	Paced    bool   // a pacer held it back
	Bound    bool   // InFlight is a bound, not a count
	Round    uint32 // the round it was counted in
	Cohort   uint32 // the hold's test it belongs to (0: none)
}

// Verdict is what the law made of one answer.
type Verdict struct {
	// Fresh: the signal is for a request sent after the last decrease of
	// its kind. The others are the tail of a burst already answered.
	Fresh bool
	// Decreased: the law cut the rate (throttle) or the limit (overload).
	Decreased bool
	// Cut says how the rate was cut, NoCut when it was not (an overload
	// may cut the limit alone).
	Cut Cut
}

// Cut is how a fresh rate signal moved the estimate.
type Cut uint8

// Cuts.
const (
	NoCut        Cut = iota
	SlowStartEnd     // the first: slow start ends at a measured estimate
	ProbeFailed      // sent above the estimate: it stands, or a saturated measurement high in the bracket replaces it
	Drop             // the accepted rate fell far under the estimate: it is the new one (at least est/8)
	StepDown         // a rate judged clean was throttled: a small step down
)

func (c Cut) String() string {
	switch c {
	case SlowStartEnd:
		return "slow-start-end"
	case ProbeFailed:
		return "probe-failure"
	case Drop:
		return "drop-detected"
	case StepDown:
		return "step-down"
	}
	return "none"
}

// Law is the control state of one scope. The zero value is not usable:
// call Init.
type Law struct {
	cfg *Config

	limit    float64 // concurrency limit
	rate     float64 // pacing rate, req/s (before ceilings)
	est      float64 // capacity estimate, 0 = unknown
	step     float64 // the next probe's step above the estimate
	hi       float64 // the rate the last probe, or the search after a drop, failed at, above est (0: none): the bracket's top
	downStep float64 // the last small step down
	// proven is the estimate a failed probe's measurement replaced (0:
	// none), until that measurement has held to the next probe
	proven float64
	// the last drop: when, and the estimate a step down would have left
	// (where the search after it stops)
	dropAt     time.Duration
	dropTo     float64
	ceil       float64 // the lowest ceiling in force, 0 = none
	nextProbe  time.Duration
	lastDecr   time.Duration
	lastPause  time.Duration
	roundStart time.Duration
	holdUntil  time.Duration
	holdFrom   time.Duration // when the hold's test may begin: the end of the pause that came with it
	// the hold's test (Hold): the sends of its cohort, from holdFrom on,
	// their answers, and the state it began in
	hold holdTest
	// the in-flight count a burst's overload answered (0: none), and until
	// when the limit stays under it: a probe of the concurrency costs a
	// pause as one of the rate does, and waits as long
	capAt      float64
	capUntil   time.Duration
	pausedAt   time.Duration       // when the last pause was announced
	idle       [2][2]time.Duration // the last two pauses (Paused, Idle), from and until: a count over them reads low
	fleet      bool                // a fleet's: its state is shared (Shared, Adopt, FleetAccepted, Deferred)
	roundUsed  uint16              // sends in this round that filled the concurrency limit (in a hole of the layout)
	srtt       time.Duration
	ringTick   int64   // slot number of ring's newest slot
	ssthresh   float32 // slow start of the limit ends here (whole numbers)
	epoch      uint32  // rate decreases so far
	cepoch     uint32  // concurrency decreases so far
	roundEpoch uint32
	overRow    uint16 // overloads in a row with no success between
	ph         Phase
	probeRds   uint8 // clean rounds the current probe has held
	heldRds    uint8 // clean busy rounds at or above the estimate since the last rate decrease
	fastProbe  bool
	roundBad   bool // a signal arrived for a request sent in this round
	roundInUse bool // a success of this round was sent with the limit in use
	// accepted answers by completion time, for the capacity measurement
	ring [ringSlots]uint16
	// sends in this round, and those the pacer held back
	roundSends, roundPaced uint16
	roundSeq               uint32 // numbers the rounds

	// the latency signal: successes' round trips, this round's mean, and
	// the least round mean over minRTTSpan (in rttSlots parts)
	rttSlot  time.Duration // the current part's start
	latEMA   float32       // seconds: successes' round trips, smoothed
	latVar   float32       // their variance about latEMA, smoothed alike
	roundSum float64       // seconds
	roundSq  float64       // the squares, for the round's noise
	roundInf float32       // the successes' sends' in-flight counts, summed
	lastRTT  float32       // seconds, of the answer being observed
	roundN   uint16
	rttAt    uint8
	rttMin   [rttSlots]float32 // seconds; 0: empty
	costVar  float32           // the spread of a round's answers (their variance), smoothed over rounds, seconds squared

	// a queue under test: a round read as queueing cut the limit to the
	// knee; the answers to sends at the lower limit (qEpoch) say whether
	// the round trip fell with it (a queue) or not (the pages cost more)
	qTest          bool
	qN             uint16
	okAt           int32   // the most in flight a success sent in okEpoch was sent with (atCap)
	qSum, qSq      float64 // as roundSum and roundSq, over the test's answers
	qInf           float32 // as roundInf
	qRTT, qSE      float32 // the suspect round's mean round trip and its standard error, seconds
	qInf1          float32 // the suspect round's mean in flight
	qEpoch         uint32  // cepoch of the cut
	okEpoch        uint32  // the concurrency epoch the last overload's cut began (atCap)
	qLimit, qSsthr float64 // before the cut
	qKnee          float64 // the limit if the queue is confirmed
	qDeep          bool    // the test drained below the knee
	qStart         time.Duration
	// until then a queue confirmed at this baseline needs no deep drain
	qConfirmed time.Duration

	// the fleet's accepted rate (FleetAccepted), req/s, and when it was
	// told (0: never)
	fleetAcc float32
	// the in-flight count (itself included) of the send of the last
	// overload that cut the limit (0: none, or another decrease since):
	// atCap's; in a hole of the layout, as okAt and okEpoch
	overAt  int32
	fleetAt time.Duration
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
		rttSlot:    now,
	}
}

// SetConfig puts the law under c from now (the caller's rule changed):
// the concurrency limit moves within c's bounds at once, and the next
// decisions read c.
func (l *Law) SetConfig(c *Config) {
	l.cfg = c
	l.limit = math.Min(math.Max(l.limit, float64(c.MinConcurrency)), float64(c.MaxConcurrency))
	l.ssthresh = min(l.ssthresh, float32(c.MaxConcurrency))
}

// MaxRate bounds every rate the law takes from outside its own
// measurements (quota headers, an estimate restored or imported, a fleet's
// shared state), req/s: a value from outside is untrusted, and no polite
// crawl of one scope needs more. The law's own search may go above it.
const MaxRate = 1000

// Seed starts the law from a capacity a server stated (honest quota
// headers): the scope sends just under it at once, with no slow start, and
// probes above it later. A law past slow start keeps what it measured.
func (l *Law) Seed(now time.Duration, capacity float64) {
	l.start(now, capacity*(1-margin), 0)
}

// Restore starts the law from an estimate it measured before (a scope
// evicted and created again, an estimate imported from an earlier crawl),
// as it was: no margin is taken off again. limit, if above the start,
// seeds the concurrency limit too, at most MaxConcurrency. The estimate is
// bounded by MaxRate and by the ceiling in force (SetCeiling).
func (l *Law) Restore(now time.Duration, est, limit float64) {
	l.start(now, est, limit)
}

func (l *Law) start(now time.Duration, est, limit float64) {
	if l.ph != SlowStart || l.est != 0 || !(est > 0) {
		return
	}
	l.est = l.bounded(est)
	l.rate = l.est
	l.ph = Steady
	l.nextProbe = now + l.probeGap()
	if limit > l.limit {
		l.limit = math.Min(math.Floor(limit), float64(l.cfg.MaxConcurrency))
		l.ssthresh = float32(l.limit)
	}
	l.newRound(now)
}

// bounded is a rate from outside within [MinRate, MaxRate] and under the
// ceiling in force. NaN gives MinRate.
func (l *Law) bounded(r float64) float64 {
	top := float64(MaxRate)
	if l.ceil > 0 && l.ceil < top {
		top = l.ceil
	}
	if !(r <= top) {
		r = top
	}
	return math.Max(r, l.cfg.MinRate)
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

// Ceiling is the ceiling last set (0: none).
func (l *Law) Ceiling() float64 { return l.ceil }

// Sent records a send at now at rate (the pacing rate in force), with
// inflight requests in flight (itself included), the concurrency limit in
// use or not, and paced when the pacer held it back, and returns its
// ticket.
func (l *Law) Sent(now time.Duration, rate float64, inflight int, inUse, paced bool) Stamp {
	l.countSend(inUse, paced)
	return Stamp{Sent: now, Rate: rate, Epoch: l.epoch, CEpoch: l.cepoch, InFlight: int32(inflight), InUse: inUse, Paced: paced, Round: l.roundSeq,
		Cohort: l.cohortSend(now, atLevel(paced, inUse))}
}

// Deferred: the send *st stamps waits elsewhere before it goes (a fleet's
// turn and its shared schedule, for as long as a round or more): it is not
// counted in the round it was stamped in, but by Went in the round it goes
// in. A round judged while its sends wait elsewhere would read them as
// sends the rate did not hold back, and slow start would not double.
func (l *Law) Deferred(st *Stamp) {
	l.fleet = true
	if h := &l.hold; h.member(*st) {
		h.remove(*st) // counted again when it goes (Went)
		// no longer a member: a send given back before it goes (Dropped)
		// is not taken out twice
		st.Cohort = 0
	}
	if st.Round != l.roundSeq || l.roundSends == 0 {
		return // its round has been judged already
	}
	l.roundSends--
	if st.Paced && l.roundPaced > 0 {
		l.roundPaced--
	}
	if st.InUse && l.roundUsed > 0 {
		l.roundUsed--
	}
}

// countSend counts a send in this round: those the pacer held back make
// the round busy, those that filled the concurrency limit say the limit
// bound it.
func (l *Law) countSend(inUse, paced bool) {
	if l.roundSends == math.MaxUint16 {
		return
	}
	l.roundSends++
	if paced {
		l.roundPaced++
	}
	if inUse {
		l.roundUsed++
	}
}

// Went: the send st stamps, deferred, goes now at rate; paced: the rate
// was its bottleneck (the fleet's schedule held it back at this rate, or
// this process's pacer did and nothing else held it); st.InUse, as the
// caller leaves it: it filled the concurrency limit (the fleet's). It is
// stamped again as sent now: its answer is judged against the rate and
// the decreases in force when it went, not when it began to wait.
func (l *Law) Went(st *Stamp, now time.Duration, rate float64, paced bool) {
	l.countSend(st.InUse, paced)
	st.Sent, st.Rate, st.Epoch, st.CEpoch, st.Paced, st.Round = now, rate, l.epoch, l.cepoch, paced, l.roundSeq
	st.Cohort = l.cohortSend(now, atLevel(paced, st.InUse))
}

// RoundTrip folds the round trip of one answer (to its response headers)
// into the smoothed RTT that sizes the law's rounds. Call it before Observe
// of the same answer: a success's round trip also feeds the latency signal
// (a rejection is answered by a limiter in front of the origin, faster than
// any page, and would read as an empty path).
func (l *Law) RoundTrip(rtt time.Duration) {
	l.lastRTT = 0
	if rtt <= 0 {
		return
	}
	l.lastRTT = float32(rtt.Seconds())
	if l.srtt == 0 {
		l.srtt = rtt
		return
	}
	l.srtt += (rtt - l.srtt) / 8
}

// MinRTT is the unloaded round trip: the least mean round trip of the
// successes of a round (of four at least) over the last ten minutes, each
// mean taken at the most its noise allows, or the one a drain measured
// since.
func (l *Law) MinRTT() time.Duration {
	m := float32(0)
	for _, v := range l.rttMin {
		if v > 0 && (m == 0 || v < m) {
			m = v
		}
	}
	return time.Duration(float64(m) * float64(time.Second))
}

// latency feeds a success's round trip, for send t, to this round's mean
// (judgeLatency folds the round's mean into the unloaded baseline) and to
// a queue test's.
func (l *Law) latency(now time.Duration, t Stamp) {
	if now-l.rttSlot >= minRTTSpan/rttSlots {
		l.rttAt = (l.rttAt + 1) % rttSlots
		l.rttMin[l.rttAt] = 0
		l.rttSlot = now
	}
	s := l.lastRTT
	if s <= 0 {
		return
	}
	if l.latEMA == 0 {
		l.latEMA = s
	} else {
		d := s - l.latEMA
		l.latEMA += d / 8
		l.latVar += (d*d - l.latVar) / 8
	}
	l.roundSum += float64(s)
	l.roundSq += float64(s) * float64(s)
	l.roundInf += float32(t.InFlight)
	l.roundInUse = l.roundInUse || t.InUse
	if l.roundN < math.MaxUint16 {
		l.roundN++
	}
	if l.qTest && t.CEpoch == l.qEpoch && l.qN < math.MaxUint16 {
		l.qSum += float64(s)
		l.qSq += float64(s) * float64(s)
		l.qInf += float32(t.InFlight)
		l.qN++
	}
}

// queueing reports whether the smoothed round trip of successes is above f
// times the unloaded one by more than its noise: pages that differ in cost
// spread the round trips without any queue (an average of weight 1/8 keeps
// a quarter of the answers' spread, sqrt(1/15)). Once a drain has
// confirmed a queue at this baseline, a rise is that queue again, and is
// believed at once.
func (l *Law) queueing(now time.Duration, f float64) bool {
	m := l.MinRTT().Seconds()
	e := float64(l.latEMA)
	if now >= l.qConfirmed {
		e -= noise * math.Sqrt(float64(l.latVar)/15)
	}
	return m > 0 && e > f*m
}

// meanSE is the mean of n values of sum sum and sum of squares sq, and
// its standard error.
func meanSE(sum, sq float64, n uint16) (mean, se float64) {
	k := float64(max(n, 1))
	mean = sum / k
	return mean, math.Sqrt(math.Max(sq/k-mean*mean, 0) / k)
}

// judgeLatency closes the latency round. A round whose mean round trip is
// over latencyHigh times the unloaded one may have had work queueing at the
// server (a server that never says no), or its pages may have cost more
// (pages differ from URL to URL and over a crawl): a hypothesis, tested by
// draining, as BBR re-measures its least round trip. The limit falls to
// the knee, where the round trip would be latencyHigh times the unloaded
// one, and at least by a quarter, a drain deep enough to show over a
// round's noise; no increase until the verdict. The answers to sends at
// the lower limit decide: a queue's round trip falls with what is in
// flight (Little's law), a page's cost does not. If what was in flight
// fell and the round trip fell at least half as much (in proportion, and
// by more than the two means' noise), the queue was real and the cut
// stands. If not, the rise was no queue of this scope's making: the cut is
// taken back, and the unloaded round trip is the one just measured at the
// lower limit.
//
// Every comparison allows for the noise of a mean (noise standard errors):
// a round of pages that differ in cost reads high or low by chance, and a
// law that takes the chance for a queue cuts a healthy site.
func (l *Law) judgeLatency(now time.Duration) {
	base := l.MinRTT().Seconds()
	n := l.roundN
	mean, se := meanSE(l.roundSum, l.roundSq, n)
	inf := float64(l.roundInf) / float64(max(n, 1))
	inUse := l.roundInUse
	if n >= 4 {
		// the spread of the pages' costs (a queue's changes add to it,
		// and make the law slower to believe the next one)
		v := float32(se * se * float64(n))
		if l.costVar == 0 {
			l.costVar = v
		} else {
			l.costVar += (v - l.costVar) / 4
		}
	}
	l.roundSum, l.roundSq, l.roundInf, l.roundN, l.roundInUse = 0, 0, 0, 0, false
	// a round's own spread understates a heavy tail (a round without one
	// of the rare slow pages looks steady): the noise of its mean is at
	// least what the rounds' spread says
	se = math.Max(se, math.Sqrt(float64(l.costVar)/float64(max(n, 1))))
	if l.qTest {
		switch {
		case l.qEpoch != l.cepoch:
			// an overload (or the fleet) cut the limit again: that
			// decrease stands, and the test is void
			l.qTest = false
		case l.qN >= 4:
			l.qTest = false
			m, mse := meanSE(l.qSum, l.qSq, l.qN)
			mse = math.Max(mse, math.Sqrt(float64(l.costVar)/float64(l.qN)))
			r1 := float64(l.qRTT)
			inf2 := float64(l.qInf) / float64(l.qN)
			drained := inf2 / float64(l.qInf1)
			fell := r1-m > noise*math.Hypot(float64(l.qSE), mse)
			// a drain below the knee that leaves the round trip over it
			// found a baseline too low, not a queue: a queue drained
			// under its knee is gone. One request at a time queues behind
			// none of this scope's own: its round trip is the unloaded one
			back := !l.qDeep || m-noise*mse <= latencyHigh*base
			switch {
			case drained <= 0.9 && m/r1 <= (1+drained)/2 && fell && back && inf2 > 1:
				// a queue: the limit stays at the knee (the drain below
				// it was for the measurement)
				l.limit = math.Max(l.limit, l.qKnee)
				l.ssthresh = float32(l.limit)
				l.qConfirmed = now + minRTTSpan/rttSlots
			case !l.qDeep && drained > 0.9:
				// a cut to the knee alone that moved too little to
				// tell: it stands
			default:
				// (within the bounds in force: SetConfig may have
				// lowered MaxConcurrency during the test)
				l.limit = math.Min(math.Max(l.limit, l.qLimit), float64(l.cfg.MaxConcurrency))
				l.ssthresh = float32(math.Max(float64(l.ssthresh), l.qSsthr))
				l.rebase(float32(m + noise*mse))
				if l.dropAt >= l.qStart-2*l.roundLen() && l.dropTo > l.est {
					// a drop read while the answers slowed down was the
					// lag of slower answers, counted by completion: the
					// estimate a step down would have left returns
					l.est = l.dropTo
					l.rate = math.Max(l.rate, l.est)
					l.dropTo = 0
					if l.ph == SlowStart {
						l.ph = Steady // the search after the drop too
					}
				}
			}
		}
		return
	}
	// a round over latencyHigh times the unloaded round trip, or one that
	// held the limit in use from growing (over latencyLow times it) with no
	// queue confirmed at this baseline: both say "a queue", and both are
	// tested (a baseline measured too low would otherwise hold the limit
	// for as long as it is remembered)
	low := mean - noise*se // the least the round's mean may be
	high := low > latencyHigh*base
	deep := now >= l.qConfirmed
	if base > 0 && n >= 4 && (high || deep && inUse && low > latencyLow*base) {
		minc := float64(l.cfg.MinConcurrency)
		knee := l.limit
		if high {
			knee = math.Max(math.Floor(l.limit*latencyHigh*base/mean+1e-6), minc) // the round trips are float32
		}
		nl := knee
		if deep {
			nl = math.Max(math.Floor(math.Min(knee, l.limit*3/4)+1e-6), minc)
		}
		if nl < l.limit {
			l.qTest, l.qLimit, l.qSsthr, l.qKnee, l.qDeep, l.qStart = true, l.limit, float64(l.ssthresh), knee, deep, now
			l.qRTT, l.qSE, l.qInf1 = float32(mean), float32(se), float32(max(inf, 1))
			l.limit = nl
			l.ssthresh = float32(nl)
			l.cepoch++
			l.qEpoch, l.qSum, l.qSq, l.qInf, l.qN = l.cepoch, 0, 0, 0, 0
			return
		}
		// the limit is at its floor: this round is as drained as the
		// scope gets, and its round trip the unloaded one
		l.rebase(float32(mean + noise*se))
		return
	}
	if n >= 4 {
		// the unloaded round trip is the least of the rounds' means, each
		// taken at the most it may be (its mean plus its noise): pages
		// differ (robots.txt, a redirect, a cached page answer faster than
		// a search), and the least single answer, or the least of many
		// noisy means, would make any mix of them read as a queue
		m := float32(mean + noise*se)
		if p := &l.rttMin[l.rttAt]; *p == 0 || m < *p {
			*p = m
		}
	}
}

// noise is how many standard errors a mean round trip must move by before
// the law believes it moved: two, the usual bound of chance.
const noise = 2

// rebase makes m the unloaded round trip, forgetting the older ones.
func (l *Law) rebase(m float32) {
	l.rttMin = [rttSlots]float32{}
	l.rttMin[l.rttAt] = m
	l.qConfirmed = 0 // a queue confirmed at the old baseline is no more
}

// Fresh reports whether signal s for ticket t is fresh: sent after the last
// decrease of its kind (a throttle for the rate, an overload for the
// concurrency). The others are the tail of a burst already answered.
func (l *Law) Fresh(t Stamp, s Signal) bool {
	switch s {
	case Throttled, Refused:
		return t.Epoch == l.epoch
	case Overloaded:
		return t.CEpoch == l.cepoch
	}
	return true
}

// Rising reports whether t was sent at a rate not yet judged clean, above
// the one the scope started at in slow start (a doubling), or above the
// estimate (a probe). A refusal of such a send follows a rise in rate, and
// says the rate is too high more likely than anything else; a refusal at
// the starting rate says nothing of the rate.
func (l *Law) Rising(t Stamp) bool {
	if l.est == 0 {
		return t.Rate > l.cfg.InitialRate*(1+margin/2)
	}
	return t.Rate > l.est*(1+margin/2)
}

// Observe feeds the law the answer to ticket t, of signal s, at now.
func (l *Law) Observe(now time.Duration, t Stamp, s Signal) Verdict {
	v := Verdict{Fresh: l.Fresh(t, s)}
	switch s {
	case Throttled:
		v.Cut = l.onThrottle(now, t.Epoch, t.Rate)
		v.Decreased = v.Cut != NoCut
	case Refused:
		l.roundBad = true
		if t.Epoch == l.epoch {
			// one refusal a burst, as one decrease: the answers to
			// what was sent before it are its tail
			l.epoch++
			l.newRound(now)
		}
	case Overloaded:
		l.roundBad = true
		before := l.limit
		// Little's law: a rate that needs fewer in flight than the
		// overload leaves (the rate times the successes' round trip)
		// does not explain it; a burst over the concurrency the server
		// takes does, and the overload is the concurrency's answer
		// alone. In a fleet the rate and the in-flight count are the
		// fleet's; a count that is only a bound (the send waited for
		// its slot: the rate held it) makes no such test, both are cut.
		rtt := float64(l.latEMA)
		burst := !t.Bound && rtt > 0 && t.Rate*rtt < float64(t.InFlight-1)
		// An in-flight count that failed before, with no send at it
		// succeeding between, is the server's cap whatever the rate:
		// the overload is the concurrency's, unless the round trip says
		// the server queues (a rate limiter that delays, then refuses
		// what its queue cannot hold: too fast, its queue full).
		burst = burst || l.atCap(t) && !l.queueing(now, latencyHigh)
		v.Decreased = l.onOverload(t.CEpoch, int(t.InFlight))
		if v.Decreased {
			l.overAt, l.okAt, l.okEpoch = t.InFlight, 0, l.cepoch
			if t.Bound {
				l.overAt = 0
			}
		}
		if burst && v.Decreased {
			// the concurrency's probe cost this overload's pause, if
			// it paused, else little more than the overload itself
			gap := time.Duration(minProbeGap)
			if l.pausedAt == now {
				gap = l.failedGap()
			}
			l.capAt, l.capUntil = float64(t.InFlight), now+gap
		}
		// Little's law: the work in service at the server is the rate
		// times the time in service. Concurrency alone sends in bursts
		// (each answer frees a send at once); the rate paced under what
		// the server took keeps its work in service even.
		if t.Epoch == l.epoch && !burst {
			v.Cut = l.onThrottle(now, t.Epoch, t.Rate)
			v.Decreased = v.Cut != NoCut || v.Decreased
			if v.Cut != NoCut && l.overRow == 1 {
				l.littleFloor(before)
			}
		}
	default:
		l.onSuccess(now, t)
	}
	// the hold's test counts the answer once it is applied: a success
	// that ends the hold increases nothing itself, and a decrease it
	// made fails the test
	l.cohortAnswer(now, t, s == Success, l.lastRTT)
	return v
}

// Hold holds every increase from from until until: an overload (503) may
// come from an origin that struggles, and a 200 from a struggling origin
// is no proof of headroom. That is a hypothesis, and the answers test it.
// The cohort is the sends made from from on (the end of the overload's
// pause), at least holdCohort of them over at least a round's length.
// Once every one is answered, the hold ends if they were all successes,
// at least half sent at the scope's level (atLevel: the pacer held them
// back, or they filled the concurrency limit; a scope under both says
// nothing of its level), with no decrease anywhere since, and their
// mean round trip, plus its noise, is within latencyHigh of the unloaded
// round trip measured before the hold: the origin does not struggle at
// this level (a concurrency cap or a limiter answered). Increases resume
// from the next round. Any other verdict keeps the hold and tests the
// next cohort; an origin that struggles answers slower or fails again,
// and stays held until until. A later hold wins.
func (l *Law) Hold(from, until time.Duration) {
	if until > l.holdUntil {
		base := float32(l.MinRTT().Seconds())
		if l.holdUntil > from && l.hold.base > 0 && !(base > 0 && base < l.hold.base) {
			// a hold still in force: its baseline stands (a queue test
			// during it may have measured the unloaded round trip again
			// at a struggling origin's level)
			base = l.hold.base
		}
		l.holdFrom, l.holdUntil = from, until
		l.hold.base = base
		l.hold.next()
	}
}

// holdCohort is the least cohort a hold's test judges: the noise of a
// mean of fewer round trips says nothing (judgeLatency's least too).
const holdCohort = 4

// holdTest is the test of a hold's hypothesis (Hold).
type holdTest struct {
	gen            uint32        // numbers the cohorts: a stamp's Cohort
	start          time.Duration // its first send
	begun, closed  bool
	epoch, cepoch  uint32  // the decreases when it began
	base           float32 // the unloaded round trip when the hold began, seconds
	sent, level    uint16  // level: sends at the scope's level (atLevel)
	answered, good uint16  // good: successes with a round trip
	sum, sq        float64 // the successes' round trips, seconds
}

// member: t was sent in this cohort (not an earlier one, nor none).
func (h *holdTest) member(t Stamp) bool { return t.Cohort != 0 && t.Cohort == h.gen && h.begun }

// remove takes t, a member that has not been answered, out of the cohort.
func (h *holdTest) remove(t Stamp) {
	if h.sent > 0 {
		h.sent--
		if atLevel(t.Paced, t.InUse) && h.level > 0 {
			h.level--
		}
	}
}

// atLevel: a send went at the scope's level, not under it: the pacer held
// it back (the rate bound it), or it filled the concurrency limit
// (inflight >= limit at its send: the limit bound it). A cohort sent
// under both tests nothing of the load the scope puts on the origin; one
// sent with its limit full tests the level of concurrency the overload
// left, as one sent at its rate tests the rate. (At a limit of 1 every
// send fills it: a trickle of sends one at a time is that scope's level,
// and the hold's round-trip test is what guards it.)
func atLevel(paced, inUse bool) bool { return paced || inUse }

// next clears the cohort: the next one begins with the next send in the
// hold, against the same baseline.
func (h *holdTest) next() { *h = holdTest{gen: h.gen, base: h.base} }

// over: the cohort has its least size and has lasted a round (of length
// d) at now; no send joins it after.
func (h *holdTest) over(now, d time.Duration) bool {
	return h.sent >= holdCohort && now-h.start >= d
}

// cohortSend counts a send at now in the hold's cohort if it belongs to
// one (level: it went at the scope's level, atLevel), and returns the
// cohort's number (0: none).
func (l *Law) cohortSend(now time.Duration, level bool) uint32 {
	h := &l.hold
	if now >= l.holdUntil || now < l.holdFrom || h.base <= 0 {
		return 0
	}
	if !h.begun {
		h.gen++
		if h.gen == 0 {
			h.gen = 1
		}
		h.begun, h.start, h.epoch, h.cepoch = true, now, l.epoch, l.cepoch
	}
	if h.closed || h.over(now, l.roundLen()) || h.sent == math.MaxUint16 {
		h.closed = true
		return 0
	}
	h.sent++
	if level {
		h.level++
	}
	return h.gen
}

// cohortAnswer counts the answer to t (ok: a success whose round trip,
// seconds, is rtt) and judges the cohort once all of it is answered.
func (l *Law) cohortAnswer(now time.Duration, t Stamp, ok bool, rtt float32) {
	h := &l.hold
	if !h.member(t) {
		return
	}
	h.answered++
	if ok && rtt > 0 {
		h.good++
		h.sum += float64(rtt)
		h.sq += float64(rtt) * float64(rtt)
	}
	l.judgeHold(now)
}

// Dropped: the send t stamps got no answer that speaks of the origin's
// load (it was not made after all, it was canceled, or it was answered
// neutrally: a 404, a DNS failure) and the law is told of no signal for
// it. With failed, the answer was no success either (a block not taken
// for a throttle). The hold's cohort is judged without it, or fails: a
// cohort waiting for an answer that never comes would hold its test, and
// every later one, for the rest of the hold.
func (l *Law) Dropped(now time.Duration, t Stamp, failed bool) {
	h := &l.hold
	if !h.member(t) {
		return
	}
	if failed {
		h.answered++
	} else {
		h.remove(t)
	}
	l.judgeHold(now)
}

// judgeHold ends the hold if its cohort, closed and all answered, says
// the origin does not struggle, and begins the next cohort if it does not.
func (l *Law) judgeHold(now time.Duration) {
	h := &l.hold
	if !h.begun || !(h.closed || h.over(now, l.roundLen())) || h.answered < h.sent {
		return
	}
	mean, se := meanSE(h.sum, h.sq, h.good)
	// (a throttle or an overload of the cohort's is a decrease since)
	if h.sent >= holdCohort && h.good == h.sent && 2*int(h.level) >= int(h.sent) && h.epoch == l.epoch && h.cepoch == l.cepoch &&
		mean+noise*se <= latencyHigh*float64(h.base) {
		l.holdUntil = 0
	}
	h.next()
}

// HeldUntil is when the hold on increases ends (0: none).
func (l *Law) HeldUntil() time.Duration { return l.holdUntil }

// Paused records a pause of d, from now until until, that a throttle cost:
// nothing is sent during it, and it sizes the interval between probes.
func (l *Law) Paused(now, until, d time.Duration) {
	l.lastPause, l.pausedAt = d, now
	l.Idle(now, until)
	if until > l.roundStart {
		l.roundStart = until
	}
	if next := now + l.probeGap(); next > l.nextProbe {
		l.nextProbe = next
	}
}

// Idle records that nothing is sent from now until until: a pause another
// process of the fleet shared (a pause of this process's own comes with
// Paused). It sizes nothing; it tells a count of the fleet's that the pause
// took more of than the second it is read in (accepted).
func (l *Law) Idle(now, until time.Duration) {
	if cur := &l.idle[1]; now < cur[1] {
		cur[1] = max(cur[1], until) // the pause in force, extended
		return
	}
	l.idle[0], l.idle[1] = l.idle[1], [2]time.Duration{now, until}
}

// Resumed: the scope resumes after its breaker closed or the user
// unparked it. The estimate (cut by every fresh throttle that opened the
// breaker) stands; no hold is left over.
func (l *Law) Resumed(now time.Duration) {
	l.holdUntil, l.overAt = 0, 0
	l.newRound(now)
	if l.ph != SlowStart {
		// what opened the breaker (or the park) is over: the estimate it
		// cut is a lower bound, probe up from it soon
		l.ph, l.fastProbe = Steady, true
		l.nextProbe = now + l.probeGap()
	}
}

func (l *Law) newRound(now time.Duration) {
	l.roundStart, l.roundEpoch, l.roundBad = now, l.epoch, false
	l.roundSends, l.roundPaced, l.roundUsed = 0, 0, 0
	l.roundSeq++
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

// accepted is the accepted rate over the last second, req/s, counted by
// completion time. (Counting by send time, over the last second whose
// answers are all in, was tried: it lags a capacity drop by the round trip
// and cost 9 to 18 points on the drop and sliding-window families of the
// simulator.)
func (l *Law) accepted(now time.Duration) float64 {
	switch {
	case l.fleetAt == 0:
		return l.ownAccepted(now)
	case now-l.fleetAt <= time.Second:
		if l.paused(l.fleetAt) > l.paused(now) {
			// a fleet's count is of the second before this process
			// last heard from its store, up to one of its sends old:
			// if a pause took more of that second than of this one,
			// it reads low (on a fixed window of 13/s, 6/s 0.4 s
			// after a pause), and read as a drop. It is no
			// measurement of this second.
			return 0
		}
		// a fleet's: this process's count is only its part
		return math.Max(float64(l.fleetAcc), l.ownAccepted(now))
	}
	// in a fleet whose count is not known now (its store is down, or
	// restarted and has not counted a second yet): this process's part
	// is no measure of the capacity, and reads as a drop
	return 0
}

// paused is how much of the second that ends at end the last two pauses
// took.
func (l *Law) paused(end time.Duration) time.Duration {
	var d time.Duration
	for _, p := range l.idle {
		d += max(0, min(end, p[1])-max(end-time.Second, p[0]))
	}
	return d
}

// FleetAccepted tells the law the accepted rate of the whole fleet at now
// (a shared store counts it), req/s: for a second, the law measures the
// capacity by it rather than by this process's part.
func (l *Law) FleetAccepted(now time.Duration, perSecond float64) {
	l.fleet = true
	if !(perSecond >= 0) || math.IsInf(perSecond, 0) {
		return
	}
	l.fleetAcc, l.fleetAt = float32(perSecond), max(now, 1)
}

func (l *Law) ownAccepted(now time.Duration) float64 {
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

func (l *Law) onSuccess(now time.Duration, t Stamp) {
	inUse := t.InUse
	if !t.Bound && t.CEpoch >= l.okEpoch {
		if t.CEpoch > l.okEpoch {
			// another decrease since the last overload: its in-flight
			// count is no longer in question
			l.okEpoch, l.okAt, l.overAt = t.CEpoch, 0, 0
		}
		l.okAt = max(l.okAt, t.InFlight)
	}
	l.addAccepted(now)
	l.latency(now, t)
	l.overRow = 0
	maxc := float64(l.cfg.MaxConcurrency)
	// a queue under test holds the limit where the test put it
	if inUse && now >= l.holdUntil && l.limit < maxc && !l.qTest && !l.queueing(now, latencyLow) {
		prev := l.limit
		if l.limit < float64(l.ssthresh) {
			l.limit++
		} else {
			l.limit += 1 / l.limit
		}
		l.limit = math.Min(l.limit, maxc)
		if now < l.capUntil {
			// under the level a burst overloaded, never lowered by it
			l.limit = math.Max(prev, math.Min(l.limit, l.capAt-1))
		}
	}
	l.endRound(now)
}

// endRound closes the current round when it has lasted long enough and
// applies the increase it earned.
func (l *Law) endRound(now time.Duration) {
	if now-l.roundStart < l.roundLen() {
		return
	}
	// (in int: twice a uint16 count overflows past 32,767 sends a round)
	clean, busy := !l.roundBad && l.roundEpoch == l.epoch, l.roundSends > 0 && 2*int(l.roundPaced) >= int(l.roundSends)
	bound := l.roundSends > 0 && 2*int(l.roundUsed) >= int(l.roundSends) // the limit bound most sends
	l.newRound(now)
	l.judgeLatency(now)
	// a cohort all answered before its round's length was over is judged now
	l.judgeHold(now)
	if !clean || now < l.holdUntil {
		return
	}
	if busy && l.ph != SlowStart && l.heldRds < math.MaxUint8 {
		l.heldRds++
	}
	switch l.ph {
	case SlowStart:
		if busy && l.est > 0 {
			// the search after a drop, a doubling a clean round: at the
			// rate throttled before the drop, less the margin, the
			// capacity did not fall after all. (A round is no
			// measurement: a burst allowance flatters one.)
			top := l.dropTo
			if l.ceil > 0 && (top == 0 || l.ceil < top) {
				top = l.ceil
			}
			if top > 0 && l.rate >= top {
				// the drop was misread: the estimate returns, and the
				// next probe waits as after any step down
				l.est = math.Max(l.est, top)
				l.ph, l.rate, l.dropTo, l.fastProbe = Steady, l.est, 0, false
				l.nextProbe = now + l.probeGap()
				return
			}
			l.rate *= 2
			if top > 0 {
				l.rate = math.Min(l.rate, top)
			}
		} else if busy && (l.ceil == 0 || l.rate < l.ceil) {
			l.rate = l.capped(l.rate * 2)
		}
	case Steady:
		if now >= l.nextProbe && busy && (l.ceil == 0 || l.est < l.ceil) {
			// (nothing to learn above a ceiling in force: the pacer holds
			// the sends to it, every round would look busy and clean,
			// and the estimate would double past it every probe, to
			// +Inf under a quota of 1/s held for an hour, and a burst
			// at once when the ceiling lapsed)
			l.ph, l.proven = Probing, 0
			l.probeRds = 0
			l.rate = l.capped(l.est * (1 + l.step))
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
		if !busy && bound && now < l.capUntil {
			// the limit, held under a level a burst overloaded, bound
			// the probe before the rate did: what it let through was
			// accepted, and the rate need not hold the scope under it
			// (a cap counts what is in service, not what is sent: no
			// window's edge flatters the count)
			if a := l.accepted(now) * (1 - margin); a > l.est {
				l.est = math.Min(a, l.rate)
			}
		}
		if busy {
			// the probe rate held for a whole round: the capacity is at
			// least that (what was sent, under a ceiling)
			l.est = l.capped(l.est * (1 + l.step))
			l.step = l.nextStep(l.step * 2)
			l.fastProbe = true
		}
		l.ph = Steady
		l.rate = l.est
		l.nextProbe = now + l.probeGap()
	}
}

// capped is r under the ceiling in force, if any.
func (l *Law) capped(r float64) float64 {
	if l.ceil > 0 {
		return math.Min(r, l.ceil)
	}
	return r
}

// nextStep is the next probe's step above the estimate, want at most:
// under a rate a probe failed at (hi), half way to it, as a binary search
// does (BIC-TCP); never under firstStep. A probe that held at or above hi
// says the capacity rose past it: the bracket is forgotten.
func (l *Law) nextStep(want float64) float64 {
	if l.hi > 0 && l.est >= l.hi {
		l.hi = 0
	}
	if l.hi > 0 {
		want = math.Min(want, (l.hi/l.est-1)/2)
	}
	return math.Min(math.Max(want, firstStep), 1)
}

// probeGap is the wait before the next probe. Clean probes are cheap, so
// after one (or after a large drop) the next comes after two rounds; a failed
// probe costs a pause, so after a throttle the gap keeps that cost under
// probeBudget of the time.
func (l *Law) probeGap() time.Duration {
	if l.fastProbe {
		return 2 * l.roundLen()
	}
	return l.failedGap()
}

// failedGap is the gap after a failed probe: it keeps the pauses failed
// probes cost under probeBudget of the time.
func (l *Law) failedGap() time.Duration {
	return min(max(minProbeGap, sat.Seconds(l.lastPause.Seconds()/probeBudget)), maxProbeGap)
}

// onThrottle reacts to a throttle for a request sent in epoch at rate
// sentRate. It returns how it decreased (a fresh signal), NoCut for the
// tail of a burst already answered.
func (l *Law) onThrottle(now time.Duration, epoch uint32, sentRate float64) Cut {
	l.roundBad = true
	if epoch != l.epoch {
		return NoCut
	}
	a := l.accepted(now)
	fast := false // probe again soon: the estimate is a fresh lower bound
	var cut Cut
	searched := false
	switch {
	case l.ph == SlowStart && l.est > 0 && sentRate > l.est*(1+margin/2):
		// the search after a drop passed the capacity, which lies
		// between the drop's measurement and the rate throttled. As at
		// slow start's end the capacity is at least half that rate (the
		// last doubling held a round), less the margin. No measurement is
		// trusted above it (a second that straddles two of a fixed
		// window's windows reads up to the rate sent, twice the
		// capacity); the search goes on up with probes soon, from the
		// first step, as after a drop.
		l.est = math.Max(l.est, sentRate/2*(1-margin))
		l.hi, l.dropTo = sentRate, 0
		fast, cut, searched = true, ProbeFailed, true
	case l.est == 0:
		// slow start overshoots by at most 2x; the accepted rate can read
		// high when its second straddles two server windows, and the rate
		// just throttled is over the capacity whatever was measured. The
		// estimate is a lower bound of a bracket [est, sentRate]: search
		// up from it soon.
		l.est = math.Max(math.Min(a, sentRate), sentRate/2) * (1 - margin)
		fast, cut = true, SlowStartEnd
	case sentRate > l.est*(1+margin/2):
		// a probe above the estimate failed: the capacity is under the
		// probe rate, and at least what was accepted over the last second
		// (most of it at the probe rate, over the capacity: a saturated
		// measurement). A probe that grew far past a capacity that rose
		// under it learns the new capacity at once. A measurement in the
		// lower half of the bracket [est, sentRate] is not trusted: a
		// second that straddles two of the server's windows reads up to
		// the rate sent, and an estimate above the capacity costs a
		// throttle a window. The next probe waits the long gap (a failed
		// probe costs a pause) and goes half way to the failed rate.
		if m := math.Min(a, sentRate) * (1 - margin); m > (l.est+sentRate)/2 {
			l.proven, l.est = l.est, m
		}
		l.hi = sentRate
		if l.heldRds >= probeRounds {
			// the estimate held before the probe, and no step was taken
			// under it: a throttle soon after is a first step from it,
			// not an escalation of an older step
			l.downStep = 0
		}
		cut = ProbeFailed
	case a > 0 && a < l.est*bigDrop:
		// the capacity fell, or the second read low (it overlapped a
		// pause; a limiter that counts what it refused holds slow
		// start's overshoot against the next period): the measurement is
		// a lower bound of the capacity, the estimate a step down would
		// have left an upper one. The search between them is slow
		// start's, a doubling a clean round from the measurement, up to
		// that estimate at most: a misread drop costs a few rounds, a
		// real one a round over it. (Nothing accepted in the last second
		// is no measurement: right after a pause nothing was sent.)
		l.dropAt, l.dropTo = now, math.Min(l.est, sentRate)*(1-margin)
		l.est = math.Max(a, l.est/8)
		fast, cut = true, Drop
	case l.proven > 0 && l.proven < l.est && sentRate > l.proven && now < l.nextProbe:
		// the failed probe's measurement, taken for the new estimate,
		// did not hold before the next probe: it read the probe's
		// second, whose answers a limiter that counts what it refused
		// (or a window's edge) flattered. The estimate that held before
		// the probe returns, and the next throttle is a first step from
		// it, not an escalation of a step that was never taken. (A
		// throttle at or under that estimate says more: it is stepped
		// down from as any.)
		l.est, l.downStep = l.proven, 0
		cut = StepDown
	default:
		// a rate judged clean was throttled (a burst allowance flattered
		// it, or the capacity moved a little): a small step down. A
		// throttle that follows the last decrease within a few rounds says
		// that step was not enough: each such step grows by the margin.
		// (Stepping to the rate accepted over the last second instead was
		// tried: 8 points lost on a fixed window at 50 ms in the
		// simulator.)
		// (A law with no decrease yet, restored or seeded, takes its
		// first throttle for a first step.)
		if l.lastDecr > 0 && now-l.lastDecr < 4*l.roundLen() {
			l.downStep = math.Min(l.downStep+margin, 0.5)
		} else {
			l.downStep = margin
		}
		l.est = math.Min(l.est, sentRate) * (1 - l.downStep)
		cut = StepDown
	}
	l.lastDecr = now
	l.est = math.Max(l.est, l.cfg.MinRate)
	l.rate = l.est
	switch {
	case cut == ProbeFailed && searched:
		l.step = firstStep
	case cut == ProbeFailed:
		l.step = l.nextStep(1)
	default:
		// the capacity is under the estimate or at it: no bracket above
		l.hi, l.step = 0, firstStep
	}
	if cut != ProbeFailed {
		l.proven = 0
	}
	l.heldRds = 0
	l.ph = Steady
	if cut == Drop {
		l.ph = SlowStart
	}
	l.fastProbe = fast
	l.nextProbe = now + l.probeGap()
	l.epoch++
	l.newRound(now)
	return cut
}

// Rethrottle applies to the state in force (a fleet's, just adopted) a
// throttle it has not seen: one this process saw for a send stamped at a
// rate the fleet has since left (another process doubled it meanwhile,
// or probed). A throttle is evidence against the rate the fleet sends
// at, and counts once across the fleet: it is judged at the fleet's
// rate, not at the stale one it was stamped with, whose cut would set
// the estimate from a rate the fleet no longer sends at (a 429 at 8/s,
// while the fleet sent at 16, read as a capacity of 3.88/s).
//
// It adopts s, the fleet's state, first: the decrease this process made
// on its stale state is undone, and is no earlier decrease that the
// throttle would escalate; a concurrency cut it made (an overload that
// cut both) is kept. A state Adopt refuses leaves the law as it was: the
// throttle is already in this process's own state, and is not taken twice.
func (l *Law) Rethrottle(now time.Duration, s Shared) Cut {
	cepoch, limit, ssthresh, lastDecr := l.cepoch, l.limit, l.ssthresh, l.lastDecr
	l.lastDecr = 0
	if !l.Adopt(now, s) {
		l.lastDecr = lastDecr
		return NoCut
	}
	if cepoch > s.CEpoch {
		l.cepoch, l.limit, l.ssthresh = cepoch, limit, ssthresh
	}
	return l.onThrottle(now, l.epoch, l.rate)
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

// atCap: the overload t came at the in-flight count of the last one,
// sent since that one's cut with no decrease between, and no send at that
// count or more succeeded since: the count is the server's cap. A rate
// limiter's overloads come at whatever count its rate holds in flight,
// and sends at that count succeed between them; a concurrency cap's come
// just above the cap, and always there. A higher count is no evidence
// (the limit has just grown to it, nothing was sent there before); nor is
// one at the least concurrency, which no cut can lower (the rate must
// fall then), nor a fleet's (its count is the fleet's, the successes
// this process's).
func (l *Law) atCap(t Stamp) bool {
	return !t.Bound && !l.fleet && t.InFlight == l.overAt && t.CEpoch == l.okEpoch &&
		l.okAt < t.InFlight && int(t.InFlight) > l.cfg.MinConcurrency
}

// littleFloor keeps the concurrency an overload left (it was before at
// most) at what the rate just cut to needs by Little's law: the rate
// times the round trip. An overload is two hypotheses, too many in
// flight and too fast, and the rate's cut answers the second; a
// concurrency cut under what that rate needs would make it unreachable
// for the whole hold (a rate limiter answering 503, over a round trip
// that holds a request or two in flight at its capacity, left at one
// request in flight: 72 % of its capacity). A second overload in a row,
// with no success between, is the concurrency's: no floor then.
func (l *Law) littleFloor(before float64) {
	need := math.Ceil(l.est * float64(l.latEMA))
	if need > l.limit {
		l.limit = math.Min(need, math.Max(before, l.limit))
		l.ssthresh = float32(l.limit)
	}
}

// Shared is the part of a law a fleet of processes shares for one scope:
// the rate the fleet sends at and its estimate, the probe step, the
// concurrency limit, the phase, and the epochs that make a throttle count
// once across the fleet, the last decrease's age (a throttle soon after
// it, seen by any process, escalates the step down), the top of the
// search after a drop, and the estimate a failed probe's measurement
// replaced. NextProbe and SinceDecrease are relative to when it was
// taken; SinceDecrease is 0 for none.
type Shared struct {
	Rate, Estimate, Step, DownStep, Limit float64
	// Top is where the search after a drop stops (0: none): the
	// estimate a step down would have left. A search adopted without it
	// doubles until a throttle, past the capacity, and the throttle's
	// second then reads as a drop again.
	Top float64
	// Proven is the estimate a failed probe's measurement replaced (0:
	// none): the process that sees the next throttle gives it back, as
	// the one that probed would.
	Proven                   float64
	Epoch, CEpoch            uint32
	Phase                    Phase
	NextProbe, SinceDecrease time.Duration
}

// Shared returns the law's shared part at now; a law asked for it is a
// fleet's from then on (its rate, estimate and limit are the fleet's, and
// its stamps' in-flight counts, as the caller stamps them: Stamp.InFlight).
func (l *Law) Shared(now time.Duration) Shared {
	l.fleet = true
	return Shared{
		Rate: l.rate, Estimate: l.est, Step: l.step, DownStep: l.downStep, Limit: l.limit,
		Top: l.dropTo, Proven: l.proven, Epoch: l.epoch, CEpoch: l.cepoch, Phase: l.ph, NextProbe: max(l.nextProbe-now, 0),
		SinceDecrease: l.sinceDecrease(now),
	}
}

// sinceDecrease is the age of the last decrease at now, at least 1 ns; 0
// for none.
func (l *Law) sinceDecrease(now time.Duration) time.Duration {
	if l.lastDecr == 0 {
		return 0
	}
	return max(now-l.lastDecr, 1)
}

// Adopt takes the fleet's shared state at now: what another process decided
// (a decrease it saw, a probe it started) becomes this law's. Requests sent
// before carry the old epochs: their signals are the tail of what the fleet
// already answered. Round accounting starts again. A store is untrusted:
// values that make no sense are ignored, the rate and the estimate are
// bounded as Restore bounds them, and the concurrency limit is only ever
// lowered (a decrease decided elsewhere; increases are each process's own).
// It reports whether it took s (false: s made no sense, and nothing
// changed).
func (l *Law) Adopt(now time.Duration, s Shared) bool {
	l.fleet = true
	if !(s.Rate > 0) || !(s.Limit >= 1) || !(s.Estimate >= 0) || math.IsInf(s.Limit, 0) || s.Phase > Probing ||
		s.Phase != SlowStart && !(s.Estimate > 0) {
		// (past slow start a law has an estimate: with none, the first
		// probe would go at 0 and the rate stay at the floor for good)
		return false
	}
	rate := l.bounded(s.Rate)
	est := 0.0
	if s.Estimate > 0 {
		est = l.bounded(s.Estimate)
	}
	moved := rate != l.rate || s.Epoch != l.epoch || s.Phase != l.ph
	if moved {
		// another process's decision: this one's last drop is not the
		// fleet's, but the search after the fleet's drop stops where
		// it would have stopped in the process that began it
		l.dropTo, l.proven = 0, 0
		if s.Phase == SlowStart && est > 0 && s.Top > 0 {
			l.dropTo = l.bounded(s.Top)
		}
		if s.Proven > 0 && s.Proven < est {
			l.proven = l.bounded(s.Proven)
		}
	}
	if s.Epoch != l.epoch {
		// a decrease decided elsewhere: the estimate has held nothing
		// since
		l.heldRds = 0
	}
	l.rate, l.est = rate, est
	if s.Step > 0 && s.Step <= 1 {
		l.step = s.Step
	}
	if s.DownStep >= 0 && s.DownStep <= 0.5 {
		l.downStep = s.DownStep // 0: the next step down is a first one
	}
	if s.CEpoch != l.cepoch && s.Limit < l.limit {
		l.limit = math.Max(math.Floor(s.Limit), float64(l.cfg.MinConcurrency))
		l.ssthresh = float32(l.limit)
	}
	l.epoch, l.cepoch, l.ph = s.Epoch, s.CEpoch, s.Phase
	l.nextProbe = now + min(max(s.NextProbe, 0), maxProbeGap)
	if s.SinceDecrease > 0 && s.SinceDecrease < now {
		// the fleet's last decrease, if it is newer than this law's own
		l.lastDecr = max(l.lastDecr, now-s.SinceDecrease)
	}
	if moved {
		// rounds judge one rate: a new one starts
		l.probeRds = 0
		l.newRound(now)
	}
	return true
}
