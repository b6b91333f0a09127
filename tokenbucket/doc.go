// Package tokenbucket provides per-key token buckets, the rate cap of each
// scope (host, proxy, API key) of a polite crawler, that can be drained on a
// 429 and re-rated while callers wait.
//
//	reg, err := tokenbucket.New(tokenbucket.Config{Rate: 2, Burst: 1}) // per host
//	...
//	if err := reg.Wait(ctx, host); err != nil {
//		return err // canceled, or ErrWouldExceedDeadline: do not send unpaced
//	}
//	resp, err := client.Do(req)
//	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
//		reg.Drain(host, time.Now().Add(retryAfter)) // the longest drain wins
//	}
//
// A Bucket is used like a rate.Limiter: AllowAt drops what exceeds the rate,
// ReserveAt returns a Reservation to sleep on or cancel, Wait blocks on a
// context. It adds what a politeness layer needs:
//
//   - DrainAt empties the bucket and blocks it until a deadline; the longest
//     deadline wins; afterwards tokens accrue from zero, so there is no
//     burst of saved tokens at resume. ResumeAt ends a drain early.
//   - Blocked Wait callers form a queue that is re-priced at once, in
//     arrival order, when the rate changes, the bucket is drained or a
//     caller ahead gives up. With rate.Limiter, reservations keep the price
//     they were made at, and a rate cut bites only after the queue has
//     drained.
//   - Wait fails at once with ErrWouldExceedDeadline, spending nothing, when
//     the token cannot come before the context's deadline; a caller queued
//     when a rate cut or a drain makes its deadline unreachable fails then.
//     A canceled Wait gives its token back, and the callers behind move up.
//
// A Registry holds one Bucket per key, created on first use with the
// Config's rate and burst, and evicts idle keys.
//
// # Time
//
// Every decision takes an explicit now (AllowAt, ReserveAt, SetRateAt,
// DrainAt, ...), with a shorthand that uses time.Now(); Wait takes a context
// and reads the clock itself. Pass times from time.Now() or derived from it
// with Add: they carry Go's monotonic clock reading, so that a step of the
// wall clock causes neither a burst nor a stall. Round(0), Truncate, and
// formatting and parsing strip that reading. DrainAt converts a deadline
// without one (say, a Retry-After HTTP date) to now plus its wall-clock
// distance, which keeps the deadline on now's monotonic clock.
//
// With times that carry no monotonic reading, a wall-clock step is seen, and
// bounded: forward, a bucket can at most fill up (Burst tokens, as after an
// idle spell); backward, it takes the earlier time as its reference and
// carries on, with no stall. A drain in force is lengthened or shortened by
// such a step, which is why DrainAt pins its deadline.
//
// # Memory
//
// A key is evicted once it has gone untouched for Config.IdleTTL, is full
// (a fresh Bucket would behave the same), is not drained and has no one
// waiting on it. Eviction is amortised: each new key examines up to four
// keys that were placed in the sweep order at least IdleTTL ago, evicting
// the idle ones and moving the others to the back. There is no background
// goroutine and nothing to Close. The bound:
//
//   - Keys visited once each (a crawl across many hosts): Len is exactly the
//     keys touched within the last IdleTTL. Visiting 1,000,000 distinct keys,
//     one per millisecond, with a 1 s IdleTTL never holds more than 1,000
//     (TestRegistryMillionKeys), and the heap grows by about 210 kB.
//   - In general, Len grows only when a new key arrives, and each new key
//     evicts up to four idle ones. In steady state Len stays within 4/3 ×
//     (the keys touched within the last 2×IdleTTL, plus those a drain, a
//     waiter or an unfinished refill holds) + 1; the 4/3 is the sweep's lag
//     when many keys stay in use and few new ones arrive
//     (TestRegistryBoundWithHotKeys). After a burst of keys, the excess
//     goes four per new key, or at once with EvictAt.
//   - Config.MaxKeys adds a hard bound; EvictAt sweeps everything at once.
//
// An idle key costs about 235 bytes (a 176-byte Bucket, its key, its map
// entry) against about 140 for a bare rate.Limiter in a map.
//
// # Built on golang.org/x/time/rate
//
// Each Bucket holds a rate.Limiter, by value, for the token arithmetic, plus
// the drain deadline and the queue of blocked callers under a mutex of its
// own. The benchmarks (BENCHMARKS.md, side by side with a bare
// rate.Limiter in the same run) show no reason to replace it: the outer
// mutex costs about 10 ns on an uncontended take, the Registry's map lookup
// 10–20 ns more, nothing allocates, and under 64-way contention on one key
// the Bucket stays within tens of nanoseconds of a bare Limiter. A
// hand-written bucket would save that mutex and some 60 bytes per key, and
// would have to re-earn x/time/rate's record of correctness; the model test
// (TestBucketMatchesRateLimiter) checks that a Bucket decides exactly as a
// bare Limiter does.
//
// What rate.Limiter lacks is worked around, not patched: it has no setter
// for the token count (a new Bucket is filled by one nanosecond at rate.Inf,
// long before any real time; a drain caps the tokens at zero through
// SetBurstAt); its Wait cannot be re-priced (the queue does it, with
// ReserveN and Reservation.CancelAt latest first, so every token comes
// back); its zero-rate reservations are 292 years away (a Bucket reports
// itself closed instead); and a refused AllowN leaves its clock where it
// was, which after a backward wall-clock step would stall it (a refused
// take re-anchors it at now).
package tokenbucket
