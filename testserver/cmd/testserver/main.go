// Command testserver runs an origin with hidden limits on loopback, for
// trying a crawler by hand or from another process. It prints the URL of
// each host, serves until Ctrl-C (or -duration) and prints what each host
// saw.
//
//	go run ./testserver/cmd/testserver -rate 30 -latency 350ms
//	go run ./testserver/cmd/testserver -kind token -rate 5 -burst 2 -retry-after date -hosts 3
//	go run ./testserver/cmd/testserver -adversary drip -drip-interval 1s -robots-size 10485760
//	go run ./testserver/cmd/testserver -kind pool -max-concurrent 8 -latency 100ms -rtt 50ms
//
// Every host gets the same policy. Run with -h for every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/colly-polite/polite/testserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed flags.
type options struct {
	kind          string
	rate          float64
	n             int
	window        time.Duration
	burst         int
	maxConcurrent int
	queue         int
	countRejected bool
	schedule      string

	rtt, latency, jitter, perInFlight time.Duration

	excessStatus    int
	retryAfter      string
	fixedRetryAfter time.Duration
	quotaHeaders    bool
	rawRetryAfter   []string
	excessClose     bool
	quotaLie        string

	banAfter          int
	banWithin, banFor time.Duration

	crawlDelay   time.Duration
	robotsStatus int
	disallow     string
	robotsFile   string
	robotsType   string
	robotsSize   int64

	adversary      string
	adversaryBytes int
	dripInterval   time.Duration

	pages, fanOut int

	hosts    int
	seed     int64
	duration time.Duration
}

const usageHead = `usage: testserver [flags]

Runs an origin with hidden limits on loopback (one listener per host, all
with the same policy), prints each host's URL, serves until Ctrl-C or
-duration, then prints what each host saw. "-rate N" alone is a fixed window
of N requests per second. Requests other than /robots.txt count against the
limit; "/" and /page/N form a crawlable site, and /redirect?to=URL,
/redirect/loop and /redirect/hop?n=K&hosts=H1,H2 answer redirects.
-rtt adds a network round trip to every answer, rejections included;
"-kind pool" is an origin that queues and never says no. -adversary,
-excess-close, -raw-retry-after, -quota-lie and the -robots-* flags make
adversarial origins, to try a crawler against servers that misbehave.

flags:
`

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.kind, "kind", "", "limit `kind`: fixed, token (GCRA; alias gcra), sliding, concurrency, pool (a worker pool\nthat queues; alias workerpool), none (default: fixed with -rate or -n, pool with -queue,\nconcurrency with only -max-concurrent, else none)")
	fs.Float64Var(&o.rate, "rate", 0, "fixed, sliding: shorthand for -n `R` -window 1s (R whole); token: requests per second")
	fs.IntVar(&o.n, "n", 0, "fixed, sliding: requests allowed per -window")
	fs.DurationVar(&o.window, "window", time.Second, "fixed, sliding: the window (fixed windows are aligned to the start)")
	fs.IntVar(&o.burst, "burst", 1, "token: requests admitted at once from a full bucket (>= 1)")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", 0, "concurrency: requests served at once, the excess gets 503;\npool: workers, each busy for -latency per request, the excess waits in a queue")
	fs.IntVar(&o.queue, "queue", 0, "pool: the most requests waiting for a worker, the excess gets 503 (0: unbounded)")
	fs.BoolVar(&o.countRejected, "count-rejected", false, "sliding, token: rejected requests count against the limit too (penalty box)")
	fs.StringVar(&o.schedule, "schedule", "", "capacity changes, comma-separated; each `AT=CAP` makes CAP replace -rate/-n\n(or -max-concurrent) from AT on: -rate 40 -schedule 10s=10 is 40/s, then 10/s from t=10s;\ncapacity may rise too: -rate 10 -schedule 30s=40")
	fs.DurationVar(&o.rtt, "rtt", 0, "network round trip: every request reaches the host rtt/2 after it is sent,\nevery answer (rejections, robots.txt and all) the client rtt/2 after it leaves")
	fs.DurationVar(&o.latency, "latency", 0, "fixed processing time of every admitted request (a pool worker's service time)")
	fs.DurationVar(&o.jitter, "jitter", 0, "extra latency, uniform in [0, jitter), seeded by -seed")
	fs.DurationVar(&o.perInFlight, "per-inflight", 0, "extra latency per other request in flight (a struggling origin)")
	fs.IntVar(&o.excessStatus, "excess-status", 0, "status of rejected requests (default 429; 503 for concurrency)")
	fs.StringVar(&o.retryAfter, "retry-after", "seconds", "Retry-After `form` on rejections: seconds, date, zero, garbage, none")
	fs.DurationVar(&o.fixedRetryAfter, "fixed-retry-after", 0, "announce this delay instead of the time until capacity frees")
	fs.BoolVar(&o.quotaHeaders, "quota-headers", false, "send RateLimit / RateLimit-Policy and X-RateLimit-* headers")
	fs.Func("raw-retry-after", "send this `value` verbatim as Retry-After on rejections, instead of -retry-after;\nrepeat the flag for several header lines (e.g. -raw-retry-after 5 -raw-retry-after 3600)", func(v string) error {
		o.rawRetryAfter = append(o.rawRetryAfter, v)
		return nil
	})
	fs.BoolVar(&o.excessClose, "excess-close", false, "answer rejections with an empty body and Connection: close, then close the connection")
	fs.StringVar(&o.quotaLie, "quota-lie", "none", "quota headers that lie (remaining 0, reset already past) on every response;\nthe `form` of the reset: zero, epoch (a Unix time), date (an HTTP-date), none")
	fs.IntVar(&o.banAfter, "ban-after", 0, "ban (403 block page) after this many rejections within -ban-within (0: never)")
	fs.DurationVar(&o.banWithin, "ban-within", time.Minute, "span in which -ban-after rejections start a ban")
	fs.DurationVar(&o.banFor, "ban-for", time.Minute, "how long a ban lasts")
	fs.DurationVar(&o.crawlDelay, "crawl-delay", 0, "Crawl-delay line in robots.txt (0: none)")
	fs.IntVar(&o.robotsStatus, "robots-status", 200, "status of /robots.txt (e.g. 404, 429, 500)")
	fs.StringVar(&o.disallow, "disallow", "", "comma-separated `paths` disallowed in robots.txt")
	fs.StringVar(&o.robotsFile, "robots-file", "", "serve the contents of this `file` verbatim as robots.txt")
	fs.StringVar(&o.robotsType, "robots-type", "", "Content-Type of robots.txt (default text/plain; charset=utf-8)")
	fs.Int64Var(&o.robotsSize, "robots-size", 0, "pad robots.txt with comment lines to exactly this many `bytes` (streamed)")
	fs.StringVar(&o.adversary, "adversary", "none", "misbehave on admitted requests: reset (mid-body), drip (one byte per -drip-interval),\nhang (never answer), none")
	fs.IntVar(&o.adversaryBytes, "adversary-bytes", 0, "reset: body bytes sent before the reset; drip: body length (0: the whole body)")
	fs.DurationVar(&o.dripInterval, "drip-interval", time.Second, "drip: time between two bytes")
	fs.IntVar(&o.pages, "pages", 1000, "pages of the site per host")
	fs.IntVar(&o.fanOut, "fanout", 5, "links per page")
	fs.IntVar(&o.hosts, "hosts", 1, "number of hosts (a.test, b.test, ...), each on its own port")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the latency jitter")
	fs.DurationVar(&o.duration, "duration", 0, "run this long, then exit (0: until Ctrl-C)")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("testserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package has printed the error and the usage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, "run 'testserver -h' for the flags")
		return 2
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("testserver: unexpected arguments %q", fs.Args()))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, err := o.config(set)
	if err != nil {
		return fail(err)
	}
	srv, err := testserver.New(cfg)
	if err != nil {
		return fail(err)
	}
	for _, h := range srv.Hosts() {
		fmt.Fprintf(stdout, "%s %s\n", h, srv.HostURL(h))
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	<-ctx.Done()
	srv.Close()
	for _, h := range srv.Hosts() {
		fmt.Fprintln(stdout, summary(h, srv.Stats(h)))
	}
	return 0
}

// config turns the flags into a Config; set holds the flags given.
func (o *options) config(set map[string]bool) (testserver.Config, error) {
	if o.hosts < 1 {
		return testserver.Config{}, fmt.Errorf("testserver: -hosts must be >= 1, got %d", o.hosts)
	}
	kind := o.kind
	if kind == "" {
		switch {
		case set["rate"] || set["n"]:
			kind = "fixed"
		case set["queue"]:
			kind = "pool"
		case set["max-concurrent"]:
			kind = "concurrency"
		default:
			kind = "none"
		}
	}
	lim, err := o.limit(kind, o.rate, o.n, o.maxConcurrent, set)
	if err != nil {
		return testserver.Config{}, err
	}
	if set["queue"] && kind != "pool" && kind != "workerpool" {
		return testserver.Config{}, fmt.Errorf("testserver: -queue is for a worker pool (-kind pool), not %s", kind)
	}
	p := testserver.Policy{
		Limit:   lim,
		Latency: testserver.Latency{RTT: o.rtt, Base: o.latency, Jitter: o.jitter, PerInFlight: o.perInFlight},
		Excess: testserver.Excess{
			Status:          o.excessStatus,
			FixedRetryAfter: o.fixedRetryAfter,
			QuotaHeaders:    o.quotaHeaders,
			RawRetryAfter:   o.rawRetryAfter,
			CloseConnection: o.excessClose,
		},
		Site: testserver.Site{Pages: o.pages, FanOut: o.fanOut},
		Robots: testserver.Robots{Status: o.robotsStatus, CrawlDelay: o.crawlDelay,
			ContentType: o.robotsType, Size: o.robotsSize},
	}
	if o.robotsFile != "" {
		b, err := os.ReadFile(o.robotsFile)
		if err != nil {
			return testserver.Config{}, fmt.Errorf("testserver: -robots-file: %w", err)
		}
		if len(b) == 0 {
			return testserver.Config{}, fmt.Errorf("testserver: -robots-file %s is empty", o.robotsFile)
		}
		p.Robots.Body = string(b)
	}
	lies := map[string]testserver.QuotaLieMode{
		"none": testserver.NoQuotaLie, "zero": testserver.QuotaLieResetZero,
		"epoch": testserver.QuotaLieResetEpoch, "date": testserver.QuotaLieResetDate,
	}
	lie, ok := lies[o.quotaLie]
	if !ok {
		return testserver.Config{}, fmt.Errorf("testserver: -quota-lie %q: want zero, epoch, date or none", o.quotaLie)
	}
	p.Excess.QuotaLie = lie
	kinds := map[string]testserver.AdversaryKind{
		"none": testserver.NoAdversary, "reset": testserver.ResetMidBody,
		"drip": testserver.DripBody, "hang": testserver.Hang,
	}
	adv, ok := kinds[o.adversary]
	if !ok {
		return testserver.Config{}, fmt.Errorf("testserver: -adversary %q: want reset, drip, hang or none", o.adversary)
	}
	p.Adversary = testserver.Adversary{Kind: adv, Bytes: o.adversaryBytes}
	if adv == testserver.DripBody || set["drip-interval"] {
		p.Adversary.Interval = o.dripInterval
	}
	if o.pages < 1 || o.fanOut < 1 {
		return testserver.Config{}, fmt.Errorf("testserver: -pages and -fanout must be >= 1")
	}
	modes := map[string]testserver.RetryAfterMode{
		"seconds": testserver.RetryAfterSeconds, "date": testserver.RetryAfterHTTPDate,
		"zero": testserver.RetryAfterZero, "garbage": testserver.RetryAfterGarbage, "none": testserver.RetryAfterNone,
	}
	mode, ok := modes[o.retryAfter]
	if !ok {
		return testserver.Config{}, fmt.Errorf("testserver: -retry-after %q: want seconds, date, zero, garbage or none", o.retryAfter)
	}
	if len(o.rawRetryAfter) > 0 && set["retry-after"] {
		return testserver.Config{}, fmt.Errorf("testserver: -raw-retry-after replaces -retry-after: give one of them")
	}
	p.Excess.RetryAfter = mode
	if o.banAfter != 0 {
		p.Ban = &testserver.Ban{After: o.banAfter, Within: o.banWithin, For: o.banFor}
	}
	if o.disallow != "" {
		for _, d := range strings.Split(o.disallow, ",") {
			if d = strings.TrimSpace(d); d != "" {
				p.Robots.Disallow = append(p.Robots.Disallow, d)
			}
		}
	}
	if o.schedule != "" {
		if kind == "none" {
			return testserver.Config{}, fmt.Errorf("testserver: -schedule needs a limit (-rate, -n or -max-concurrent)")
		}
		stepSet := maps.Clone(set)
		stepSet["rate"] = true
		for _, item := range strings.Split(o.schedule, ",") {
			at, capStr, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok {
				return testserver.Config{}, fmt.Errorf("testserver: -schedule item %q: want AT=CAP, e.g. 10s=10", item)
			}
			d, err := time.ParseDuration(at)
			if err != nil {
				return testserver.Config{}, fmt.Errorf("testserver: -schedule item %q: %w", item, err)
			}
			c, err := strconv.ParseFloat(capStr, 64)
			if err != nil {
				return testserver.Config{}, fmt.Errorf("testserver: -schedule item %q: %w", item, err)
			}
			l, err := o.limit(kind, c, int(c), int(c), stepSet)
			if err != nil {
				return testserver.Config{}, fmt.Errorf("testserver: -schedule item %q: %w", item, err)
			}
			if kind != "token" && c != math.Trunc(c) {
				return testserver.Config{}, fmt.Errorf("testserver: -schedule item %q: capacity must be whole for %s", item, kind)
			}
			p.Schedule = append(p.Schedule, testserver.Step{At: d, Limit: l})
		}
	}
	hosts := map[string]testserver.Policy{}
	for _, h := range testserver.HostNames(o.hosts) {
		hosts[h] = p
	}
	return testserver.Config{Hosts: hosts, Network: testserver.Loopback, Seed: o.seed}, nil
}

// limit builds the Limit of kind with capacity rate (token), n (fixed,
// sliding; or rate when whole) or maxConc (concurrency).
func (o *options) limit(kind string, rate float64, n, maxConc int, set map[string]bool) (testserver.Limit, error) {
	switch kind {
	case "none":
		return testserver.Limit{}, nil
	case "fixed", "sliding":
		l := testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: o.window, CountRejected: o.countRejected}
		if kind == "sliding" {
			l.Kind = testserver.SlidingWindow
		}
		if set["rate"] {
			if rate != math.Trunc(rate) || rate < 1 {
				return l, fmt.Errorf("testserver: -rate %v for a %s window must be a whole number >= 1 (or use -n and -window)", rate, kind)
			}
			if !set["window"] {
				l.Window = time.Second
			}
			l.N = int(rate)
		}
		if l.N < 1 {
			return l, fmt.Errorf("testserver: a %s window needs -rate or -n >= 1", kind)
		}
		return l, nil
	case "token", "gcra":
		if rate <= 0 {
			return testserver.Limit{}, fmt.Errorf("testserver: a token bucket needs -rate > 0")
		}
		return testserver.Limit{Kind: testserver.TokenBucket, Rate: rate, Burst: o.burst, CountRejected: o.countRejected}, nil
	case "concurrency":
		if maxConc < 1 {
			return testserver.Limit{}, fmt.Errorf("testserver: a concurrency limit needs -max-concurrent >= 1")
		}
		return testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: maxConc}, nil
	case "pool", "workerpool":
		if maxConc < 1 {
			return testserver.Limit{}, fmt.Errorf("testserver: a worker pool needs -max-concurrent >= 1 (its workers)")
		}
		return testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: maxConc, Queue: o.queue}, nil
	}
	return testserver.Limit{}, fmt.Errorf("testserver: unknown -kind %q: want fixed, token, sliding, concurrency, pool or none", kind)
}

// summary is one line of what a host saw.
func summary(host string, st testserver.Stats) string {
	codes := make([]int, 0, len(st.ByStatus))
	for c := range st.ByStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d requests", host, st.Requests)
	for _, c := range codes {
		fmt.Fprintf(&b, ", %d×%d", st.ByStatus[c], c)
	}
	fmt.Fprintf(&b, "; max in flight %d", st.MaxInFlight)
	if st.MaxQueued > 0 {
		fmt.Fprintf(&b, "; max queued %d", st.MaxQueued)
	}
	fmt.Fprintf(&b, "; pause violations %d; bans %d; robots.txt %d", st.PauseViolations, st.BanCount, st.Robots)
	return b.String()
}
