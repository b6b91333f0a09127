package classify

import (
	"math"
	"net/http"
	"time"
)

// MaxRetryAfterSeconds is the largest delay-seconds value [ParseRetryAfter]
// accepts: the largest whole number of seconds a time.Duration holds
// (about 292 years). "9223372036" parses; "9223372037" and longer values,
// such as "99999999999999999999", are absent rather than clamped, because
// a number that large is garbage, not advice. Callers cap sane-but-long
// delays themselves.
const MaxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// RetryAfter reads the Retry-After field of h, relative to now (the time
// the response was received). See [ParseRetryAfter] for the forms
// accepted.
//
// Retry-After is a singleton field; when it appears more than once the
// largest valid value wins and invalid ones are ignored, since waiting too
// little is the costly mistake. ok is false when no value is valid.
//
// The delay-seconds path allocates nothing.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	for _, v := range h.Values("Retry-After") {
		if x, vok := ParseRetryAfter(v, now); vok && (!ok || x > d) {
			d, ok = x, true
		}
	}
	return d, ok
}

// ParseRetryAfter parses one Retry-After value (RFC 9110, section 10.2.3):
// delay-seconds ("120") or an HTTP-date in any of the three forms
// http.ParseTime accepts (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT",
// RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37
// 1994"). Surrounding whitespace is ignored.
//
// A date is converted to a delay from now; a date at or before now gives
// (0, true): the server's clock or ours is off, and the caller decides the
// minimum pause. Empty, negative, fractional, garbage and overflowing
// values (above [MaxRetryAfterSeconds]) give (0, false). The result is
// never negative, and the delay-seconds path allocates nothing.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		// No HTTP-date starts with a digit.
		n, ok := parseUint(v)
		if !ok || n > uint64(MaxRetryAfterSeconds) {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return nonNegative(t.Sub(now)), true
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
