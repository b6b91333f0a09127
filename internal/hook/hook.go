// Package hook is what the module's other packages need of the core
// (package polite) that the core does not export: the Colly wiring
// (package adaptive) and the frontier. The core sets every hook in its init;
// a controller is passed as any (a *polite.Controller) so that this package
// needs no import of the core.
package hook

import (
	"log/slog"
	"net/http"
	"time"
)

// Hooks the core sets.
var (
	// New makes a controller that fails safe (as NewTransport does) from
	// cfg (a polite.Config), with robots.txt on unless cfg says otherwise.
	New func(cfg any, robotsOn bool) any
	// Transport is a transport of ctrl that sends through next with the
	// given attempt timeout (0: none).
	Transport func(ctrl any, next http.RoundTripper, attemptTimeout time.Duration) http.RoundTripper
	// Unwrap reports whether rt is a transport of a controller, and which,
	// what it sends through and its attempt timeout.
	Unwrap func(rt http.RoundTripper) (ctrl any, next http.RoundTripper, attemptTimeout time.Duration, ok bool)
	// Settings are what the wiring needs of ctrl's configuration: its
	// logger, whether robots.txt is on, its attempt timeout (0: none).
	Settings func(ctrl any) (logger *slog.Logger, robots bool, attemptTimeout time.Duration)
	// AddErr adds err to what ctrl.Err reports.
	AddErr func(ctrl any, err error)

	// Reserve takes a send slot on the scope of req if it can send now,
	// without waiting (see Reservation); otherwise Readiness says what it
	// waits for. err is the refusal the request would meet now.
	Reserve func(ctrl any, req *http.Request) (Reservation, Readiness, error)
	// Notify calls f with the key of a scope each time that scope may be
	// able to send sooner than Reserve said; stop ends the calls.
	Notify func(ctrl any, f func(scope string)) (stop func())
	// ScopeKey is the key of the scope req belongs to.
	ScopeKey func(ctrl any, req *http.Request) string
)

// Reservation is a send slot taken ahead of its request: the next request
// the controller sends on that scope uses it instead of waiting. Its zero
// value holds nothing; it is safe to copy and to use from any goroutine.
type Reservation struct{ cancel func() }

// NewReservation is a reservation given back by cancel.
func NewReservation(cancel func()) Reservation { return Reservation{cancel} }

// Held reports whether r holds a slot.
func (r Reservation) Held() bool { return r.cancel != nil }

// Cancel gives the slot back if no request has used it yet; calling it
// again, or after a request used it, does nothing.
func (r Reservation) Cancel() {
	if r.cancel != nil {
		r.cancel()
	}
}

// Readiness says what a scope that could not be reserved waits for. At
// most one field is set; the zero value waits for nothing.
type Readiness struct {
	// Until is when the scope may send; ask again then.
	Until time.Time
	// Notify: the scope sends again only after a send ends or its
	// robots.txt has been read; Notify tells when to ask again.
	Notify bool
	// Probe: robots.txt of the request's origin is not known yet: send one
	// request of the origin without a reservation (it reads robots.txt
	// first) and ask again when it ends.
	Probe bool
}
