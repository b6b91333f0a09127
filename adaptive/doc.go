// Package adaptive makes a Colly collector, or any http.Client, polite and
// fast at once: for each scope (a host by default) it finds the server's real
// limit by itself and keeps just under it.
//
// One line is enough:
//
//	c := colly.NewCollector()
//	ctrl := adaptive.Attach(c)
//
// Attach wraps the collector's transport. Every request first acquires a
// permit from its scope's controller, which combines
//
//   - a pause gate: Retry-After, breaker and park deadlines stop the whole
//     scope, not one caller, and the longest deadline wins;
//   - an adaptive rate, paced by a token bucket that hands out send slots one
//     at a time at the rate in force (so a cut takes effect at once, not after
//     the queue drains);
//   - an AIMD concurrency limit (additive increase per window of successes,
//     decrease at most once per window).
//
// Outcomes are classified by package classify: 429 cuts the rate, 503 / 502 /
// 504 and transport failures cut the rate and the concurrency and hold
// increases, 403 and block pages never change the rate but can park the scope,
// 404 and other 4xx say nothing about load. See Controller for the control law
// and README.md for measured results.
package adaptive
