// Package adaptive makes a Colly collector, or any http.Client, polite and
// fast at once: for each scope (a host by default) it finds the server's real
// limit by itself and keeps just under it.
//
// One line is enough:
//
//	c := colly.NewCollector()
//	ctrl := adaptive.Attach(c)
//
// Attach wraps the collector's transport (NewTransport does the same for any
// http.Client). Every request first acquires a permit from its scope's
// controller, which combines
//
//   - a pause gate: Retry-After (both forms), breaker and park deadlines
//     stop the whole scope, not one caller, and the longest deadline wins;
//     with a Store the gate is shared by several collectors;
//   - an adaptive rate, paced on a theoretical send schedule over a token
//     bucket and handed out one send at a time at the rate in force, so a
//     cut takes effect at once, not after the queue drains;
//   - an AIMD concurrency limit (additive increase per window of successes,
//     decrease at most once per window).
//
// Outcomes are classified by package classify: 429 cuts the rate, 503 / 502 /
// 504 and transport failures cut the concurrency and hold increases, 403 and
// block pages (a header, or body markers in the first 16 KiB) never change the
// rate but park the scope after a few in a row, 404 and other 4xx say nothing
// about load. Retries (3 by default) go only to idempotent requests with a
// replayable body, and waiting politely never uses up a request's timeout.
// robots.txt Crawl-delay is a rate ceiling. Each class of signal is a
// non-blocking event stream (Controller.Events); Controller.Snapshots and
// WithLogger show the state.
//
// law.go explains the control law; README.md has the measured results.
package adaptive
