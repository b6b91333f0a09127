// Package adaptive makes a Colly collector, or any http.Client, polite and
// fast at once: for each scope (a host by default) it finds the server's real
// limit by itself and keeps just under it.
//
//	c := colly.NewCollector()
//	ctrl := adaptive.Attach(c) // NewTransport does the same for any http.Client
//
// Every request waits for its scope: a pause gate (Retry-After in both
// forms, the breaker, parks after blocks), a paced rate under every ceiling
// (configured, robots.txt Crawl-delay, quota headers), and an AIMD
// concurrency limit; 429, 503 and 403 are told apart (package classify);
// robots.txt's Disallow is enforced. With a Store, a fleet of processes is
// one client. Package frontier queues a crawl's requests so that no thread
// waits on one scope; package metrics exports what Report counts, and
// WithLogger logs each decision with its cause. ARCHITECTURE.md shows the
// parts and the path of one request, internal/law/README.md the control
// law, and the module's README.md the measured results and how Colly's
// features combine with it.
package adaptive
