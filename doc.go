// Package polite makes any http.Client, and through package adaptive any
// Colly collector, polite and fast at once: for each scope (a host by
// default) it finds the server's real limit by itself and keeps just under
// it, with a paced rate, a concurrency limit, pauses for Retry-After, and
// robots.txt.
//
// Most callers need two things: a Controller (New, or adaptive.Attach for
// a Colly collector) and its Transport, which every request goes through:
//
//	ctrl, err := polite.New(polite.Config{})
//	client := &http.Client{Transport: ctrl.Transport(http.DefaultTransport)}
//
// Config is the one front door: its zero value is a polite controller, and
// each field states its default. NewTransport does the same in one line
// and fails safe instead of returning an error. Errors from a refusal wrap
// ErrPaused, ErrBlocked, ErrBreakerOpen or ErrDisallowed, with a
// *ScopeError saying which scope, why and until when.
//
// The rest is for watching and for special cases: Snapshot and Report are
// the pull view (what package metrics exports), Events the push view (one
// stream of load signals, each with its class); Acquire and Permit serve
// callers that send requests by other means; ExportEstimates and
// ImportEstimates let a crawl start warm; Unpark lifts a park; Close gives
// back what a controller holds in a shared fleet.Store. ARCHITECTURE.md
// shows the parts and the path of one request, internal/law/README.md the
// control law.
package polite
