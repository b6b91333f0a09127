package polite

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/colly-polite/polite/classify"
)

// The simulator: a fast, deterministic, discrete-event model of one scope
// crawled by a pool of workers against a rate limiter, over a network round
// trip. It drives the scope's decision core (law, pacer, gate) directly,
// without net/http, goroutines or a clock, so a law change is judged across
// limiter families in milliseconds. sim_families_test.go holds the families
// and the tests; the socket-level bench confirms what it finds.

// simTrace, when set, sees every send and answer (for debugging).
var simTrace func(t int64, what string)

// simLimiter is a server's admission policy: a request arriving at a (ns
// since the start) is admitted, with the time its answer leaves the origin,
// or rejected with a status and a Retry-After (whole seconds, 0: none).
type simLimiter interface {
	arrive(a int64) (admitted bool, leave int64, status int, ra int64)
}

// simStep switches the server to a fresh limiter at At.
type simStep struct {
	At  time.Duration
	New func() simLimiter
}

// simScenario is one run: a limiter (possibly changing over time), the
// network, the crawler, and what is judged.
type simScenario struct {
	Name      string
	Steps     []simStep                     // Steps[0].At must be 0
	Capacity  func(t time.Duration) float64 // accepted requests per second the limiter allows at t
	RTT       time.Duration
	Workers   int
	Duration  time.Duration
	JudgeFrom time.Duration // goodput and rejections are judged over [JudgeFrom, Duration)
	Seed      uint64
	Rule      Rule // the controller's default rule (zero: defaults)
	Latencies bool // keep every admitted request's latency, for the median
	// World is what a seed varies besides the gate's jitter (sim_world_test.go);
	// the zero value varies nothing: the seed is the jitter's alone.
	World simProfile
	// ChangeSpread: the capacity's change (every step after the first)
	// comes up to this much later in each world, a draw from the seed; the
	// judged window and the run move with it. A change at the same moment
	// in every world meets the law's probe schedule at the same phase, and
	// ten worlds then judge one phase ten times.
	ChangeSpread time.Duration
	// Hosts, if set, make the run a whole crawl of several scopes sharing
	// the Workers (Steps and Capacity are then unused); see simHost.
	Hosts    []simHost
	Dispatch simDispatch
}

// simResult is what one run measured.
type simResult struct {
	Sends, Accepted, Rejected int // judged window, by arrival at the server
	AllSends                  int
	Goodput                   float64 // accepted per second over the judged window
	CapacityAvg               float64 // the limiter's capacity over the window
	Violations                int     // requests that arrived inside an announced pause
	BreakerOpens              int
	MedianLatency             time.Duration // admitted requests, arrival to answer (queueing origins)
	Failed                    int           // requests the controller refused (fail fast)
	// Crawl is a whole crawl's report (nil for a timed run of one scope).
	Crawl *simCrawlResult
}

func (r simResult) share() float64 {
	if r.Crawl != nil {
		return r.Crawl.share()
	}
	if r.CapacityAvg == 0 {
		return 0
	}
	return r.Goodput / r.CapacityAvg
}

func (r simResult) rejectedShare() float64 {
	if r.Sends == 0 {
		return 0
	}
	return float64(r.Rejected) / float64(r.Sends)
}

func (r simResult) String() string {
	return fmt.Sprintf("goodput %6.2f/s = %5.1f %% of %6.2f, rejected %5.2f %%, violations %d, breaker %d, failed %d, median latency %v",
		r.Goodput, 100*r.share(), r.CapacityAvg, 100*r.rejectedShare(), r.Violations, r.BreakerOpens, r.Failed, r.MedianLatency)
}

// simEvent kinds.
const (
	evAnswer = iota // an answer reaches the client
	evWake          // the scope asked to be looked at again
	evRejoin        // a worker that failed fast tries again
)

type simEvent struct {
	t      int64
	due    int64 // evWake: the time asked for (t is later on a busy machine)
	kind   uint8
	status int16
	host   int32 // the scope's index in a whole crawl; 0 otherwise
	ra     int64
	p      stamp
}

// simQueue is a binary min-heap of events by time, typed so that a push
// allocates nothing.
type simQueue []simEvent

func (q *simQueue) push(e simEvent) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].t <= h[i].t {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (q *simQueue) pop() simEvent {
	h := *q
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].t < h[m].t {
			m = l
		}
		if r := l + 1; r < n && h[r].t < h[m].t {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return e
}

// simRun runs one scenario.
func simRun(sc simScenario, st *settings) simResult {
	if sc.ChangeSpread > 0 {
		sc = sc.changeLater()
	}
	r, err := sc.Rule.resolve("Default")
	if err != nil {
		panic(err)
	}
	hosts := sc.Hosts
	if len(hosts) == 0 {
		hosts = []simHost{{Name: "sim.test", Steps: sc.Steps, Capacity: sc.Capacity}}
	}
	scopes := make([]*simScope, len(hosts))
	for i, h := range hosts {
		s := &simScope{host: h, pages: h.Pages, wakeAt: -1}
		if h.Pages == 0 {
			s.pages = -1 // endless
		}
		s.c.init(h.Name, &r, 0, sc.Seed)
		scopes[i] = s
	}
	return simDrive(sc, st, scopes)
}

// changeLater moves the scenario's change, its judged window and its end
// by the seed's draw in [0, ChangeSpread).
func (sc simScenario) changeLater() simScenario {
	d := time.Duration(rand.New(rand.NewPCG(sc.Seed, 0xc4a9e)).Int64N(int64(sc.ChangeSpread)))
	steps := slices.Clone(sc.Steps)
	for i := 1; i < len(steps); i++ {
		steps[i].At += d
	}
	capacity := sc.Capacity
	sc.Steps, sc.Capacity = steps, func(t time.Duration) float64 { return capacity(max(t-d, 0)) }
	sc.JudgeFrom, sc.Duration = sc.JudgeFrom+d, sc.Duration+d
	return sc
}

// simScope is one scope of a run: its decision core, the server's limiter
// in front of it, and what was measured there.
type simScope struct {
	host     simHost
	c        core
	lim      simLimiter
	step     int
	waiting  int   // workers waiting on this scope (fifo dispatch)
	wakeAt   int64 // the earliest evWake pending, -1: none
	refusing bool  // ready dispatch: refused at once, tried again by an evRejoin
	pauses   []simPause
	breakerW breakerState
	pages    int // pages not yet handed to a worker; -1: endless
	fetched  int
	last     int64 // the last answer's time
	res      simResult
	lat      []time.Duration
}

// simDrive is the event loop over the scopes' decision cores.
func simDrive(sc simScenario, st *settings, scopes []*simScope) simResult {
	var (
		q     simQueue
		end   = int64(sc.Duration)
		from  = int64(sc.JudgeFrom)
		half  = int64(sc.RTT) / 2
		w     = newSimWorld(sc.World, sc.Seed, sc.Duration)
		crawl = len(sc.Hosts) > 0
		pool  = sc.Workers // ready dispatch: the workers free for any scope
		rr    int          // fifo dispatch: the host of the next URL handed out
		done  int          // hosts whose pages are all fetched
	)
	for _, s := range scopes {
		s.lim = s.host.Steps[0].New()
		s.step = 1
		s.breakerW = s.c.breaker()
		w.serve(s.lim)
	}
	push := q.push
	// next hands a free worker the next URL of the crawl (fifo): the hosts
	// in turn, as a crawler seeded at each host's index discovers them.
	next := func() {
		for range scopes {
			s := scopes[rr]
			rr = (rr + 1) % len(scopes)
			if s.pages != 0 {
				if s.pages > 0 {
					s.pages--
				}
				s.waiting++
				return
			}
		}
	}
	for range sc.Workers {
		if sc.Dispatch == simFIFO {
			next()
		}
	}
	// pump hands out every send scope i allows at t.
	pump := func(i int, t int64) {
		s := scopes[i]
		now := time.Duration(t)
		waiting := &s.waiting
		if sc.Dispatch == simReady {
			if s.refusing || s.pages == 0 {
				return
			}
			waiting = &pool
		}
		for *waiting > 0 {
			d := s.c.decide(now, st)
			switch d.kind {
			case fail:
				s.res.Failed++
				if sc.Dispatch == simReady {
					s.refusing = true
					push(simEvent{t: w.late(t + int64(100*time.Millisecond)), kind: evRejoin, host: int32(i)})
					return
				}
				*waiting--
				push(simEvent{t: w.late(t + int64(100*time.Millisecond)), kind: evRejoin, host: int32(i)})
				continue
			case waitUntil:
				if wk := int64(d.wake); s.wakeAt < 0 || wk < s.wakeAt {
					s.wakeAt = wk
					push(simEvent{t: w.late(wk), due: wk, kind: evWake, host: int32(i)})
				}
				return
			case waitRelease:
				return
			}
			p := s.c.take(now)
			*waiting--
			if sc.Dispatch == simReady && s.pages > 0 {
				s.pages--
			}
			s.res.AllSends++
			if simTrace != nil {
				simTrace(t, s.host.Name+" send")
			}
			up, down := w.halves(half)
			a := t + up // arrival at the server
			for s.step < len(s.host.Steps) && a >= int64(s.host.Steps[s.step].At) {
				s.lim = s.host.Steps[s.step].New()
				w.serve(s.lim)
				s.step++
			}
			ok, leave, status, ra := s.lim.arrive(a)
			judged := a >= from && a < end
			if judged {
				s.res.Sends++
			}
			for _, pw := range s.pauses {
				if t >= pw.from && t < pw.to {
					s.res.Violations++
					break
				}
			}
			if ok {
				if judged {
					s.res.Accepted++
					if sc.Latencies {
						s.lat = append(s.lat, time.Duration(leave-a))
					}
				}
				push(simEvent{t: w.late(leave + down), kind: evAnswer, status: 200, host: int32(i), p: p})
				continue
			}
			if judged {
				s.res.Rejected++
			}
			recv := w.late(a + down) // when the client reads the answer
			if ra > 0 {
				// a violation is a send the client made inside a pause it
				// had read: from its reading for ra, on its own clock (a
				// send made before it read the answer was on its way, and
				// a window on the server's clock counted such sends as
				// jitter or a late reading carried them over its edge)
				s.pauses = prune(s.pauses, t)
				s.pauses = append(s.pauses, simPause{from: recv, to: recv + ra*int64(time.Second)})
			}
			push(simEvent{t: recv, kind: evAnswer, status: int16(status), ra: ra, host: int32(i), p: p})
		}
	}
	pumpAll := func(t int64) {
		for i := range scopes {
			pump(i, t)
		}
	}
	pumpAll(0)
	for len(q) > 0 {
		e := q.pop()
		if e.t >= end {
			break
		}
		s := scopes[e.host]
		switch e.kind {
		case evWake:
			if e.due == s.wakeAt {
				s.wakeAt = -1
			}
		case evRejoin:
			if sc.Dispatch == simReady {
				s.refusing = false
			} else {
				s.waiting++
			}
		case evAnswer:
			if simTrace != nil {
				k := s.c.state()
				simTrace(e.t, fmt.Sprintf("%s answer %d ra %d | rate %.3f lo %.3f %s limit %.1f inflight %d | stamp %+v", s.host.Name, e.status, e.ra, k.rate, k.estimate, k.phase, k.limit, k.inflight, e.p))
			}
			now := time.Duration(e.t)
			o := outcome{status: int(e.status), rtt: now - e.p.Sent}
			switch e.status {
			case 200:
				o.class = classify.Success
			case 429:
				o.class = classify.Throttled
			case 403:
				o.class = classify.Blocked
			default:
				o.class = classify.Overloaded
			}
			if e.ra > 0 {
				o.retryAfter, o.hasRA = time.Duration(e.ra)*time.Second, true
			}
			s.c.record(now, e.p, &o, st)
			if s.c.breaker() == breakerOpen && s.breakerW != breakerOpen {
				s.res.BreakerOpens++
			}
			s.breakerW = s.c.breaker()
			s.last = e.t
			switch {
			case sc.Dispatch == simReady:
				pool++
				if e.status == 200 {
					s.fetched++
				} else if s.pages >= 0 {
					s.pages++ // the page goes back to its host's queue
				}
			case e.status != 200:
				s.waiting++ // the worker retries its page on the same scope
			default:
				s.fetched++
				next()
			}
			if crawl && e.status == 200 && s.fetched == s.host.Pages {
				done++
			}
		}
		if crawl && done == len(scopes) {
			end = e.t // the crawl is over
			break
		}
		pumpAll(e.t)
	}
	if crawl {
		return simCrawlReport(sc, scopes, end)
	}
	s := scopes[0]
	res := s.res
	span := (sc.Duration - sc.JudgeFrom).Seconds()
	res.Goodput = float64(res.Accepted) / span
	// the capacity averaged over the window, in 100 ms steps
	var c float64
	n := 0
	for t := sc.JudgeFrom; t < sc.Duration; t += 100 * time.Millisecond {
		c += s.host.Capacity(t)
		n++
	}
	res.CapacityAvg = c / float64(n)
	if len(s.lat) > 0 {
		slices.Sort(s.lat)
		res.MedianLatency = s.lat[len(s.lat)/2]
	}
	return res
}

// simPause is a pause a client read, on its clock: from its reading of
// the answer, for the Retry-After.
type simPause struct{ from, to int64 }

func prune(ps []simPause, t int64) []simPause {
	out := ps[:0]
	for _, p := range ps {
		if p.to > t {
			out = append(out, p)
		}
	}
	return out
}

// Limiter families.

// simFixedWindow admits n per window, windows aligned to the start;
// rejections carry the seconds to the next window (at least 1), or none.
type simFixedWindow struct {
	n, w     int64
	latency  int64
	noRA     bool
	k, count int64
}

func (f *simFixedWindow) arrive(a int64) (bool, int64, int, int64) {
	if k := a / f.w; k != f.k {
		f.k, f.count = k, 0
	}
	if f.count < f.n {
		f.count++
		return true, a + f.latency, 200, 0
	}
	if f.noRA {
		return false, 0, 429, 0
	}
	return false, 0, 429, ceilSeconds((f.k+1)*f.w - a)
}

// simGCRA is a token bucket in its GCRA form: one every t, burst b.
type simGCRA struct {
	t, b, latency int64
	tat           int64
	countRejected bool
}

func (g *simGCRA) arrive(a int64) (bool, int64, int, int64) {
	tol := (g.b - 1) * g.t
	if g.tat-a <= tol {
		g.tat = max(g.tat, a) + g.t
		return true, a + g.latency, 200, 0
	}
	ra := ceilSeconds(g.tat - tol - a)
	if g.countRejected {
		g.tat = max(g.tat, a) + g.t
	}
	return false, 0, 429, ra
}

// simSliding admits n in any span of w (a log); rejected requests count.
type simSliding struct {
	n, w, latency int64
	log           []int64 // ring of the last n counted arrivals
	head          int
}

func (s *simSliding) arrive(a int64) (bool, int64, int, int64) {
	if s.log == nil {
		s.log = make([]int64, s.n)
		for i := range s.log {
			s.log[i] = math.MinInt64 / 2
		}
	}
	oldest := s.log[s.head]
	ok := a-oldest >= s.w
	s.log[s.head] = a // rejections count too
	s.head = (s.head + 1) % len(s.log)
	if ok {
		return true, a + s.latency, 200, 0
	}
	return false, 0, 429, ceilSeconds(s.log[s.head] + s.w - a)
}

// simConcurrency serves at most c at once; the excess gets 503 with a
// 1 s Retry-After.
type simConcurrency struct {
	c, latency int64
	busy       []int64 // end times
}

func (s *simConcurrency) arrive(a int64) (bool, int64, int, int64) {
	live := s.busy[:0]
	for _, e := range s.busy {
		if e > a {
			live = append(live, e)
		}
	}
	s.busy = live
	if int64(len(s.busy)) < s.c {
		s.busy = append(s.busy, a+s.latency)
		return true, a + s.latency, 200, 0
	}
	return false, 0, 503, 1
}

// simPool is a worker pool that queues and never rejects: n workers, each
// busy for service per request, first come first served.
type simPool struct {
	service int64
	free    []int64 // when each worker is free
}

func (p *simPool) arrive(a int64) (bool, int64, int, int64) {
	i := 0
	for j := range p.free {
		if p.free[j] < p.free[i] {
			i = j
		}
	}
	start := max(a, p.free[i])
	p.free[i] = start + p.service
	return true, p.free[i], 200, 0
}

func ceilSeconds(d int64) int64 {
	return max((d+int64(time.Second)-1)/int64(time.Second), 1)
}

// simRand draws scenario parameters.
func simRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x51)) }
