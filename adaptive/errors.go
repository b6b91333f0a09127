package adaptive

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
	ErrPaused = errors.New("adaptive: scope paused beyond the maximum wait")
	// ErrBlocked: the scope is parked after repeated blocks (403 or block
	// pages). The request was not sent. Controller.Unpark releases it.
	ErrBlocked = errors.New("adaptive: scope parked after repeated blocks")
	// ErrBreakerOpen: sustained throttling with no success opened the
	// scope's breaker for longer than the maximum wait.
	ErrBreakerOpen = errors.New("adaptive: breaker open")
	// ErrConfig: an option or rule is invalid.
	ErrConfig = errors.New("adaptive: invalid configuration")
)

// ScopeError tells which scope refused a request, why, and until when.
// It wraps ErrPaused, ErrBlocked or ErrBreakerOpen.
type ScopeError struct {
	Scope       string
	Reason      Reason
	PausedUntil time.Time // when the scope sends again; zero when parked until Unpark
	Err         error
}

func (e *ScopeError) Error() string {
	if e.PausedUntil.IsZero() {
		return fmt.Sprintf("%v: scope %q (%s)", e.Err, e.Scope, e.Reason)
	}
	return fmt.Sprintf("%v: scope %q (%s) until %s", e.Err, e.Scope, e.Reason, e.PausedUntil.UTC().Format(time.RFC3339))
}

func (e *ScopeError) Unwrap() error { return e.Err }
