package polite

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/colly-polite/polite/classify"
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/law"
)

// Rule is the per-domain configuration, the replacement for colly.LimitRule
// (FromLimitRule converts one). The zero value of every field means the
// stated default. Rules are matched in order against the request's host in
// lower case, and against host:port when the URL names a port other than
// the scheme's default (as Colly matches URL.Host); the first match wins and
// Config.Default covers the rest.
type Rule struct {
	// Domain is a glob (path.Match syntax) matched against the host, e.g.
	// "*.example.com", or "127.0.0.1:8080" with a port. Ignored when
	// DomainRegexp is set.
	Domain string
	// DomainRegexp, if set, is matched against the host (and host:port)
	// instead of Domain.
	DomainRegexp *regexp.Regexp
	// Match, if set, decides instead of Domain and DomainRegexp whether
	// the rule applies to a host (and host:port). It must be safe for
	// concurrent use. FromLimitRule sets it to Colly's own matcher.
	Match func(host string) bool

	// Rate is a ceiling in requests per second that the adaptive rate never
	// exceeds. 0 means no configured ceiling (the server's answers, quota
	// headers and robots.txt Crawl-delay still cap it). Rates, when set, are
	// at least 1e-6 (one request per 11.6 days).
	Rate float64
	// InitialRate is where slow start begins, in requests per second.
	// 0 means 2 (or Rate, if lower).
	InitialRate float64
	// MinRate is the floor of the adaptive rate. 0 means 0.05 (one request
	// per 20 s, or Rate if lower).
	MinRate float64

	// MinGap is the shortest time between two sends of one scope: a
	// ceiling of 1/MinGap on its rate that the adaptive rate never
	// exceeds, kept strictly (no credit for late timers), applied before
	// the send (colly.LimitRule's Delay sleeps after each response
	// instead). 0 means none.
	MinGap time.Duration
	// RandomGap adds a random extra in [0, RandomGap) to the gap before
	// each send, drawn per send: sends never come closer than the rate in
	// force (and MinGap) allow. 0 means none.
	RandomGap time.Duration

	// StartConcurrency is the initial concurrency limit: 0 means 4.
	StartConcurrency int
	// MinConcurrency is the floor of the concurrency limit: 0 means 1.
	MinConcurrency int
	// MaxConcurrency is the ceiling of the concurrency limit: 0 means 64
	// (or MinConcurrency, if higher).
	MaxConcurrency int

	// MaxRetries bounds the retries of one request after a throttle,
	// overload or transport failure: 0 means 3, negative means none.
	MaxRetries int

	// BlockThreshold is how many blocks (403, block pages) in a row, with
	// no success between, park the scope. 0 means 3; negative means never
	// park. Many sites refuse a client that goes too fast with 403: a
	// block for a request sent while the rate was rising (slow start, a
	// probe), or one that follows a success, is taken for a throttle (a
	// pause, a slower rate, a probe back up later), and counts toward a
	// park only when nothing succeeds between.
	BlockThreshold int
	// ParkFor bounds how long a park lasts. A park ends by itself with one
	// probe: its success resumes the scope, a block parks it again for
	// twice as long. The first park lasts 30 s (or ParkFor, if shorter).
	// 0 means 15 minutes; negative means until Controller.Unpark.
	ParkFor time.Duration
}

// Config is the controller's configuration, its one front door: the zero
// value of every field means the stated default, so Config{} is a polite
// controller. New validates it; NewTransport and adaptive.Attach fail safe
// instead (each invalid field takes its most conservative value, and
// Controller.Err says so). A Config is a plain value: copy it freely; the
// controller keeps its own copy.
type Config struct {
	// Default is the rule for hosts that no entry of Rules matches.
	Default Rule
	// Rules are tried in order; the first match wins. A rule is matched
	// against a request's host; a scope whose hosts match different rules
	// (Scope below) keeps to the strictest of the rules it has met: each
	// ceiling the lowest, each gap and park the longest, each concurrency
	// bound the lowest.
	Rules []Rule

	// Scope maps a request to the key of the scope that controls it. nil
	// means ScopeHost; ScopeDomain is one scope per registered domain.
	Scope func(*http.Request) string

	// MaxPause is the longest the controller makes a request wait at the
	// head of its scope's line: for a pause (Retry-After, breaker, quota),
	// or for the gap a ceiling (configured rate, Crawl-delay, quota) puts
	// between two sends. Above it the request fails at once with ErrPaused
	// (a *ScopeError says why) and the scope stays paused. A place in a long
	// queue is not such a wait. 0 means 120 s.
	MaxPause time.Duration
	// MinRetryAfter is the shortest pause a Retry-After asks for: "0", or a
	// date in the past, still pauses this long (never a zero-wait loop).
	// 0 means 500 ms.
	MinRetryAfter time.Duration
	// Backoff is the pause after a throttle or overload without Retry-After;
	// it doubles for each further one without a success in between, up to
	// MaxBackoff. 0 means 1 s.
	Backoff time.Duration
	// MaxBackoff bounds Backoff's doubling, and the doubling of a
	// Retry-After that was not enough (refused again with no success
	// since: a lockout longer than it says). 0 means 60 s (or Backoff, if
	// longer).
	MaxBackoff time.Duration
	// Jitter spreads the resume after a pause over [0, Jitter) so that
	// several collectors do not return in one instant. 0 means 10 % of the
	// pause, at most 1 s; negative means none.
	Jitter time.Duration
	// OverloadHold is how long increases stay off at most after an
	// overload (503, 502, 504, transport failure), counted from the end of
	// the pause it caused: a 200 from a struggling origin is no proof of
	// headroom. The hold ends sooner when the sends made after the pause
	// (at least 4, over a round) all succeed, mostly held back by the
	// pacer, within 1.2 times the round trip measured before the hold:
	// the origin does not struggle (a concurrency cap or a limiter
	// answered). 0 means 10 s.
	OverloadHold time.Duration

	// BreakerThreshold is how many throttles or overloads in a row, with no
	// success between, open the breaker. 0 means 6; negative disables it.
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker stays open (at least the
	// server's Retry-After); then one probe goes out at the floor. 0 means
	// 30 s.
	BreakerCooldown time.Duration

	// AttemptTimeout bounds one attempt (headers and body), counted from the
	// moment the request is sent, never while it waits politely. 0 means no
	// per-attempt timeout (NewTransport) or the collector's request timeout
	// (Attach, which moves it here).
	AttemptTimeout time.Duration

	// Robots enables robots.txt: its Crawl-delay, and its Allow and
	// Disallow rules (see RobotsDisallow). nil means off, and on under
	// adaptive.Attach (a crawler's default); new(false) turns it off there.
	Robots *bool
	// RobotsDisallow enforces robots.txt's Allow and Disallow rules (RFC
	// 9309) for the request's User-Agent: a disallowed URL fails at once,
	// unsent, with ErrDisallowed; while robots.txt answers 5xx or cannot
	// be reached, every URL of the origin is disallowed until it is asked
	// again (RobotsRetry). nil means on whenever Robots is; false keeps
	// only Crawl-delay (and a conservative RobotsFailDelay while robots.txt
	// cannot be read).
	RobotsDisallow *bool
	// MaxCrawlDelay caps an absurd Crawl-delay. 0 means 30 s.
	MaxCrawlDelay time.Duration
	// RobotsTTL is how long a fetched robots.txt is trusted. 0 means 24 h
	// (RFC 9309 allows at most 24 h).
	RobotsTTL time.Duration
	// RobotsFailDelay is the conservative delay between requests while a
	// host's robots.txt answers 429 (or 5xx, or cannot be reached, with
	// RobotsDisallow off). 0 means 5 s.
	RobotsFailDelay time.Duration
	// RobotsRetry is how soon an unreadable robots.txt is asked for again,
	// and so how long a 5xx disallows the origin. 0 means 1 minute.
	RobotsRetry time.Duration

	// IdleTTL evicts scopes untouched for this long with nothing in flight.
	// 0 means 10 minutes.
	IdleTTL time.Duration
	// MaxRemembered bounds what the controller keeps beyond the life of a
	// scope (per origin, its robots.txt; per scope, its Crawl-delay and
	// quota ceilings): the least recently used go first. 0 means 50,000.
	MaxRemembered int

	// Store, if set, makes this controller one of a fleet that shares
	// each scope's send schedule, law, pause and concurrency (see Store).
	// nil means this controller's scopes are its own.
	Store fleet.Store

	// GlobalRate is a ceiling in requests per second on the sends of all
	// scopes of this controller together (Crawlee's maxRequestsPerMinute
	// is GlobalRate × 60), on top of each scope's own. 0 means none.
	GlobalRate float64

	// JitterSeed seeds the per-scope random source of the resume jitter. 0
	// means a random seed, so that separate processes crawling one host do
	// not resume in step; tests set it for reproducible runs.
	JitterSeed uint64

	// EventBuffer is the capacity of the event stream (Events). 0 means 256.
	EventBuffer int
	// Logger, if set, receives the time series of decisions (time, scope,
	// limit, in flight, rate, event): decreases, pauses and parks at Info
	// level, additive increases, sends and answers at Debug
	// (docs/observe.md).
	Logger *slog.Logger
	// Classifier turns outcomes into classes. nil means the zero
	// classify.Classifier (Cloudflare challenge detection). A Classifier
	// with Detectors of its own makes the transport show them the first
	// 16 KiB of every body under 500 (the caller still reads it whole).
	Classifier *classify.Classifier
	// BlockBodyMarkers, if set, are searched (case-insensitively) in the
	// first 16 KiB of 2xx/4xx bodies to detect block pages.
	BlockBodyMarkers []string
}

// minRate is the lowest rate accepted. One send interval (1/rate) must fit a
// time.Duration with room to spare: below ~1e-10 it overflows, pacing lets
// sends through unpaced and waiters spin on 1 µs timers.
const minRate = 1e-6

// longestGap is the gap of minRate (about 11.6 days): the longest MinGap a
// schedule keeps.
const longestGap = time.Duration(float64(time.Second) / minRate)

// rateProblem says what is wrong with a configured rate, or "".
func rateProblem(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "not a finite number"
	case f < 0:
		return "negative"
	case f > 0 && f < minRate:
		return "below the minimum of 1e-6 requests per second"
	}
	return ""
}

// rule is a Rule with its defaults filled in.
type rule struct {
	Rule
	retries int
	never   bool       // the Domain glob is malformed: the rule matches no host
	gapRate float64    // the ceiling of MinGap, req/s (0: none)
	law     law.Config // what the control law needs of it
}

// defaultMinRate is the floor of the adaptive rate when MinRate is 0, and
// the value an unreadable rate ceiling falls back to.
const defaultMinRate = 0.05

// resolve fills in r's defaults; name ("Default", "Rules[2]") says which
// rule a problem is about. Every invalid field gets the most conservative
// value of its own (a rate ceiling the minimum rate, a concurrency 1) and
// an error saying so; the valid ones are kept.
func (r Rule) resolve(name string) (rule, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: "+format, append([]any{ErrConfig, name}, args...)...))
	}
	if why := rateProblem(r.MinRate); why != "" {
		bad("MinRate %v is %s", r.MinRate, why)
		r.MinRate = 0
	}
	minRate := r.MinRate
	if minRate == 0 {
		minRate = defaultMinRate
	}
	if why := rateProblem(r.Rate); why != "" {
		bad("Rate %v is %s", r.Rate, why)
		r.Rate = minRate
	}
	if why := rateProblem(r.InitialRate); why != "" {
		bad("InitialRate %v is %s", r.InitialRate, why)
		r.InitialRate = minRate
	}
	for _, f := range []struct {
		n string
		v *time.Duration
	}{{"MinGap", &r.MinGap}, {"RandomGap", &r.RandomGap}} {
		if *f.v < 0 {
			bad("%s %v is negative", f.n, *f.v)
			*f.v = 0
		}
		// a century at most, as every duration: their sum is then
		// representable (past MaxInt64 it wrapped negative, and passed
		// the check against MaxPause)
		*f.v = min(*f.v, longestPause)
	}
	if r.MinGap > longestGap {
		// the least rate is its ceiling's floor: a longer gap would be
		// kept shorter without a word
		bad("MinGap %v above %v, the longest gap a schedule keeps: cut to it", r.MinGap, longestGap)
		r.MinGap = longestGap
	}
	for _, f := range []struct {
		n string
		v *int
	}{{"StartConcurrency", &r.StartConcurrency}, {"MinConcurrency", &r.MinConcurrency}, {"MaxConcurrency", &r.MaxConcurrency}} {
		if *f.v < 0 {
			bad("%s %d is negative", f.n, *f.v)
			*f.v = 1
		}
	}
	if r.Rate > 0 && r.MinRate > r.Rate {
		bad("MinRate %v above Rate %v", r.MinRate, r.Rate)
		r.MinRate = r.Rate
	}
	if r.MaxConcurrency > 0 && r.MinConcurrency > r.MaxConcurrency {
		bad("MinConcurrency %d above MaxConcurrency %d", r.MinConcurrency, r.MaxConcurrency)
		r.MinConcurrency = r.MaxConcurrency
	}
	// hosts are matched in lower case (normalizeHost): a glob written
	// with capitals ("API.Example.com") would match none, and its rule's
	// ceilings would silently fall to Default's
	r.Domain = canonicalGlob(strings.ToLower(r.Domain))
	out := rule{Rule: r}
	if r.Domain != "" && r.DomainRegexp == nil && r.Match == nil {
		if _, err := path.Match(r.Domain, ""); err != nil {
			bad("Domain %q: %v (the rule matches no host)", r.Domain, err)
			out.never = true
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&out.MinConcurrency, 1)
	def(&out.MaxConcurrency, max(64, out.MinConcurrency))
	def(&out.StartConcurrency, 4)
	if out.MinRate == 0 {
		out.MinRate = defaultMinRate
	}
	if out.InitialRate == 0 {
		out.InitialRate = 2
	}
	out.gapRate = gapRate(out.MinGap)
	for _, ceil := range []float64{out.Rate, out.gapRate} {
		if ceil > 0 {
			out.InitialRate = math.Min(out.InitialRate, ceil)
			out.MinRate = math.Min(out.MinRate, ceil)
		}
	}
	out.StartConcurrency = min(max(out.StartConcurrency, out.MinConcurrency), out.MaxConcurrency)
	if out.InitialRate < out.MinRate {
		out.InitialRate = out.MinRate
	}
	switch {
	case r.MaxRetries == 0:
		out.retries = 3
	case r.MaxRetries < 0:
		out.retries = 0
	default:
		out.retries = r.MaxRetries
	}
	def(&out.BlockThreshold, 3)
	if out.ParkFor == 0 {
		out.ParkFor = 15 * time.Minute
	}
	out.law = law.Config{
		InitialRate: out.InitialRate, MinRate: out.MinRate,
		StartConcurrency: out.StartConcurrency, MinConcurrency: out.MinConcurrency, MaxConcurrency: out.MaxConcurrency,
	}
	return out, errs
}

// stricter is the rule that keeps to both a and b (resolved): each
// ceiling the lower (a zero Rate none), each gap and park the longer, each
// concurrency bound and each threshold the lower. Retries are the
// request's own rule's (the transport reads them per request).
func stricter(a, b *rule) rule {
	r := a.Rule
	lower := func(x, y float64) float64 { // of two ceilings, 0 none
		if x == 0 || y > 0 && y < x {
			return y
		}
		return x
	}
	r.Rate = lower(a.Rate, b.Rate)
	r.InitialRate = min(a.InitialRate, b.InitialRate)
	r.MinRate = min(a.MinRate, b.MinRate)
	r.MinGap = max(a.MinGap, b.MinGap)
	r.RandomGap = max(a.RandomGap, b.RandomGap)
	r.StartConcurrency = min(a.StartConcurrency, b.StartConcurrency)
	r.MinConcurrency = min(a.MinConcurrency, b.MinConcurrency)
	r.MaxConcurrency = min(a.MaxConcurrency, b.MaxConcurrency)
	switch { // park soonest; a negative threshold never parks
	case a.BlockThreshold < 0:
		r.BlockThreshold = b.BlockThreshold
	case b.BlockThreshold >= 0:
		r.BlockThreshold = min(a.BlockThreshold, b.BlockThreshold)
	}
	switch { // park longest; a negative ParkFor lasts until Unpark
	case a.ParkFor < 0 || b.ParkFor < 0:
		r.ParkFor = -1
	default:
		r.ParkFor = max(a.ParkFor, b.ParkFor)
	}
	out, _ := r.resolve("") // every value is valid already
	out.retries = a.retries
	return out
}

// sameLimits reports whether r keeps to the same limits as o.
func (r *rule) sameLimits(o *rule) bool {
	return r.Rate == o.Rate && r.InitialRate == o.InitialRate && r.MinRate == o.MinRate &&
		r.MinGap == o.MinGap && r.RandomGap == o.RandomGap && r.StartConcurrency == o.StartConcurrency &&
		r.MinConcurrency == o.MinConcurrency && r.MaxConcurrency == o.MaxConcurrency &&
		r.BlockThreshold == o.BlockThreshold && r.ParkFor == o.ParkFor
}

// matches reports whether the rule applies to host, or to hostport (host
// with a port that is not the scheme's default; "" when there is none).
func ptrs(rs []rule) []*rule {
	out := make([]*rule, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

func (r *rule) matches(host, hostport string) bool {
	if r.never {
		return false
	}
	if r.Match != nil {
		return r.Match(host) || hostport != "" && r.Match(hostport)
	}
	if r.DomainRegexp != nil {
		return r.DomainRegexp.MatchString(host) || hostport != "" && r.DomainRegexp.MatchString(hostport)
	}
	if ok, _ := path.Match(r.Domain, host); ok {
		return true
	}
	ok, _ := path.Match(r.Domain, hostport)
	return hostport != "" && ok
}

// settings is a validated Config with defaults filled in.
type settings struct {
	Config
	def   rule
	rules []rule
	// robots: robots.txt is read; disallow: its Allow and Disallow rules
	// are enforced
	robots, disallow bool
}

// resolve validates c and fills in its defaults. It always returns usable
// settings: an invalid field gets the most conservative value of its own
// (see Rule.resolve; durations their default, Robots on), and the error
// lists every problem.
func (c Config) resolve() (*settings, error) {
	var errs []error
	s := &settings{Config: c}
	var rerrs []error
	s.def, rerrs = c.Default.resolve("Default")
	errs = append(errs, rerrs...)
	for i, r := range c.Rules {
		name := fmt.Sprintf("Rules[%d]", i)
		switch {
		case r.Match != nil:
			name += " (Match)"
		case r.DomainRegexp != nil:
			name += fmt.Sprintf(" (%q)", r.DomainRegexp)
		case r.Domain != "":
			name += fmt.Sprintf(" (%q)", r.Domain)
		default:
			errs = append(errs, fmt.Errorf("%w: %s has neither Domain, DomainRegexp nor Match (ignored)", ErrConfig, name))
			continue
		}
		rr, rerrs := r.resolve(name)
		errs = append(errs, rerrs...)
		s.rules = append(s.rules, rr)
	}
	durs := []struct {
		v   *time.Duration
		def time.Duration
		n   string
	}{
		{&s.MaxPause, 120 * time.Second, "MaxPause"},
		{&s.MinRetryAfter, 500 * time.Millisecond, "MinRetryAfter"},
		{&s.Backoff, time.Second, "Backoff"},
		{&s.MaxBackoff, 60 * time.Second, "MaxBackoff"},
		{&s.OverloadHold, 10 * time.Second, "OverloadHold"},
		{&s.BreakerCooldown, 30 * time.Second, "BreakerCooldown"},
		{&s.MaxCrawlDelay, 30 * time.Second, "MaxCrawlDelay"},
		{&s.RobotsTTL, 24 * time.Hour, "RobotsTTL"},
		{&s.RobotsFailDelay, 5 * time.Second, "RobotsFailDelay"},
		{&s.RobotsRetry, time.Minute, "RobotsRetry"},
		{&s.IdleTTL, 10 * time.Minute, "IdleTTL"},
	}
	for _, d := range durs {
		if *d.v < 0 {
			errs = append(errs, fmt.Errorf("%w: %s is negative (%v)", ErrConfig, d.n, *d.v))
			*d.v = 0
		}
		if *d.v == 0 {
			*d.v = d.def
			if d.v == &s.MaxBackoff {
				s.MaxBackoff = max(s.MaxBackoff, s.Backoff)
			}
		}
		// past a century is for ever, and stays representable added to
		// the controller's clock (a RobotsTTL of MaxInt64 overflowed: a
		// robots.txt fetched again before every request)
		*d.v = min(*d.v, longestPause)
	}
	if why := rateProblem(s.GlobalRate); why != "" {
		errs = append(errs, fmt.Errorf("%w: GlobalRate %v is %s", ErrConfig, s.GlobalRate, why))
		s.GlobalRate = defaultMinRate
	}
	// a jitter past a century is one, as every duration: added to a
	// pause's end it stays representable (past MaxInt64 it wrapped, and
	// the pause was dropped)
	s.Jitter = min(s.Jitter, longestPause)
	if s.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: AttemptTimeout is negative (%v)", ErrConfig, s.AttemptTimeout))
		s.AttemptTimeout = 0
	}
	if s.MaxBackoff < s.Backoff {
		errs = append(errs, fmt.Errorf("%w: MaxBackoff %v below Backoff %v", ErrConfig, s.MaxBackoff, s.Backoff))
		s.MaxBackoff = s.Backoff
	}
	for _, r := range append([]*rule{&s.def}, ptrs(s.rules)...) {
		// a gap longer than MaxPause would fail every request
		if r.MinGap+r.RandomGap > s.MaxPause {
			errs = append(errs, fmt.Errorf("%w: MinGap %v + RandomGap %v above MaxPause %v (both cut to fit)", ErrConfig, r.MinGap, r.RandomGap, s.MaxPause))
			r.MinGap = min(r.MinGap, s.MaxPause)
			r.RandomGap = s.MaxPause - r.MinGap
			r.gapRate = gapRate(r.MinGap)
		}
	}
	if s.BreakerThreshold == 0 {
		s.BreakerThreshold = 6
	}
	if s.EventBuffer < 0 {
		errs = append(errs, fmt.Errorf("%w: EventBuffer is negative (%d)", ErrConfig, s.EventBuffer))
		s.EventBuffer = 0
	}
	if s.EventBuffer == 0 {
		s.EventBuffer = 256
	}
	if s.MaxRemembered < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxRemembered is negative (%d)", ErrConfig, s.MaxRemembered))
		s.MaxRemembered = 0
	}
	if s.MaxRemembered == 0 {
		s.MaxRemembered = 50_000
	}
	if s.Scope == nil {
		s.Scope = ScopeHost
	}
	s.robots = s.Robots != nil && *s.Robots
	s.disallow = s.robots && (s.RobotsDisallow == nil || *s.RobotsDisallow)
	if s.JitterSeed == 0 {
		s.JitterSeed = rand.Uint64()
	}
	if s.Classifier == nil {
		s.Classifier = &classify.Classifier{}
	}
	for status, k := range s.Classifier.Statuses {
		if !k.Valid() {
			// (no override: the status decides, as classify reads it)
			errs = append(errs, fmt.Errorf("%w: Classifier.Statuses[%d] is %v, not a class (ignored)", ErrConfig, status, k))
		}
	}
	if len(s.BlockBodyMarkers) > 0 {
		cl := *s.Classifier
		cl.Detectors = append(append([]classify.Detector{}, cl.Detectors...), classify.BodyMarkers(s.BlockBodyMarkers...))
		if len(s.Classifier.Detectors) == 0 {
			cl.Detectors = append(cl.Detectors, classify.CloudflareChallenge)
		}
		s.Classifier = &cl
	}
	return s, errors.Join(errs...)
}

// ruleFor returns the rule of a request's scheme and host. Rules match the
// host in lower case without trailing dot, and host:port when the port is
// not the scheme's default (as normalizeHost leaves it). With no rules it
// normalises nothing.
func (s *settings) ruleFor(scheme, rawHost string) *rule {
	if len(s.rules) == 0 {
		return &s.def
	}
	hostport := normalizeHost(scheme, rawHost)
	host, port := splitHostPort(hostport)
	if port == "" {
		hostport = ""
	}
	for i := range s.rules {
		if s.rules[i].matches(host, hostport) {
			return &s.rules[i]
		}
	}
	return &s.def
}
