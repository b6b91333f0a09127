package classify

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfterSeconds is the largest delay-seconds value [ParseRetryAfter]
// turns into an exact delay: the largest whole number of seconds a
// time.Duration holds (about 292 years). "9223372036" is 9223372036 s;
// any larger run of digits ("9223372037", "99999999999999999999", however
// long) is [Forever].
const MaxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// Forever is the delay of a Retry-After too large to represent; treat it
// as longer than any pause you honour. It is the largest time.Duration,
// so it also wins every comparison with a representable delay.
const Forever = time.Duration(math.MaxInt64)

// RetryAfter reads the Retry-After field of h. now is the time the
// response was received. See [ParseRetryAfter] for the forms accepted.
//
// An HTTP-date is the server's clock, so when h carries a valid Date field
// the delay is measured against it (see [ServerNow]) rather than against
// now: a local clock that runs fast would otherwise turn "retry in 30 s"
// into a date in the past. Delay-seconds do not depend on either clock.
//
// Retry-After is a singleton field, but proxies repeat it and merge the
// repeats into one comma-separated list; over every line and every member
// the largest valid delay wins and invalid ones are ignored, since waiting
// too little is the costly mistake. ok is false when no member is valid.
//
// The delay-seconds path allocates nothing, and it does not read Date.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	c := clock{h: h, now: now}
	for _, v := range h["Retry-After"] {
		if x, vok := parseRetryAfter(v, &c); vok && (!ok || x > d) {
			d, ok = x, true
		}
	}
	return d, ok
}

// ParseRetryAfter parses one Retry-After value (RFC 9110, section 10.2.3):
// delay-seconds ("120") or an HTTP-date in any of the three forms
// http.ParseTime accepts (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT",
// RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37
// 1994"). Surrounding whitespace is ignored. A date is converted to a
// delay from now; to measure it against the server's clock, pass
// [ServerNow] of the response as now ([RetryAfter] does).
//
// A comma-separated list ("3, 5", or dates and numbers mixed, as a proxy
// merging two fields writes them) gives its largest valid member; invalid
// members are ignored. The comma inside a date does not split it.
//
// A date at or before now gives (0, true): the caller decides the minimum
// pause. Delay-seconds above [MaxRetryAfterSeconds] give ([Forever],
// true). Empty, negative, fractional and garbage values give (0, false).
// The result is never negative, and the delay-seconds path allocates
// nothing.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	c := clock{now: now, done: true}
	return parseRetryAfter(v, &c)
}

// ServerNow returns the time in h's Date field, the server's clock when it
// generated the response, or now when Date is absent or invalid (any of
// the three forms http.ParseTime accepts; only the first Date line
// counts).
//
// Dates a server sends (Retry-After, a reset time) are meant against its
// own clock, so measuring them from Date gives the wait it intended
// whatever the local clock says. Date has a resolution of one second and
// may predate the response's arrival by up to a round trip; both are
// small next to clock skew, and both err towards waiting longer.
func ServerNow(h http.Header, now time.Time) time.Time {
	vs := h["Date"]
	if len(vs) == 0 {
		return now
	}
	t, err := http.ParseTime(trimOWS(vs[0]))
	if err != nil {
		return now
	}
	return t
}

// clock is the time dates in one response are measured against: the
// server's Date, resolved only when a date is met, since most values are
// delays and parsing Date costs more than parsing them.
type clock struct {
	h    http.Header
	now  time.Time
	done bool // now already holds ServerNow(h, now)
}

func (c *clock) server() time.Time {
	if !c.done {
		c.now, c.done = ServerNow(c.h, c.now), true
	}
	return c.now
}

// parseRetryAfter returns the largest valid member of the list v.
func parseRetryAfter(v string, c *clock) (d time.Duration, ok bool) {
	for v != "" {
		piece, rest, more := strings.Cut(v, ",")
		if p := trimOWS(piece); more && isWeekday(p) {
			// The comma after "Sun" or "Sunday" is inside a date: parse
			// the weekday with the piece after it, as one member.
			next, after, _ := strings.Cut(rest, ",")
			if x, xok := parseRetryAfterMember(trimOWS(v[:len(piece)+1+len(next)]), c); xok {
				if !ok || x > d {
					d, ok = x, true
				}
				v = after
				continue
			}
		}
		if x, xok := parseRetryAfterMember(trimOWS(piece), c); xok && (!ok || x > d) {
			d, ok = x, true
		}
		v = rest
	}
	return d, ok
}

// parseRetryAfterMember parses one trimmed member: delay-seconds or an
// HTTP-date.
func parseRetryAfterMember(m string, c *clock) (time.Duration, bool) {
	if m == "" {
		return 0, false
	}
	if isDigit(m[0]) {
		// No HTTP-date starts with a digit.
		return parseDelaySeconds(m)
	}
	if len(m) < 3 || !isWeekday(m[:3]) {
		// Every HTTP-date starts with a day name; checking it first spares
		// garbage the error values http.ParseTime allocates.
		return 0, false
	}
	t, err := http.ParseTime(m)
	if err != nil {
		return 0, false
	}
	return nonNegative(t.Sub(c.server())), true
}

// parseDelaySeconds parses a run of ASCII digits of any length (leading
// zeros allowed) as seconds; more than MaxRetryAfterSeconds is Forever.
func parseDelaySeconds(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) {
			return 0, false
		}
		if n <= MaxRetryAfterSeconds { // past it the value is Forever; keep checking the digits
			n = n*10 + int64(c-'0')
		}
	}
	if n > MaxRetryAfterSeconds {
		return Forever, true
	}
	return time.Duration(n) * time.Second, true
}

// weekdays are the day names that open HTTP-dates, long form; the short
// form is the first three letters, which no two share.
var weekdays = [...]string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// isWeekday reports whether s is a day name, short or long, in any ASCII
// case (http.ParseTime matches day names without regard to case).
func isWeekday(s string) bool {
	if len(s) < 3 || len(s) > len("Wednesday") {
		return false
	}
	for _, w := range weekdays {
		// |0x20 lower-cases an ASCII letter and maps no other byte to one.
		if s[0]|0x20 == w[0]|0x20 && s[1]|0x20 == w[1] && s[2]|0x20 == w[2] {
			return len(s) == 3 || len(s) == len(w) && strings.EqualFold(s, w)
		}
	}
	return false
}

func nonNegative(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseUint parses a non-empty run of ASCII digits (leading zeros allowed).
// ok is false for any other byte or on uint64 overflow.
func parseUint(s string) (n uint64, ok bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// trimOWS trims ASCII whitespace (HTTP's OWS, plus CR, LF, VT and FF for
// values that did not come through an HTTP parser).
func trimOWS(s string) string {
	for s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	for s != "" && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\v', '\f':
		return true
	}
	return false
}
