// Package classify turns one HTTP outcome into a [Class] and reads the
// headers a server uses to say how hard it may be pushed: Retry-After and
// the quota families (IETF RateLimit / RateLimit-Policy, X-RateLimit-*,
// GitHub, X, Shopify).
//
// Everything here is a pure function of its arguments: no state, no clock
// (callers pass now), no I/O, no panics on any input. The controller in
// package polite feeds it what each request produced:
//
//	resp, err := client.Do(req)
//	switch classify.Response(resp, err) {
//	case classify.Throttled:
//		d, ok := classify.RetryAfter(resp.Header, time.Now())
//		// pause the scope for min(d, your cap), or a default if !ok
//	case classify.Overloaded, classify.TransportFailure:
//		// back off
//	}
//
// Classes are separate channels, not a severity scale: only
// [Class.Signal] classes say something about server load.
package classify
