// Package polite is the root of colly-polite: a politeness layer that makes
// any Colly crawler (or any http.Client) find each server's real limit by
// itself and keep just under it.
//
// The work is done in the subpackages: adaptive (the per-scope controller and
// the one-line Attach for Colly), tokenbucket (per-key token buckets),
// classify (HTTP outcome classes and Retry-After / quota headers), frontier
// (a crawl queue that never waits on one host while another is ready),
// metrics (a Prometheus collector over a controller) and testserver (a local
// origin with hidden limits, to prove crawlers polite).
package polite
