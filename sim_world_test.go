package polite

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
)

// A seed is a world. The families of sim_families_test.go vary only the
// gate's jitter with the seed; the kinds of sim_kinds_test.go also draw,
// from the same seed, what differs from one real crawl to the next: where
// the limiter's windows fall against the crawl's start, how the origin's
// cost spreads over URLs and drifts over time, how much each direction of
// the round trip varies, and whether the crawler's machine is busy (its
// timers fire late, it stalls). simProfile says how far a family's worlds
// range; newSimWorld draws one.

// simProfile is how far the worlds of a family range. The zero value
// varies nothing (the world of every seed is the same ideal one).
type simProfile struct {
	// Phase: the limiter's clock runs ahead of the crawl's by a draw in
	// [0, Phase), so a fixed window's boundaries fall anywhere against the
	// crawl's start.
	Phase time.Duration
	// RTTJitter: each world draws j in [0, RTTJitter); each direction of
	// each request then takes a uniform extra in [0, j·RTT/2).
	RTTJitter float64
	// CostSpread: each world draws sigma in [0, CostSpread); each request's
	// cost at the origin is scaled by a lognormal factor of mean 1 and that
	// sigma (pages differ in cost from URL to URL).
	CostSpread float64
	// Drift: each world draws an amplitude in [0, Drift) and a period of
	// 30-150 s; the origin's cost is scaled by 1 + amplitude·sin over the
	// crawl (it changes over time without load).
	Drift float64
	// Busy is the odds that a world's crawler runs on a busy machine (1:
	// every world): each timer and each answer is handled late by an
	// exponential draw of mean 0.5-3 ms, and the process stalls 0.5-2 times
	// a second for 10-150 ms, everything due meanwhile handled at the
	// stall's end.
	Busy float64
	// Shared: on a busy machine the server runs beside the crawler (as in
	// a test on one machine), so its answers leave late too.
	Shared bool
}

// simWorld is one drawn world. Its zero value (and a nil *simWorld's
// fields) is the ideal world: no phase, no jitter, constant costs, an idle
// machine. Not safe for concurrent use: a run owns its world.
type simWorld struct {
	rng      *rand.Rand // nil: nothing to draw
	phase    int64
	jitter   float64 // of RTT/2
	sigma    float64
	driftAmp float64
	driftPer float64 // seconds
	driftPh  float64
	busy     bool
	shared   bool       // the server's answers are late too
	lateMean float64    // ns
	stalls   []simPause // sorted, disjoint
}

// newSimWorld draws the world of seed within p, for a run of d.
func newSimWorld(p simProfile, seed uint64, d time.Duration) *simWorld {
	w := &simWorld{}
	if p == (simProfile{}) {
		return w
	}
	r := rand.New(rand.NewPCG(seed, 0x3c6ef372fe94f82b))
	w.rng = r
	// the drift is drawn whatever the profile, so that a seed is the same
	// world for every kind (its busy machine the same seeds'), and set
	// aside where the profile has none: a kind that did not draw it was
	// busy in other worlds than the others, six of ten instead of three.
	// (Every kind has a phase.)
	if p.Phase > 0 {
		w.phase = r.Int64N(int64(p.Phase))
	}
	w.jitter = p.RTTJitter * r.Float64()
	w.sigma = p.CostSpread * r.Float64()
	amp, per, ph := r.Float64(), r.Float64(), r.Float64()
	if p.Drift > 0 {
		w.driftAmp = p.Drift * amp
		w.driftPer = 30 + 120*per
		w.driftPh = 2 * math.Pi * ph
	}
	if busy := r.Float64(); p.Busy > 0 && busy < p.Busy {
		w.busy, w.shared = true, p.Shared
		w.lateMean = float64(500*time.Microsecond) + float64(2500*time.Microsecond)*r.Float64()
		every := 1 / (0.5 + 1.5*r.Float64()) // seconds between stalls, on average
		longest := 10 + 140*r.Float64()      // ms
		for t := 0.0; ; {
			t += r.ExpFloat64() * every
			from := int64(t * 1e9)
			if from >= int64(d) {
				break
			}
			to := from + int64((10+(longest-10)*r.Float64())*1e6)
			if n := len(w.stalls); n > 0 && from <= w.stalls[n-1].to {
				w.stalls[n-1].to = max(w.stalls[n-1].to, to)
				continue
			}
			w.stalls = append(w.stalls, simPause{from: from, to: to})
		}
	}
	return w
}

// late is when the crawler handles what falls due at t: at once on an idle
// machine; on a busy one, after the stall t falls in and a draw of its
// scheduling delay.
func (w *simWorld) late(t int64) int64 {
	if !w.busy {
		return t
	}
	i := sort.Search(len(w.stalls), func(i int) bool { return w.stalls[i].to > t })
	if i < len(w.stalls) && w.stalls[i].from <= t {
		t = w.stalls[i].to
	}
	return t + int64(w.rng.ExpFloat64()*w.lateMean)
}

// halves are the two directions of one request's round trip, each half
// (RTT/2) and its jitter.
func (w *simWorld) halves(half int64) (up, down int64) {
	if w.jitter == 0 || half == 0 {
		return half, half
	}
	j := w.jitter * float64(half)
	return half + int64(j*w.rng.Float64()), half + int64(j*w.rng.Float64())
}

// cost scales the origin's base cost of a request arriving at a (the
// crawl's clock) by the world's per-URL spread and drift.
func (w *simWorld) cost(base, a int64) int64 {
	f := 1.0
	if w.sigma > 0 {
		f *= math.Exp(w.sigma*w.rng.NormFloat64() - w.sigma*w.sigma/2)
	}
	if w.driftAmp > 0 {
		f *= 1 + w.driftAmp*math.Sin(2*math.Pi*float64(a)/1e9/w.driftPer+w.driftPh)
	}
	return int64(float64(base) * f)
}

// uniform is a draw in [0, 1) for what a family's own cost mix picks per
// URL (0 in the ideal world).
func (w *simWorld) uniform() float64 {
	if w.rng == nil {
		return 0
	}
	return w.rng.Float64()
}

// serve hands the world to a limiter that needs it.
func (w *simWorld) serve(l simLimiter) {
	if f, ok := l.(*simFront); ok {
		f.w = w
	}
}

// simCost is an origin's base cost of a request arriving at a (ns since
// the crawl's start), u a uniform draw for the URL: a family's schedule or
// mix, before the world's spread and drift.
type simCost func(a int64, u float64) int64

// simConstCost is a cost of d for every page at every time.
func simConstCost(d time.Duration) simCost { return func(int64, float64) int64 { return int64(d) } }

// simFront is a server as the kinds build it: an admission policy in
// front (its clock ahead of the crawl's by the world's phase), what it
// answers to excess, and the origin's cost behind it, drawn from the
// world. A policy that needs the cost to admit (a concurrency cap, a queue)
// implements simServing; one that admits at once has no latency of its
// own.
type simFront struct {
	adm    simLimiter
	cost   simCost
	status int   // of a rejection; 0: the policy's
	ra     int64 // Retry-After of a rejection, seconds; 0: the policy's, -1: none
	w      *simWorld
}

// simServing is an admission policy that takes each request's cost.
type simServing interface {
	arriveFor(a, service int64) (admitted bool, leave int64, status int, ra int64)
}

func (f *simFront) arrive(a int64) (bool, int64, int, int64) {
	ph := f.w.phase
	svc := f.w.cost(f.cost(a, f.w.uniform()), a)
	var (
		ok            bool
		leave         int64
		status        int
		ra            int64
		includesCosts bool
	)
	if s, is := f.adm.(simServing); is {
		ok, leave, status, ra = s.arriveFor(a+ph, svc)
		includesCosts = true
	} else {
		ok, leave, status, ra = f.adm.arrive(a + ph)
	}
	if ok {
		leave -= ph
		if !includesCosts {
			leave += svc
		}
		if f.w.shared {
			leave = max(f.w.late(leave), a)
		}
		return true, leave, 200, 0
	}
	if f.status != 0 {
		status = f.status
	}
	switch {
	case f.ra < 0:
		ra = 0
	case f.ra > 0:
		ra = f.ra
	}
	return false, 0, status, ra
}

// simConnCap serves at most c at once (nginx limit_conn); the excess gets
// 503 without Retry-After.
type simConnCap struct {
	c    int
	busy []int64 // end times
}

func (s *simConnCap) arrive(a int64) (bool, int64, int, int64) { return s.arriveFor(a, 0) }

func (s *simConnCap) arriveFor(a, service int64) (bool, int64, int, int64) {
	s.busy = slices.DeleteFunc(s.busy, func(e int64) bool { return e <= a })
	if len(s.busy) < s.c {
		s.busy = append(s.busy, a+service)
		return true, a + service, 200, 0
	}
	return false, 0, 503, 0
}

// simLeaky is nginx limit_req without nodelay: a request over the rate
// waits its turn (excess / rate) in front of the origin; one that would
// find more than burst ahead of it is refused with 503 and no Retry-After.
type simLeaky struct {
	rate   float64 // per second
	burst  float64
	excess float64 // requests ahead, as nginx keeps it
	last   int64
	seen   bool
}

func (l *simLeaky) arrive(a int64) (bool, int64, int, int64) { return l.arriveFor(a, 0) }

func (l *simLeaky) arriveFor(a, service int64) (bool, int64, int, int64) {
	if !l.seen {
		l.seen, l.last = true, a
		return true, a + service, 200, 0
	}
	e := max(l.excess-l.rate*float64(a-l.last)/1e9, 0) + 1
	if e > l.burst {
		return false, 0, 503, 0
	}
	l.excess, l.last = e, a
	wait := int64(e / l.rate * 1e9)
	return true, a + wait + service, 200, 0
}

// simHAProxy is HAProxy's sc_http_req_rate over a period: the count of the
// current period plus the previous one's, weighted by the share of the
// period still to come. Every request is counted, the rejected ones too;
// a request whose count is above n is refused (429), Retry-After the time
// to the next period.
type simHAProxy struct {
	n, period int64
	k         int64 // the current period's index
	cur, prev int64
}

func (h *simHAProxy) arrive(a int64) (bool, int64, int, int64) {
	if k := a / h.period; k != h.k {
		if k == h.k+1 {
			h.prev = h.cur
		} else {
			h.prev = 0
		}
		h.k, h.cur = k, 0
	}
	h.cur++
	left := float64((h.k+1)*h.period - a)
	if rate := float64(h.prev)*left/float64(h.period) + float64(h.cur); rate > float64(h.n) {
		return false, 0, 429, ceilSeconds(int64(left))
	}
	return true, a, 200, 0
}

// simPenalty locks a client out for box after its first rejection by the
// limiter inside (fail2ban, a WAF's penalty box): every request until then
// is refused, whatever the Retry-After says.
type simPenalty struct {
	inner simLimiter
	box   int64
	until int64
}

func (p *simPenalty) arrive(a int64) (bool, int64, int, int64) {
	if a < p.until {
		return false, 0, 429, ceilSeconds(p.until - a)
	}
	ok, leave, status, ra := p.inner.arrive(a)
	if !ok {
		p.until = a + p.box
	}
	return ok, leave, status, ra
}

// simDispatch is how a whole crawl's workers pick their next request.
type simDispatch uint8

const (
	// simFIFO: one queue of URLs, the hosts in turn as a crawl seeded at
	// each index discovers them; a worker takes the next URL and waits on
	// its scope (Colly's queue with N threads). A rejected page is retried
	// by the same worker; a refusal puts the worker to sleep for 100 ms.
	simFIFO simDispatch = iota
	// simReady: a worker goes to whichever scope can send now (the
	// frontier package: per-host queues, the ready scope first); a rejected
	// page goes back to its host's queue; a scope that refuses is skipped
	// for 100 ms.
	simReady
)

// simHost is one host of a run: its limiter over time, its capacity, and
// how many pages it has (0: endless, the timed runs).
type simHost struct {
	Name     string
	Steps    []simStep
	Capacity func(t time.Duration) float64
	Pages    int
}

// simCrawlResult is a whole crawl: per host, when it was done.
type simCrawlResult struct {
	Hosts []simCrawlHost
	// Makespan is the crawl's length (its deadline if cut); Ideal the
	// slowest host's pages / capacity.
	Makespan, Ideal time.Duration
	Cut             bool
}

// simCrawlHost is what one host of a crawl came to.
type simCrawlHost struct {
	Name             string
	Pages, Fetched   int
	Ideal, Finish    time.Duration // pages / capacity; the last answer (the deadline if not done)
	Sends, Rejected  int
	Violations, Fail int
}

// hostShare is goodput over a host's crawl as a share of its capacity:
// its ideal time over its finish, scaled by what it fetched.
func (h simCrawlHost) hostShare() float64 {
	if h.Finish <= 0 || h.Pages == 0 {
		return 0
	}
	return h.Ideal.Seconds() / h.Finish.Seconds() * float64(h.Fetched) / float64(h.Pages)
}

// share is the worst host's: a crawl is as good as its host that waited
// longest for what it could have had.
func (c *simCrawlResult) share() float64 {
	s := math.Inf(1)
	for _, h := range c.Hosts {
		s = math.Min(s, h.hostShare())
	}
	if math.IsInf(s, 1) {
		return 0
	}
	return s
}

// simCrawlReport sums up a whole crawl that ended at end.
func simCrawlReport(sc simScenario, scopes []*simScope, end int64) simResult {
	var res simResult
	cr := &simCrawlResult{Makespan: time.Duration(end)}
	for _, s := range scopes {
		h := simCrawlHost{Name: s.host.Name, Pages: s.host.Pages, Fetched: s.fetched,
			Sends: s.res.Sends, Rejected: s.res.Rejected, Violations: s.res.Violations, Fail: s.res.Failed}
		h.Ideal = time.Duration(float64(h.Pages) / s.host.Capacity(0) * 1e9)
		h.Finish = time.Duration(s.last)
		if s.fetched < s.host.Pages {
			h.Finish, cr.Cut = time.Duration(end), true
		}
		cr.Ideal = max(cr.Ideal, h.Ideal)
		cr.Hosts = append(cr.Hosts, h)
		res.Sends += s.res.Sends
		res.Accepted += s.res.Accepted
		res.Rejected += s.res.Rejected
		res.AllSends += s.res.AllSends
		res.Violations += s.res.Violations
		res.BreakerOpens += s.res.BreakerOpens
		res.Failed += s.res.Failed
	}
	res.Crawl = cr
	res.Goodput = float64(res.Accepted) / time.Duration(end).Seconds()
	return res
}

// simCrawlDeadline is when a whole crawl is stopped, as the bench's S11
// does: twice the slowest host's ideal time, plus 30 s.
func simCrawlDeadline(hosts []simHost) time.Duration {
	var slowest time.Duration
	for _, h := range hosts {
		slowest = max(slowest, time.Duration(float64(h.Pages)/h.Capacity(0)*1e9))
	}
	return 2*slowest + 30*time.Second
}
