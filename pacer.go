package polite

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/colly-polite/polite/internal/sat"
	"github.com/colly-polite/polite/tokenbucket"
)

// pacer spaces the sends of one scope: a GCRA schedule (tokenbucket.Bucket)
// at the law's rate under every ceiling in force. Ceilings are the
// configured rate (Rule.Rate), the rule's MinGap, robots.txt Crawl-delay
// and quota headers; the law is told the lowest only so that it never
// probes above it. Rule.RandomGap adds a random extra before each send.
// Not safe for concurrent use: scope.mu guards it.
type pacer struct {
	b          tokenbucket.Bucket
	robots     float64       // Crawl-delay ceiling, req/s (0: none)
	quota      float64       // quota-header ceiling, req/s (0: none)
	quotaUntil time.Duration // the quota ceiling lapses then
	why        ceilingKind   // which ceiling binds
	// share is the part of the rate this process may use: 1, or its share
	// of a fleet whose shared store is unreachable (0 means 1)
	share float64
	// rejoined: the store answers again, and this process keeps to its
	// share only until the others know (its sends are spaced by the
	// fleet's schedule again)
	rejoined bool
	// fleetCeil is the fleet's configured ceiling, req/s (0: none), as
	// its store last said (fleetKnown): in a fleet, the law is bound by
	// it rather than by this process's own, which binds only this
	// process's sends
	fleetCeil  float64
	fleetKnown bool
	// lone is the ceiling of a fleet's process whose store never
	// answered, req/s (0: none): the fleet's size is unknown
	lone float64
}

// sync recomputes the rate in force from the law's rate and the ceilings,
// tells the law the lowest ceiling, and re-prices the next send when the
// rate changed. It reports whether it did.
func (p *pacer) sync(now time.Duration, c *core) bool {
	own := c.configured()
	site, siteWhy := p.robots, ceilCrawlDelay // the site's ceilings
	if v := p.quota; v > 0 && now < p.quotaUntil && (site == 0 || v < site) {
		site, siteWhy = v, ceilQuota
	}
	ceil, why := own, ceilConfigured
	if site > 0 && (ceil == 0 || site < ceil) {
		ceil, why = site, siteWhy
	}
	lawCeil := ceil
	if p.fleetKnown {
		lawCeil = site
		if v := p.fleetCeil; v > 0 && (lawCeil == 0 || v < lawCeil) {
			lawCeil = v
		}
	}
	if v := p.lone; v > 0 && (lawCeil == 0 || v < lawCeil) {
		lawCeil = v
	}
	c.law.SetCeiling(lawCeil)
	r := c.law.Rate()
	if v := p.lone; v > 0 && r > v {
		r = v
	}
	if p.share > 0 && p.share < 1 {
		r *= p.share
	}
	if ceil > 0 && r >= ceil {
		r = ceil
	} else {
		why = ceilNone
	}
	p.why = why
	alone := p.share > 0 && p.share < 1
	if alone && !p.rejoined && r >= 1 {
		// a whole number of sends a second: a strict schedule then sends
		// at most r in any second, and the processes of a fleet on their
		// shares, which no one spaces against each other, at most the
		// fleet's rate together (2.5/s each for four would be 3 in some
		// seconds, 12 against 10). A process that rejoined is spaced
		// against the others that did by the fleet's schedule: those on
		// their whole numbers and it add up to at most one more
		r = math.Floor(r)
	}
	// a Crawl-delay or a MinGap asks for a minimum gap: no credit for
	// late timers; nor is there any for a process on its share of a
	// fleet whose store is away, whose schedule is one of several that
	// no one spaces against the others: a send it catches up on adds to
	// theirs
	p.b.SetStrict(creditBreaks(r, p.robots) || c.rule.gapRate > 0 || alone)
	if r == p.b.Rate() {
		return false
	}
	p.b.SetRate(r)
	return true
}

// creditBreaks reports whether the credit a schedule at rate r gives a
// late send (tokenbucket.MaxCredit, a quarter of the interval at most)
// could bring two sends closer than a Crawl-delay ceiling's gap (ceil, 0:
// none): not only at the ceiling, but at any rate whose interval less the
// credit falls under it (a rate 2 % under a Crawl-delay of 0.1 s sent
// 97.5 ms apart).
func creditBreaks(r, ceil float64) bool {
	if !(ceil > 0) || !(r > 0) {
		return false
	}
	t := sat.Interval(r)
	return t-min(t/4, tokenbucket.MaxCredit) < sat.Interval(ceil)
}

// whole is the rate in force for a whole fleet, req/s: the law's under
// the site's ceilings and the fleet's configured one, before this
// process's own ceiling and share. Call it after sync.
func (p *pacer) whole(c *core) float64 {
	r := c.law.Rate()
	if ceil := c.law.Ceiling(); ceil > 0 && r > ceil {
		r = ceil
	}
	return r
}

// rate is the rate in force, req/s.
func (p *pacer) rate() float64 { return p.b.Rate() }

// setQuota makes rate the quota ceiling until until.
func (p *pacer) setQuota(rate float64, until time.Duration) { p.quota, p.quotaUntil = rate, until }

// requireCrawlDelay makes the Crawl-delay ceiling at least as strict as
// rate (the Crawl-delay of one of the scope's origins). It reports whether
// it changed.
func (p *pacer) requireCrawlDelay(rate float64) bool {
	if rate > 0 && (p.robots == 0 || rate < p.robots) {
		p.robots = rate
		return true
	}
	return false
}

// crawlDelayRate is the rate ceiling of a Crawl-delay d (0: none), with 1 %
// headroom (at least 5 ms): the gap the server sees is the gap we send at
// plus the jitter of the way there.
func crawlDelayRate(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return 1 / (d + max(d/100, 5*time.Millisecond)).Seconds()
}

// gapRate is the rate ceiling of a minimum gap d (0: none): a hair below
// 1/d, so that the interval the schedule derives from it is never shorter
// than d.
func gapRate(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return max(float64(time.Second)/float64(d+time.Nanosecond), minRate)
}

// sent draws the random extra gap before the next send (Rule.RandomGap)
// from rng after a send was taken.
func (p *pacer) sent(r *rule, rng *rand.PCG) {
	if r.RandomGap <= 0 {
		return
	}
	p.b.Defer(time.Duration(rng.Uint64() % uint64(r.RandomGap)))
}

// globalPacer is the controller-wide ceiling (Config.GlobalRate): one GCRA
// schedule, strict (a ceiling, no credit for late timers), that every
// scope's send also takes from. Its mu is a leaf lock, taken under a
// scope's.
type globalPacer struct {
	mu sync.Mutex
	b  tokenbucket.Bucket // guarded by mu
}

// untake gives back the slot of a send granted but not made, on the
// scope's terms (core.untake): only if its moment is not past, so that a
// slot given back after a long wait lets no burst out. g may be nil.
func (g *globalPacer) untake(t stamp, now time.Duration) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now-t.Sent < sat.Interval(g.b.Rate()) {
		g.b.Untake(t.Sent)
	}
}

func newGlobalPacer(rate float64) *globalPacer {
	if rate <= 0 {
		return nil
	}
	g := &globalPacer{}
	g.b.SetRate(rate)
	g.b.SetStrict(true)
	return g
}
