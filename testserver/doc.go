// Package testserver is an origin with hidden limits, to prove crawlers
// polite: several virtual hosts in one server, each with its own capacity
// (fixed window, token bucket / GCRA, sliding window, concurrency cap, a
// worker pool that queues and never says no, or a schedule of them that
// lowers or raises it), network round trip and processing latency (with
// page costs that change over time), answer to excess (429, 503 or any
// status, 403 for a limiter that refuses too fast; every form of
// Retry-After, quota headers, bans), a
// crawlable site, a robots.txt and, on demand, the misbehaviour of
// adversarial origins (see below). Per host Stats give what a test asserts
// on: counts per status, accepted and rejected times, latencies,
// concurrency and queue depth, accepted rate per second and pause
// violations (requests that ignored an announced Retry-After).
//
// It has the shape of net/http/httptest: New returns a started *Server with
// URL, Client and an idempotent Close; NewTest binds one to a test. Two
// networks reach it. Loopback serves each host on a real 127.0.0.1 listener,
// for examples, benchmarks and end-to-end runs. Memory serves all hosts over
// net.Pipe connections, routed by the Host header ("http://a.test"); it works
// inside a testing/synctest bubble, where time is virtual and a 10-minute
// crawl takes milliseconds. NewTest uses Memory by default.
//
// A test of a crawler in virtual time:
//
//	func TestPolite(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
//				"a.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 30, Window: time.Second}},
//			}})
//			crawl(srv.Client(), srv.URL) // the code under test
//			st := srv.Stats("a.test")
//			if st.ByStatus[429] > 0 || st.PauseViolations > 0 {
//				t.Errorf("impolite: %+v", st)
//			}
//		})
//	}
//
// With Colly, hand the server's transport to the collector:
//
//	c := colly.NewCollector()
//	c.WithTransport(srv.Transport())
//	c.Visit(srv.URL + "/")
//
// Every host serves these paths, whatever the method. Only the path selects
// the resource: a query string is ignored (crawlers add them), except by the
// redirect endpoints, which take their arguments from it.
//
//	/                   the index of the site (see Site)
//	/page/N             page N, for N in decimal (no sign, no leading zero) below Site.Pages
//	/robots.txt         see Robots
//	/redirect?to=URL    302 with Location: URL, verbatim; 400 unless URL is an
//	                    absolute http or https URL with a host (and the only "to")
//	/redirect/loop      302 with Location: /redirect/loop, a redirect loop
//	/redirect/hop?n=K&hosts=H1,H2,...
//	                    a chain of K redirects (1 <= K <= 1000) between the
//	                    listed hosts, ending at /page/1: 302 to the next host's
//	                    HostURL + /redirect/hop?n=K-1&hosts=H1,H2,... (HostURL +
//	                    /page/1 when K is 1), the next host being the one after
//	                    the answering host in the list, cyclically, or H1 if it
//	                    is not listed. hosts defaults to the answering host
//	                    alone; unknown or repeated names, or a bad n, get 400.
//
// Anything else, such as /page/abc, /page/07 or /page/1/, is 404.
//
// # Adversarial origins
//
// To prove that a crawler survives servers it does not control, a host can
// misbehave on purpose. Each of these works on both networks, keeps the
// statistics (Stats.Requests always; Stats.ByStatus whenever a status was
// sent) and ends at once on Close:
//
//	connection reset mid-body     Adversary{Kind: ResetMidBody, Bytes: n}
//	a body that drips             Adversary{Kind: DripBody, Bytes: n, Interval: d}
//	headers that never arrive     Adversary{Kind: Hang}
//	429, empty body, closed conn  Excess{CloseConnection: true}
//	Retry-After huge, negative,   Excess{RawRetryAfter: []string{"1000000000000"}},
//	garbage, repeated and         {"-1"}, {"in a while"}, {"5", "3600"},
//	conflicting, a date long past {"Thu, 01 Jan 1970 00:00:00 GMT"},
//	or far ahead                  {"Fri, 31 Dec 9999 23:59:59 GMT"}
//	quota headers that lie        Excess{QuotaLie: QuotaLieResetDate} (and other modes)
//	Crawl-delay 1e9, -1, abc      Robots{Body: "User-agent: *\nCrawl-delay: abc\n"}
//	robots.txt of 10 MB           Robots{Size: 10 << 20} (streamed)
//	robots.txt with a BOM         Robots{Body: "\ufeffUser-agent: *\nDisallow: /x\n"}
//	robots.txt served as HTML     Robots{ContentType: "text/html; charset=utf-8", Body: page}
//	a redirect loop               GET /redirect/loop
//	redirects between hosts       GET /redirect/hop?n=K&hosts=H1,H2,...
//
// Adversary acts on the requests the limit admits, after their latency;
// rejections, ban pages and robots.txt are answered as usual, as by a rate
// limiter in front of a broken origin, so a host can both throttle and
// break.
//
// Time is always time.Now, so inside a bubble everything is virtual and
// exact. Requests other than /robots.txt count against the limit; robots.txt
// never does (see Robots). Redirects, 400s and 404s count like pages: each is
// a request the origin serves, so a client following a chain of K redirects
// spends K+1 requests of the limit, and any of them may be rejected or
// banned. Admitted requests wait for their latency (and a WorkerPool's
// queue); rejections are answered at once, as by a rate limiter in front
// of the origin, unless Latency.RTT is set: then every request reaches the
// host half a round trip after it was sent, and every answer, rejections
// included, reaches the client half a round trip after it left, so that
// the requests on the wire when a limit fills all come back rejected.
// Stats.Accepted and Stats.Rejected together hold every request but
// robots.txt.
package testserver
