package polite_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/fleet"
	"github.com/colly-polite/polite/internal/hook"
)

// A claim takes the scope's next send slot without waiting; the next
// acquire on the scope uses it at once; Release after that does nothing,
// and Release of an unused claim gives the slot back.
func TestClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Default: polite.Rule{Rate: 1, InitialRate: 1}})
		require.NoError(t, err)
		req, _ := http.NewRequest("GET", "http://a.test/", nil)
		ctx := context.Background()

		cl, w, err := hook.Reserve(ctrl, req)
		require.NoError(t, err)
		require.True(t, cl.Held(), "the scope can send now")
		assert.Zero(t, w)
		_, w, err = hook.Reserve(ctrl, req)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Second), w.Until, 10*time.Millisecond, "the pacer's next send")

		start := time.Now()
		p, err := ctrl.Acquire(ctx, req)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "the claimed slot, at once")
		cl.Cancel() // used: nothing happens
		snap, _ := ctrl.Snapshot("a.test")
		assert.Equal(t, 1, snap.InFlight)
		p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)

		time.Sleep(time.Second)
		cl, _, _ = hook.Reserve(ctrl, req)
		require.True(t, cl.Held())
		snap, _ = ctrl.Snapshot("a.test")
		assert.Equal(t, 1, snap.InFlight, "a claim holds a slot")
		cl.Cancel()
		cl.Cancel()
		snap, _ = ctrl.Snapshot("a.test")
		assert.Zero(t, snap.InFlight, "given back, once")
	})
}

// A claim never sends into a pause: if the scope is paused after the
// claim, the request waits for the pause like any other.
func TestClaimHonoursLaterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{})
		require.NoError(t, err)
		req, _ := http.NewRequest("GET", "http://a.test/", nil)
		ctx := context.Background()
		p, err := ctrl.Acquire(ctx, req)
		require.NoError(t, err)
		_, w, _ := hook.Reserve(ctrl, req)
		time.Sleep(time.Until(w.Until)) // the pacer's next send
		cl, _, _ := hook.Reserve(ctrl, req)
		require.True(t, cl.Held())
		h := http.Header{}
		h.Set("Retry-After", "5")
		p.Record(&http.Response{StatusCode: 429, Header: h}, nil) // pauses the scope 5 s
		start := time.Now()
		p, err = ctrl.Acquire(ctx, req)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 5*time.Second, "waited for the pause")
		p.Drop()
		cl.Cancel()
		snap, _ := ctrl.Snapshot("a.test")
		assert.Zero(t, snap.InFlight)
		_, w, err = hook.Reserve(ctrl, req)
		require.NoError(t, err)
		assert.False(t, w.Notify || w.Probe)
	})
}

// What a scope that cannot be claimed waits for: a free slot (Notify says
// when one is), robots.txt (a probe first), or a refusal.
func TestClaimWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Default: polite.Rule{InitialRate: 1000, StartConcurrency: 1, MaxConcurrency: 1}})
		require.NoError(t, err)
		var heard atomic.Int64
		stop := hook.Notify(ctrl, func(scope string) {
			if scope == "a.test" {
				heard.Add(1)
			}
		})
		req, _ := http.NewRequest("GET", "http://a.test/", nil)
		p, err := ctrl.Acquire(context.Background(), req)
		require.NoError(t, err)
		cl, w, err := hook.Reserve(ctrl, req)
		require.NoError(t, err)
		assert.False(t, cl.Held())
		assert.True(t, w.Notify, "the one slot is taken")
		p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
		assert.Equal(t, int64(1), heard.Load(), "told when it ends")
		stop()
		p, _ = ctrl.Acquire(context.Background(), req)
		p.Drop()
		assert.Equal(t, int64(1), heard.Load(), "stopped")

		robots, err := polite.New(polite.Config{Robots: new(true)})
		require.NoError(t, err)
		_, w, err = hook.Reserve(robots, req)
		require.NoError(t, err)
		assert.True(t, w.Probe, "robots.txt unknown: one request first")

		_, _, err = hook.Reserve(ctrl, &http.Request{})
		assert.Error(t, err, "no URL")
	})
}

// leaseStore counts the fleet's leases taken and given back.
type leaseStore struct {
	fleet.MemoryStore
	taken, back atomic.Int64
}

func (s *leaseStore) Lease(ctx context.Context, a fleet.LeaseRequest) (fleet.Lease, error) {
	g, err := s.MemoryStore.Lease(ctx, a)
	if g.ID != "" {
		s.taken.Add(1)
	}
	return g, err
}

func (s *leaseStore) Return(ctx context.Context, r fleet.Return) (fleet.Settlement, error) {
	if r.Lease != "" {
		s.back.Add(1)
	}
	return s.MemoryStore.Return(ctx, r)
}

// twoInAFleet is two controllers sharing a store (as two processes would),
// each with a concurrency limit of limit and a high rate, and a request of
// their scope.
func twoInAFleet(t *testing.T, limit int) (*leaseStore, *polite.Controller, *polite.Controller, *http.Request) {
	store := &leaseStore{}
	rule := polite.Config{Default: polite.Rule{InitialRate: 1000, StartConcurrency: limit, MaxConcurrency: limit}}
	rule.Store = store
	a, err := polite.New(rule)
	require.NoError(t, err)
	b, err := polite.New(rule)
	require.NoError(t, err)
	req, err := http.NewRequest("GET", "http://a.test/", nil)
	require.NoError(t, err)
	return store, a, b, req
}

// acquireWaits starts an Acquire of req on c that must still wait after a
// second (the fleet's limit in use elsewhere), and returns what gives its
// result once it ends.
func acquireWaits(t *testing.T, c *polite.Controller, req *http.Request) (sent func() (polite.Permit, error)) {
	t.Helper()
	var (
		p   polite.Permit
		err error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p, err = c.Acquire(context.Background(), req)
	}()
	time.Sleep(time.Second)
	synctest.Wait()
	select {
	case <-done:
		t.Fatal("the request went past the fleet's limit")
	default:
	}
	return func() (polite.Permit, error) {
		<-done
		return p, err
	}
}

// With a Store, a reservation holds this process's slot only: reserving
// does no I/O. The fleet's lease and its schedule's slot are taken when the
// reserved request is sent, as for any request; while the fleet's
// concurrency is in use elsewhere, the reserved request waits for it (its local slot given
// back meanwhile) and never sends past the fleet.
func TestReserveWithStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, a, b, req := twoInAFleet(t, 1)
		ctx := context.Background()

		held, err := b.Acquire(ctx, req) // the fleet's one slot, in the other process
		require.NoError(t, err)
		require.Equal(t, int64(1), store.taken.Load())

		cl, _, err := hook.Reserve(a, req)
		require.NoError(t, err)
		require.True(t, cl.Held(), "this process's slot is free: Claim does not ask the store")
		assert.Equal(t, int64(1), store.taken.Load(), "Claim took no lease")

		sent := acquireWaits(t, a, req) // the claimed request
		held.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
		p, err := sent()
		require.NoError(t, err)
		assert.Equal(t, int64(2), store.taken.Load(), "the claimed request took the fleet's lease when sent")
		snap, _ := a.Snapshot("a.test")
		assert.Equal(t, 1, snap.InFlight)
		p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
		cl.Cancel() // used or given back: nothing left to release
		snap, _ = a.Snapshot("a.test")
		assert.Zero(t, snap.InFlight)
		assert.Equal(t, store.taken.Load(), store.back.Load(), "every lease given back")

		// a claim used at once, the fleet free: one lease, given back
		time.Sleep(time.Second)
		cl, _, err = hook.Reserve(a, req)
		require.NoError(t, err)
		require.True(t, cl.Held())
		start := time.Now()
		p, err = a.Acquire(ctx, req)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "no wait: the fleet's slot is free and its schedule due")
		p.Record(&http.Response{StatusCode: 200, Header: http.Header{}}, nil)
		cl.Cancel()
		assert.Equal(t, int64(3), store.taken.Load())
		assert.Equal(t, store.taken.Load(), store.back.Load())
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	})
}

// In a fleet, a scope with a send waiting for the fleet's lease (or its
// slot) hands out no other: a frontier's worker given one would wait there
// too, held from the scopes that could use it. Here this process may send
// (its own limit is 2, one in flight) but the fleet's two leases are held
// by another process. Once the waiting send goes, the scope is ready again
// and says so (Notify).
func TestReserveWaitsBehindTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, a, b, req := twoInAFleet(t, 2)
		ctx := context.Background()
		ok := &http.Response{StatusCode: 200, Header: http.Header{}}

		var held [2]polite.Permit
		var err error
		for i := range held {
			held[i], err = b.Acquire(ctx, req)
			require.NoError(t, err)
			time.Sleep(time.Millisecond) // the next slot of the schedule
		}
		var told atomic.Int32
		stop := hook.Notify(a, func(scope string) {
			if scope == "a.test" {
				told.Add(1)
			}
		})
		defer stop()

		cl, _, err := hook.Reserve(a, req)
		require.NoError(t, err)
		require.True(t, cl.Held())
		_, w, err := hook.Reserve(a, req)
		require.NoError(t, err)
		assert.True(t, w.Notify, "one reserved and not sent yet: it will wait for the fleet")

		sent := acquireWaits(t, a, req)
		second, w, err := hook.Reserve(a, req)
		require.NoError(t, err)
		assert.False(t, second.Held(), "this process's limit has room, the fleet's has none")
		assert.True(t, w.Notify, "ask again when told")

		told.Store(0)
		held[0].Record(ok, nil)
		p, err := sent()
		require.NoError(t, err)
		assert.Positive(t, told.Load(), "told once the waiting send went")
		cl.Cancel()
		second, _, err = hook.Reserve(a, req)
		require.NoError(t, err)
		assert.True(t, second.Held(), "none waits for the fleet: the scope hands out again")
		second.Cancel()

		p.Record(ok, nil)
		held[1].Record(ok, nil)
		assert.Equal(t, store.taken.Load(), store.back.Load(), "every lease given back")
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	})
}

// A claim given back unused gives back the controller-wide ceiling's slot
// too (Config.GlobalRate), as it gives back the scope's: under a global
// 1/s, a claim on one host cancelled at once leaves the next second's
// send to any host. Before, the global slot stayed taken, and the next
// host waited a whole interval for a send that never went.
func TestClaimCancelGivesBackTheGlobalSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{GlobalRate: 1, Robots: new(false)})
		require.NoError(t, err)
		a, _ := http.NewRequest("GET", "http://a.test/", nil)
		b, _ := http.NewRequest("GET", "http://b.test/", nil)
		cl, _, err := hook.Reserve(ctrl, a)
		require.NoError(t, err)
		require.True(t, cl.Held())
		cl.Cancel()
		start := time.Now()
		p, err := ctrl.Acquire(context.Background(), b)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "the global slot given back goes to b.test at once")
		p.Drop()
	})
}

// okAnswer is a 200 with no headers.
func okAnswer() *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
}

// getReq is a GET of u.
func getReq(u string) *http.Request { r, _ := http.NewRequest(http.MethodGet, u, nil); return r }

// A claim used later than it was taken counts from when it is used: under
// a MinGap of 1 s, a claim taken at 0 and used at 0.9 s leaves the next
// send a second after 0.9 s (before, it went at 1 s: 100 ms apart).
func TestClaimUsedLateCountsFromItsUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Robots: new(false), Default: polite.Rule{MinGap: time.Second}})
		require.NoError(t, err)
		ctx := context.Background()
		cl, _, err := hook.Reserve(ctrl, getReq("http://a.test/1"))
		require.NoError(t, err)
		require.True(t, cl.Held())
		time.Sleep(900 * time.Millisecond) // its worker is slow to pick it up
		p1, err := ctrl.Acquire(ctx, getReq("http://a.test/1"))
		require.NoError(t, err)
		first := time.Now()
		p1.Record(okAnswer(), nil)
		p2, err := ctrl.Acquire(ctx, getReq("http://a.test/2"))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(first), time.Second, "MinGap from the claim's use")
		p2.Record(okAnswer(), nil)
	})
}

// A claim is checked against the ceilings in force when it is used or
// given back. One scope spans a.test (Rate 10) and b.test (MinGap 1 s); a
// claim is taken under Rate 10 100 ms after the scope's last send, and
// b.test's rule joins the scope 20 ms later. Used by b.test's request, it
// does not go then (before, 120 ms after the last send); given back (a
// cache hit), it leaves b.test's send a whole MinGap after the last one
// made (before, the schedule gave back the new, longer interval from the
// claim's slot: 150 ms after it).
func TestClaimUnderAStricterCeiling(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(map[bool]string{false: "used", true: "given back"}[cancel], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctrl, err := polite.New(polite.Config{
					Robots:  new(false),
					Scope:   func(*http.Request) string { return "one" },
					Default: polite.Rule{Rate: 10, InitialRate: 10},
					Rules:   []polite.Rule{{Domain: "b.test", MinGap: time.Second}},
				})
				require.NoError(t, err)
				ctx := context.Background()
				p, err := ctrl.Acquire(ctx, getReq("http://a.test/0"))
				require.NoError(t, err)
				first := time.Now()
				p.Record(okAnswer(), nil)
				time.Sleep(100 * time.Millisecond)
				cl, _, _ := hook.Reserve(ctrl, getReq("http://a.test/1"))
				require.True(t, cl.Held())
				time.Sleep(20 * time.Millisecond)
				if cancel {
					_, _, _ = hook.Reserve(ctrl, getReq("http://b.test/x")) // b.test's rule joins the scope
					time.Sleep(30 * time.Millisecond)
					cl.Cancel() // the claimed request never left
				}
				p, err = ctrl.Acquire(ctx, getReq("http://b.test/x"))
				require.NoError(t, err)
				assert.GreaterOrEqual(t, time.Since(first), time.Second, "b.test's MinGap from the scope's last send")
				p.Record(okAnswer(), nil)
			})
		})
	}
}

// A claim taken before a pause and used after it is spaced from its use:
// at 1/s, a 429 saying Retry-After 5 while a claim waits for its worker,
// the claim used 200 ms after the pause, the next send a second after it.
func TestClaimUsedAfterAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Robots: new(false), Jitter: -1, Default: polite.Rule{Rate: 1, InitialRate: 1}})
		require.NoError(t, err)
		ctx := context.Background()
		p0, err := ctrl.Acquire(ctx, getReq("http://a.test/0"))
		require.NoError(t, err)
		time.Sleep(time.Second)
		r1, _, _ := hook.Reserve(ctrl, getReq("http://a.test/1"))
		require.True(t, r1.Held())
		time.Sleep(100 * time.Millisecond)
		h := http.Header{}
		h.Set("Retry-After", "5")
		p0.Record(&http.Response{StatusCode: http.StatusTooManyRequests, Header: h}, nil)
		snap, _ := ctrl.Snapshot("a.test")
		time.Sleep(time.Until(snap.PausedUntil) + 200*time.Millisecond)
		p1, err := ctrl.Acquire(ctx, getReq("http://a.test/1"))
		require.NoError(t, err)
		used := time.Now()
		p1.Record(okAnswer(), nil)
		p2, err := ctrl.Acquire(ctx, getReq("http://a.test/2"))
		require.NoError(t, err)
		snap, _ = ctrl.Snapshot("a.test")
		assert.GreaterOrEqual(t, time.Since(used), time.Duration(float64(time.Second)/snap.Rate)-time.Millisecond,
			"an interval of the rate in force after the claim's use")
		p2.Record(okAnswer(), nil)
	})
}

// A frontier told to wait for a scope's line (Reserve's Notify) hears when
// the line empties because its waiter gave up, not only when one sends:
// before, it was never told, and the scope sat idle.
func TestNotifiedWhenAWaiterLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := polite.New(polite.Config{Robots: new(false), Default: polite.Rule{Rate: 1, InitialRate: 1}})
		require.NoError(t, err)
		var notes atomic.Int32
		stop := hook.Notify(ctrl, func(string) { notes.Add(1) })
		defer stop()
		p, err := ctrl.Acquire(context.Background(), getReq("http://a.test/0"))
		require.NoError(t, err)
		p.Record(okAnswer(), nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { _, err := ctrl.Acquire(ctx, getReq("http://a.test/w")); done <- err }()
		time.Sleep(100 * time.Millisecond)
		cl, w, _ := hook.Reserve(ctrl, getReq("http://a.test/f"))
		require.False(t, cl.Held())
		require.True(t, w.Notify, "behind the line")
		before := notes.Load()
		cancel()
		require.Error(t, <-done)
		assert.Greater(t, notes.Load(), before, "the line moved: the frontier is told")
	})
}
