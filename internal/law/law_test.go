package law_test

import (
	"cmp"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/internal/law"
)

const (
	ms  = time.Millisecond
	sec = time.Second
)

var cfg = law.Config{InitialRate: 2, MinRate: 0.05, StartConcurrency: 4, MinConcurrency: 1, MaxConcurrency: 64}

// ev is one thing that happens to a law, at a time, and what must hold
// after it. A zero expectation is not checked (use want* fields for 0 with
// the check flags).
type ev struct {
	at time.Duration
	// send: a send at rate (inflight in flight, the limit in use or not),
	// kept as ticket number id (paced: the pacer held it back). ok, 429,
	// 503, refused: the answer to ticket id. ceil: the lowest ceiling is rate.
	// hold: hold increases until at+d. pause: a pause of d from at.
	// rtt: an answer's round trip was d. fleet: the law's state is
	// shared (Shared is asked for).
	do       string
	id       int
	rate     float64
	inflight int
	inUse    bool
	paced    bool // send: the pacer held it back
	bound    bool // send: inflight is a bound (a fleet's send that waited for its slot)
	d        time.Duration

	wantRate, wantEst, wantLimit float64
	wantPhase                    string
	wantFresh, wantDecreased     *bool
	wantCut                      string // Verdict.Cut
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

func play(t *testing.T, c law.Config, evs []ev) {
	t.Helper()
	var l law.Law
	l.Init(&c, 0)
	tickets := map[int]law.Stamp{}
	for i, e := range evs {
		where := fmt.Sprintf("event %d (%s at %v)", i, e.do, e.at)
		var v law.Verdict
		switch e.do {
		case "send":
			tickets[e.id] = l.Sent(e.at, e.rate, max(e.inflight, 1), e.inUse, e.paced)
			if e.bound {
				st := tickets[e.id]
				st.Bound = true
				tickets[e.id] = st
			}
		case "ok", "429", "503", "refused":
			tk, ok := tickets[e.id]
			require.True(t, ok, "%s: no ticket %d", where, e.id)
			sig := map[string]law.Signal{"ok": law.Success, "429": law.Throttled, "503": law.Overloaded, "refused": law.Refused}[e.do]
			v = l.Observe(e.at, tk, sig)
		case "ceil":
			l.SetCeiling(e.rate)
		case "hold":
			l.Hold(e.at, e.at+e.d)
		case "pause":
			l.Paused(e.at, e.at+e.d, e.d)
		case "rtt":
			l.RoundTrip(e.d)
		case "fleet":
			l.Shared(e.at)
		case "restore":
			l.Restore(e.at, e.rate, 4)
		default:
			t.Fatalf("%s: unknown event", where)
		}
		if e.wantRate != 0 {
			assert.InDelta(t, e.wantRate, l.Rate(), 1e-9, "%s: rate", where)
		}
		if e.wantEst != 0 {
			assert.InDelta(t, e.wantEst, l.Estimate(), 1e-9, "%s: estimate", where)
		}
		if e.wantLimit != 0 {
			assert.InDelta(t, e.wantLimit, l.Limit(), 1e-9, "%s: limit", where)
		}
		if e.wantPhase != "" {
			assert.Equal(t, e.wantPhase, l.Phase().String(), "%s: phase", where)
		}
		if e.wantFresh != nil {
			assert.Equal(t, *e.wantFresh, v.Fresh, "%s: fresh", where)
		}
		if e.wantDecreased != nil {
			assert.Equal(t, *e.wantDecreased, v.Decreased, "%s: decreased", where)
		}
		if e.wantCut != "" {
			assert.Equal(t, e.wantCut, v.Cut.String(), "%s: cut", where)
		}
	}
}

// busyRound is one round of a second in which the pacer held sends back
// and a send at rate came back accepted at the end: a clean, busy round.
func busyRound(from time.Duration, id int, rate float64) []ev {
	return []ev{
		{at: from, do: "send", id: id, rate: rate, paced: true},
		{at: from + sec, do: "ok", id: id},
	}
}

func seq(parts ...[]ev) []ev {
	var out []ev
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestSlowStart(t *testing.T) {
	t.Run("doubles per clean busy round", func(t *testing.T) {
		play(t, cfg, seq(
			[]ev{{do: "send", id: 1, rate: 2, paced: true}},
			[]ev{{at: 500 * ms, do: "ok", id: 1, wantRate: 2, wantPhase: "slow-start"}}, // the round lasts a second
			[]ev{{at: sec, do: "send", id: 2, rate: 2, paced: true}, {at: sec, do: "ok", id: 2, wantRate: 4}},
			busyRound(sec, 3, 4),
			[]ev{{at: 2 * sec, do: "send", id: 4, rate: 8, paced: true}, {at: 3 * sec, do: "ok", id: 4, wantRate: 16}},
		))
	})
	t.Run("not when the rate was not the bottleneck (no send held back)", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 2},
			{at: sec, do: "ok", id: 1, wantRate: 2},
			{at: sec, do: "send", id: 2, rate: 2},
			{at: 2 * sec, do: "ok", id: 2, wantRate: 2},
		})
	})
	t.Run("never past the ceiling", func(t *testing.T) {
		play(t, cfg, seq(
			[]ev{{do: "ceil", rate: 3}},
			busyRound(0, 1, 2),
			[]ev{{at: sec, do: "ok", id: 1, wantRate: 3}},
			busyRound(sec, 2, 3),
			[]ev{{at: 2 * sec, do: "ok", id: 2, wantRate: 3}},
		))
	})
	t.Run("the limit grows by one per success while in use", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 2, inflight: 4, inUse: true},
			{at: 100 * ms, do: "ok", id: 1, wantLimit: 5},
			{at: 100 * ms, do: "send", id: 2, rate: 2, inflight: 2},
			{at: 200 * ms, do: "ok", id: 2, wantLimit: 5}, // not in use: no increase
		})
	})
}

func TestThrottle(t *testing.T) {
	t.Run("the first ends slow start at an estimate", func(t *testing.T) {
		// nothing accepted in the last second: the rate throttled is over
		// the capacity, and slow start overshoots by at most 2x
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 8},
			{at: 100 * ms, do: "429", id: 1, wantEst: 4 * 0.97, wantRate: 4 * 0.97, wantPhase: "steady", wantFresh: yes, wantDecreased: yes, wantCut: "slow-start-end"},
		})
	})
	t.Run("the first, bounded by what was accepted", func(t *testing.T) {
		evs := []ev{}
		// 6 accepted in the last second, the throttle at 8/s: the estimate
		// is between half the rate throttled and the rate accepted
		for i := range 6 {
			evs = append(evs, ev{at: time.Duration(i) * 125 * ms, do: "send", id: i, rate: 8},
				ev{at: time.Duration(i)*125*ms + 10*ms, do: "ok", id: i})
		}
		evs = append(evs, ev{at: 875 * ms, do: "send", id: 9, rate: 8},
			ev{at: 875 * ms, do: "429", id: 9, wantEst: 6 / 0.875 * 0.97})
		play(t, cfg, evs)
	})
	t.Run("the tail of a burst is one signal", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 8}, {do: "send", id: 2, rate: 8}, {do: "send", id: 3, rate: 8},
			{at: 100 * ms, do: "429", id: 1, wantEst: 3.88, wantDecreased: yes},
			{at: 100 * ms, do: "429", id: 2, wantEst: 3.88, wantFresh: no, wantDecreased: no, wantCut: "none"},
			{at: 110 * ms, do: "429", id: 3, wantEst: 3.88, wantFresh: no, wantDecreased: no},
			{at: 200 * ms, do: "send", id: 4, rate: 3.88},
			{at: 300 * ms, do: "429", id: 4, wantFresh: yes, wantDecreased: yes},
		})
	})
	t.Run("a rate judged clean steps down a little, more if it keeps coming", func(t *testing.T) {
		evs := []ev{{do: "send", id: 1, rate: 20}, {at: 10 * ms, do: "429", id: 1, wantEst: 10 * 0.97}}
		// steady at 9.7, accepted at that rate for a second, more than four
		// rounds after the last decrease
		for i := range 10 {
			at := 5*sec + time.Duration(i)*100*ms
			evs = append(evs, ev{at: at, do: "send", id: 10 + i, rate: 9.7}, ev{at: at + 5*ms, do: "ok", id: 10 + i})
		}
		evs = append(evs,
			ev{at: 6 * sec, do: "send", id: 30, rate: 9.7},
			ev{at: 6*sec + 5*ms, do: "429", id: 30, wantEst: 9.7 * 0.97, wantCut: "step-down"},
			// within four rounds of it: the step was not enough
			ev{at: 6*sec + 10*ms, do: "send", id: 31, rate: 9.7 * 0.97},
			ev{at: 6*sec + 20*ms, do: "429", id: 31, wantEst: 9.7 * 0.97 * 0.94, wantCut: "step-down"})
		play(t, cfg, evs)
	})
	t.Run("the first throttle after a restored estimate is a first step", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "restore", rate: 10},
			{at: 500 * ms, do: "send", id: 1, rate: 10},
			{at: 600 * ms, do: "429", id: 1, wantEst: 10 * 0.97, wantCut: "step-down"},
		})
	})
	t.Run("a capacity drop is measured", func(t *testing.T) {
		evs := []ev{{do: "send", id: 1, rate: 80}, {at: 10 * ms, do: "429", id: 1, wantEst: 40 * 0.97}}
		// at 38.8 the server now accepts 8 a second, far under 70 %: seven
		// of them in the 875 ms the measurement covers at 2 s
		for i := range 8 {
			at := sec + time.Duration(i)*125*ms
			evs = append(evs, ev{at: at, do: "send", id: 10 + i, rate: 38.8}, ev{at: at + 5*ms, do: "ok", id: 10 + i})
		}
		evs = append(evs, ev{at: 2 * sec, do: "send", id: 30, rate: 38.8},
			ev{at: 2 * sec, do: "429", id: 30, wantEst: 7 / 0.875, wantCut: "drop-detected"})
		play(t, cfg, evs)
	})
	aDrop := func() []ev {
		evs := []ev{{do: "send", id: 1, rate: 80}, {at: 10 * ms, do: "429", id: 1, wantEst: 40 * 0.97}}
		for i := range 8 {
			at := sec + time.Duration(i)*125*ms
			evs = append(evs, ev{at: at, do: "send", id: 10 + i, rate: 38.8}, ev{at: at + 5*ms, do: "ok", id: 10 + i})
		}
		return append(evs, ev{at: 2 * sec, do: "send", id: 30, rate: 38.8},
			ev{at: 2 * sec, do: "429", id: 30, wantEst: 7 / 0.875, wantCut: "drop-detected"})
	}
	// the same drop: the measurement is a lower bound, the estimate a step
	// down would have left an upper one, and the search between them is
	// slow start's, a doubling a clean round
	back := 38.8 * 0.97
	t.Run("after a drop the rate doubles a clean round, up to where a step down would have left it", func(t *testing.T) {
		play(t, cfg, seq(aDrop(),
			[]ev{{at: 2 * sec, do: "send", id: 39, rate: 8, wantRate: 7 / 0.875, wantPhase: "slow-start"}},
			busyRound(2*sec, 40, 8),
			[]ev{{at: 3 * sec, do: "send", id: 50, rate: 16, wantRate: 16, wantEst: 7 / 0.875}},
			busyRound(3*sec, 41, 16),
			[]ev{{at: 4 * sec, do: "send", id: 51, rate: 32, wantRate: 32}},
			busyRound(4*sec, 42, 32),
			[]ev{{at: 5 * sec, do: "send", id: 52, rate: back, wantRate: back, wantPhase: "slow-start"}},
			busyRound(5*sec, 43, back),
			// the top held: the capacity did not fall after all
			[]ev{{at: 6 * sec, do: "send", id: 53, rate: back, wantRate: back, wantEst: back, wantPhase: "steady"}},
		))
	})
	t.Run("under a ceiling the search after a drop ends at the ceiling", func(t *testing.T) {
		play(t, cfg, seq(aDrop(),
			[]ev{{at: 2 * sec, do: "ceil", rate: 12}},
			busyRound(2*sec, 40, 8),
			[]ev{{at: 3 * sec, do: "send", id: 50, rate: 12, wantRate: 12, wantPhase: "slow-start"}},
			busyRound(3*sec, 41, 12),
			[]ev{{at: 4 * sec, do: "send", id: 51, rate: 12, wantEst: 12, wantPhase: "steady"}},
		))
	})
	t.Run("a search after a drop that passes the capacity: half the rate throttled, then probes soon", func(t *testing.T) {
		play(t, cfg, seq(aDrop(),
			busyRound(2*sec, 40, 8), busyRound(3*sec, 41, 16),
			[]ev{
				{at: 4 * sec, do: "send", id: 99, rate: 32, wantRate: 32},
				{at: 4*sec + 10*ms, do: "429", id: 99, wantEst: 16 * 0.97, wantPhase: "steady", wantCut: "probe-failure"},
			},
			// the search goes on up from there, soon, from the first step
			busyRound(4*sec+10*ms, 42, 16*0.97), busyRound(5*sec+10*ms, 43, 16*0.97),
			[]ev{{at: 6*sec + 10*ms, do: "send", id: 97, rate: 16 * 0.97, wantRate: 16 * 0.97 * 1.03, wantPhase: "probing"}},
		))
	})
}

func TestProbe(t *testing.T) {
	start := []ev{{do: "send", id: 1, rate: 20}, {at: 10 * ms, do: "429", id: 1, wantEst: 9.7}}
	// probes hold three busy rounds above the estimate; then it moves up
	probe := func(from time.Duration, id int, est float64) []ev {
		evs := []ev{}
		for r := range 3 {
			evs = append(evs, busyRound(from+time.Duration(r)*sec, id+r, est*1.03)...)
		}
		evs[len(evs)-1].wantEst, evs[len(evs)-1].wantPhase = est*1.03, "steady"
		return evs
	}
	t.Run("the first throttle brackets the capacity: search up two rounds later", func(t *testing.T) {
		evs := seq(start,
			busyRound(sec, 2, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 3, rate: 9.7, paced: true}, {at: 3 * sec, do: "ok", id: 3, wantPhase: "probing", wantRate: 9.7 * 1.03}},
			probe(3*sec, 4, 9.7),
			// clean probes are cheap: the next comes two rounds later,
			// twice as far above
			busyRound(6*sec, 10, 9.7*1.03),
			[]ev{{at: 7 * sec, do: "send", id: 11, rate: 9.7 * 1.03, paced: true}, {at: 8 * sec, do: "ok", id: 11, wantPhase: "probing", wantRate: 9.7 * 1.03 * 1.06}},
		)
		play(t, cfg, evs)
	})
	t.Run("a failed probe leaves the estimate and waits the long gap", func(t *testing.T) {
		evs := seq(start, busyRound(sec, 2, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 3, rate: 9.7, paced: true}, {at: 3 * sec, do: "ok", id: 3, wantPhase: "probing"}},
			[]ev{{at: 3 * sec, do: "send", id: 4, rate: 9.7 * 1.03},
				{at: 3*sec + 10*ms, do: "429", id: 4, wantEst: 9.7, wantRate: 9.7, wantPhase: "steady", wantDecreased: yes, wantCut: "probe-failure"}},
			// no pause: the gap is the 10 s minimum
			busyRound(12*sec, 5, 9.7),
			[]ev{{at: 13 * sec, do: "send", id: 6, rate: 9.7, paced: true}, {at: 13*sec + 5*ms, do: "ok", id: 6, wantPhase: "steady"}},
			busyRound(14*sec, 7, 9.7),
			[]ev{{at: 15 * sec, do: "send", id: 8, rate: 9.7, paced: true}, {at: 15*sec + 5*ms, do: "ok", id: 8, wantPhase: "probing"}},
		)
		play(t, cfg, evs)
	})
	t.Run("a throttle after a failed probe escalates only a step the estimate did not hold", func(t *testing.T) {
		// slow start's end, then its fast probe two rounds later fails:
		// the estimate had not held three rounds, and a throttle soon
		// after escalates the step as after slow start's end (6 %)
		fast := seq(start, busyRound(sec, 2, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 3, rate: 9.7, paced: true}, {at: 3 * sec, do: "ok", id: 3, wantPhase: "probing"},
				{at: 3 * sec, do: "send", id: 4, rate: 9.7 * 1.03},
				{at: 3*sec + 10*ms, do: "429", id: 4, wantCut: "probe-failure"}})
		play(t, cfg, seq(fast, []ev{{at: 4 * sec, do: "send", id: 5, rate: 9.7},
			{at: 4*sec + 10*ms, do: "429", id: 5, wantEst: 9.7 * 0.94, wantCut: "step-down"}}))
		// the next probe, after the estimate held for the gap, fails
		// too: a throttle soon after is a first step from it (3 %)
		var held []ev
		for r := range 10 {
			held = append(held, busyRound(4*sec+time.Duration(r)*sec, 10+r, 9.7)...)
		}
		held[len(held)-1].wantPhase = "probing"
		play(t, cfg, seq(fast, held, []ev{{at: 14 * sec, do: "send", id: 30, rate: 9.7 * 1.03},
			{at: 14*sec + 10*ms, do: "429", id: 30, wantCut: "probe-failure"},
			{at: 15 * sec, do: "send", id: 31, rate: 9.7},
			{at: 15*sec + 10*ms, do: "429", id: 31, wantEst: 9.7 * 0.97, wantCut: "step-down"}}))
	})
	// n answers accepted at even spacing over [1.125 s, 2 s): the last
	// second's measurement at 2 s is n / 0.875 s
	accepted := func(n, id int, rate float64) []ev {
		var evs []ev
		for i := range n {
			at := 1125*ms + time.Duration(i)*875*ms/time.Duration(n)
			evs = append(evs, ev{at: at, do: "send", id: id + i, rate: rate}, ev{at: at + ms, do: "ok", id: id + i})
		}
		return evs
	}
	t.Run("a probe far past a risen capacity learns it from what was accepted", func(t *testing.T) {
		// est 9.7; a probe sent at 20/s fails while 14 were accepted in
		// the last 0.875 s (16/s): the capacity is in [16, 20), over the
		// middle of the bracket [9.7, 20], so the estimate is the
		// measurement less the margin, and the next probe goes half way
		// to 20
		est := 16 * 0.97
		evs := seq(start, accepted(14, 10, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 4, rate: 20},
				{at: 2 * sec, do: "429", id: 4, wantEst: est, wantRate: est, wantPhase: "steady", wantCut: "probe-failure"}},
			busyRound(11*sec, 30, est),
			[]ev{{at: 12 * sec, do: "send", id: 31, rate: est, paced: true}, {at: 12*sec + 5*ms, do: "ok", id: 31, wantPhase: "probing", wantRate: est * (1 + (20/est-1)/2)}},
		)
		play(t, cfg, evs)
	})
	t.Run("a failed probe's measurement that does not hold gives the estimate before it back", func(t *testing.T) {
		// as above, the probe at 20/s learns 16/s less the margin; the
		// next throttle, at that estimate, says the measurement was
		// flattered: 9.7 returns (not a step down from 15.52), and a
		// throttle after it is a first step, not an escalation
		est := 16 * 0.97
		evs := seq(start, accepted(14, 10, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 4, rate: 20},
				{at: 2 * sec, do: "429", id: 4, wantEst: est, wantCut: "probe-failure"},
				{at: 3 * sec, do: "send", id: 5, rate: est},
				{at: 3*sec + 10*ms, do: "429", id: 5, wantEst: 9.7, wantRate: 9.7, wantPhase: "steady", wantCut: "step-down"},
				{at: 4 * sec, do: "send", id: 6, rate: 9.7},
				{at: 4*sec + 10*ms, do: "429", id: 6, wantEst: 9.7 * 0.97, wantCut: "step-down"}},
		)
		play(t, cfg, evs)
	})
	t.Run("the measurement's hypothesis ends at the next probe, or at a rate under what held", func(t *testing.T) {
		est := 16 * 0.97
		failed := seq(start, accepted(14, 10, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 4, rate: 20},
				{at: 2 * sec, do: "429", id: 4, wantEst: est, wantCut: "probe-failure"}})
		// a throttle of a send at 9.7 or under (a ceiling held it there)
		// says 9.7 is no better: a step down from what was sent (the
		// second since slow start's end, whose estimate held no round:
		// escalated)
		play(t, cfg, seq(failed, []ev{{at: 3 * sec, do: "send", id: 5, rate: 9},
			{at: 3*sec + 10*ms, do: "429", id: 5, wantEst: 9 * 0.94, wantCut: "step-down"}}))
		// the measurement held to the next probe, which failed: a throttle
		// after it steps down from the measurement, which it no longer
		// doubts
		var held []ev
		for r := range 10 {
			held = append(held, busyRound(2*sec+time.Duration(r)*sec, 30+r, est)...)
		}
		held[len(held)-1].wantPhase = "probing"
		play(t, cfg, seq(failed, held, []ev{{at: 12 * sec, do: "send", id: 50, rate: est * 1.03},
			{at: 12*sec + 10*ms, do: "429", id: 50, wantEst: est, wantCut: "probe-failure"},
			{at: 13 * sec, do: "send", id: 51, rate: est},
			{at: 13*sec + 10*ms, do: "429", id: 51, wantEst: est * 0.97, wantCut: "step-down"}}))
	})
	t.Run("in a fleet, the process that sees the throttle gives the estimate back", func(t *testing.T) {
		c := cfg
		var a, b law.Law
		a.Init(&c, 0)
		b.Init(&c, 0)
		tk := a.Sent(0, 20, 1, false, true)
		require.Equal(t, law.SlowStartEnd, a.Observe(10*ms, tk, law.Throttled).Cut)
		for i := range 14 { // 16/s accepted over the last 0.875 s, as above
			at := 1125*ms + time.Duration(i)*875*ms/14
			tk := a.Sent(at, 9.7, 1, false, false)
			a.Observe(at+ms, tk, law.Success)
		}
		tk = a.Sent(2*sec, 20, 1, false, true)
		require.Equal(t, law.ProbeFailed, a.Observe(2*sec, tk, law.Throttled).Cut)
		b.Adopt(2*sec+ms, a.Shared(2*sec+ms))
		assert.InDelta(t, 16*0.97, b.Estimate(), 1e-9)
		tb := b.Sent(3*sec, b.Rate(), 1, false, false)
		assert.Equal(t, law.StepDown, b.Observe(3*sec+10*ms, tb, law.Throttled).Cut)
		assert.InDelta(t, 9.7, b.Estimate(), 1e-9, "b gives back the estimate a's probe replaced")
		a.Adopt(3*sec+20*ms, b.Shared(3*sec+20*ms))
		ta := a.Sent(4*sec, a.Rate(), 1, false, false)
		a.Observe(4*sec+10*ms, ta, law.Throttled)
		assert.InDelta(t, 9.7*0.97, a.Estimate(), 1e-9, "and the next throttle, in a, is a first step from it")
	})
	t.Run("at the top of a bracket the estimate stands and the next probe goes half way", func(t *testing.T) {
		// a probe at 12/s fails with 9 accepted in 0.875 s (10.3/s): in
		// the lower half of [9.7, 12], which a second straddling two
		// windows can read too high; the estimate stands and the next
		// probe is at the middle, 10.85/s, not back at 12
		evs := seq(start, accepted(9, 10, 9.7),
			[]ev{{at: 2 * sec, do: "send", id: 4, rate: 12},
				{at: 2 * sec, do: "429", id: 4, wantEst: 9.7, wantRate: 9.7, wantPhase: "steady", wantCut: "probe-failure"}},
			busyRound(11*sec, 30, 9.7),
			[]ev{{at: 12 * sec, do: "send", id: 31, rate: 9.7, paced: true}, {at: 12*sec + 5*ms, do: "ok", id: 31, wantPhase: "probing", wantRate: (9.7 + 12) / 2}},
		)
		play(t, cfg, evs)
	})
	t.Run("the gap keeps failed probes' pauses under 2 % of the time, at most two minutes", func(t *testing.T) {
		for _, tc := range []struct {
			pause, gap time.Duration
		}{{sec, 50 * sec}, {30 * sec, 2 * time.Minute}} {
			evs := seq(start, busyRound(sec, 2, 9.7),
				[]ev{{at: 2 * sec, do: "send", id: 3, rate: 9.7, paced: true}, {at: 3 * sec, do: "ok", id: 3, wantPhase: "probing"}},
				[]ev{{at: 3 * sec, do: "send", id: 4, rate: 9.7 * 1.03},
					{at: 3*sec + 10*ms, do: "pause", d: tc.pause},
					{at: 3*sec + 10*ms, do: "429", id: 4, wantPhase: "steady"}},
				busyRound(3*sec+tc.gap-2*sec, 5, 9.7),
				[]ev{{at: 3*sec + tc.gap - sec, do: "send", id: 6, rate: 9.7, paced: true}, {at: 3*sec + tc.gap - sec + 5*ms, do: "ok", id: 6, wantPhase: "steady"}},
				busyRound(3*sec+tc.gap, 7, 9.7),
				[]ev{{at: 4*sec + tc.gap, do: "send", id: 8, rate: 9.7, paced: true}, {at: 4*sec + tc.gap + 5*ms, do: "ok", id: 8, wantPhase: "probing"}},
			)
			t.Run(tc.pause.String(), func(t *testing.T) { play(t, cfg, evs) })
		}
	})
}

func TestOverload(t *testing.T) {
	t.Run("the limit falls to what was in flight, halves in a row", func(t *testing.T) {
		c := cfg
		c.StartConcurrency = 16
		play(t, c, []ev{
			{do: "send", id: 1, rate: 2, inflight: 10},
			{at: 10 * ms, do: "503", id: 1, wantLimit: 9, wantDecreased: yes},
			{at: 20 * ms, do: "send", id: 2, rate: 2, inflight: 9},
			{at: 30 * ms, do: "503", id: 2, wantLimit: 4, wantDecreased: yes},
			{at: 30 * ms, do: "send", id: 3, rate: 2, inflight: 2},
			{at: 40 * ms, do: "send", id: 4, rate: 2, inflight: 3},
			{at: 50 * ms, do: "503", id: 3, wantLimit: 1, wantDecreased: yes},
			{at: 50 * ms, do: "503", id: 4, wantLimit: 1, wantFresh: no, wantDecreased: no},
		})
	})
	t.Run("a hold stops increases until it ends", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 2, inflight: 4},
			{at: 10 * ms, do: "503", id: 1, wantLimit: 3},
			{at: 10 * ms, do: "hold", d: 10 * sec},
			{at: sec, do: "send", id: 2, rate: 2, inflight: 3, inUse: true},
			{at: sec + 10*ms, do: "ok", id: 2, wantLimit: 3},
			{at: 11 * sec, do: "send", id: 3, rate: 2, inflight: 3, inUse: true},
			{at: 11*sec + 10*ms, do: "ok", id: 3, wantLimit: 3 + 1.0/3},
		})
	})
	// held is a law at a 100-ms unloaded round trip sending at 40/s, just
	// overloaded at 4 in flight (a cut the rate explains: no burst cap on
	// the limit) with 10 answers to earlier sends still to come, held for
	// 10 s from the end of a pause of pause (none: 0); at is the pause's
	// end. round sends n requests over a second (paced: the pacer held
	// them back), each answered at once with round trip d (429 for the
	// fail-th, counted from 1; 0: none).
	held := func(c law.Config, pause time.Duration) *heldLaw {
		h := &heldLaw{l: new(law.Law)}
		h.l.Init(&c, 0)
		h.round(100*ms, 40, true, 0)
		h.round(100*ms, 40, true, 0)
		for range 10 {
			h.tails = append(h.tails, h.l.Sent(h.at, 40, 4, true, false))
		}
		tk := h.l.Sent(h.at, 40, 4, true, false)
		h.at += 10 * ms
		if pause > 0 {
			h.l.Paused(h.at, h.at+pause, pause) // the pause first, as the caller does
		}
		h.l.Observe(h.at, tk, law.Overloaded)
		h.cut = h.l.Limit()
		h.l.Hold(h.at+pause, h.at+pause+10*sec)
		h.until = h.at + pause + 10*sec
		return h
	}
	tailsIn := func(h *heldLaw, d time.Duration) {
		for _, tk := range h.tails { // the answers to sends before the overload
			h.at += 20 * ms
			h.answer(d, tk)
		}
	}
	// afterPause: held, the tails answered in the pause, the clock at its end
	afterPause := func() *heldLaw {
		h := held(cfg, sec)
		tailsIn(h, 100*ms)
		h.at = h.until - 10*sec
		return h
	}
	t.Run("a hold ends with a cohort sent after the pause at the unloaded round trip", func(t *testing.T) {
		h := held(cfg, sec)
		tailsIn(h, 100*ms)
		h.at = h.until - 10*sec // the pause's end
		h.round(100*ms, 3, true, 0)
		assert.NotZero(t, h.l.HeldUntil(), "3 answers are no cohort yet")
		assert.Equal(t, h.cut, h.l.Limit(), "no increase under the hold")
		h.round(100*ms, 40, true, 0)
		assert.Zero(t, h.l.HeldUntil(), "the origin answered at its unloaded round trip: it does not struggle")
		before := h.l.Limit()
		h.round(100*ms, 40, true, 0)
		assert.Greater(t, h.l.Limit(), before, "increases resume after the hold")
	})
	t.Run("a cohort sent under the rate and the limit is no test", func(t *testing.T) {
		h := afterPause()
		h.under = true
		h.round(100*ms, 40, false, 0)
		h.round(100*ms, 40, false, 0)
		assert.NotZero(t, h.l.HeldUntil(), "a scope under its allowance says nothing of the origin at its level")
		h.round(100*ms, 40, true, 0)
		assert.Zero(t, h.l.HeldUntil(), "the same cohort, the pacer holding it back, is a test")
	})
	t.Run("a cohort sent with the limit full is a test, paced or not", func(t *testing.T) {
		// the overload left the limit under what the rate needs: the
		// limit binds, not the pacer, and the cohort tests the level of
		// concurrency the overload left
		h := afterPause()
		h.round(100*ms, 40, false, 0)
		assert.Zero(t, h.l.HeldUntil(), "a cohort at the limit's level, answered at the unloaded round trip")
	})
	t.Run("a cohort with a throttle keeps the hold, the next is tested", func(t *testing.T) {
		h := afterPause()
		h.round(100*ms, 4, true, 2) // a round's length: the cohort is judged at its last answer
		assert.NotZero(t, h.l.HeldUntil(), "a cohort with a failure passes no test")
		h.round(100*ms, 40, true, 0)
		assert.Zero(t, h.l.HeldUntil(), "the next cohort, at the new rate, answered at the unloaded round trip")
	})
	t.Run("answers to sends before the overload are no evidence", func(t *testing.T) {
		// a 503 without Retry-After pauses nothing: the hold's test
		// begins at once, while the earlier sends' answers come in fast
		h := held(cfg, 0)
		cohort := h.sends(6, 200*ms)
		tailsIn(h, 100*ms) // the earlier sends answer fast while the cohort is out
		h.answer(300*ms, cohort...)
		for h.at < h.until-sec {
			h.round(300*ms, 3, true, 0)
			require.NotZero(t, h.l.HeldUntil(), "at %v: the cohort answered three times slower than unloaded", h.at)
		}
	})
	t.Run("sends inside the pause are no cohort", func(t *testing.T) {
		h := held(cfg, 3*sec)
		tailsIn(h, 100*ms)
		h.at = h.until - 10*sec - 2500*ms // inside the pause (a fleet's deferred send may go)
		for range 5 {                     // as many as a cohort, over more than a round
			tk := h.send()
			h.at += 400 * ms
			h.answer(100*ms, tk)
		}
		h.at = h.until - 10*sec
		for h.at < h.until-sec {
			h.round(300*ms, 40, true, 0)
			require.NotZero(t, h.l.HeldUntil(), "at %v: the cohort sent after the pause answered three times slower than unloaded", h.at)
		}
	})
	t.Run("a cohort is judged when all of it is answered", func(t *testing.T) {
		h := afterPause()
		late := h.halfAnswered()
		h.at += sec
		h.round(100*ms, 3, true, 0) // the cohort's round ends, and it is closed
		assert.NotZero(t, h.l.HeldUntil(), "half the cohort is in flight")
		h.answer(100*ms, late...)
		assert.Zero(t, h.l.HeldUntil(), "the whole cohort answered at the unloaded round trip")
	})
	t.Run("a decrease while the cohort is out keeps the hold", func(t *testing.T) {
		h := afterPause()
		late := h.sends(4, 300*ms)
		h.round(100*ms, 2, true, 1) // after the cohort: a throttle, a decrease
		h.answer(100*ms, late...)
		assert.NotZero(t, h.l.HeldUntil(), "the cohort's answers were good, but the scope decreased since it began")
	})
	t.Run("a cohort's late answers are judged too", func(t *testing.T) {
		h := afterPause()
		late := h.halfAnswered()
		h.at += sec
		h.answer(400*ms, late...)
		h.round(100*ms, 3, true, 0)
		assert.NotZero(t, h.l.HeldUntil(), "half the cohort answered in 400 ms, four times the unloaded round trip")
	})
	t.Run("a hold armed again keeps the baseline of the one in force", func(t *testing.T) {
		for _, c := range []law.Config{cfg, {InitialRate: 2, MinRate: 0.05, StartConcurrency: 1, MinConcurrency: 1, MaxConcurrency: 1}} {
			h := held(c, sec)
			tailsIn(h, 100*ms)
			h.at = h.until - 10*sec
			for range 4 { // a struggling origin: its queue test may measure the unloaded round trip again
				h.round(300*ms, 40, true, 0)
			}
			tk := h.send()
			h.at += 10 * ms
			h.l.Paused(h.at, h.at+sec, sec)
			h.l.Observe(h.at, tk, law.Overloaded) // it fails again
			h.l.Hold(h.at+sec, h.at+11*sec)
			h.until = h.at + 11*sec
			h.at += sec
			for h.at < h.until-sec {
				h.round(300*ms, 40, true, 0)
				require.NotZero(t, h.l.HeldUntil(), "limit at most %d, at %v: still three times slower than before the first hold", c.MaxConcurrency, h.at)
			}
		}
	})
	t.Run("a hold armed again begins a cohort of its own", func(t *testing.T) {
		h := afterPause()
		old := h.sends(6, 200*ms)
		h.l.Hold(h.at, h.at+10*sec) // another overload's
		h.until = h.at + 10*sec
		cohort := h.sends(6, 200*ms)
		h.answer(100*ms, old...) // the first cohort's answers: no part of the second
		h.answer(300*ms, cohort...)
		h.round(300*ms, 3, true, 0)
		assert.NotZero(t, h.l.HeldUntil())
	})
	t.Run("sends dropped from a cohort", func(t *testing.T) {
		h := afterPause()
		cohort := h.sends(6, 200*ms)
		h.l.Dropped(h.at, cohort[0], false) // canceled, or a 404: no evidence
		h.answer(100*ms, cohort[1:]...)
		assert.Zero(t, h.l.HeldUntil(), "the cohort less one that said nothing of the load")

		h = afterPause()
		cohort = h.sends(6, 200*ms)
		h.l.Dropped(h.at, cohort[0], true) // a block, no success
		h.answer(100*ms, cohort[1:]...)
		assert.NotZero(t, h.l.HeldUntil(), "a cohort with a failure passes no test")
		h.round(100*ms, 40, true, 0)
		assert.Zero(t, h.l.HeldUntil(), "the next cohort is tested")

		h = afterPause()
		cohort = h.sends(4, 300*ms)
		h.send() // a round on: the cohort is closed
		for _, tk := range cohort[:3] {
			h.l.Dropped(h.at, tk, false)
		}
		h.answer(100*ms, cohort[3])
		assert.NotZero(t, h.l.HeldUntil(), "one answer is no cohort")
	})
	t.Run("a slow scope's cohort waits for its fourth send", func(t *testing.T) {
		h := afterPause()
		for range 12 { // 2.5/s: a round holds two or three
			tk := h.send()
			h.at += 400 * ms
			h.answer(100*ms, tk)
		}
		assert.Zero(t, h.l.HeldUntil())
	})
	t.Run("a cohort is judged without the sends that went to wait elsewhere", func(t *testing.T) {
		h := afterPause()
		cohort := h.sends(6, 200*ms)
		h.l.Deferred(&cohort[4]) // a fleet's turn: they wait elsewhere
		h.l.Deferred(&cohort[5])
		h.send() // a round on: the cohort is closed
		h.l.Went(&cohort[4], h.at, 40, true)
		h.l.Went(&cohort[5], h.at, 40, true)
		h.answer(100*ms, cohort[:4]...)
		assert.Zero(t, h.l.HeldUntil(), "the four that went answered at the unloaded round trip")
	})
	t.Run("a send deferred, then given back before it goes, leaves the cohort once", func(t *testing.T) {
		h := afterPause()
		cohort := h.sends(5, 200*ms) // the fifth closes it: five members
		h.l.Deferred(&cohort[3])     // a fleet's turn
		h.l.Dropped(h.at, cohort[3], false)
		h.answer(100*ms, cohort[0], cohort[1], cohort[2], cohort[4])
		assert.Zero(t, h.l.HeldUntil(), "four members answered at the unloaded round trip, the fifth given back")
	})
	t.Run("a fleet's send that went with the limit full is at the scope's level", func(t *testing.T) {
		h := afterPause()
		h.under = true
		var cohort []law.Stamp
		for range 5 {
			tk := h.l.Sent(h.at, 40, 1, false, false)
			h.l.Deferred(&tk)
			tk.InUse = true // the fleet's concurrency all in use with it
			h.l.Went(&tk, h.at, 40, false)
			cohort = append(cohort, tk)
			h.at += 250 * ms
		}
		h.answer(100*ms, cohort...)
		assert.Zero(t, h.l.HeldUntil(), "the sends filled the fleet's limit when they went")
	})
	t.Run("a send at the scope's level that leaves the cohort takes its level with it", func(t *testing.T) {
		h := afterPause()
		var full, under []law.Stamp
		for i := range 6 {
			if i < 2 {
				full = append(full, h.l.Sent(h.at, 40, int(h.l.Limit()), true, false))
			} else {
				under = append(under, h.l.Sent(h.at, 40, 1, false, false))
			}
			h.at += 150 * ms // six within a round: all members
		}
		h.l.Dropped(h.at, full[0], false) // canceled
		h.l.Dropped(h.at, full[1], false)
		h.at += sec // a round on: the cohort is judged at its last answer
		h.answer(100*ms, under...)
		assert.NotZero(t, h.l.HeldUntil(), "the cohort left is four sends under the rate and the limit")
	})
	t.Run("a cohort less its deferred sends", func(t *testing.T) {
		h := afterPause()
		cohort := h.sends(4, 300*ms)
		h.send() // a round on: the cohort is closed
		for i := range cohort {
			h.l.Deferred(&cohort[i]) // a fleet's turn: they wait elsewhere
		}
		h.round(500*ms, 3, true, 0)
		assert.NotZero(t, h.l.HeldUntil(), "no send of the cohort went: no evidence")
	})
	t.Run("a cohort closes: a steady flow is judged", func(t *testing.T) {
		// four in flight at all times: a cohort that took every send
		// would never be all answered
		h := afterPause()
		var inflight []law.Stamp
		for range 120 {
			inflight = append(inflight, h.send())
			h.at += 25 * ms
			if len(inflight) > 4 {
				h.answer(100*ms, inflight[0])
				inflight = inflight[1:]
			}
		}
		assert.Zero(t, h.l.HeldUntil(), "3 s of answers at the unloaded round trip")
	})
	t.Run("a cohort lasts a round: answered early, it is judged when the round is over", func(t *testing.T) {
		h := held(cfg, sec)
		h.at = h.until - 10*sec
		for range 6 {
			tk := h.send()
			h.at += 10 * ms
			h.answer(100*ms, tk)
		}
		assert.NotZero(t, h.l.HeldUntil(), "a round has not passed: more may join the cohort")
		h.at += sec
		tailsIn(h, 100*ms) // the round ends at an answer
		assert.Zero(t, h.l.HeldUntil())
	})
	t.Run("a cohort whose round trips spread wide is no proof", func(t *testing.T) {
		h := afterPause()
		for h.at < h.until-sec {
			for i := range 40 { // a mean of 110 ms, under 1.2 times 100, but noisy
				tk := h.send()
				h.at += 25 * ms
				h.answer([]time.Duration{20 * ms, 200 * ms}[i%2], tk)
			}
			require.NotZero(t, h.l.HeldUntil(), "at %v", h.at)
		}
	})
	t.Run("answers without a round trip are no test", func(t *testing.T) {
		h := afterPause()
		h.round(0, 40, true, 0)
		h.round(0, 40, true, 0)
		assert.NotZero(t, h.l.HeldUntil())
	})
	t.Run("a hold stays while the round trip is high", func(t *testing.T) {
		for _, c := range []law.Config{cfg, {InitialRate: 2, MinRate: 0.05, StartConcurrency: 1, MinConcurrency: 1, MaxConcurrency: 1}} {
			for _, n := range []int{3, 40} { // under a round's queue test, and over it
				h := held(c, sec)
				tailsIn(h, 100*ms)
				h.at = h.until - 10*sec
				for h.at < h.until-sec {
					h.round(300*ms, n, true, 0)
					require.NotZero(t, h.l.HeldUntil(), "limit at most %d, %d a round, at %v: an origin three times slower than unloaded may be struggling", c.MaxConcurrency, n, h.at)
					require.LessOrEqual(t, h.l.Limit(), h.cut, "no increase under the hold")
				}
			}
		}
	})
	t.Run("never under the minimum", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 2, inflight: 1},
			{at: 10 * ms, do: "503", id: 1, wantLimit: 1},
		})
	})
}

func TestPauseAndResume(t *testing.T) {
	t.Run("a round spanning a pause is not judged", func(t *testing.T) {
		play(t, cfg, []ev{
			{do: "send", id: 1, rate: 2, paced: true},
			{at: 100 * ms, do: "pause", d: 5 * sec},
			{at: 2 * sec, do: "ok", id: 1, wantRate: 2}, // the round starts when the pause ends
		})
	})
	t.Run("resumed clears the hold", func(t *testing.T) {
		var l law.Law
		c := cfg
		l.Init(&c, 0)
		l.Hold(0, time.Hour)
		require.Equal(t, time.Hour, l.HeldUntil())
		l.Resumed(sec)
		assert.Zero(t, l.HeldUntil())
	})
}

func TestRoundTrip(t *testing.T) {
	var l law.Law
	c := cfg
	l.Init(&c, 0)
	l.RoundTrip(800 * ms)
	assert.Equal(t, 800*ms, l.RTT())
	l.RoundTrip(0) // unknown: ignored
	l.RoundTrip(0)
	assert.Equal(t, 800*ms, l.RTT())
	l.RoundTrip(0)
	l.RoundTrip(1600 * ms)
	assert.Equal(t, 900*ms, l.RTT(), "smoothed by 1/8")
}

// Little's law: a fresh overload cuts the rate too (concurrency alone sends
// in bursts), once per burst; the concurrency limit falls as before.
func TestOverloadCutsTheRate(t *testing.T) {
	play(t, cfg, []ev{
		{do: "send", id: 1, rate: 16, inflight: 4}, {do: "send", id: 2, rate: 16, inflight: 4},
		{at: 10 * ms, do: "503", id: 1, wantEst: 8 * 0.97, wantRate: 8 * 0.97, wantLimit: 3, wantDecreased: yes, wantCut: "slow-start-end"},
		{at: 10 * ms, do: "503", id: 2, wantEst: 8 * 0.97, wantLimit: 3, wantFresh: no, wantDecreased: no},
	})
}

// A refusal (a 429 after a Retry-After that was not enough: a lockout)
// says nothing of the rate: nothing is cut, the round it ends is not
// judged (a success in its place would start the probe that is due), and
// the answers to what was sent before it are its tail.
func TestRefusedCutsNothing(t *testing.T) {
	refusal := func(answer string, phase string, rate float64) []ev {
		return []ev{
			{do: "send", id: 1, rate: 8}, {at: 10 * ms, do: "429", id: 1, wantEst: 4 * 0.97},
			// the next probe is due at 2.01 s; a busy round runs from 10 ms
			{at: 20 * ms, do: "send", id: 2, rate: 3.88, paced: true},
			{at: 30 * ms, do: "send", id: 3, rate: 3.88, paced: true},
			{at: 3 * sec, do: answer, id: 2, wantEst: 3.88, wantRate: rate, wantPhase: phase, wantFresh: yes, wantDecreased: no},
		}
	}
	play(t, cfg, refusal("ok", "probing", 3.88*1.03)) // the control
	play(t, cfg, seq(refusal("refused", "steady", 3.88), []ev{
		{at: 3 * sec, do: "429", id: 3, wantEst: 3.88, wantFresh: no, wantDecreased: no, wantCut: "none"},
	}))
}

// Little's law again: a rate that needs fewer in flight than an overload
// leaves (rate times round trip: 10/s over 350 ms holds 3.5) does not
// explain it; a burst over the server's concurrency does. The limit falls,
// the rate stands, and the limit stays under the level that failed for the
// gap after a failed probe (a 1-s pause: 50 s), then grows again.
func TestOverloadOfABurst(t *testing.T) {
	c := cfg
	c.InitialRate, c.StartConcurrency = 10, 16
	play(t, c, []ev{
		// a success measures the round trip: 350 ms
		{do: "send", id: 100, rate: 10}, {at: 350 * ms, do: "rtt", d: 350 * ms}, {at: 350 * ms, do: "ok", id: 100},
		{at: 400 * ms, do: "send", id: 1, rate: 10, inflight: 9},
		{at: 405 * ms, do: "send", id: 2, rate: 10, inflight: 9},
		{at: 410 * ms, do: "pause", d: sec},
		{at: 410 * ms, do: "503", id: 1, wantRate: 10, wantLimit: 8, wantDecreased: yes, wantCut: "none"},
		{at: 430 * ms, do: "503", id: 2, wantLimit: 8, wantFresh: no, wantDecreased: no, wantCut: "none"},
		{at: 30 * sec, do: "send", id: 3, rate: 10, inflight: 8, inUse: true},
		{at: 30*sec + 10*ms, do: "ok", id: 3, wantLimit: 8},
		{at: 51 * sec, do: "send", id: 4, rate: 10, inflight: 8, inUse: true},
		{at: 51*sec + 10*ms, do: "ok", id: 4, wantLimit: 8 + 1.0/8},
	})
}

// In a fleet the stamped rate and in-flight count are the fleet's: the
// burst test is made as in one process. A count that is only a bound (the
// send waited for its slot of the fleet's schedule, and the leases of the
// sends waiting ahead of it count too) makes none: the overload cuts the
// rate too.
func TestOverloadOfABurstInAFleet(t *testing.T) {
	c := cfg
	c.InitialRate, c.StartConcurrency = 10, 16
	for _, bound := range []bool{false, true} {
		cut := map[bool]string{false: "none", true: "slow-start-end"}[bound]
		t.Run(cut, func(t *testing.T) {
			play(t, c, []ev{
				{do: "fleet"},
				{do: "send", id: 100, rate: 10}, {at: 350 * ms, do: "rtt", d: 350 * ms}, {at: 350 * ms, do: "ok", id: 100},
				{at: 400 * ms, do: "send", id: 1, rate: 10, inflight: 9, bound: bound},
				{at: 410 * ms, do: "503", id: 1, wantLimit: 8, wantDecreased: yes, wantCut: cut},
			})
		})
	}
}

// An overload that the rate explains (6.79/s over 300 ms holds 2 in
// flight, the overload came at 2) cuts the rate; the limit keeps what the
// cut rate needs, ceil(rate × round trip), instead of falling to one in
// flight, which would hold the scope far under the rate for the whole hold.
// A second overload in a row is the concurrency's: no floor.
func TestOverloadKeepsWhatTheRateNeeds(t *testing.T) {
	est := 14 / 2 * 0.97 // slow start's end at 14/s, nothing accepted
	// the step down escalates: a throttle 20 ms after the last decrease
	want := math.Ceil(est * 0.94 * 0.3)
	require.Equal(t, 2.0, want)
	play(t, cfg, []ev{
		// a success measures the round trip: 300 ms
		{do: "send", id: 100, rate: 14}, {at: 300 * ms, do: "rtt", d: 300 * ms}, {at: 300 * ms, do: "ok", id: 100},
		// two seconds later: nothing accepted in the last second
		{at: 2300 * ms, do: "send", id: 1, rate: 14, inflight: 2},
		{at: 2310 * ms, do: "429", id: 1, wantEst: est},
		{at: 2320 * ms, do: "send", id: 2, rate: est, inflight: 2},
		{at: 2330 * ms, do: "503", id: 2, wantEst: est * 0.94, wantLimit: want, wantCut: "step-down"},
		{at: 2340 * ms, do: "send", id: 3, rate: est * 0.94, inflight: 2},
		{at: 2350 * ms, do: "503", id: 3, wantLimit: 1, wantDecreased: yes},
	})
}

// A concurrency cap refuses one in-flight count, whatever the rate: a
// second overload at the count of the last one, with no send at that count
// succeeding between, is the concurrency's. The limit falls under the
// count and the rate stands (a cap of 8 at 350 ms carries 22.9/s; a rate
// over it needs more than 8 in flight, so Little's law alone took each
// 503 for the rate's and cut it, 3 % then 6 %, 9 %, 12 %, while the cap's
// additive increase brought the limit back to 9 again and again:
// `limit_conn 8` at 0 ms in the simulator, 79.7 % of its capacity in the
// worst world). The overload is the rate's as before when a send at that
// count or more succeeded between (a rate limiter's 503s come at whatever
// count its rate holds in flight), when the round trip says the server
// queues (a limiter that delays, then refuses what its queue cannot hold),
// at another count, after another decrease, for a count that is a bound
// or a fleet's, and at the least concurrency (no cut of the limit answers
// it).
func TestOverloadAtACap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		over    int           // the in-flight count of both overloads' sends
		over2   int           // the second's, if not over
		ok      int           // that of the successes between them (0: none, the overloads in a row)
		rtt     time.Duration // their round trip
		fleet   bool          // the law is a fleet's
		between bool          // another concurrency decrease between (an overload of a send whose count is a bound)
		bound   bool          // the second overload's count is a bound
		wantCut string        // the second overload's
	}{
		{name: "a cap", over: 9, ok: 8, rtt: 350 * ms, wantCut: "none"},
		{name: "a count that succeeded", over: 9, ok: 9, rtt: 350 * ms, wantCut: "step-down"},
		{name: "a higher count that succeeded", over: 9, ok: 10, rtt: 350 * ms, wantCut: "step-down"},
		{name: "a queue", over: 9, ok: 8, rtt: 900 * ms, wantCut: "step-down"},
		{name: "a higher count", over: 9, over2: 10, ok: 8, rtt: 350 * ms, wantCut: "step-down"},
		{name: "another decrease between", over: 9, ok: 8, rtt: 350 * ms, between: true, wantCut: "step-down"},
		{name: "a bound", over: 9, ok: 8, rtt: 350 * ms, bound: true, wantCut: "step-down"},
		{name: "a fleet's", over: 9, ok: 8, rtt: 350 * ms, fleet: true, wantCut: "step-down"},
		// one in flight: no cut of the limit can answer it, the rate must
		{name: "the least concurrency", over: 1, rtt: 350 * ms, wantCut: "step-down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l law.Law
			l.Init(&cfg, 0)
			l.Restore(0, 30, 9) // 30/s over 350 ms holds 10.5 in flight: Little's law reads each overload at 9 as the rate's
			if tc.fleet {
				l.Shared(0)
			}
			send := func(at time.Duration, inflight int, bound bool) law.Stamp {
				tk := l.Sent(at, l.Rate(), inflight, true, true)
				tk.Bound = bound
				return tk
			}
			answer := func(at, rtt time.Duration, inflight int, s law.Signal) law.Verdict {
				tk := send(at-rtt, inflight, false)
				if s == law.Success {
					l.RoundTrip(rtt)
				}
				return l.Observe(at, tk, s)
			}
			// a round of successes at 8 in flight, 350 ms: the baseline
			for i := range 24 {
				answer(400*ms+time.Duration(i)*40*ms, 350*ms, min(8, tc.over), law.Success)
			}
			require.InDelta(t, float64(350*ms), float64(l.MinRTT()), float64(time.Millisecond))
			v := answer(1400*ms, 10*ms, tc.over, law.Overloaded)
			require.Equal(t, "step-down", v.Cut.String(), "the first overload: Little's law takes it for the rate's")
			if tc.between {
				tk := send(1410*ms, 12, true)
				require.True(t, l.Observe(1420*ms, tk, law.Overloaded).Decreased)
			}
			rate := l.Rate()
			for i := range 20 * min(tc.ok, 1) {
				answer(1500*ms+time.Duration(i)*40*ms, tc.rtt, tc.ok, law.Success)
			}
			tk := send(2390*ms, cmp.Or(tc.over2, tc.over), tc.bound)
			v = l.Observe(2400*ms, tk, law.Overloaded)
			assert.True(t, v.Decreased)
			assert.Equal(t, tc.wantCut, v.Cut.String())
			if tc.wantCut == "none" {
				assert.Equal(t, 8.0, l.Limit(), "the limit under the count that failed")
				assert.Equal(t, rate, l.Rate(), "the rate stands")
			} else {
				assert.Less(t, l.Rate(), rate)
			}
		})
	}
}

// A server that never says no queues instead: when the round's mean round
// trip climbs over 1.2 times the unloaded one, the limit falls to the knee;
// under 1.1 times it may grow.
func TestLatencyKnee(t *testing.T) {
	c := cfg
	c.StartConcurrency = 4
	var l law.Law
	l.Init(&c, 0)
	answer := func(at time.Duration, rtt time.Duration, inUse bool) {
		tk := l.Sent(at-rtt, 100, 8, inUse, false)
		l.RoundTrip(rtt)
		l.Observe(at, tk, law.Success)
	}
	// unloaded: 100 ms, and the limit in use grows (slow start: +1 per
	// success), through the first round
	for i := range 4 {
		answer(100*ms+time.Duration(i)*ms, 100*ms, true)
	}
	require.Equal(t, 8.0, l.Limit())
	assert.Zero(t, l.MinRTT(), "no round closed yet: no baseline")
	answer(sec, 100*ms, false) // closes the first round
	assert.InDelta(t, float64(100*ms), float64(l.MinRTT()), float64(time.Microsecond), "the first round's mean")
	// queueing: 160 ms over the whole next round; in use, the limit does
	// not grow once the smoothed round trip is over 1.1 times the unloaded
	for i := range 20 {
		answer(sec+time.Duration(i+1)*40*ms, 160*ms, i > 4)
	}
	assert.Equal(t, 8.0, l.Limit(), "no growth while queueing")
	// the round closes: the limit falls to where the round trip would be
	// 1.2 times the unloaded one, 8 × 1.2 × 100 / 160 = 6
	answer(2*sec+10*ms, 160*ms, false)
	assert.Equal(t, 6.0, l.Limit())
}

// The unloaded baseline is a round's mean, not the fastest answer: a crawl
// whose pages differ (robots.txt in 5 ms beside pages of 100 ms) is not
// read as queueing, and its limit is not cut.
func TestLatencyMixedPages(t *testing.T) {
	c := cfg
	c.StartConcurrency = 8
	var l law.Law
	l.Init(&c, 0)
	at := time.Duration(0)
	answer := func(rtt time.Duration) {
		at += 50 * ms
		tk := l.Sent(at-rtt, 100, 4, false, false)
		l.RoundTrip(rtt)
		l.Observe(at, tk, law.Success)
	}
	for round := range 10 {
		if round%3 == 0 {
			answer(5 * ms) // a fast answer in some rounds
		}
		for range 20 {
			answer(100 * ms)
		}
	}
	assert.Equal(t, 8.0, l.Limit(), "a mix of fast and slow answers is not a queue")
	assert.Greater(t, l.MinRTT(), 90*ms)
}

// Seed starts the law at a capacity a server stated, just under it;
// Restore at an estimate measured before, as it was (no margin taken off
// twice). Either way no slow start, and a law that has measured keeps its
// measurement.
func TestSeed(t *testing.T) {
	c := cfg
	var l law.Law
	l.Init(&c, 0)
	l.Seed(0, 40)
	assert.InDelta(t, 40*0.97, l.Estimate(), 1e-9)
	assert.InDelta(t, 40*0.97, l.Rate(), 1e-9)
	assert.Equal(t, law.Steady, l.Phase())
	l.Seed(0, 100)
	l.Restore(0, 100, 0)
	assert.InDelta(t, 40*0.97, l.Estimate(), 1e-9, "a second seed does not overwrite")

	var r law.Law
	r.Init(&c, 0)
	r.Restore(0, 17.68, 12)
	assert.Equal(t, 17.68, r.Estimate(), "restored as it was")
	assert.Equal(t, 12.0, r.Limit())

	var m law.Law
	m.Init(&c, 0)
	m.Seed(0, 0)
	m.Restore(0, math.NaN(), 0)
	assert.Equal(t, law.SlowStart, m.Phase(), "nothing to seed from")
}

// A rate from outside the law (quota headers, an import, a fleet's store)
// is untrusted: it is bounded by MaxRate and the ceiling in force, and an
// imported limit by MaxConcurrency. (An estimate of 1e308 req/s imported
// with a limit of 1e300 ran a scope at 9.7e307/s.)
func TestOutsideRatesBounded(t *testing.T) {
	c := cfg
	for _, tc := range []struct {
		name       string
		ceil, want float64
		seed       func(*law.Law)
	}{
		{"restored", 0, law.MaxRate, func(l *law.Law) { l.Restore(0, 1e308, 1e300) }},
		{"restored under a ceiling", 5, 5, func(l *law.Law) { l.Restore(0, 1e12, 1e300) }},
		{"quota headers", 0, law.MaxRate, func(l *law.Law) { l.Seed(0, 1e9) }},
		{"infinite", 0, law.MaxRate, func(l *law.Law) { l.Restore(0, math.Inf(1), math.Inf(1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l law.Law
			l.Init(&c, 0)
			l.SetCeiling(tc.ceil)
			tc.seed(&l)
			assert.Equal(t, tc.want, l.Estimate())
			assert.Equal(t, tc.want, l.Rate())
			assert.LessOrEqual(t, l.Limit(), float64(c.MaxConcurrency))
		})
	}
}

// After the breaker closes (or an unpark), the estimate it cut is a lower
// bound: probe up from it within two rounds.
func TestResumedProbesSoon(t *testing.T) {
	evs := []ev{{do: "send", id: 1, rate: 20}, {at: 10 * ms, do: "429", id: 1, wantEst: 9.7},
		{at: 20 * ms, do: "send", id: 2, rate: 9.7}, {at: 30 * ms, do: "pause", d: 30 * sec},
		{at: 30 * ms, do: "429", id: 2}}
	var l law.Law
	c := cfg
	l.Init(&c, 0)
	tk := map[int]law.Stamp{}
	for _, e := range evs {
		switch e.do {
		case "send":
			tk[e.id] = l.Sent(e.at, e.rate, 1, false, false)
		case "pause":
			l.Paused(e.at, e.at+e.d, e.d)
		case "429":
			l.Observe(e.at, tk[e.id], law.Throttled)
		}
	}
	l.Resumed(31 * sec)
	for r := range 3 {
		at := 31*sec + time.Duration(r)*sec
		tk := l.Sent(at, l.Rate(), 1, false, true)
		l.Observe(at+sec, tk, law.Success)
	}
	assert.Equal(t, law.Probing, l.Phase(), "probing two rounds after the resume, not two minutes")
}

// A fleet shares part of a law: what one process decides (a decrease, a
// probe) another adopts; the limit's own increases are not taken from the
// fleet, its decreases are; a throttle of a request sent before the
// adoption is the tail of what the fleet already answered.
func TestSharedAndAdopt(t *testing.T) {
	c := cfg
	var a, b law.Law
	a.Init(&c, 0)
	b.Init(&c, 0)
	tb := b.Sent(0, 16, 4, false, true)                            // b sends at slow start's 16/s...
	ta := a.Sent(0, 16, 4, false, true)                            // ...and so does a
	require.True(t, a.Observe(10*ms, ta, law.Throttled).Decreased) // a is throttled first
	sh := a.Shared(10 * ms)
	assert.InDelta(t, 8*0.97, sh.Estimate, 1e-9)
	b.Adopt(20*ms, sh)
	assert.InDelta(t, a.Rate(), b.Rate(), 1e-9)
	assert.Equal(t, law.Steady, b.Phase())
	v := b.Observe(30*ms, tb, law.Throttled)
	assert.False(t, v.Fresh, "b's own throttle for a request sent before: the same burst")
	assert.False(t, v.Decreased)

	// the limit: b's own growth stays; a decrease elsewhere is taken
	tk := b.Sent(40*ms, b.Rate(), 4, true, false)
	b.Observe(50*ms, tk, law.Success)
	grown := b.Limit()
	sh = a.Shared(60 * ms)
	sh.Limit = 2
	b.Adopt(70*ms, sh)
	assert.Equal(t, grown, b.Limit(), "no concurrency decrease in the fleet: b keeps its own")
	sh.CEpoch++
	b.Adopt(80*ms, sh)
	assert.Equal(t, 2.0, b.Limit(), "a decrease decided elsewhere")

	// the fleet never raises the limit, whatever its epoch says
	sh.CEpoch++
	sh.Limit = 1e300
	b.Adopt(85*ms, sh)
	assert.Equal(t, 2.0, b.Limit(), "a store's limit above this process's is not taken")
	// a rate from a store is bounded
	sh.Rate, sh.Estimate = 1e308, math.Inf(1)
	b.Adopt(86*ms, sh)
	assert.Equal(t, float64(law.MaxRate), b.Rate())
	assert.Equal(t, float64(law.MaxRate), b.Estimate())

	// nonsense from a store is ignored
	before := b.Rate()
	b.Adopt(90*ms, law.Shared{Rate: -1, Limit: 1})
	b.Adopt(90*ms, law.Shared{Rate: 5, Limit: 0})
	assert.Equal(t, before, b.Rate())
}

// In a fleet, a throttle measures the capacity by the fleet's accepted
// rate (FleetAccepted, fresh for a second), not by this process's part.
func TestFleetAccepted(t *testing.T) {
	run := func(fleet float64, age time.Duration) float64 {
		c := cfg
		var l law.Law
		l.Init(&c, 0)
		at := time.Duration(0)
		// this process's part: 5 accepted answers a second
		for range 20 {
			at += 200 * ms
			tk := l.Sent(at-10*ms, 32, 1, false, true)
			l.RoundTrip(10 * ms)
			l.Observe(at, tk, law.Success)
		}
		if fleet > 0 {
			l.FleetAccepted(at-age, fleet)
		}
		tk := l.Sent(at, 32, 1, false, true)
		l.Observe(at+ms, law.Stamp{Sent: at, Rate: 32, Epoch: tk.Epoch, CEpoch: tk.CEpoch}, law.Throttled)
		return l.Estimate()
	}
	assert.InDelta(t, 32.0/2*0.97, run(0, 0), 1e-6, "alone: its own 5/s reads low, the rule of half the rate throttled holds")
	assert.InDelta(t, 20*0.97, run(20, 0), 1e-6, "the fleet's 20/s")
	assert.InDelta(t, 32.0/2*0.97, run(20, 2*time.Second), 1e-6, "a fleet figure two seconds old is not used")
}

// In a fleet, the accepted count a process last heard from its store may
// be older than the throttle it judges: a second that a pause took more of
// than the throttle's own second reads low, and is no measurement. Taken
// for one, it read as a drop: 6/s against an estimate of 15.52 on a fixed
// window of 13/s, 0.4 s after a pause, and the fleet searched back up from
// 6. The pause may be this process's own (Paused) or one the fleet shared
// (Idle); a count as fresh as the throttle still measures a drop.
func TestFleetAcceptedStaleAcrossAPause(t *testing.T) {
	const est = 15.52
	run := func(own bool, countAt time.Duration) (string, float64) {
		c := cfg
		var l law.Law
		l.Init(&c, 0)
		l.Restore(0, est, 4)
		if own {
			l.Paused(7000*ms, 8000*ms, time.Second)
		} else {
			l.Idle(7000*ms, 8000*ms)
		}
		l.FleetAccepted(countAt, 6)
		at := 8740 * ms
		tk := l.Sent(at-140*ms, est, 1, false, true)
		v := l.Observe(at, tk, law.Throttled)
		return v.Cut.String(), l.Estimate()
	}
	for _, own := range []bool{true, false} {
		cut, e := run(own, 8360*ms) // its second 0.64 s paused, the throttle's 0.26 s
		assert.Equal(t, "step-down", cut, "own pause %v: a stale count", own)
		assert.InDelta(t, est*0.97, e, 1e-3, "own pause %v", own)
		cut, e = run(own, 8740*ms) // as fresh as the throttle
		assert.Equal(t, "drop-detected", cut, "own pause %v: a fresh count", own)
		assert.InDelta(t, 6.0, e, 1e-6, "own pause %v", own)
	}
}

// Rising: a send in slow start above the starting rate, or above the
// estimate (a probe), was at a rate not yet judged clean; one at the
// starting rate, at the estimate or under it was not.
func TestRising(t *testing.T) {
	var l law.Law
	l.Init(&cfg, 0)
	assert.False(t, l.Rising(l.Sent(0, 2, 1, false, false)), "slow start, at the starting rate")
	assert.True(t, l.Rising(l.Sent(0, 4, 1, false, false)), "slow start, doubled")
	l.Seed(0, 10)
	est := l.Estimate()
	assert.False(t, l.Rising(l.Sent(0, est, 1, false, false)), "at the estimate")
	assert.False(t, l.Rising(l.Sent(0, est/2, 1, false, false)), "under it")
	assert.True(t, l.Rising(l.Sent(0, est*1.03, 1, false, false)), "a probe")
}

// origin is a closed loop for the latency signal's tests: a client that
// sends at the law's rate (a pacer) with at most the law's limit in
// flight, against a server whose answer to the i-th request, sent at t
// with k in flight (itself included), takes cost(t, i), times k/workers
// past its workers (a queue). It returns the law after until.
func origin(t *testing.T, start float64, workers int, cost func(at time.Duration, i int) time.Duration, until time.Duration, check func(at time.Duration, l *law.Law)) *law.Law {
	t.Helper()
	c := cfg
	c.StartConcurrency = int(start)
	var l law.Law
	l.Init(&c, 0)
	type req struct {
		tk   law.Stamp
		done time.Duration
	}
	var flight []req
	i := 0
	next := time.Duration(0) // the pacer's next send
	held := false            // the pacer held a send back
	for at := time.Duration(0); at < until; at += ms {
		for j := 0; j < len(flight); {
			if r := flight[j]; r.done <= at {
				l.RoundTrip(r.done - r.tk.Sent)
				l.Observe(at, r.tk, law.Success)
				flight = append(flight[:j], flight[j+1:]...)
				continue
			}
			j++
		}
		if len(flight) < int(l.Limit()) && at < next {
			held = true
		}
		for len(flight) < int(l.Limit()) && at >= next {
			k := len(flight) + 1
			d := cost(at, i)
			if k > workers {
				d = d * time.Duration(k) / time.Duration(workers)
			}
			i++
			flight = append(flight, req{l.Sent(at, l.Rate(), k, k >= int(l.Limit()), held), at + d})
			held = false
			next = max(next+time.Duration(float64(sec)/l.Rate()), at-sec/10)
		}
		if check != nil {
			check(at, &l)
		}
	}
	return &l
}

// A queue is what falls when the concurrency falls: against 4 workers of
// 100 ms, slow start from 2 overshoots the knee (6 in flight read
// 150 ms); the drain to the knee brings the round trip back to 100 ms, so
// the cut stands (at most 1.2 times the unloaded round trip: 4 in flight)
// and the baseline stays 100 ms.
func TestLatencyQueueConfirmed(t *testing.T) {
	l := origin(t, 2, 4, func(time.Duration, int) time.Duration { return 100 * ms }, 20*sec, nil)
	assert.LessOrEqual(t, l.Limit(), 5.0, "the knee of 4 workers")
	assert.GreaterOrEqual(t, l.Limit(), 4.0, "full throughput")
	assert.InDelta(t, float64(100*ms), float64(l.MinRTT()), float64(ms))
}

// Pages that cost more without any load are no queue: 20-ms pages, then
// 600-ms pages from 10 s. The round trip reads 30 times the unloaded one;
// the drain does not bring it down, so the limit returns and the unloaded
// round trip follows the new cost, within seconds.
func TestLatencyCostChange(t *testing.T) {
	var before float64
	l := origin(t, 12, 1000, func(at time.Duration, _ int) time.Duration {
		if at < 10*sec {
			return 20 * ms
		}
		return 600 * ms
	}, 25*sec, func(at time.Duration, l *law.Law) {
		if at == 10*sec-ms {
			before = l.Limit()
		}
	})
	assert.GreaterOrEqual(t, l.Limit(), before, "the limit it had before the change")
	assert.Greater(t, l.MinRTT(), 500*ms, "the unloaded round trip followed the cost")
}

// Pages whose cost differs from URL to URL (a lognormal-like spread: one
// page in twenty costs ten times the others) never read as a queue, however
// many rounds go by: the baseline does not ratchet down to the luckiest
// round's mean.
func TestLatencySpreadNoRatchet(t *testing.T) {
	l := origin(t, 8, 1000, func(_ time.Duration, i int) time.Duration {
		d := 50*ms + time.Duration((i*7919)%41)*ms // 50-90 ms
		if i%20 == 7 {
			d = 900 * ms
		}
		return d
	}, 10*time.Minute, nil)
	assert.GreaterOrEqual(t, l.Limit(), 8.0, "the limit in use is not cut")
}

// A drop read while the pages slow down is the lag of slower answers, and
// is taken back: at 20/s against a server whose pages go from 20 ms to
// 600 ms at 10 s, a throttle at 10.5 s finds few answers in the last second
// (the others are on their way) and reads as a drop; the drain then shows
// no queue, and the estimate a step down would have left returns.
func TestDropDuringSlowdownReturns(t *testing.T) {
	var est float64
	l := origin(t, 16, 1000, func(at time.Duration, _ int) time.Duration {
		if at < 10*sec {
			return 20 * ms
		}
		return 600 * ms
	}, 20*sec, func(at time.Duration, l *law.Law) {
		switch at {
		case 0:
			l.Seed(0, 20)
		case 10*sec + 500*ms:
			est = l.Estimate()
			v := l.Observe(at, l.Sent(at-50*ms, l.Rate(), 1, false, true), law.Throttled)
			require.Equal(t, "drop-detected", v.Cut.String())
			require.Less(t, l.Estimate(), est*0.7)
		}
	})
	assert.InDelta(t, est*(1-0.03), l.Estimate(), 0.01, "the estimate a step down would have left")
}

// A throttle soon after a decrease another process of the fleet made
// escalates the step down, as it would have in that process: the last
// decrease's age travels with the shared state. (Without it each process
// stepped down by the margin again, and an estimate 17 % over a fixed
// window took nine throttles instead of four.)
func TestSharedDecreaseEscalates(t *testing.T) {
	c := cfg
	var a, b law.Law
	a.Init(&c, 0)
	b.Init(&c, 0)
	ta := a.Sent(0, 20, 4, false, true)
	require.Equal(t, law.SlowStartEnd, a.Observe(10*ms, ta, law.Throttled).Cut)
	b.Adopt(20*ms, a.Shared(20*ms))
	// a steps down again, far from its slow start's end
	ta = a.Sent(10*sec, a.Rate(), 4, false, false)
	require.Equal(t, law.StepDown, a.Observe(10*sec+10*ms, ta, law.Throttled).Cut)
	est := a.Estimate()
	sh := a.Shared(10*sec + 500*ms)
	assert.Equal(t, 490*ms, sh.SinceDecrease)
	b.Adopt(11*sec, sh)
	// b is throttled 1.5 s after a's decrease: the step was not enough
	tb := b.Sent(11*sec, b.Rate(), 4, false, false)
	require.Equal(t, law.StepDown, b.Observe(11*sec+500*ms, tb, law.Throttled).Cut)
	assert.InDelta(t, est*(1-2*0.03), b.Estimate(), 1e-9, "escalated as in the process that decreased")

	// a store's nonsense ages are ignored: a negative one, one older than
	// the law
	var d law.Law
	d.Init(&c, 0)
	for _, age := range []time.Duration{-sec, 100 * sec} {
		sh.SinceDecrease = age
		d.Adopt(12*sec, sh)
		assert.Zero(t, d.Shared(12*sec).SinceDecrease, "age %v", age)
	}
}

// A send that waits elsewhere (a fleet's turn) is counted in the round it
// goes in, not the one its stamp was taken in: slow start doubles after a
// round whose sends the fleet's schedule held back, however long they
// waited.
func TestDeferredSendCountsWhenItGoes(t *testing.T) {
	c := cfg
	var l law.Law
	l.Init(&c, 0)
	// round 1: four sends stamped, all waiting for the fleet
	var st []law.Stamp
	for i := range 4 {
		s := l.Sent(time.Duration(i)*10*ms, 2, 1, false, false)
		l.Deferred(&s)
		st = append(st, s)
	}
	// an answer at 1.1 s to a send of before closes round 1: its sends
	// were not counted in it, and a round with no send is no proof of the
	// rate
	t0 := l.Sent(50*ms, 2, 1, false, false)
	l.Observe(1100*ms, t0, law.Success)
	assert.Equal(t, 2.0, l.Rate())
	// they go in round 2, held by the fleet's schedule
	for i := range st {
		l.Went(&st[i], 1200*ms+time.Duration(i)*100*ms, 2, true)
		assert.Equal(t, 1200*ms+time.Duration(i)*100*ms, st[i].Sent, "stamped again as sent then")
	}
	// round 2 ends at 2.1 s: its four sends were paced, the rate is the
	// bottleneck, slow start doubles
	for i := range st {
		l.Observe(2300*ms+time.Duration(i)*ms, st[i], law.Success)
	}
	assert.Equal(t, 4.0, l.Rate())
}

// A search after a drop, adopted by another process, stops where it
// would have stopped in the process that began it: at the estimate a step
// down would have left. Without that top the adopted search doubled past
// the capacity, and the throttle's second read as a drop again.
func TestAdoptedSearchKeepsItsTop(t *testing.T) {
	c := cfg
	var a, b law.Law
	a.Init(&c, 0)
	b.Init(&c, 0)
	a.Seed(0, 20)
	b.Adopt(0, a.Shared(0))
	// a's last second: 5 accepted answers, under 70 % of its estimate
	at := time.Duration(0)
	for range 5 {
		at += 200 * ms
		tk := a.Sent(at-10*ms, a.Rate(), 1, false, true)
		a.Observe(at, tk, law.Success)
	}
	tk := a.Sent(at, a.Rate(), 1, false, true)
	require.Equal(t, law.Drop, a.Observe(at+ms, tk, law.Throttled).Cut)
	sh := a.Shared(at + ms)
	top := 20 * 0.97 * 0.97
	assert.InDelta(t, top, sh.Top, 1e-9, "the search's top: where a step down would have left the estimate")
	b.Adopt(at+2*ms, sh)
	require.Equal(t, law.SlowStart, b.Phase())
	// b's clean busy rounds: the search doubles up to the top, no further
	from := at + 2*ms
	for i := range 6 {
		r := b.Rate()
		assert.LessOrEqual(t, r, top+1e-9, "round %d", i)
		tb := b.Sent(from, r, 1, false, true)
		from += sec
		b.Observe(from, tb, law.Success)
	}
	assert.Equal(t, law.Steady, b.Phase(), "the drop was misread: the estimate returns")
	assert.InDelta(t, top, b.Estimate(), 1e-9)
}

// heldLaw is a law under a hold (TestOverload): at is its clock.
type heldLaw struct {
	l         *law.Law
	at, until time.Duration
	cut       float64
	tails     []law.Stamp
	// under: round's sends leave the concurrency limit's last slot free
	// (with paced false: a scope under both its rate and its limit)
	under bool
}

// send sends one request at 40/s, the pacer holding it back.
func (h *heldLaw) send() law.Stamp { return h.l.Sent(h.at, 40, int(h.l.Limit()), true, true) }

// sends sends n requests gap apart (sends), the first at h.at.
func (h *heldLaw) sends(n int, gap time.Duration) []law.Stamp {
	var tks []law.Stamp
	for range n {
		tks = append(tks, h.send())
		h.at += gap
	}
	return tks
}

// halfAnswered sends 8 requests 100 ms apart and answers every other one
// at once at the unloaded round trip (100 ms); it returns the others,
// still in flight.
func (h *heldLaw) halfAnswered() []law.Stamp {
	var late []law.Stamp
	for i := range 8 {
		tk := h.send()
		h.at += 100 * ms
		if i%2 == 0 {
			late = append(late, tk)
			continue
		}
		h.answer(100*ms, tk)
	}
	return late
}

// answer answers tks, successes with round trip d, at h.at.
func (h *heldLaw) answer(d time.Duration, tks ...law.Stamp) {
	for _, tk := range tks {
		h.l.RoundTrip(d)
		h.l.Observe(h.at, tk, law.Success)
	}
}

// round sends n requests over a second at 40/s (paced: the pacer held
// them back), each answered at once with round trip d; the fail-th
// (from 1) is throttled (0: none).
func (h *heldLaw) round(d time.Duration, n int, paced bool, fail int) {
	for i := range n {
		inflight := int(h.l.Limit())
		if h.under {
			inflight = max(inflight-1, 1)
		}
		tk := h.l.Sent(h.at, 40, inflight, !h.under, paced)
		h.at += sec / time.Duration(max(n-1, 1))
		h.l.RoundTrip(d)
		sig := law.Success
		if i+1 == fail {
			sig = law.Throttled
		}
		h.l.Observe(h.at, tk, sig)
	}
}

// A throttle re-applied to a fleet's state (Rethrottle) is judged at the
// fleet's rate as a first step: the cut this process made on its stale
// state is undone, not taken for an earlier decrease to escalate; a
// concurrency cut it made is kept.
func TestRethrottleIsTheFleetsFirstStep(t *testing.T) {
	var l law.Law
	c := cfg
	l.Init(&c, 0)
	fleetState := law.Shared{Rate: 12, Estimate: 12, Step: 0.03, DownStep: 0.03, Limit: 8, Epoch: 5, CEpoch: 2, Phase: law.Steady}
	l.Adopt(0, fleetState)
	now := 10 * time.Second
	st := l.Sent(now, 12, 8, true, false)
	l.Observe(now+10*time.Millisecond, st, law.Overloaded) // cuts the rate and the limit
	require.Less(t, l.Limit(), 8.0)
	limit := l.Limit()
	cut := l.Rethrottle(now+20*time.Millisecond, fleetState)
	assert.Equal(t, law.StepDown, cut)
	assert.InDelta(t, 12*0.97, l.Estimate(), 1e-9, "a first step from the fleet's 12/s, not an escalated one")
	assert.Equal(t, limit, l.Limit(), "the overload's concurrency cut is kept")
	assert.Greater(t, l.Shared(now).CEpoch, fleetState.CEpoch, "and the fleet will see it")
}

// A round of more sends than a uint16 holds half of is still judged by its
// share of paced sends: 40,000 paced sends in a round make it busy, and
// slow start doubles (2 × 40,000 paced overflowed 16 bits, and the round
// read as not busy).
func TestHugeRoundStillBusy(t *testing.T) {
	var l law.Law
	c := cfg
	c.InitialRate = 40000
	c.MaxConcurrency = 1 << 20
	l.Init(&c, 0)
	start := l.Rate()
	for i := range 40000 {
		at := time.Duration(i) * 25 * time.Microsecond
		st := l.Sent(at, l.Rate(), 1, false, true)
		l.Observe(at+time.Microsecond, st, law.Success)
	}
	st := l.Sent(1100*ms, l.Rate(), 1, false, true)
	l.Observe(1100*ms+time.Microsecond, st, law.Success)
	assert.Equal(t, 2*start, l.Rate(), "a clean busy round doubles slow start's rate")
}

// A fleet's state that Adopt refuses (a store is untrusted) leaves the
// law as it was: the throttle this process already took on its own state
// is not taken a second time, and the memory of its last decrease (which
// escalates the next step) is kept.
func TestRethrottleOfARefusedStateCutsNothingMore(t *testing.T) {
	var l law.Law
	c := cfg
	l.Init(&c, 0)
	l.Adopt(0, law.Shared{Rate: 12, Estimate: 12, Step: 0.03, DownStep: 0.03, Limit: 8, Epoch: 5, CEpoch: 2, Phase: law.Steady})
	now := 10 * time.Second
	st := l.Sent(now, 12, 4, true, false)
	l.Observe(now+10*time.Millisecond, st, law.Throttled) // the process's own step down
	before := l.Shared(now + 20*time.Millisecond)
	require.Less(t, before.Estimate, 12.0)
	for _, bad := range []law.Shared{
		{Rate: -1, Estimate: 12, Limit: 8, Phase: law.Steady},
		{Rate: 12, Estimate: 0, Limit: 8, Phase: law.Steady},
		{Rate: 12, Estimate: 12, Limit: 0, Phase: law.Steady},
		{Rate: math.NaN(), Estimate: 12, Limit: 8, Phase: law.Steady},
	} {
		cut := l.Rethrottle(now+20*time.Millisecond, bad)
		assert.Equal(t, law.NoCut, cut, "%+v", bad)
		assert.Equal(t, before, l.Shared(now+20*time.Millisecond), "%+v: the law as it was", bad)
	}
}

// Under a concurrency cap (the limit held under a count a burst
// overloaded), a probe round in which most sends filled the limit, not
// the pacer, tests the cap and not the rate: it ends "not busy", and
// before, the estimate stayed where it was, however much the cap let
// through (in the simulator's worst world of limit_conn 8, probes from
// 18.98 to 23.53/s for 80 s while the cap carried 21.6/s). What it let
// through was accepted: the estimate rises to it, less the margin, at
// most the probe's rate. With no cap in force, or a round the limit did
// not bind, nothing changes.
func TestProbeBoundByACap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		capped     bool // a burst's overload before the probe
		filled     bool // the probe's sends filled the limit
		wantRaised bool
	}{
		{name: "under a cap", capped: true, filled: true, wantRaised: true},
		{name: "no cap", filled: true},
		{name: "the limit did not bind", capped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l law.Law
			l.Init(&cfg, 0)
			l.Restore(0, 18, 12)
			answer := func(at time.Duration, inflight int, inUse, paced bool) {
				tk := l.Sent(at-350*ms, l.Rate(), inflight, inUse, paced)
				l.RoundTrip(350 * ms)
				l.Observe(at, tk, law.Success)
			}
			at := 400 * ms
			for ; at < 9500*ms; at += 55 * ms {
				answer(at, 7, false, true)
			}
			if tc.capped {
				// 18/s over 350 ms holds 6.3 in flight: an overload at 10
				// is a burst's, the limit falls, the rate stands
				tk := l.Sent(at-10*ms, l.Rate(), 10, true, false)
				v := l.Observe(at, tk, law.Overloaded)
				require.True(t, v.Decreased)
				require.Equal(t, "none", v.Cut.String())
				require.Equal(t, 9.0, l.Limit())
			}
			for ; l.Phase() != law.Probing; at += 55 * ms {
				require.Less(t, at, 15*time.Second, "the probe is due 10 s after the restore")
				answer(at, 7, false, true)
			}
			est, probe := l.Estimate(), l.Rate()
			require.Greater(t, probe, est)
			// the probe's round: 20/s accepted, none held back by the pacer
			start := at
			for ; l.Phase() == law.Probing; at += 50 * ms {
				require.Less(t, at, start+3*time.Second, "a round that is not busy ends the probe")
				answer(at, 9, tc.filled, false)
			}
			if tc.wantRaised {
				assert.InDelta(t, probe, l.Estimate(), 1e-9, "what the cap let through was accepted: up to the probe's rate")
			} else {
				assert.Equal(t, est, l.Estimate())
			}
		})
	}
}

// Under a ceiling the estimate never rises past it: the pacer holds the
// sends to the ceiling, so every round looks busy and clean, and a probe
// above it learns nothing. Before, each probe "held" and the estimate
// doubled past the ceiling every few rounds (1.9e13 after four minutes
// under a ceiling of 1/s, +Inf after an hour), and a burst went out when
// the ceiling lapsed.
func TestEstimateStaysUnderTheCeiling(t *testing.T) {
	c := cfg
	var l law.Law
	l.Init(&c, 0)
	l.SetCeiling(1)
	l.Restore(0, 1, 4)
	for i := range 600 {
		at := time.Duration(i) * sec
		st := l.Sent(at, l.Rate(), 1, false, true)
		l.Observe(at+sec/2, st, law.Success)
	}
	assert.LessOrEqual(t, l.Estimate(), 1.0)
	assert.LessOrEqual(t, l.Rate(), 1.0)
}

// A shared state past slow start with no estimate is refused: its first
// probe would go at 0, and the rate would stay at the floor for good (a
// state with Rate 50 and Estimate 0 held a law at 0.05/s for ten minutes).
func TestAdoptRefusesNoEstimatePastSlowStart(t *testing.T) {
	c := cfg
	var l law.Law
	l.Init(&c, 0)
	l.Restore(0, 20, 4)
	s := l.Shared(0)
	s.Estimate, s.Rate, s.Epoch = 0, 50, s.Epoch+1
	l.Adopt(sec, s)
	assert.Equal(t, 20.0, l.Estimate(), "refused: the law keeps its own")
}
