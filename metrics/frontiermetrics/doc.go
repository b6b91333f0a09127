// Package frontiermetrics exports a frontier.Queue's progress to
// Prometheus:
//
//	reg.MustRegister(frontiermetrics.New(q))
//
// The crawl's queued, running, done and failed requests, its rate and its
// ETA, and the same for the scopes that will finish last (a bounded
// number of them). It reads Queue.Progress when scraped. It is a package
// apart from metrics so that metrics needs no Colly.
package frontiermetrics
