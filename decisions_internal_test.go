package polite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/internal/law"
)

// The decision log's causes, one step at a time: views before and after a
// step, what the step was, and the lines (level, event, cause) it tells.
func TestNarrate(t *testing.T) {
	const now = 10 * time.Second
	steady := visible{coreState: coreState{phase: law.Steady, estimate: 20, lawRate: 20, rate: 20, limit: 8}}
	with := func(f func(*visible)) visible { v := steady; f(&v); return v }
	cases := map[string]struct {
		before, after visible
		tale          observed
		q             cause
		want          []string
	}{
		"nothing changed": {steady, steady, observed{}, cause{op: opAcquire, granted: true}, nil},
		"per-request detail at Debug": {steady, steady, observed{debug: true}, cause{op: opRecord, class: classify.Success, status: 200},
			[]string{"DEBUG response success"}},
		"a pause that ended before the step comes first": {steady, with(func(v *visible) { v.inflight = 1 }),
			observed{resumed: true, pauseFrom: 9 * time.Second, pauseTo: 9500 * time.Millisecond, pauseWhy: pauseBackoff, debug: true},
			cause{op: opAcquire, granted: true}, []string{"INFO resume backoff", "DEBUG send granted"}},
		"the tail of a burst extends the pause": {with(func(v *visible) { v.pausedUntil, v.reason = now+time.Second, pauseRetryAfter }),
			with(func(v *visible) { v.pausedUntil, v.reason = now+3*time.Second, pauseRetryAfter }), observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429},
			[]string{"DEBUG throttled tail", "INFO pause-extended retry-after"}},
		"a pause shared by another collector": {steady, with(func(v *visible) { v.pausedUntil, v.reason = now+time.Second, pauseRetryAfter }),
			observed{}, cause{op: opAdopt}, []string{"INFO pause retry-after:shared"}},
		"a capacity drop": {steady, with(func(v *visible) { v.estimate, v.lawRate, v.rate = 10, 10, 10 }), observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429, decreased: true, cut: law.Drop},
			[]string{"INFO decrease:throttled drop-detected"}},
		"a step down": {steady, with(func(v *visible) { v.estimate, v.lawRate, v.rate = 19, 19, 19 }), observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429, decreased: true, cut: law.StepDown},
			[]string{"INFO decrease:throttled step-down"}},
		"a failed probe": {with(func(v *visible) { v.phase, v.lawRate = law.Probing, 21 }), steady, observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429, decreased: true, cut: law.ProbeFailed},
			[]string{"INFO decrease:throttled probe-failure"}},
		"an overload cuts the limit and holds increases": {steady, with(func(v *visible) { v.limit, v.held = 5, now+10*time.Second }), observed{},
			cause{op: opRecord, class: classify.Overloaded, status: 503, decreased: true},
			[]string{"INFO decrease:overloaded limit-cut", "INFO hold overloaded"}},
		"the breaker opens": {steady, with(func(v *visible) { v.breaker, v.pausedUntil, v.reason = breakerOpen, now+30*time.Second, pauseBreaker }), observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429},
			[]string{"DEBUG throttled tail", "INFO pause breaker", "INFO breaker-open throttled"}},
		"the cooldown ends": {with(func(v *visible) { v.breaker = breakerOpen }), with(func(v *visible) { v.breaker = breakerHalfOpen }), observed{},
			cause{op: opAcquire}, []string{"INFO breaker-half-open cooldown-ended"}},
		"the probe closes the breaker": {with(func(v *visible) { v.breaker, v.held = breakerHalfOpen, now+time.Second }), steady, observed{},
			cause{op: opRecord, class: classify.Success, status: 200},
			[]string{"INFO breaker-closed probe-succeeded", "INFO hold-lifted resumed"}},
		"a clean cohort lifts the hold": {with(func(v *visible) { v.held = now + 5*time.Second }), steady, observed{},
			cause{op: opRecord, class: classify.Success, status: 200},
			[]string{"INFO hold-lifted clean-cohort"}},
		"blocks park the scope": {steady, with(func(v *visible) { v.parked, v.parkedUntil = true, now+15*time.Minute }), observed{},
			cause{op: opRecord, class: classify.Blocked, status: 403}, []string{"INFO blocked block", "INFO parked blocked"}},
		"a park runs out": {with(func(v *visible) { v.parked = true }), steady, observed{}, cause{op: opAcquire}, []string{"INFO unparked expired"}},
		"Unpark lifts a park and a pause": {with(func(v *visible) { v.parked, v.pausedUntil = true, now+time.Minute }), steady,
			observed{pauseFrom: 5 * time.Second}, cause{op: opUnpark}, []string{"INFO resume unpark", "INFO unparked unpark"}},
		"robots.txt gives a Crawl-delay that binds": {with(func(v *visible) { v.phase, v.lawRate, v.rate = law.SlowStart, 2, 2 }),
			with(func(v *visible) {
				v.phase, v.lawRate, v.rate, v.robots, v.ceiling, v.ceilingRate = law.SlowStart, 2, 0.99, 0.99, ceilCrawlDelay, 0.99
			}),
			observed{}, cause{op: opAcquire, crawlDelay: time.Second}, []string{"INFO robots crawl-delay", "INFO ceiling crawl-delay"}},
		"a quota ceiling appears": {steady, with(func(v *visible) { v.quota = 5 }), observed{}, cause{op: opRecord, class: classify.Success, status: 200},
			[]string{"INFO quota headers"}},
		"a quota ceiling moves": {with(func(v *visible) { v.quota = 5 }), with(func(v *visible) { v.quota = 4 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"DEBUG quota headers"}},
		"a quota ceiling remembered by a new scope": {steady, with(func(v *visible) { v.quota = 5 }), observed{}, cause{op: opCreate},
			[]string{"INFO quota remembered"}},
		"the configured ceiling stops binding": {with(func(v *visible) { v.ceiling, v.ceilingRate = ceilConfigured, 20 }),
			with(func(v *visible) { v.estimate, v.lawRate, v.rate = 19, 19, 19 }), observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429, decreased: true, cut: law.StepDown},
			[]string{"INFO decrease:throttled step-down", "INFO ceiling-lifted configured"}},
		"a slow-start step": {with(func(v *visible) { v.phase, v.estimate, v.lawRate, v.rate = law.SlowStart, 0, 4, 4 }),
			with(func(v *visible) { v.phase, v.estimate, v.lawRate, v.rate = law.SlowStart, 0, 8, 8 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"INFO increase slow-start-step"}},
		"a probe starts": {steady, with(func(v *visible) { v.phase, v.lawRate, v.rate = law.Probing, 20.6, 20.6 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"INFO probe-start probe-due"}},
		"a probe holds": {with(func(v *visible) { v.phase, v.lawRate = law.Probing, 20.6 }), with(func(v *visible) { v.estimate, v.lawRate, v.rate = 20.6, 20.6, 20.6 }),
			observed{}, cause{op: opRecord, class: classify.Success, status: 200}, []string{"INFO probe-success probe-held"}},
		"an additive increase is Debug": {with(func(v *visible) { v.limit = 7.9 }), with(func(v *visible) { v.limit = 8.02 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"DEBUG increase additive"}},
		// law v2: the law says how it cut, the views cannot tell
		"the answer to a probe that arrives after the probe ended": {steady, steady, observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429, decreased: true, cut: law.ProbeFailed},
			[]string{"INFO decrease:throttled probe-failure"}},
		"a large step down (throttles in a row) is no drop": {steady, with(func(v *visible) { v.estimate, v.lawRate, v.rate = 12, 12, 12 }), observed{},
			cause{op: opRecord, class: classify.Throttled, status: 429, decreased: true, cut: law.StepDown},
			[]string{"INFO decrease:throttled step-down"}},
		"an overload cuts the rate too (Little's law)": {steady,
			with(func(v *visible) {
				v.limit, v.estimate, v.lawRate, v.rate, v.held = 5, 19.4, 19.4, 19.4, now+10*time.Second
			}), observed{},
			cause{op: opRecord, class: classify.Overloaded, status: 503, decreased: true, cut: law.StepDown},
			[]string{"INFO decrease:overloaded limit-cut", "INFO decrease:overloaded step-down", "INFO hold overloaded"}},
		"slow start ends on an overload": {with(func(v *visible) { v.phase, v.estimate, v.lawRate, v.rate = law.SlowStart, 0, 16, 16 }),
			with(func(v *visible) { v.limit, v.estimate, v.lawRate, v.rate = 3, 7.76, 7.76, 7.76 }), observed{},
			cause{op: opRecord, class: classify.TransportFailure, decreased: true, cut: law.SlowStartEnd},
			[]string{"INFO decrease:transport-failure limit-cut", "INFO decrease:transport-failure slow-start-end"}},
		"an overload fresh for the rate only": {steady, with(func(v *visible) { v.estimate, v.lawRate, v.rate = 19.4, 19.4, 19.4 }), observed{},
			cause{op: opRecord, class: classify.Overloaded, status: 503, decreased: true, cut: law.StepDown},
			[]string{"INFO decrease:overloaded step-down"}},
		"an honest quota policy seeds the estimate": {with(func(v *visible) { v.phase, v.estimate, v.lawRate, v.rate = law.SlowStart, 0, 2, 2 }),
			with(func(v *visible) { v.estimate, v.lawRate, v.rate, v.quota = 19.4, 19.4, 19.4, 20 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"INFO quota headers", "INFO estimate quota-policy"}},
		"a new scope starts from a remembered estimate": {with(func(v *visible) { v.phase, v.estimate, v.lawRate, v.rate = law.SlowStart, 0, 2, 2 }),
			with(func(v *visible) { v.estimate, v.lawRate, v.rate = 19.4, 19.4, 19.4 }), observed{},
			cause{op: opCreate}, []string{"INFO estimate remembered"}},
		"the latency knee cuts the limit": {steady, with(func(v *visible) { v.limit = 5 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"INFO limit latency-knee"}},
		"the fleet's law adopted": {steady, with(func(v *visible) { v.phase, v.lawRate, v.rate, v.limit = law.Probing, 20.6, 20.6, 6 }), observed{},
			cause{op: opAdopt}, []string{"INFO adopt fleet", "INFO limit fleet"}},
		"a claim and its send are Debug": {steady, with(func(v *visible) { v.inflight = 1 }), observed{debug: true},
			cause{op: opReserve, granted: true}, []string{"DEBUG reserve granted"}},
		"the claimed send": {with(func(v *visible) { v.inflight = 1 }), with(func(v *visible) { v.inflight = 1 }), observed{debug: true},
			cause{op: opAcquire, granted: true, reserved: true}, []string{"DEBUG send reserved"}},
		"the law moves its estimate by itself": {steady, with(func(v *visible) { v.estimate = 22 }), observed{},
			cause{op: opRecord, class: classify.Success, status: 200}, []string{"INFO estimate law"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tl := tc.tale
			tl.before, tl.after = tc.before, tc.after
			var got []string
			for _, l := range tl.lines(nil, now, &tc.q) {
				got = append(got, l.level.String()+" "+l.event+" "+l.cause)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
