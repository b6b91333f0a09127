package testserver

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// ErrConfig is wrapped by every error New returns for an invalid Config.
// Match it with errors.Is; the message names the host and the field.
var ErrConfig = errors.New("testserver: invalid configuration")

// ErrClosed is returned when dialling a Server that has been closed.
var ErrClosed = errors.New("testserver: server closed")

// LimitKind selects the algorithm behind a host's hidden capacity.
type LimitKind int

const (
	// None is the zero LimitKind: the host accepts every request.
	None LimitKind = iota
	// FixedWindow admits N requests per Window. Windows are aligned to the
	// server's start: window k is [k*Window, (k+1)*Window) and the count
	// resets at each boundary, like a counter reset every second. As with
	// any fixed window, a client can get 2N requests through in a span of
	// one Window that straddles a boundary (N at the end of one window, N at
	// the start of the next).
	FixedWindow
	// TokenBucket is a token bucket in its GCRA form (as in redis_rate or
	// nginx limit_req with burst): one request every T = 1/Rate seconds,
	// with Burst requests admitted at once from a full bucket. Exactly: a
	// request at t is admitted if TAT - t <= (Burst-1)*T, and then
	// TAT = max(TAT, t) + T (TAT starts at 0). Burst 1 means strictly one
	// per T; Burst 2 admits two requests at the same instant, then one every
	// T. The Retry-After it computes is the time until that test passes.
	TokenBucket
	// SlidingWindow admits at most N requests in any span of Window (a
	// sliding log): a request is admitted if fewer than N counted requests
	// arrived in the Window before it. No edge effect.
	SlidingWindow
	// Concurrency admits at most MaxConcurrent requests in flight at once;
	// the excess is answered at once (503 unless Excess.Status says
	// otherwise).
	Concurrency
	// WorkerPool is an origin that queues and never says no: MaxConcurrent
	// workers serve the admitted requests in arrival order, and a request
	// that finds every worker busy waits for one in a queue (unbounded
	// unless Queue is set; beyond Queue waiting requests, the excess is
	// answered 503 unless Excess.Status says otherwise). A worker is busy
	// for the request's Latency (its service time), so the pool serves at
	// most MaxConcurrent / Latency.Base requests per second (fewer with
	// Jitter or PerInFlight), and under load a request waits in the queue
	// before its service. A queued request is
	// not in flight (Stats.MaxInFlight counts busy workers); a client that
	// gives up while queued leaves the queue, and Close ends queued
	// requests at once.
	WorkerPool
)

var limitKindNames = [...]string{"None", "FixedWindow", "TokenBucket", "SlidingWindow", "Concurrency", "WorkerPool"}

// String returns the constant's name, e.g. "FixedWindow".
func (k LimitKind) String() string {
	if k >= 0 && int(k) < len(limitKindNames) {
		return limitKindNames[k]
	}
	return fmt.Sprintf("LimitKind(%d)", int(k))
}

// Limit is a hidden capacity. Its zero value (Kind None) is unlimited. Fields
// that Kind does not use are ignored (but must not be negative), except that
// a None limit with any capacity field set is an error: it is almost always a
// forgotten Kind.
//
// A Limit is a plain value; it is safe to share between goroutines as long as
// nobody writes it.
type Limit struct {
	// Kind selects the algorithm; see the constants.
	Kind LimitKind
	// Rate is the sustained rate of a TokenBucket, in requests per second.
	// It must be > 0 for TokenBucket.
	Rate float64
	// N is the number of requests a FixedWindow or SlidingWindow admits per
	// Window. It must be >= 1 for those kinds (at most 1<<20 for
	// SlidingWindow, which keeps a log of N timestamps).
	N int
	// Window is the window of FixedWindow and SlidingWindow. It must be > 0
	// for those kinds.
	Window time.Duration
	// Burst is the number of requests a full TokenBucket admits at once. It
	// must be >= 1 for TokenBucket.
	Burst int
	// MaxConcurrent is the number of requests a Concurrency limit serves at
	// once, and the number of workers of a WorkerPool. It must be >= 1 for
	// those kinds.
	MaxConcurrent int
	// Queue is the most requests a WorkerPool holds waiting for a worker;
	// a request that finds the queue full is answered as excess. Zero means
	// an unbounded queue. Other kinds ignore it.
	Queue int
	// CountRejected makes rejected requests count against the limit too,
	// as penalty-box limiters do: a client that keeps knocking while
	// throttled stays locked out. It applies to SlidingWindow (a rejected
	// request enters the log) and TokenBucket (a rejected request still
	// advances the bucket). FixedWindow ignores it (a rejection happens only
	// once the window is full anyway), as do Concurrency and WorkerPool.
	CountRejected bool
}

// Step is one entry of a schedule: from At (measured from the server's
// start) on, Limit applies to the host. A step may lower capacity or raise
// it (10/s, then 40/s), or change the kind. The new limit starts from a
// fresh state (an empty window, a full bucket); requests in flight are not
// affected. Requests a WorkerPool has queued stay admitted and are served
// by the limit in force, from the step's instant on: by its workers if it
// is a WorkerPool (with more workers, queued requests start at once; with
// fewer, requests in service finish and no new one starts until the busy
// workers number fewer than the new count), at once otherwise. The zero
// Step lifts every limit from the start.
type Step struct {
	At    time.Duration
	Limit Limit
}

// Latency is the time a request spends in the network and in the origin.
// The zero value is no delay at all.
//
// RTT is the network between client and server, and applies to every
// request: the host sees a request RTT/2 after the client sent it (its
// arrival: the limit's decision, a ban, Stats and pause violations all
// happen at that instant), and every answer, whatever it is (admitted,
// rejected, banned, robots.txt, redirect, 404, adversarial), takes RTT/2
// more (the rest of RTT, for an odd number of nanoseconds) to reach the
// client. So a rejection takes one RTT; when a limit fills up, the
// requests already on the wire (rate × RTT of them) all come back
// rejected. The host learns at once of a client that gives up.
//
// Base, Jitter and PerInFlight are the origin's own processing time, spent
// only on requests the limit admitted; rejections (429/503), ban pages and
// robots.txt are answered without it, as a rate limiter in front of an
// origin does. The processing time of one request is Base + a uniform draw
// in [0, Jitter) + n × PerInFlight, where n is the number of other
// requests in flight when its processing starts (on admission, or for a
// WorkerPool, when it gets a worker; then it is the worker's service time).
type Latency struct {
	// RTT is the round trip of the network; zero means none.
	RTT time.Duration
	// Base is the fixed part of every admitted request's processing time.
	Base time.Duration
	// Jitter adds a uniform extra in [0, Jitter), drawn from a per-host PRNG
	// seeded from Config.Seed and the host name: deterministic for a given
	// arrival order.
	Jitter time.Duration
	// PerInFlight adds this much per other request in flight: a struggling
	// origin that slows down under load.
	PerInFlight time.Duration
	// Schedule changes the cost of pages over time, without load: from
	// each step's At (measured from the server's start) on, a request
	// whose processing starts then takes that step's Base and Jitter
	// instead (PerInFlight still applies). Steps must have strictly
	// increasing At >= 0. A crawl that meets fast listing pages for 15 s,
	// then slow detail pages, is Base 20 ms with the step {At: 15 s, Base:
	// 600 ms}.
	Schedule []CostStep
	// ExternalRTT is a round trip added outside the server, by a network
	// or a delaying proxy in front of it. The server waits for none of it,
	// but counts pause violations as if it were part of RTT: a request
	// that arrives before the client could have read a pause, or that was
	// sent at the pause's end, does not violate it. Zero means none.
	ExternalRTT time.Duration
}

// CostStep is one step of Latency.Schedule: from At on, the origin's
// processing time is Base plus a uniform draw in [0, Jitter).
type CostStep struct {
	At     time.Duration
	Base   time.Duration
	Jitter time.Duration
}

// RetryAfterMode selects what the Retry-After header of a rejection says.
type RetryAfterMode int

const (
	// RetryAfterSeconds (the zero value) sends delay-seconds: the whole
	// number of seconds until capacity frees (rounded up, at least 1).
	RetryAfterSeconds RetryAfterMode = iota
	// RetryAfterHTTPDate sends an IMF-fixdate (http.TimeFormat), rounded up
	// to the next whole second so that a client waiting until then never
	// comes back early.
	RetryAfterHTTPDate
	// RetryAfterZero sends "Retry-After: 0". It announces no pause.
	RetryAfterZero
	// RetryAfterGarbage sends an unparseable value ("soon"). It announces no
	// pause.
	RetryAfterGarbage
	// RetryAfterNone sends no Retry-After header. It announces no pause.
	RetryAfterNone
)

var retryAfterNames = [...]string{"RetryAfterSeconds", "RetryAfterHTTPDate", "RetryAfterZero", "RetryAfterGarbage", "RetryAfterNone"}

// String returns the constant's name, e.g. "RetryAfterHTTPDate".
func (m RetryAfterMode) String() string {
	if m >= 0 && int(m) < len(retryAfterNames) {
		return retryAfterNames[m]
	}
	return fmt.Sprintf("RetryAfterMode(%d)", int(m))
}

// garbageRetryAfter is what RetryAfterGarbage sends.
const garbageRetryAfter = "soon"

// Excess says how requests over the limit are answered. The zero value
// answers 429 (503 for a Concurrency or WorkerPool limit) with Retry-After
// in seconds and no quota headers.
type Excess struct {
	// Status is the status of a rejected request. Zero means 429 Too Many
	// Requests, or 503 Service Unavailable for a Concurrency or WorkerPool
	// limit. Other values must be in 200..599.
	Status int
	// RetryAfter selects the form of the Retry-After header.
	RetryAfter RetryAfterMode
	// FixedRetryAfter, if > 0, is announced instead of the computed time
	// until capacity frees (still rounded up to whole seconds). The
	// computed delay is the time until the window resets (FixedWindow), a
	// token is due (TokenBucket) or the oldest logged request leaves the
	// window (SlidingWindow); a Concurrency or WorkerPool limit cannot know
	// when a slot frees and announces 1 second.
	FixedRetryAfter time.Duration
	// QuotaHeaders adds quota headers to every response of a host whose
	// limit is FixedWindow, SlidingWindow or TokenBucket: the IETF draft
	// (-08 and later) fields RateLimit-Policy: "default";q=Q;w=W and
	// RateLimit: "default";r=R;t=T, and X-RateLimit-Limit (Q), -Remaining
	// (R) and -Reset (T, in seconds from now, not a Unix time). They are
	// honest: Q per W is the sustained capacity (W whole seconds; a 500 ms
	// window of 5 is stated as 10 per 1 s; a token bucket as
	// max(Burst, Rate×W) per W, W the time to refill the burst rounded up);
	// R is what would be admitted right now (at most N, or Burst); T is the
	// time until the window resets, the oldest logged request leaves the
	// window, or the bucket is full, rounded up.
	QuotaHeaders bool
	// RawRetryAfter, if not empty, is sent instead of the Retry-After that
	// RetryAfter and FixedRetryAfter would give (leave those zero): one
	// header line per entry, verbatim and in order, on every rejection.
	// It reaches what the modes cannot: "1000000000000" (huge),
	// "-1" (negative), "in a while" (garbage), two conflicting lines
	// {"5", "3600"}, "Thu, 01 Jan 1970 00:00:00 GMT" (a date long past) or
	// "Fri, 31 Dec 9999 23:59:59 GMT" (far in the future). Entries must not
	// contain control characters other than tab; leading and trailing
	// blanks are not significant in HTTP and clients drop them.
	//
	// A pause is announced, for Stats.PauseViolations, only by a single
	// line that RFC 9110 gives a meaning: all digits (seconds from the
	// response; an amount beyond time.Duration runs forever) or an
	// HTTP-date (any of the three forms) in the future. Repeated lines,
	// "0", negative, garbage and past dates announce none.
	RawRetryAfter []string
	// CloseConnection answers rejections as a struggling proxy does: the
	// status and Retry-After (and quota headers, if any) with an empty body
	// (Content-Length: 0, no Content-Type) and "Connection: close", after
	// which the server closes the connection. The next request needs a new
	// connection.
	CloseConnection bool
	// QuotaLie, if set, replaces the honest quota headers of QuotaHeaders
	// (leave that false) with headers that say the quota is spent and
	// already reset, on every response of the host, whatever its limit
	// (even None) and whatever was admitted; see QuotaLieMode.
	QuotaLie QuotaLieMode
}

// Ban makes a host block a client that keeps exceeding the limit (a Ban
// needs After >= 1; its zero value is invalid): after
// After rejected requests within Within, every request but robots.txt is
// answered 403 with an HTML block page for For. The request that completes
// the count is still answered as excess; the next one gets the 403.
// Requests during a ban do not count against the limit nor towards the next
// ban.
type Ban struct {
	// After is the number of rejections that starts a ban. It must be >= 1.
	After int
	// Within is the span in which After rejections must fall. Zero means 1
	// minute.
	Within time.Duration
	// For is how long a ban lasts. Zero means 1 minute.
	For time.Duration
}

// Site is the crawlable content of a host: "/" links to pages /page/0 ..
// /page/FanOut-1, and page n links to pages (n*FanOut + i + 1) mod Pages for
// i in [0, FanOut), so that a crawl from "/" reaches every page. Links are
// root-relative ("/page/7"). A query string does not change the page served
// ("/page/7?utm=x" is page 7). Any path that is neither a page nor one of the
// other paths the package documentation lists, "/page/abc" for one, is 404
// (and still counts against the limit). The zero value means 1000 pages with
// 5 links each; at most 1<<30 pages and 1000 links per page.
type Site struct {
	// Pages is the number of pages. Zero means 1000.
	Pages int
	// FanOut is the number of links per page. Zero means 5.
	FanOut int
}

// Robots is a host's /robots.txt. The zero value serves 200 with
// "User-agent: *" and an empty Disallow (everything allowed).
//
// robots.txt requests never count against the limit, are never banned and
// have no processing time (only the network's Latency.RTT), so that tests
// of robots handling are not perturbed by the limit (and the reverse). They are counted in Stats.Requests, Stats.Robots
// and Stats.ByStatus, and arriving during an announced pause they count as
// pause violations.
type Robots struct {
	// Status is the status of /robots.txt. Zero means 200. A status other
	// than 2xx is answered with a short plain-text body.
	Status int
	// CrawlDelay, if > 0, adds a Crawl-delay line in seconds (fractional
	// if need be, e.g. "Crawl-delay: 0.5").
	CrawlDelay time.Duration
	// Body, if set, is served verbatim (with Status) instead of the
	// generated file.
	Body string
	// Disallow lists paths for "Disallow:" lines under "User-agent: *".
	Disallow []string
	// RetryAfter, if > 0 and Status is not 2xx, is sent as Retry-After in
	// whole seconds (rounded up) and announces a pause like a rejection
	// does.
	RetryAfter time.Duration
	// ContentType is the Content-Type of /robots.txt. Empty means
	// "text/plain; charset=utf-8". With "text/html; charset=utf-8" and an
	// HTML page in Body, robots.txt is served as HTML, as by a site whose
	// error page or SPA shell answers every path.
	ContentType string
	// Size, if > 0, is the exact length of the body: the generated or
	// verbatim body followed by filler comment lines ("# ...", after a
	// line break if the body does not end with one; the last line may be
	// cut short). The filler is streamed from a shared buffer, so a 10 MB
	// robots.txt costs the server no 10 MB per request. Size must not be
	// below the body's own length.
	Size int64
}

// Policy is everything about one virtual host. The zero value is an honest
// host with no limit, no latency, the default site and an allow-all
// robots.txt.
type Policy struct {
	// Limit applies from the server's start until the first Step.
	Limit Limit
	// Schedule changes the limit at given times, down or up; steps must
	// have strictly increasing At >= 0. A step at 0 replaces Limit from
	// the start. See Step.
	Schedule []Step
	// Latency is the network round trip and the origin's processing time.
	Latency Latency
	Excess  Excess
	// Ban, if not nil, blocks clients that keep exceeding the limit.
	Ban    *Ban
	Site   Site
	Robots Robots
	// Adversary makes the host misbehave on the requests its limit admits
	// (not on rejections, ban pages or robots.txt); the zero value is an
	// honest origin. See AdversaryKind.
	Adversary Adversary
}

// Network selects how clients reach the server.
type Network int

const (
	// DefaultNetwork is the zero Network: New uses Loopback, NewTest uses
	// Memory.
	DefaultNetwork Network = iota
	// Loopback serves each host on its own real TCP listener on 127.0.0.1.
	// Use it for examples, benchmarks and end-to-end runs in real time. Real
	// sockets hang inside a testing/synctest bubble.
	Loopback
	// Memory serves every host on one in-memory listener built on
	// net.Pipe, routed by the Host header; only the Server's Transport can
	// reach it. It works inside a testing/synctest bubble (virtual time),
	// provided the Server is created inside that bubble.
	Memory
)

var networkNames = [...]string{"DefaultNetwork", "Loopback", "Memory"}

// String returns the constant's name, e.g. "Memory".
func (n Network) String() string {
	if n >= 0 && int(n) < len(networkNames) {
		return networkNames[n]
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Config configures a Server. The zero value is one host, "a.test", with the
// zero Policy, on the default network.
//
// Config and the types it holds are plain values: New copies what it keeps,
// so a Config may be reused or modified after New returns. Like any value,
// they are safe for concurrent use only while nobody writes them.
type Config struct {
	// Hosts maps host names ("a.test", "b.test", ...) to their policies.
	// Names are lower-case DNS-like names without a port. Empty means one
	// host "a.test" with the zero Policy.
	Hosts map[string]Policy
	// Network selects loopback sockets or the in-memory network.
	Network Network
	// Seed seeds the per-host PRNGs (latency jitter).
	Seed int64
	// ClientHeader names a request header that says which client sent a
	// request (e.g. "X-Client"), for a run of several clients against one
	// host: Stats.Clients then splits Accepted and Rejected by its value.
	// Empty means no split (Stats.Clients is nil).
	ClientHeader string
}

// DefaultHost is the host name used when Config.Hosts is empty.
const DefaultHost = "a.test"

// HostNames returns n host names in the conventional order: "a.test" ..
// "z.test", then "aa.test", "ab.test", ... (bijective base 26, like
// spreadsheet columns). It is a convenience for building Config.Hosts.
func HostNames(n int) []string {
	names := make([]string, 0, max(n, 0))
	for i := range n {
		var b [16]byte
		j := len(b)
		for k := i + 1; k > 0; k = (k - 1) / 26 {
			j--
			b[j] = byte('a' + (k-1)%26)
		}
		names = append(names, string(b[j:])+".test")
	}
	return names
}

// Defaults that zero values stand for.
const (
	defaultPages     = 1000
	defaultFanOut    = 5
	defaultBanWithin = time.Minute
	defaultBanFor    = time.Minute
	maxSlidingN      = 1 << 20
	maxPages         = 1 << 30
	maxFanOut        = 1000
	concurrencyWait  = time.Second
)

func configErr(host, format string, args ...any) error {
	return fmt.Errorf("%w: host %q: %s", ErrConfig, host, fmt.Sprintf(format, args...))
}

// validHeaderName reports whether name is empty or an HTTP token (RFC 9110
// field-name).
func validHeaderName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validateHostName accepts lower-case DNS-like names and IP literals without a
// port.
func validateHostName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty host name", ErrConfig)
	}
	if len(name) > 253 || name[0] == '.' || name[len(name)-1] == '.' {
		return fmt.Errorf("%w: bad host name %q", ErrConfig, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("%w: bad host name %q (want lower-case letters, digits, '.', '-', no port)", ErrConfig, name)
		}
	}
	return nil
}

func validateLimit(host, where string, l Limit) error {
	if l.Kind < None || l.Kind > WorkerPool {
		return configErr(host, "%s: unknown LimitKind %d", where, int(l.Kind))
	}
	if math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Rate < 0 {
		return configErr(host, "%s: Rate must be a finite number >= 0, got %v", where, l.Rate)
	}
	if l.N < 0 {
		return configErr(host, "%s: negative N %d", where, l.N)
	}
	if l.Window < 0 {
		return configErr(host, "%s: negative Window %v", where, l.Window)
	}
	if l.Burst < 0 {
		return configErr(host, "%s: negative Burst %d", where, l.Burst)
	}
	if l.MaxConcurrent < 0 {
		return configErr(host, "%s: negative MaxConcurrent %d", where, l.MaxConcurrent)
	}
	if l.Queue < 0 {
		return configErr(host, "%s: negative Queue %d", where, l.Queue)
	}
	switch l.Kind {
	case None:
		if l.Rate != 0 || l.N != 0 || l.Window != 0 || l.Burst != 0 || l.MaxConcurrent != 0 || l.Queue != 0 {
			return configErr(host, "%s: capacity fields set but Kind is None (unlimited); set Kind", where)
		}
	case FixedWindow, SlidingWindow:
		if l.N < 1 {
			return configErr(host, "%s: %v needs N >= 1", where, l.Kind)
		}
		if l.Window <= 0 {
			return configErr(host, "%s: %v needs Window > 0", where, l.Kind)
		}
		if l.Kind == SlidingWindow && l.N > maxSlidingN {
			return configErr(host, "%s: SlidingWindow N %d above %d", where, l.N, maxSlidingN)
		}
	case TokenBucket:
		if l.Rate <= 0 {
			return configErr(host, "%s: TokenBucket needs Rate > 0", where)
		}
		if l.Rate > 1e9 {
			return configErr(host, "%s: TokenBucket Rate %v above 1e9 per second", where, l.Rate)
		}
		if l.Burst < 1 {
			return configErr(host, "%s: TokenBucket needs Burst >= 1", where)
		}
	case Concurrency, WorkerPool:
		if l.MaxConcurrent < 1 {
			return configErr(host, "%s: %v needs MaxConcurrent >= 1", where, l.Kind)
		}
	}
	return nil
}

func validatePolicy(host string, p *Policy) error {
	if err := validateLimit(host, "Limit", p.Limit); err != nil {
		return err
	}
	var prev time.Duration
	for i, st := range p.Schedule {
		where := fmt.Sprintf("Schedule[%d]", i)
		if st.At < 0 {
			return configErr(host, "%s: negative At %v", where, st.At)
		}
		if i > 0 && st.At <= prev {
			return configErr(host, "%s: At %v not after the previous step's %v", where, st.At, prev)
		}
		prev = st.At
		if err := validateLimit(host, where+".Limit", st.Limit); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"RTT", p.Latency.RTT}, {"Base", p.Latency.Base}, {"Jitter", p.Latency.Jitter}, {"PerInFlight", p.Latency.PerInFlight},
		{"ExternalRTT", p.Latency.ExternalRTT}} {
		if f.d < 0 {
			return configErr(host, "Latency.%s: negative %v", f.name, f.d)
		}
	}
	for i, st := range p.Latency.Schedule {
		if st.At < 0 || st.Base < 0 || st.Jitter < 0 {
			return configErr(host, "Latency.Schedule[%d]: negative duration in %+v", i, st)
		}
		if i > 0 && st.At <= p.Latency.Schedule[i-1].At {
			return configErr(host, "Latency.Schedule[%d]: At %v not after the previous step's %v", i, st.At, p.Latency.Schedule[i-1].At)
		}
	}
	ex := p.Excess
	if ex.Status != 0 && (ex.Status < 200 || ex.Status > 599) {
		return configErr(host, "Excess.Status %d not in 200..599", ex.Status)
	}
	if ex.RetryAfter < RetryAfterSeconds || ex.RetryAfter > RetryAfterNone {
		return configErr(host, "Excess.RetryAfter: unknown RetryAfterMode %d", int(ex.RetryAfter))
	}
	if ex.FixedRetryAfter < 0 {
		return configErr(host, "Excess.FixedRetryAfter: negative %v", ex.FixedRetryAfter)
	}
	if len(ex.RawRetryAfter) > 0 && (ex.RetryAfter != RetryAfterSeconds || ex.FixedRetryAfter != 0) {
		return configErr(host, "Excess.RawRetryAfter replaces RetryAfter and FixedRetryAfter: leave them zero")
	}
	for i, v := range ex.RawRetryAfter {
		if !validFieldValue(v) {
			return configErr(host, "Excess.RawRetryAfter[%d] %q contains a control character", i, v)
		}
	}
	if ex.QuotaLie < NoQuotaLie || ex.QuotaLie > QuotaLieResetDate {
		return configErr(host, "Excess.QuotaLie: unknown QuotaLieMode %d", int(ex.QuotaLie))
	}
	if ex.QuotaLie != NoQuotaLie && ex.QuotaHeaders {
		return configErr(host, "Excess.QuotaLie replaces the honest QuotaHeaders: set one of them")
	}
	if err := validateAdversary(host, p.Adversary); err != nil {
		return err
	}
	if b := p.Ban; b != nil {
		if b.After < 1 {
			return configErr(host, "Ban.After must be >= 1, got %d", b.After)
		}
		if b.Within < 0 || b.For < 0 {
			return configErr(host, "Ban: negative duration in %+v", *b)
		}
		if b.After > maxSlidingN {
			return configErr(host, "Ban.After %d above %d", b.After, maxSlidingN)
		}
	}
	if p.Site.Pages < 0 || p.Site.FanOut < 0 {
		return configErr(host, "Site: negative value in %+v", p.Site)
	}
	if p.Site.Pages > maxPages || p.Site.FanOut > maxFanOut {
		return configErr(host, "Site: %+v above the maxima (Pages %d, FanOut %d)", p.Site, maxPages, maxFanOut)
	}
	r := p.Robots
	if r.Status != 0 && (r.Status < 200 || r.Status > 599) {
		return configErr(host, "Robots.Status %d not in 200..599", r.Status)
	}
	if r.CrawlDelay < 0 || r.RetryAfter < 0 {
		return configErr(host, "Robots: negative duration")
	}
	for _, d := range r.Disallow {
		if strings.ContainsAny(d, "\r\n") {
			return configErr(host, "Robots.Disallow %q contains a line break", d)
		}
	}
	if !validFieldValue(r.ContentType) {
		return configErr(host, "Robots.ContentType %q contains a control character", r.ContentType)
	}
	if r.Size < 0 {
		return configErr(host, "Robots.Size: negative %d", r.Size)
	}
	if _, body := renderRobots(&r); r.Size > 0 && r.Size < int64(len(body)) {
		return configErr(host, "Robots.Size %d below the body's %d bytes", r.Size, len(body))
	}
	return nil
}

// validFieldValue reports whether v can be sent verbatim as a header field
// value: no control characters but tab (RFC 9110, section 5.5).
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validate checks cfg and returns the sorted host names.
func (cfg *Config) validate() ([]string, error) {
	if cfg.Network < DefaultNetwork || cfg.Network > Memory {
		return nil, fmt.Errorf("%w: unknown Network %d", ErrConfig, int(cfg.Network))
	}
	if !validHeaderName(cfg.ClientHeader) {
		return nil, fmt.Errorf("%w: ClientHeader %q is not a header name", ErrConfig, cfg.ClientHeader)
	}
	if len(cfg.Hosts) == 0 {
		return []string{DefaultHost}, nil
	}
	names := make([]string, 0, len(cfg.Hosts))
	for name := range cfg.Hosts {
		names = append(names, name)
	}
	sort.Strings(names) // validate in a stable order: the same config, the same error
	for _, name := range names {
		if err := validateHostName(name); err != nil {
			return nil, err
		}
		p := cfg.Hosts[name]
		if err := validatePolicy(name, &p); err != nil {
			return nil, err
		}
	}
	return names, nil
}
