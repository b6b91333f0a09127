package testserver

import "time"

// Stats is what one host saw, for assertions. Times are offsets from the
// server's start (Server.Elapsed; in a synctest bubble, exact virtual
// times), and a request's time is its arrival at the host: with
// Latency.RTT, half a round trip after the client sent it. Server.Stats
// returns a deep copy that nothing else modifies; the zero value is a host
// that saw nothing.
type Stats struct {
	// Requests counts every request to the host, robots.txt included.
	Requests int
	// ByStatus counts responses per status code, robots.txt included. A
	// request is counted when its status is decided (on arrival), even if
	// the client gives up during the latency or in a WorkerPool's queue, or
	// the body is cut short or dripped by an Adversary. A request to a Hang host is not counted
	// here: it never gets a status.
	ByStatus map[int]int
	// Accepted holds the arrival times of the requests the limit admitted,
	// in order. They are answered 200, 302 by a redirect endpoint, 400 for
	// a malformed redirect request, or 404 for a path not on the site (in
	// the way the host's Adversary says); robots.txt is not included.
	Accepted []time.Duration
	// Rejected holds the arrival times of the requests the host refused, in
	// order, on the clock of Accepted: those answered with the excess status
	// (Excess.Status; 429, or 503 for a Concurrency limit, by default) and,
	// during a ban, the 403 block pages. Every request but robots.txt is in
	// exactly one of Accepted and Rejected, so len(Accepted) +
	// len(Rejected) == Requests - Robots. It costs one time.Duration per
	// rejection, as Accepted does per admission.
	Rejected []time.Duration
	// Latencies holds, for every admitted request that was answered, the
	// time from its arrival at the host to its answer leaving the origin
	// (its headers written, before the RTT/2 of the way back): its
	// processing time and, for a WorkerPool, its wait in the queue before
	// it. They are in order of completion. A request that hangs, or whose
	// client gives up or whose server closes first, has none. It costs one
	// time.Duration per admitted request, as Accepted does.
	Latencies []time.Duration
	// MaxInFlight is the most admitted requests the host served at once
	// (for a WorkerPool, the most busy workers; queued requests are not in
	// flight).
	MaxInFlight int
	// MaxQueued is the most requests a WorkerPool held queued at once,
	// waiting for a worker.
	MaxQueued int
	// PerSecond counts admitted requests per second since the start:
	// PerSecond[i] is the number admitted in [i s, (i+1) s). It ends at
	// the last second with an admitted request.
	PerSecond []int
	// PauseViolations counts requests (robots.txt included) that arrived
	// while a pause this host announced was still in force. A pause is
	// announced by a Retry-After in seconds or as an HTTP-date, and runs
	// from the response that carried it to the deadline a client computes
	// from what was sent (that response's arrival at the client plus the
	// seconds sent, or the date sent); "0", garbage and a missing header
	// announce none (for raw values, see Excess.RawRetryAfter). A response
	// the client gave up on before it arrived (a cancelled request)
	// announces nothing: that client never learned of the pause.
	//
	// The instant that counts is the request's arrival at the host, and
	// the pause is shifted to match: it starts at the decision on the
	// announcing request + RTT (when a request sent as the answer reached
	// the client arrives) and ends at the deadline + RTT/2 (when a request
	// sent at the deadline arrives). A request arriving at or before the
	// start was sent before the client could know, and is not counted;
	// without RTT, that is one arriving at the same instant as the
	// announcement. In virtual time (Memory inside synctest) that makes the
	// count exact for requests that were in flight together; so a client
	// that retries at once, without letting any virtual time pass, is not
	// counted either. In real time a request already in flight may arrive
	// a moment later and be counted.
	PauseViolations int
	// PauseViolationsByOthers counts the PauseViolations of requests whose
	// client (Config.ClientHeader) was never told of the pause: it was
	// announced only to other clients, in answers to their requests.
	// Clients that share their pauses (the processes of a fleet, through
	// their store) learn of such a pause only from each other, later than
	// the client that was told. Without Config.ClientHeader every request
	// is one client's, and this is 0. A pause announced to more than eight
	// clients counts every request inside it as its own client's.
	PauseViolationsByOthers int
	// OthersViolationLate is the latest that a request counted in
	// PauseViolationsByOthers arrived after the start of the pause it fell
	// in: the most time its client had to hear of the pause from the
	// clients told (one way through a store and back is a round trip of
	// it).
	OthersViolationLate time.Duration
	// Clients splits Accepted and Rejected by client, when
	// Config.ClientHeader names a header: the key is its value in the
	// request ("" without it), and each entry holds that client's share of
	// Accepted and Rejected (robots.txt is not included), on their clock
	// and in order. Nil without Config.ClientHeader. It costs one more
	// time.Duration per request.
	Clients map[string]ClientStats
	// Robots counts robots.txt requests.
	Robots int
	// Banned reports whether the host is banning at the time of the call.
	Banned bool
	// BanCount counts the bans started.
	BanCount int
}

// ClientStats is what one host saw of one client (Stats.Clients): the
// arrival times of its requests that the host admitted and refused, as in
// Stats.Accepted and Stats.Rejected.
type ClientStats struct {
	Accepted []time.Duration
	Rejected []time.Duration
}
