package polite

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Errors returned by the transport wrap one of them; match
// with errors.Is. Colly hands them to OnError wrapped in a *url.Error, which
// errors.Is sees through.
var (
	// ErrPaused: the scope is paused for longer than the controller is
	// allowed to wait (Config.MaxPause), typically because the server sent a
	// Retry-After above that ceiling. The request was not sent.
	ErrPaused = errors.New("polite: scope paused beyond the maximum wait")
	// ErrBlocked: the scope is parked after repeated blocks (403 or block
	// pages). The request was not sent. Controller.Unpark releases it.
	ErrBlocked = errors.New("polite: scope parked after repeated blocks")
	// ErrBreakerOpen: sustained throttling with no success opened the
	// scope's breaker for longer than the maximum wait.
	ErrBreakerOpen = errors.New("polite: breaker open")
	// ErrConfig: a Config field or Rule is invalid.
	ErrConfig = errors.New("polite: invalid configuration")
	// ErrDisallowed: the origin's robots.txt disallows the URL for this
	// User-Agent, or answered 5xx or could not be reached (RFC 9309: then
	// everything is disallowed until it is read again). The request was
	// not sent.
	ErrDisallowed = errors.New("polite: disallowed by robots.txt")
)

// ScopeError tells which scope refused a request, why, and until when.
// It wraps ErrPaused, ErrBlocked, ErrBreakerOpen or ErrDisallowed: match
// with errors.Is, read it with errors.As. At most one of Pause and Ceiling
// is set: a pause (or park) in force, or a ceiling that spaces sends
// further apart than MaxPause; neither for robots.txt (ErrDisallowed), nor
// when the law's own rate or the fleet's schedule spaces sends that far. A
// plain value; its zero value says nothing.
type ScopeError struct {
	Scope   string
	Pause   PauseReason
	Ceiling Ceiling
	// Until is when the scope sends again; zero when parked until Unpark
	// or disallowed by robots.txt rules. For an unreadable robots.txt,
	// when it is asked for again.
	Until time.Time
	Err   error
}

// Error says what refused the request, the scope, why and until when.
func (e *ScopeError) Error() string {
	why := "rate"
	switch {
	case e.Pause != PauseNone:
		why = string(e.Pause)
	case e.Ceiling != CeilingNone:
		why = string(e.Ceiling) + " ceiling"
	case errors.Is(e.Err, ErrDisallowed):
		why = "robots.txt"
	}
	if e.Until.IsZero() {
		return fmt.Sprintf("%v: scope %q (%s)", e.Err, e.Scope, why)
	}
	return fmt.Sprintf("%v: scope %q (%s) until %s", e.Err, e.Scope, why, e.Until.UTC().Format(time.RFC3339))
}

// Unwrap is the sentinel error (ErrPaused, ErrBlocked, ErrBreakerOpen or
// ErrDisallowed), for errors.Is.
func (e *ScopeError) Unwrap() error { return e.Err }
