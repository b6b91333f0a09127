// Package storetest is the conformance suite of fleet.Store: what every
// store must do for a fleet of collectors to be one polite client. The
// stores of this module run it (MemoryStore in virtual time, redisstore
// against a real redis-server); a store of your own can run it too:
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New:   func(t *testing.T) fleet.Store { return newEmptyStore(t) },
//			Slack: 100 * time.Millisecond,
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite/fleet"
)

// Harness says how to make the store under test.
type Harness struct {
	// New returns an empty store, one per test. With Virtual it is called
	// inside the test's synctest bubble.
	New func(t *testing.T) fleet.Store
	// Virtual runs each test in a synctest bubble: for a store that reads
	// the process's clock (time.Now), whose waits are then exact. A store
	// on another clock (a server's) runs in real time: its tests sleep,
	// for a few seconds in all, and run in parallel.
	Virtual bool
	// Slack is how far a duration the store reports may be off (the store's
	// clock runs during a round trip). 0 means exact.
	Slack time.Duration
	// Rewind sets the store's clock d back against every time it has
	// stored on scope (as after a failover to a node whose clock is
	// behind, or another program writing times ahead): the stamps it
	// reads are then in its future. nil skips the test that needs it.
	Rewind func(t *testing.T, s fleet.Store, scope string, d time.Duration)
}

// Reasons of a pause, as a controller would give them (a store keeps
// them and never reads them).
const retryAfter, backoff, breaker fleet.Reason = 1, 2, 4

// ttl is the lease TTL the tests ask for: a second, the shortest a store
// need honour.
const ttl = time.Second

// Run runs the suite, one subtest per behaviour.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*env)
	}{
		{"Pauses", pauses},
		{"Schedule", schedule},
		{"MaxWait", maxWait},
		{"Clamps", clamps},
		{"Leases", leases},
		{"Holder", holder},
		{"Renew", renew},
		{"RenewLive", renewLive},
		{"Law", lawState},
		{"Epoch", epoch},
		{"Live", live},
		{"Future", future},
		{"Concurrent", concurrent},
		{"Notifier", notifier},
		{"Fair", fair},
		{"Turns", turns},
		{"Ahead", ahead},
		{"QueueCap", queueCap},
		{"Ceilings", ceilings},
		{"ExactCeiling", exactCeiling},
		{"Accepted", accepted},
		{"Scopes", scopes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if h.Virtual {
				synctest.Test(t, func(t *testing.T) { tc.fn(&env{t: t, s: h.New(t), slack: h.Slack, rewind: h.Rewind}) })
				return
			}
			t.Parallel()
			tc.fn(&env{t: t, s: h.New(t), slack: h.Slack, rewind: h.Rewind})
		})
	}
}

type env struct {
	t      *testing.T
	s      fleet.Store
	slack  time.Duration
	rewind func(t *testing.T, s fleet.Store, scope string, d time.Duration)
}

func (e *env) acquire(a fleet.LeaseRequest) fleet.Lease {
	e.t.Helper()
	if a.Process == "" {
		a.Process = "p1"
	}
	if a.TTL == 0 {
		a.TTL = ttl
	}
	g, err := e.s.Lease(context.Background(), a)
	require.NoError(e.t, err)
	return g
}

func (e *env) release(r fleet.Return) fleet.Settlement {
	e.t.Helper()
	if r.Process == "" {
		r.Process = "p1"
	}
	st, err := e.s.Return(context.Background(), r)
	require.NoError(e.t, err)
	return st
}

// near asserts got is want within the slack (and never above want: the
// store's clock only runs forward).
func (e *env) near(want, got time.Duration, msg string) {
	e.t.Helper()
	assert.LessOrEqual(e.t, got, want, msg)
	assert.GreaterOrEqual(e.t, got, want-e.slack, msg)
}

// The longest pause wins, with its reason; a pause ends; a negative or
// zero pause is none.
func pauses(e *env) {
	st := e.release(fleet.Return{Scope: "a", Pause: 2 * time.Second, Reason: retryAfter})
	e.near(2*time.Second, st.Paused, "the pause shared")
	assert.Equal(e.t, retryAfter, st.Reason)
	st = e.release(fleet.Return{Scope: "a", Pause: time.Second, Reason: backoff})
	e.near(2*time.Second, st.Paused, "a shorter pause never shortens one in force")
	assert.Equal(e.t, retryAfter, st.Reason, "nor changes its reason")
	st = e.release(fleet.Return{Scope: "a", Pause: -time.Hour, Reason: backoff})
	e.near(2*time.Second, st.Paused, "a negative pause is none")

	g := e.acquire(fleet.LeaseRequest{Scope: "a", Rate: 1})
	e.near(2*time.Second, g.Paused, "Acquire reports the pause")
	assert.Equal(e.t, retryAfter, g.Reason)
	assert.Equal(e.t, g.Paused, g.Delay, "the first slot is the pause's end")
	e.release(fleet.Return{Scope: "a", Lease: g.ID})

	time.Sleep(2*time.Second + e.slack)
	st = e.release(fleet.Return{Scope: "a"})
	assert.Zero(e.t, st.Paused, "the pause is over")
	assert.Equal(e.t, fleet.Reason(0), st.Reason)
}

// The schedule spaces the fleet's sends at the rate asked, one slot after
// the other; a rate that is not a positive number is no license to send at
// once.
func schedule(e *env) {
	g1 := e.acquire(fleet.LeaseRequest{Scope: "s", Rate: 10})
	g2 := e.acquire(fleet.LeaseRequest{Scope: "s", Rate: 10})
	g3 := e.acquire(fleet.LeaseRequest{Scope: "s", Rate: 10})
	e.near(0, g1.Delay, "the first send goes at once")
	e.near(100*time.Millisecond, g2.Delay, "the second a slot later")
	e.near(200*time.Millisecond, g3.Delay, "the third two slots later")
	assert.Zero(e.t, g2.Paused, "a slot is not a pause")
	assert.NotEqual(e.t, g1.ID, g2.ID, "leases are distinct")

	time.Sleep(300 * time.Millisecond)
	g := e.acquire(fleet.LeaseRequest{Scope: "s", Rate: 10})
	e.near(0, g.Delay, "a schedule that fell behind does not bank sends")
	g = e.acquire(fleet.LeaseRequest{Scope: "s", Rate: 10})
	e.near(100*time.Millisecond, g.Delay, "nor sends two at once")

	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		scope := fmt.Sprintf("zero%v", rate)
		e.acquire(fleet.LeaseRequest{Scope: scope, Rate: rate})
		g := e.acquire(fleet.LeaseRequest{Scope: scope, Rate: 1})
		assert.Greater(e.t, g.Delay, time.Hour, "after a send at rate %v the next slot is far off", rate)
	}
}

// A slot further away than the caller waits (MaxWait) is neither granted
// nor taken from the schedule: however often the fleet asks, the next
// slot stays where it was, and one in reach is granted as before. (Taken,
// each refused ask pushed the schedule a slot further, and a schedule once
// past MaxWait refused the fleet for as long as it asked.) A pause longer
// than MaxWait is refused alike.
func maxWait(e *env) {
	a := fleet.LeaseRequest{Scope: "w", Rate: 0.1, MaxWait: 15 * time.Second}
	g := e.acquire(a)
	require.NotEmpty(e.t, g.ID)
	e.near(0, g.Delay, "the first slot is now")
	g = e.acquire(a)
	require.NotEmpty(e.t, g.ID)
	e.near(10*time.Second, g.Delay, "the second ten seconds on, within MaxWait")
	for range 5 {
		g = e.acquire(a)
		assert.Empty(e.t, g.ID, "the third slot, 20 s on, is past MaxWait")
		e.near(20*time.Second, g.Delay, "the refusal tells the slot's wait, and leaves the schedule")
	}
	b := a
	b.MaxWait = 0
	g = e.acquire(b)
	require.NotEmpty(e.t, g.ID, "a caller with no bound takes it")
	e.near(20*time.Second, g.Delay, "the slot the refusals left where it was")

	e.release(fleet.Return{Scope: "p", Pause: time.Minute, Reason: retryAfter})
	p := fleet.LeaseRequest{Scope: "p", Rate: 10, MaxWait: 30 * time.Second}
	for range 3 {
		g = e.acquire(p)
		assert.Empty(e.t, g.ID, "a pause past MaxWait is no slot")
		e.near(time.Minute, g.Delay, "its wait is the pause's")
	}
	p.MaxWait = 0
	g = e.acquire(p)
	require.NotEmpty(e.t, g.ID)
	e.near(time.Minute, g.Delay, "the first slot after the pause is still its end")
}

// Every store reads a request's numbers alike: a want above 999 is 999, a
// TTL below a second is a second, a ceiling that is not a finite number
// at least 0 is none.
func clamps(e *env) {
	// a lease asked to live for no time lives a second
	for i, d := range []time.Duration{time.Nanosecond, -time.Second} {
		scope := fmt.Sprintf("ttl%d", i)
		a := fleet.LeaseRequest{Scope: scope, Rate: 1e6, Limit: 1, TTL: d}
		require.NotEmpty(e.t, e.acquire(a).ID)
		time.Sleep(100 * time.Millisecond)
		assert.Empty(e.t, e.acquire(a).ID, "a lease with TTL %v lives a second", d)
		a.Process = "p2"
		assert.Equal(e.t, 2, e.acquire(a).Live, "and its process three")
	}
	for _, c := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -3} {
		g := e.acquire(fleet.LeaseRequest{Scope: fmt.Sprintf("ceil%v", c), Rate: 10, Ceiling: c})
		assert.Zero(e.t, g.Ceiling, "a ceiling of %v is none", c)
	}
	// wants: p2 wants 1101 and p1 ever more; read as 999 each, p2's
	// demand is the one it holds and 998, p1's part the other 1101
	const limit = 2100
	a := func(proc string, want int) fleet.Lease {
		return e.acquire(fleet.LeaseRequest{Scope: "want", Process: proc, Rate: 1e9, Limit: limit, Want: want, TTL: time.Minute})
	}
	start := time.Now()
	require.NotEmpty(e.t, a("p2", 1101).ID)
	n := 0
	for ; n < limit && a("p1", 1e6).ID != ""; n++ {
	}
	if time.Since(start) >= fleet.WantFresh-e.slack {
		e.t.Logf("%d leases took %v, beyond p2's want's life: not checked", n, time.Since(start))
		return
	}
	assert.Equal(e.t, 1101, n, "p1's part, with wants above 999 read as 999")
}

// Leases bound the fleet's concurrency; one given back is free; one not
// renewed expires.
func leases(e *env) {
	a := fleet.LeaseRequest{Scope: "c", Rate: 1000, Limit: 2}
	c1, c2, c3 := e.acquire(a), e.acquire(a), e.acquire(a)
	require.NotEmpty(e.t, c1.ID)
	require.NotEmpty(e.t, c2.ID)
	assert.False(e.t, c1.Full, "one lease of two")
	assert.True(e.t, c2.Full, "with the second, the limit is all in use")
	assert.Equal(e.t, []int{1, 2, 0}, []int{c1.Held, c2.Held, c3.Held}, "the leases held with each, none with a refusal")
	assert.Empty(e.t, c3.ID, "the fleet's limit is in use")
	assert.Positive(e.t, c3.Delay, "ask again after a while, not at once")
	e.release(fleet.Return{Scope: "c", Lease: c1.ID})
	c4 := e.acquire(a)
	assert.NotEmpty(e.t, c4.ID, "a lease given back is free")
	assert.Empty(e.t, e.acquire(a).ID)
	e.release(fleet.Return{Scope: "c", Lease: c1.ID}) // twice: no effect
	assert.Empty(e.t, e.acquire(a).ID, "a lease given back twice frees one slot")

	time.Sleep(ttl + e.slack + 10*time.Millisecond)
	assert.NotEmpty(e.t, e.acquire(a).ID, "leases not renewed expire")
	assert.NotEmpty(e.t, e.acquire(a).ID)
	assert.Empty(e.t, e.acquire(a).ID)

	b := e.acquire(fleet.LeaseRequest{Scope: "c", Rate: 1000})
	assert.NotEmpty(e.t, b.ID, "a limit of 0 is no limit")
}

// A lease's holder is the process that asked for it, whatever its name:
// a process holding leases named without its own name still holds them
// for its part, gives them back and renews them by those names.
func holder(e *env) {
	ctx := context.Background()
	a := func(proc, id string, want int) fleet.Lease {
		e.t.Helper()
		return e.acquire(fleet.LeaseRequest{Scope: "h", Process: proc, ID: id, Rate: 1e6, Limit: 4, Want: want})
	}
	require.Equal(e.t, "x0", a("p1", "x0", 1).ID, "the lease takes the name asked for")
	require.Equal(e.t, "x1", a("p1", "x1", 1).ID)
	require.Equal(e.t, "y/0", a("p2", "y/0", 2).ID, "any name")
	assert.Empty(e.t, a("p1", "x2", 1).ID, "p1 holds its part (2 of 4) while p2 wants one more")
	assert.NotEmpty(e.t, a("p2", "y/1", 1).ID, "the slot is p2's")
	time.Sleep(ttl / 2)
	require.NoError(e.t, e.s.Renew(ctx, "h", "p1", []string{"x1"}, ttl))
	e.release(fleet.Return{Scope: "h", Process: "p1", Lease: "x0"})
	assert.NotEmpty(e.t, a("p1", "x3", 1).ID, "x0 given back by its name")
	time.Sleep(ttl/2 + e.slack + 10*time.Millisecond)
	// y/0 and y/1 expired; x1 was renewed and x3 is younger
	assert.NotEmpty(e.t, a("p3", "z0", 3).ID)
	assert.NotEmpty(e.t, a("p3", "z1", 2).ID)
	assert.Empty(e.t, a("p3", "z2", 1).ID, "x1 renewed by its name still counts")
}

// Renew keeps leases alive; a lease that expired stays expired.
func renew(e *env) {
	ctx := context.Background()
	a := fleet.LeaseRequest{Scope: "r", Rate: 1000, Limit: 2}
	r1, r2 := e.acquire(a), e.acquire(a)
	require.NotEmpty(e.t, r1.ID)
	require.NotEmpty(e.t, r2.ID)
	time.Sleep(ttl / 2)
	require.NoError(e.t, e.s.Renew(ctx, "r", "p1", []string{r1.ID}, ttl))
	time.Sleep(ttl/2 + e.slack + 10*time.Millisecond)
	// r2 expired, r1 was renewed; renewing r2 now does not bring it back
	require.NoError(e.t, e.s.Renew(ctx, "r", "p1", []string{r2.ID}, ttl))
	assert.NotEmpty(e.t, e.acquire(a).ID, "the lease not renewed expired, and renewing it late did not bring it back")
	assert.Empty(e.t, e.acquire(a).ID, "the renewed one still counts")
	require.NoError(e.t, e.s.Renew(ctx, "r", "p1", nil, ttl), "renewing nothing is no error")
}

// A process that only renews (a long download) stays live, without its
// old want coming back: the fleet's limit is shared as if it wanted
// nothing more than it holds.
func renewLive(e *env) {
	ctx := context.Background()
	a := fleet.LeaseRequest{Scope: "rl", Process: "p1", Rate: 1e6, Limit: 4, Want: 5}
	g := e.acquire(a)
	require.NotEmpty(e.t, g.ID)
	for range 8 {
		time.Sleep(ttl / 2)
		require.NoError(e.t, e.s.Renew(ctx, "rl", "p1", []string{g.ID}, ttl))
	}
	b := fleet.LeaseRequest{Scope: "rl", Process: "p2", Rate: 1e6, Limit: 4, Want: 3}
	g2 := e.acquire(b)
	assert.Equal(e.t, 2, g2.Live, "p1 renewed for four lease lives: still live")
	assert.NotEmpty(e.t, g2.ID)
	b.Want = 2
	assert.NotEmpty(e.t, e.acquire(b).ID, "p1's want of long ago holds nothing")
	b.Want = 1
	assert.NotEmpty(e.t, e.acquire(b).ID, "p2 takes the three p1 does not hold")
	assert.Empty(e.t, e.acquire(b).ID, "the limit is in use")
}

// The law's state: the first client seeds an empty store, another gets it,
// a state is committed only on the version it derives from.
func lawState(e *env) {
	g := e.acquire(fleet.LeaseRequest{Scope: "d", Rate: 1})
	assert.Nil(e.t, g.State, "no state yet")
	assert.Zero(e.t, g.Version)
	g = e.acquire(fleet.LeaseRequest{Scope: "d", Rate: 1, Seed: []byte("s0")})
	assert.Nil(e.t, g.State, "the seed is the caller's own state")
	v := g.Version
	assert.NotZero(e.t, v, "a state stored has a version")
	g = e.acquire(fleet.LeaseRequest{Scope: "d", Process: "p2", Rate: 1, Seed: []byte("other")})
	assert.Equal(e.t, []byte("s0"), g.State, "another process gets it; a seed does not replace a state")
	assert.Equal(e.t, v, g.Version)
	g = e.acquire(fleet.LeaseRequest{Scope: "d", Process: "p2", Rate: 1, Version: v})
	assert.Nil(e.t, g.State, "a caller up to date gets no state")
	assert.Equal(e.t, v, g.Version)

	st := e.release(fleet.Return{Scope: "d", State: []byte("s1"), Version: v})
	assert.True(e.t, st.Committed)
	assert.Equal(e.t, v+1, st.Version)
	st = e.release(fleet.Return{Scope: "d", Process: "p2", State: []byte("s1'"), Version: v})
	assert.False(e.t, st.Committed, "derived from a version that is gone")
	assert.Equal(e.t, []byte("s1"), st.State, "the fleet's state comes back instead")
	assert.Equal(e.t, v+1, st.Version)
	st = e.release(fleet.Return{Scope: "d"})
	assert.False(e.t, st.Committed, "no state, nothing committed")
	assert.Equal(e.t, v+1, st.Version)

	// a store restarted empty is seeded by a caller that held a version
	// of the state before: it gets its state back as the fleet's, at the
	// fleet's version, not its own
	g = e.acquire(fleet.LeaseRequest{Scope: "re", Rate: 1, Version: 7, Seed: []byte("kept")})
	assert.Equal(e.t, []byte("kept"), g.State, "the seed comes back as the fleet's state")
	assert.NotZero(e.t, g.Version)
	assert.NotEqual(e.t, uint64(7), g.Version, "at the fleet's version")
	st = e.release(fleet.Return{Scope: "re", State: []byte("kept2"), Version: 7})
	assert.False(e.t, st.Committed, "a version from before the restart commits nothing")
	st = e.release(fleet.Return{Scope: "re", State: []byte("kept2"), Version: g.Version})
	assert.True(e.t, st.Committed, "the fleet's version does")

	bin := []byte{0, 1, 2, 0xff, '\n', 0}
	st = e.release(fleet.Return{Scope: "bin", State: bin, Version: 0})
	assert.True(e.t, st.Committed, "a scope with no state commits on version 0")
	g = e.acquire(fleet.LeaseRequest{Scope: "bin", Rate: 1})
	assert.Equal(e.t, bin, g.State, "states are bytes, kept exactly")
}

// A scope's state versions start from a new epoch each time the store
// stores a first state (a new scope, or one lost in a restart): a caller
// that held a version before never finds the new numbering at its
// version, so it neither looks up to date nor commits over the fleet's.
func epoch(e *env) {
	g := e.acquire(fleet.LeaseRequest{Scope: "ep1", Rate: 1e6, Seed: []byte("a0")})
	v := g.Version
	for i := range 3 {
		st := e.release(fleet.Return{Scope: "ep1", State: fmt.Appendf(nil, "a%d", i+1), Version: v})
		require.True(e.t, st.Committed)
		v = st.Version
	}
	time.Sleep(10 * time.Millisecond)
	// the scope as a store restarted empty has it: another process seeds it
	g = e.acquire(fleet.LeaseRequest{Scope: "ep2", Process: "p2", Rate: 1e6, Seed: []byte("b0")})
	w := g.Version
	for i := range 3 {
		st := e.release(fleet.Return{Scope: "ep2", Process: "p2", State: fmt.Appendf(nil, "b%d", i+1), Version: w})
		require.True(e.t, st.Committed)
		w = st.Version
	}
	g = e.acquire(fleet.LeaseRequest{Scope: "ep2", Rate: 1e6, Version: v})
	assert.Equal(e.t, []byte("b3"), g.State, "a version held from before is never the fleet's, though as many commits were made")
	st := e.release(fleet.Return{Scope: "ep2", State: []byte("stale"), Version: v})
	assert.False(e.t, st.Committed, "nor commits")
	assert.Equal(e.t, w, st.Version)

	// a commit on a scope with no state starts an epoch too
	st = e.release(fleet.Return{Scope: "ep3", State: []byte("c0"), Version: 0})
	require.True(e.t, st.Committed)
	assert.Greater(e.t, st.Version, uint64(5), "not 1")
}

// Live counts the processes acquiring on a scope; one that stopped is no
// longer counted after three lease lives.
func live(e *env) {
	assert.Equal(e.t, 1, e.acquire(fleet.LeaseRequest{Scope: "l", Process: "p1", Rate: 1000}).Live)
	assert.Equal(e.t, 2, e.acquire(fleet.LeaseRequest{Scope: "l", Process: "p2", Rate: 1000}).Live)
	assert.Equal(e.t, 2, e.acquire(fleet.LeaseRequest{Scope: "l", Process: "p1", Rate: 1000}).Live, "counted once each")
	assert.Equal(e.t, 1, e.acquire(fleet.LeaseRequest{Scope: "l2", Process: "p3", Rate: 1000}).Live, "per scope")
	time.Sleep(3*ttl + e.slack + 10*time.Millisecond)
	assert.Equal(e.t, 1, e.acquire(fleet.LeaseRequest{Scope: "l", Process: "p2", Rate: 1000}).Live, "p1 stopped")
}

// Times a store reads that are in its future (its clock went back, or
// another program wrote them) count as absent: they neither hold the
// fleet's limit or ceiling nor make a process that asked then live or
// wanting.
func future(e *env) {
	if e.rewind == nil {
		e.t.Skip("the harness cannot rewind the store's clock")
	}
	g := e.acquire(fleet.LeaseRequest{Scope: "fu", Process: "g1", Rate: 1e6, Limit: 100, Ceiling: 1000, Want: 3})
	e.release(fleet.Return{Scope: "fu", Process: "g1", Lease: g.ID})
	g = e.acquire(fleet.LeaseRequest{Scope: "fu", Process: "g2", Rate: 1e6, Limit: 100, Want: 3})
	e.release(fleet.Return{Scope: "fu", Process: "g2", Lease: g.ID})
	e.rewind(e.t, e.s, "fu", time.Hour)
	a := fleet.LeaseRequest{Scope: "fu", Process: "p1", Rate: 10, Limit: 2, Ceiling: 2, Want: 2}
	g = e.acquire(a)
	assert.Equal(e.t, 1, g.Live, "processes seen in the store's future are not live")
	assert.Equal(e.t, 2.0, g.Ceiling, "ceilings asked in the store's future lapse")
	assert.NotEmpty(e.t, g.ID)
	granted := 1
	a.Want = 1
	for range 4 {
		if e.acquire(a).ID != "" {
			granted++
		}
	}
	assert.Equal(e.t, 2, granted, "the limit asked in the store's future lapses; the ghosts' wants hold nothing")
}

// Many goroutines acquiring at once never hold more leases than the limit
// (the store is atomic), and every one gets its own slot.
func concurrent(e *env) {
	const limit, workers, each = 3, 6, 10
	var held, peak, got atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			proc := fmt.Sprintf("w%d", w)
			for n := 0; n < each; {
				g, err := e.s.Lease(ctx, fleet.LeaseRequest{Scope: "k", Process: proc, Rate: 1e6, Limit: limit, TTL: time.Minute})
				if !assert.NoError(e.t, err) {
					return
				}
				if g.ID == "" {
					time.Sleep(g.Delay)
					continue
				}
				h := held.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				held.Add(-1)
				_, err = e.s.Return(ctx, fleet.Return{Scope: "k", Process: proc, Lease: g.ID})
				if !assert.NoError(e.t, err) {
					return
				}
				got.Add(1)
				n++
			}
		}()
	}
	wg.Wait()
	assert.Equal(e.t, int32(workers*each), got.Load())
	assert.LessOrEqual(e.t, peak.Load(), int32(limit), "never more leases held than the limit")
	assert.Equal(e.t, int32(limit), peak.Load(), "the limit is used")
}

// A Notifier tells its subscribers of a pause as it is shared, not of one
// that changes nothing, and no longer once they cancel.
func notifier(e *env) {
	n, ok := e.s.(fleet.Notifier)
	if !ok {
		e.t.Skip("the store is not a Notifier")
	}
	type note struct {
		scope  string
		pause  time.Duration
		reason fleet.Reason
	}
	ch := make(chan note, 8)
	cancel := n.Subscribe(func(m fleet.Notice) {
		if m.Turn == "" {
			ch <- note{m.Scope, m.Pause, m.Reason}
		}
	})
	defer cancel()
	recv := func() (note, bool) {
		select {
		case m := <-ch:
			return m, true
		case <-time.After(2 * time.Second):
			return note{}, false
		}
	}
	e.release(fleet.Return{Scope: "n\n{x}", Pause: 3 * time.Second, Reason: breaker})
	m, ok := recv()
	require.True(e.t, ok, "the pause is announced")
	assert.Equal(e.t, note{"n\n{x}", 3 * time.Second, breaker}, m)
	e.release(fleet.Return{Scope: "n\n{x}", Pause: time.Second, Reason: backoff})
	e.release(fleet.Return{Scope: "n2", Pause: time.Second, Reason: backoff})
	m, ok = recv()
	require.True(e.t, ok)
	assert.Equal(e.t, "n2", m.scope, "a pause that changes nothing is not announced")
	cancel()
	e.release(fleet.Return{Scope: "n3", Pause: time.Second, Reason: backoff})
	select {
	case m := <-ch:
		e.t.Errorf("heard %v after cancel", m)
	case <-time.After(200 * time.Millisecond):
	}
}

// Scope names are data: any bytes, kept apart.
func scopes(e *env) {
	names := []string{"", "{", "}", "a}{b", "a\nb", "a:b", "ünï", "a\x00b", strings.Repeat("x", 4096)}
	for i, name := range names {
		e.release(fleet.Return{Scope: name, Pause: time.Duration(i+1) * time.Minute, Reason: retryAfter})
	}
	for i, name := range names {
		g := e.acquire(fleet.LeaseRequest{Scope: name, Rate: 1})
		e.near(time.Duration(i+1)*time.Minute, g.Paused, fmt.Sprintf("scope %q keeps its own pause", name))
	}
}

// Release counts the fleet's accepted answers over the last second, once
// it has counted for a second (a new scope, or a store restarted empty,
// says -1 until then: a part of a second is no measure of a rate).
func accepted(e *env) {
	// the second counted starts at the first accepted answer, not at a
	// Return that counts none
	e.release(fleet.Return{Scope: "acc0"})
	time.Sleep(1100*time.Millisecond + e.slack)
	st := e.release(fleet.Return{Scope: "acc0", Accepted: true})
	assert.Equal(e.t, -1.0, st.Accepted, "less than a second counted since the first accepted answer")

	st = e.release(fleet.Return{Scope: "acc", Accepted: true})
	assert.Equal(e.t, -1.0, st.Accepted, "less than a second counted")
	time.Sleep(1100*time.Millisecond + e.slack)
	for range 3 {
		st = e.release(fleet.Return{Scope: "acc", Accepted: true})
	}
	assert.Equal(e.t, 3.0, st.Accepted, "three accepted answers in the last second")
	st = e.release(fleet.Return{Scope: "acc", Process: "p2"})
	assert.Equal(e.t, 3.0, st.Accepted, "a release that is not one counts nothing, from any process")
	st = e.release(fleet.Return{Scope: "other", Accepted: true})
	assert.Equal(e.t, -1.0, st.Accepted, "per scope")
	time.Sleep(1100*time.Millisecond + e.slack)
	st = e.release(fleet.Return{Scope: "acc", Accepted: true})
	assert.Equal(e.t, 1.0, st.Accepted, "those of more than a second ago are gone")
}

// The fleet's limit is shared max-min between the processes that want it:
// one that holds more than its part is refused while another wants more,
// even with a slot free; a process alone may use it all; a process that
// wants little gets what it wants and the rest goes to the others; a want
// not asked for again within fleet.WantFresh is no longer held for.
func fair(e *env) {
	a := func(proc string, want int) fleet.Lease {
		e.t.Helper()
		return e.acquire(fleet.LeaseRequest{Scope: "f", Process: proc, Rate: 1e6, Limit: 4, Want: want})
	}
	var p1 []string
	for range 4 {
		g := a("p1", 1)
		require.NotEmpty(e.t, g.ID, "a process alone may use the whole limit")
		p1 = append(p1, g.ID)
	}
	assert.Empty(e.t, a("p2", 3).ID, "the limit is in use")
	e.release(fleet.Return{Scope: "f", Process: "p1", Lease: p1[0]})
	assert.Empty(e.t, a("p1", 1).ID, "p1 holds more than its part (2 of 4) while p2 wants 3: the slot is p2's")
	assert.NotEmpty(e.t, a("p2", 3).ID, "p2 gets the slot owed to it")
	e.release(fleet.Return{Scope: "f", Process: "p1", Lease: p1[1]})
	assert.NotEmpty(e.t, a("p2", 2).ID, "and the next, up to its part")
	e.release(fleet.Return{Scope: "f", Process: "p1", Lease: p1[2]})
	assert.NotEmpty(e.t, a("p1", 1).ID, "p1 under its part (1 of 2) gets the next")

	// max-min: p4 wants one send at a time, p3 takes the rest
	for range 3 {
		require.NotEmpty(e.t, e.acquire(fleet.LeaseRequest{Scope: "m", Process: "p3", Rate: 1e6, Limit: 4, Want: 8}).ID)
	}
	assert.NotEmpty(e.t, e.acquire(fleet.LeaseRequest{Scope: "m", Process: "p4", Rate: 1e6, Limit: 4, Want: 1}).ID, "p4 gets the one it wants")

	// a stale want holds nothing: p6 asked once, then stopped
	for range 2 {
		require.NotEmpty(e.t, e.acquire(fleet.LeaseRequest{Scope: "w", Process: "p5", Rate: 1e6, Limit: 2}).ID)
	}
	assert.Empty(e.t, e.acquire(fleet.LeaseRequest{Scope: "w", Process: "p6", Rate: 1e6, Limit: 2, Want: 2}).ID)
	time.Sleep(fleet.WantFresh + e.slack + 10*time.Millisecond)
	// p5's leases expired meanwhile (a lease lives ttl): it takes both again
	for range 2 {
		assert.NotEmpty(e.t, e.acquire(fleet.LeaseRequest{Scope: "w", Process: "p5", Rate: 1e6, Limit: 2, TTL: time.Minute}).ID, "p6's want went stale")
	}
}

// A lease given back that another process is owed is announced as that
// process's turn (a Notifier), so that it asks at once; one that nobody
// else is owed is not. A caller may name its lease, and give it back by
// that name.
func turns(e *env) {
	a := func(proc, id string, want int) fleet.Lease {
		e.t.Helper()
		return e.acquire(fleet.LeaseRequest{Scope: "t", Process: proc, ID: id, Rate: 1e6, Limit: 2, Want: want, TTL: time.Minute})
	}
	g1, g2 := a("p1", "p1/a", 1), a("p1", "p1/b", 1)
	require.Equal(e.t, "p1/a", g1.ID, "the lease takes the name asked for")
	require.Equal(e.t, "p1/b", g2.ID)
	n, ok := e.s.(fleet.Notifier)
	if !ok {
		e.t.Skip("the store is not a Notifier")
	}
	ch := make(chan fleet.Notice, 8)
	cancel := n.Subscribe(func(m fleet.Notice) {
		if m.Turn != "" {
			ch <- m
		}
	})
	defer cancel()
	recv := func(d time.Duration) (fleet.Notice, bool) {
		select {
		case m := <-ch:
			return m, true
		case <-time.After(d):
			return fleet.Notice{}, false
		}
	}
	e.release(fleet.Return{Scope: "t", Process: "p1", Lease: g1.ID})
	_, heard := recv(200 * time.Millisecond)
	assert.False(e.t, heard, "nobody else wants a lease: no turn")
	require.NotEmpty(e.t, a("p1", "p1/c", 1).ID)
	assert.Empty(e.t, a("p2", "p2/a", 2).ID, "the limit is in use")
	e.release(fleet.Return{Scope: "t", Process: "p1", Lease: "p1/c"})
	m, heard := recv(2 * time.Second)
	require.True(e.t, heard, "p2 is owed the lease p1 gave back")
	assert.Equal(e.t, fleet.Notice{Scope: "t", Turn: "p2"}, m)
	assert.NotEmpty(e.t, a("p2", "p2/b", 2).ID, "and gets it")
}

// Turns go in the order processes were refused: with two waiting, a
// lease given back is the first's, and the second, under its part too, is
// refused it although it is free.
func ahead(e *env) {
	a := func(proc string) fleet.Lease {
		e.t.Helper()
		return e.acquire(fleet.LeaseRequest{Scope: "ah", Process: proc, Rate: 1e9, Limit: 2, TTL: time.Minute})
	}
	g1, g2 := a("p0"), a("p0")
	require.NotEmpty(e.t, g1.ID)
	require.NotEmpty(e.t, g2.ID)
	require.Empty(e.t, a("p1").ID, "the limit is in use")
	require.Empty(e.t, a("p2").ID)
	e.release(fleet.Return{Scope: "ah", Process: "p0", Lease: g1.ID})
	assert.Empty(e.t, a("p2").ID, "p1, refused first, is owed the lease")
	assert.NotEmpty(e.t, a("p1").ID, "and gets it")
	e.release(fleet.Return{Scope: "ah", Process: "p0", Lease: g2.ID})
	assert.NotEmpty(e.t, a("p2").ID, "then p2 its turn")
}

// The queue of refused processes holds 256 of them; a process refused
// while it is full takes the place of the one that asked least lately,
// so that it is served in its turn instead of waiting behind a queue that
// never lets it in.
func queueCap(e *env) {
	const n = 257
	a := func(proc string) fleet.Lease {
		return e.acquire(fleet.LeaseRequest{Scope: "qc", Process: proc, Rate: 1e9, Limit: 1, TTL: time.Minute})
	}
	g := a("p0")
	require.NotEmpty(e.t, g.ID)
	for i := range n {
		require.Empty(e.t, a(fmt.Sprintf("q%d", i)).ID, "the limit is in use")
	}
	e.release(fleet.Return{Scope: "qc", Process: "p0", Lease: g.ID})
	for i := 1; i < n; i++ {
		proc := fmt.Sprintf("q%d", i)
		g := a(proc)
		if !assert.NotEmpty(e.t, g.ID, "%s's turn (q0 left the queue for q%d)", proc, n-1) {
			return
		}
		e.release(fleet.Return{Scope: "qc", Process: proc, Lease: g.ID})
	}
}

// The fleet's configured ceiling is the highest its processes asked with
// lately, none if one asked with none: the schedule spaces the fleet's
// sends by it, and a process with a lower ceiling of its own (which it
// keeps to itself) leaves the rest to the others.
func ceilings(e *env) {
	a := func(proc string, ceil float64) fleet.Lease {
		e.t.Helper()
		return e.acquire(fleet.LeaseRequest{Scope: "cl", Process: proc, Rate: 10, Ceiling: ceil})
	}
	g := a("p1", 2)
	assert.Equal(e.t, 2.0, g.Ceiling, "alone, a process's ceiling is the fleet's")
	g = a("p1", 2)
	e.near(500*time.Millisecond, g.Delay, "and spaces the schedule")
	time.Sleep(time.Second)
	g = a("p2", 4)
	assert.Equal(e.t, 4.0, g.Ceiling, "the highest ceiling asked is the fleet's")
	g = a("p2", 4)
	e.near(250*time.Millisecond, g.Delay, "spaced by the higher ceiling")
	g = a("p3", 0)
	assert.Zero(e.t, g.Ceiling, "a process with no ceiling lifts the fleet's")
	time.Sleep(time.Second)
	a("p3", 0)
	g = a("p1", 2)
	e.near(100*time.Millisecond, g.Delay, "the schedule goes at the rate asked")
	time.Sleep(3*ttl + e.slack + 10*time.Millisecond)
	g = a("p1", 2)
	assert.Equal(e.t, 2.0, g.Ceiling, "the others' ceilings lapse when they are no longer live")
}

// A ceiling is kept and returned exactly, whatever its digits.
func exactCeiling(e *env) {
	c := math.Nextafter(3, 0) // 2.9999999999999996: 14 digits would make it 3
	for range 2 {
		g := e.acquire(fleet.LeaseRequest{Scope: "xc", Rate: 10, Ceiling: c})
		assert.Equal(e.t, c, g.Ceiling)
	}
	g := e.acquire(fleet.LeaseRequest{Scope: "xc", Process: "p2", Rate: 10, Ceiling: 2.5})
	assert.Equal(e.t, c, g.Ceiling, "a lower ceiling leaves the highest live one")
}
