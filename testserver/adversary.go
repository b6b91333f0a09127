package testserver

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AdversaryKind selects how a host misbehaves on the requests its limit
// admits. Whatever the kind, the request is counted like any other
// (Stats.Requests, Stats.Accepted, the limit), and Close ends it at once.
type AdversaryKind int

const (
	// NoAdversary is the zero AdversaryKind: an honest origin.
	NoAdversary AdversaryKind = iota
	// ResetMidBody sends the status line and headers, with a
	// Content-Length for the whole body, then the first Adversary.Bytes
	// bytes of the body (at most all but one; zero: none), and closes the
	// connection. The client gets the response, then io.ErrUnexpectedEOF
	// from its body. The close is an ordinary one (a FIN on Loopback, not a
	// TCP RST, which may destroy bytes already sent), so what the client
	// sees is the same on both networks.
	ResetMidBody
	// DripBody sends the status line and headers at once, with a
	// Content-Length of Adversary.Bytes (zero: the whole body), then the
	// body one byte every Adversary.Interval (zero: 1 second), each byte
	// written once the previous one was taken: a body of n bytes read
	// without pause ends n×Interval after the headers. With Bytes set the
	// body is the usual one cut to Bytes, or padded with spaces.
	DripBody
	// Hang accepts the request and never answers: no status line, no
	// header, until the client goes away or the server closes. Latency
	// does not apply (but for the way in of its RTT). The request is in
	// Stats.Accepted and holds a slot of a Concurrency limit, or a
	// WorkerPool's worker, while it hangs, but no status is counted in
	// Stats.ByStatus, since none was sent.
	Hang
)

var adversaryNames = [...]string{"NoAdversary", "ResetMidBody", "DripBody", "Hang"}

// String returns the constant's name, e.g. "DripBody".
func (k AdversaryKind) String() string {
	if k >= 0 && int(k) < len(adversaryNames) {
		return adversaryNames[k]
	}
	return fmt.Sprintf("AdversaryKind(%d)", int(k))
}

// Adversary is an origin that misbehaves on purpose, to prove that a
// crawler survives it. Its zero value is an honest origin. It applies to
// every request that the limit admits (pages, redirects, 404s), after the
// request's latency; rejections, ban pages and robots.txt are answered as
// usual, as by a rate limiter in front of a broken origin. Fields that Kind
// does not use must be zero.
//
// An Adversary is a plain value; it is safe to share between goroutines as
// long as nobody writes it.
type Adversary struct {
	// Kind selects the misbehaviour; see the constants.
	Kind AdversaryKind
	// Bytes is, for ResetMidBody, how many bytes of the body are sent
	// before the connection closes (zero: none; capped at all but the last
	// byte), and for DripBody, the length of the dripped body (zero: the
	// whole body). It must be >= 0.
	Bytes int
	// Interval is the time between two bytes of a DripBody. Zero means 1
	// second. It must be >= 0.
	Interval time.Duration
}

const defaultDripInterval = time.Second

func validateAdversary(host string, a Adversary) error {
	if a.Kind < NoAdversary || a.Kind > Hang {
		return configErr(host, "Adversary: unknown AdversaryKind %d", int(a.Kind))
	}
	if a.Bytes < 0 || a.Interval < 0 {
		return configErr(host, "Adversary: negative value in %+v", a)
	}
	if (a.Kind != ResetMidBody && a.Kind != DripBody && a.Bytes != 0) || (a.Kind != DripBody && a.Interval != 0) {
		return configErr(host, "Adversary: a field that %v does not use is set in %+v", a.Kind, a)
	}
	return nil
}

// QuotaLieMode selects the quota headers of a host that lies: "nothing
// left" on every response, forever, with a reset that is already past, so
// that a client which trusts them either stops for good or, seeing the
// reset past, comes back at once and spins. Every mode sends RateLimit:
// "default";r=0;t=0 (the draft's t cannot go below now) and
// X-RateLimit-Remaining: 0; the modes differ in X-RateLimit-Reset. When the
// limit in force has a quota (FixedWindow, SlidingWindow, TokenBucket),
// RateLimit-Policy and X-RateLimit-Limit state it as QuotaHeaders would;
// otherwise they are left out.
type QuotaLieMode int

const (
	// NoQuotaLie is the zero QuotaLieMode: no lie.
	NoQuotaLie QuotaLieMode = iota
	// QuotaLieResetZero sends X-RateLimit-Reset: 0, which reads as "now"
	// as seconds from now and as 1970 as a Unix time.
	QuotaLieResetZero
	// QuotaLieResetEpoch sends X-RateLimit-Reset as a Unix time in seconds
	// one hour before the response, as GitHub's form would. Inside a
	// testing/synctest bubble the clock starts in 2000, below 10^9 seconds:
	// a client that tells delays from Unix times by magnitude reads that
	// as a delay of some 30 years. Prefer QuotaLieResetDate there.
	QuotaLieResetEpoch
	// QuotaLieResetDate sends X-RateLimit-Reset as an HTTP-date one hour
	// before the response: in the past on any clock.
	QuotaLieResetDate
)

var quotaLieNames = [...]string{"NoQuotaLie", "QuotaLieResetZero", "QuotaLieResetEpoch", "QuotaLieResetDate"}

// String returns the constant's name, e.g. "QuotaLieResetDate".
func (m QuotaLieMode) String() string {
	if m >= 0 && int(m) < len(quotaLieNames) {
		return quotaLieNames[m]
	}
	return fmt.Sprintf("QuotaLieMode(%d)", int(m))
}

// quotaLieAge is how far in the past a lying reset lies.
const quotaLieAge = time.Hour

// lieReset renders the X-RateLimit-Reset of a lie told at now.
func lieReset(m QuotaLieMode, now time.Time) string {
	past := now.Round(0).Add(-quotaLieAge)
	switch m {
	case QuotaLieResetEpoch:
		return strconv.FormatInt(past.Unix(), 10)
	case QuotaLieResetDate:
		return past.UTC().Format(http.TimeFormat)
	}
	return "0"
}

// rawPause is the pause a raw Retry-After announces at now: one line of
// digits (saturated at the largest Duration) or an HTTP-date in the future
// (dated: the pause is the time until it); 0 for anything else.
func rawPause(vals []string, now time.Time) (pause time.Duration, dated bool) {
	if len(vals) != 1 {
		return 0, false
	}
	v := strings.Trim(vals[0], " \t")
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > math.MaxInt64/uint64(time.Second) {
			return math.MaxInt64, false
		}
		return time.Duration(n) * time.Second, false
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now.Round(0)), 0), true // Sub saturates
	}
	return 0, false
}

// addSat is e+d, saturated at the largest Duration.
func addSat(e, d time.Duration) time.Duration {
	if d > math.MaxInt64-e {
		return math.MaxInt64
	}
	return e + d
}

// abort drops the connection without a word more: net/http recovers the
// panic, logs nothing and closes the connection.
func abort() {
	panic(http.ErrAbortHandler)
}

// hang waits until the client goes away or the server closes, then drops
// the connection.
func (s *Server) hang(r *http.Request) {
	select {
	case <-s.done:
	case <-r.Context().Done():
	}
	abort()
}

// resetMidBody sends the headers for body and its first n bytes (at most
// all but one), then drops the connection.
func resetMidBody(w http.ResponseWriter, status int, ctype string, body []byte, n int) {
	n = max(min(n, len(body)-1), 0)
	hdr := w.Header()
	hdr["Content-Type"] = []string{ctype}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body[:n])
	http.NewResponseController(w).Flush()
	abort()
}

// drip sends the headers at once and the body one byte every interval. It
// drops the connection if the client goes away or the server closes.
func (s *Server) drip(w http.ResponseWriter, r *http.Request, status int, ctype string, body []byte, a Adversary) {
	if a.Bytes > 0 {
		b := make([]byte, a.Bytes)
		n := copy(b, body)
		for i := n; i < len(b); i++ {
			b[i] = ' '
		}
		body = b
	}
	every := a.Interval
	if every == 0 {
		every = defaultDripInterval
	}
	hdr := w.Header()
	hdr["Content-Type"] = []string{ctype}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		abort()
	}
	for i := range body {
		if !s.sleep(r, every) {
			abort()
		}
		if _, err := w.Write(body[i : i+1]); err != nil {
			abort()
		}
		if rc.Flush() != nil {
			abort()
		}
	}
}

// closeWithStatus answers status with no body and closes the connection.
func closeWithStatus(w http.ResponseWriter, status int) {
	hdr := w.Header()
	hdr["Connection"] = []string{"close"}
	hdr["Content-Length"] = []string{"0"}
	w.WriteHeader(status)
}

// robotsFiller is the padding of a large robots.txt: comment lines of 64
// bytes, shared by every request.
var robotsFiller = func() []byte {
	const text = "# filler to make robots.txt large "
	line := text + strings.Repeat(".", 63-len(text)) + "\n"
	return []byte(strings.Repeat(line, 512))
}()
