package fleetclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/colly-polite/polite/fleet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// local is a scope as the client sees it, with a rate (setRate moves it)
// and a fixed limit.
type local struct {
	rate  float64
	limit int
	mu    sync.Mutex
	alone bool
}

func (l *local) Ask(time.Duration) Ask { return Ask{Rate: l.Rate(), Limit: l.limit} }
func (l *local) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}
func (l *local) setRate(r float64) {
	l.mu.Lock()
	l.rate = r
	l.mu.Unlock()
}
func (l *local) Granted([]byte, uint64, int, float64, bool) {
	l.mu.Lock()
	l.alone = false
	l.mu.Unlock()
}
func (l *local) Random() float64                                   { return 0.5 }
func (l *local) Waited(time.Duration) bool                         { return false }
func (l *local) Settled(fleet.Settlement, []byte) ([]byte, uint64) { return nil, 0 }
func (l *local) Alone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.alone
	l.alone = true
	return !was
}

// faulty is a MemoryStore that, while broken, does the call and then
// fails it, as a store whose reply is lost (a timeout, garbage): the
// lease taken or kept there is one the client does not know about.
type faulty struct {
	fleet.MemoryStore
	broken atomic.Bool
}

var errLost = errors.New("reply lost")

func (f *faulty) Lease(ctx context.Context, r fleet.LeaseRequest) (fleet.Lease, error) {
	g, err := f.MemoryStore.Lease(ctx, r)
	if f.broken.Load() {
		return fleet.Lease{}, errLost
	}
	return g, err
}

func (f *faulty) Return(ctx context.Context, r fleet.Return) (fleet.Settlement, error) {
	if f.broken.Load() {
		return fleet.Settlement{}, errLost // the lease stays taken there
	}
	return f.MemoryStore.Return(ctx, r)
}

func newClient(store fleet.Store, ttl ...time.Duration) *Client {
	start := time.Now()
	cfg := Config{MaxPause: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Duration { return time.Since(start) }}
	if len(ttl) > 0 {
		cfg.TTL = ttl[0]
	}
	return New(store, cfg)
}

// listening is a client of store that listens to its notices (turns,
// pauses), as a Controller's does.
func listening(store fleet.Store) *Client {
	c := newClient(store)
	c.Subscribe(func(string, time.Duration, fleet.Reason) {})
	return c
}

// held counts the leases the store holds on scope, by asking for them
// all as another process with a limit of n, once the demand of every
// process has gone stale (a process that wants is owed a free lease
// before the probe, which would count it as held).
func held(t *testing.T, s fleet.Store, scope string, n int) int {
	t.Helper()
	time.Sleep(fleet.WantFresh)
	free := 0
	for range n {
		g, err := s.Lease(context.Background(), fleet.LeaseRequest{Scope: scope, Process: "probe", Rate: 1e6, Limit: n, Want: n, TTL: time.Minute})
		require.NoError(t, err)
		if g.ID != "" {
			free++
			_, err := s.Return(context.Background(), fleet.Return{Scope: scope, Process: "probe", Lease: g.ID})
			require.NoError(t, err)
		}
	}
	return n - free
}

// A lease the store took or kept while its replies were lost is given
// back as soon as the store answers again, not left to its TTL (a minute
// here): the fleet's concurrency is whole again at once.
func TestLostLeasesGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &faulty{}
		c := newClient(store, time.Minute)
		defer c.Close()
		l := &local{rate: 1000, limit: 2}
		ctx := context.Background()

		send, err := c.Before(ctx, "a", l, false)
		require.NoError(t, err)
		require.NotEmpty(t, send.Lease)
		store.broken.Store(true)
		c.After("a", l, Report{Lease: send.Lease}) // the return is lost
		_, err = c.Before(ctx, "a", l, false)      // skipped: the store is down
		require.NoError(t, err)
		time.Sleep(storeRetryMin)
		_, err = c.Before(ctx, "a", l, false) // a lease taken, its reply lost
		assert.ErrorIs(t, err, ErrAgain)
		assert.Equal(t, 2, held(t, &store.MemoryStore, "a", 2), "the store holds two leases nobody uses")

		store.broken.Store(false)
		time.Sleep(storeRetryMax)
		healed := time.Now()
		send, err = c.Before(ctx, "a", l, false)
		require.NoError(t, err, "the store answers again")
		assert.Less(t, time.Since(healed), 100*time.Millisecond, "the lost leases were back within a try or two")
		c.After("a", l, Report{Lease: send.Lease})
		synctest.Wait() // the owed leases go back in the background
		assert.Zero(t, held(t, &store.MemoryStore, "a", 2), "both lost leases were given back, long before their TTL")
	})
}

// A lease not renewed lives DefaultTTL: a process that dies (or a return
// that never comes) holds a slot that long, not a minute.
func TestLeaseLifeIsShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		c := newClient(store)
		l := &local{rate: 1000, limit: 1}
		send, err := c.Before(context.Background(), "a", l, false)
		require.NoError(t, err)
		require.NotEmpty(t, send.Lease)
		time.Sleep(10 * DefaultTTL)
		assert.Equal(t, 1, held(t, store, "a", 1), "renewed while held")
		c.drop(send.Lease) // the process stops renewing: it died
		time.Sleep(DefaultTTL + time.Millisecond)
		assert.Zero(t, held(t, store, "a", 1), "gone after its TTL")
		c.Close()
	})
}

// A process refused because another holds the fleet's concurrency asks
// again the moment a lease it is owed comes back (the store announces its
// turn), not at its next try (every 10 ms here); its other sends wait
// behind its asker, and each lease it gets or gives back hands the turn to
// the next.
func TestTurnWakesTheAsker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		a, b := listening(store), listening(store)
		defer a.Close()
		defer b.Close()
		l := &local{rate: 1000, limit: 1}
		ctx := context.Background()
		first, err := a.Before(ctx, "s", l, false)
		require.NoError(t, err)

		const hold = 105 * time.Millisecond // off the 10-ms grid of b's tries
		start := time.Now()
		var mu sync.Mutex
		var got []time.Duration
		var order []int
		var wg sync.WaitGroup
		send := func(i int) {
			s, err := b.Before(ctx, "s", l, false)
			require.NoError(t, err)
			mu.Lock()
			got = append(got, time.Since(start))
			order = append(order, i)
			mu.Unlock()
			time.Sleep(hold)
			b.After("s", l, Report{Lease: s.Lease})
		}
		for i := range 3 {
			wg.Go(func() { send(i) })
			synctest.Wait()
		}
		time.Sleep(hold)
		a.After("s", l, Report{Lease: first.Lease})
		wg.Wait()
		assert.Equal(t, []time.Duration{hold, 2 * hold, 3 * hold}, got,
			"b's sends took the lease in turn, each the moment the last came back")
		assert.Equal(t, []int{0, 1, 2}, order, "in the order they asked")
	})
}

// A send is paced (the rate was its bottleneck) when the fleet's schedule
// held it back, or when the local pacer held it and it waited for no turn
// of the fleet's concurrency. A slot spaced at a rate the fleet doubled
// while the send waited for it is no evidence that the new rate binds:
// read as such, slow start doubled a fleet's rate round after round while
// its schedule ran seconds behind. A probe's step is not such a rise. A
// send that waited for a turn was held by the concurrency, whatever the
// pacer did.
func TestPacedIsTheRatesBottleneck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		a, b := listening(store), listening(store)
		defer a.Close()
		defer b.Close()
		ctx := context.Background()
		l := &local{rate: 10, limit: 4} // a slot every 100 ms

		first, err := a.Before(ctx, "s", l, false)
		require.NoError(t, err)
		assert.False(t, first.Paced, "sent at once, nothing held it")
		assert.False(t, first.Scheduled)
		second, err := a.Before(ctx, "s", l, false)
		require.NoError(t, err)
		assert.True(t, second.Scheduled)
		assert.True(t, second.Paced, "the fleet's schedule held it 100 ms, at the rate in force")

		// the fleet's rate moves to rate while a send waits for its slot
		waitWhile := func(rate float64, paced bool) Send {
			var s Send
			done := make(chan struct{})
			go func() {
				defer close(done)
				var err error
				s, err = a.Before(ctx, "s", l, paced)
				assert.NoError(t, err)
			}()
			synctest.Wait() // it waits for its slot
			l.setRate(rate)
			<-done
			assert.True(t, s.Scheduled)
			return s
		}
		probed := waitWhile(10.3, false) // a probe's first step meanwhile
		assert.True(t, probed.Paced, "a probe's step: its slot was spaced near enough")
		doubled := waitWhile(20.6, true) // slow start doubles it meanwhile
		assert.False(t, doubled.Paced, "its slot was spaced at 10.3/s: no evidence that 20.6/s binds, whatever the pacer did")
		for _, s := range []Send{first, second, probed, doubled} {
			a.After("s", l, Report{Lease: s.Lease})
		}

		// the fleet's concurrency: one lease, a's
		one := &local{rate: 1000, limit: 1}
		time.Sleep(time.Second)
		held, err := a.Before(ctx, "t", one, false)
		require.NoError(t, err)
		go func() {
			time.Sleep(50 * time.Millisecond)
			a.After("t", one, Report{Lease: held.Lease})
		}()
		// two of b's sends: the first asks for b, the second waits behind it
		var behind Send
		done := make(chan struct{})
		go func() {
			defer close(done)
			synctest.Wait() // b's first send asks, refused
			var err error
			behind, err = b.Before(ctx, "t", one, true)
			assert.NoError(t, err)
			b.After("t", one, Report{Lease: behind.Lease})
		}()
		turned, err := b.Before(ctx, "t", one, true)
		require.NoError(t, err)
		assert.False(t, turned.Paced, "the pacer held it, but it waited for a turn of the concurrency")
		time.Sleep(50 * time.Millisecond)
		b.After("t", one, Report{Lease: turned.Lease})
		<-done
		assert.False(t, behind.Scheduled)
		assert.False(t, behind.Paced, "it waited behind its process's asker, then for its turn: the concurrency held it")
		time.Sleep(time.Second)
		alone, err := b.Before(ctx, "t", one, true)
		require.NoError(t, err)
		assert.False(t, alone.Scheduled)
		assert.True(t, alone.Paced, "the pacer held it and nothing else did")
		b.After("t", one, Report{Lease: alone.Lease})
	})
}

// slowReplies is a MemoryStore whose replies take delay to come back
// (the call is done at once, as on a server whose answers are late).
type slowReplies struct {
	fleet.MemoryStore
	leaseDelay, renewDelay, returnDelay time.Duration
	lostRenews                          atomic.Int32 // renewals held until their deadline, never done
}

func (s *slowReplies) Lease(ctx context.Context, r fleet.LeaseRequest) (fleet.Lease, error) {
	g, err := s.MemoryStore.Lease(ctx, r)
	return g, wait(ctx, s.leaseDelay, err)
}

func (s *slowReplies) Renew(ctx context.Context, scope, process string, leases []string, ttl time.Duration) error {
	if s.lostRenews.Add(-1) >= 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	err := s.MemoryStore.Renew(ctx, scope, process, leases, ttl)
	return wait(ctx, s.renewDelay, err)
}

func (s *slowReplies) Return(ctx context.Context, r fleet.Return) (fleet.Settlement, error) {
	st, err := s.MemoryStore.Return(ctx, r)
	return st, wait(ctx, s.returnDelay, err)
}

// wait holds a reply d, or fails it when ctx ends first.
func wait(ctx context.Context, d time.Duration, err error) error {
	if d <= 0 {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A turn the store announces while the reply that refused the process is
// still on its way is not lost: the send asks again at once, not after its
// wait (a second at this rate), while the slot the store keeps for it
// stays idle.
func TestTurnBeforeTheRefusalArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &slowReplies{leaseDelay: 50 * time.Millisecond}
		a, b := listening(store), listening(store)
		defer a.Close()
		defer b.Close()
		l := &local{rate: 2, limit: 1} // a send every 500 ms
		ctx := context.Background()
		first, err := a.Before(ctx, "s", l, false)
		require.NoError(t, err)
		start := time.Now() // a's reply came 50 ms after the store gave it the slot at 0
		time.AfterFunc(10*time.Millisecond, func() { a.After("s", l, Report{Lease: first.Lease}) })
		send, err := b.Before(ctx, "s", l, false)
		require.NoError(t, err)
		require.NotEmpty(t, send.Lease)
		// (from start) refused at 0, its reply back at 50 ms; the turn
		// announced at 10 ms; asked again at 50 ms, given the slot at
		// 450 ms from then (500 ms after a's), sent at 500 ms. Had the
		// turn been lost, b would wait its 500 ms first and send at 600 ms.
		assert.Equal(t, 500*time.Millisecond, time.Since(start), "asked again as soon as the refusal arrived")
		b.After("s", l, Report{Lease: send.Lease})
	})
}

// A renewal whose call is slow, or lost, does not push the next one past
// the lease's life: each starts a third of the life after the last started,
// and the one after a lost renewal goes although that failure marked the
// store down. A lease held for ten lives is never lost, whether each
// renewal takes the whole second a store call may take (a third of the
// life) or the first is lost.
func TestSlowRenewalsKeepTheLease(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(map[bool]string{false: "slow", true: "lost"}[lost], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &slowReplies{}
				if lost {
					store.lostRenews.Store(1)
				} else {
					store.renewDelay = storeTimeout - time.Millisecond
				}
				c := newClient(store)
				defer c.Close()
				l := &local{rate: 1000, limit: 1}
				send, err := c.Before(context.Background(), "a", l, false)
				require.NoError(t, err)
				for range 10 {
					time.Sleep(DefaultTTL)
					assert.Equal(t, 1, held(t, &store.MemoryStore, "a", 1), "still held")
				}
				c.After("a", l, Report{Lease: send.Lease})
				time.Sleep(storeTimeout) // the renewal under way ends
			})
		})
	}
}

// Close gives back what it holds and owes within a second, whatever the
// store does: a store that answers each call, but 0.9 s late, does not
// hold it for each lease owed.
func TestCloseIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &slowReplies{}
		store.leaseDelay = 2 * storeTimeout // each lease taken there, its reply too late: owed
		c := newClient(store, time.Minute)
		l := &local{rate: 1000, limit: 100}
		ctx := context.Background()
		for range 5 {
			_, err := c.Before(ctx, "a", l, false)
			require.ErrorIs(t, err, ErrAgain)
			time.Sleep(storeRetryMax)
		}
		c.mu.Lock()
		owed := len(c.owed)
		c.mu.Unlock()
		require.Equal(t, 5, owed)
		store.leaseDelay, store.returnDelay = 0, 900*time.Millisecond // nothing under way
		// the store answers again: the owed leases start going back, one
		// late reply each, while the process closes
		send, err := c.Before(ctx, "a", l, false)
		require.NoError(t, err)
		require.NotEmpty(t, send.Lease)
		start := time.Now()
		c.Close()
		assert.LessOrEqual(t, time.Since(start), storeTimeout, "Close within a second")
		time.Sleep(2 * storeTimeout) // the store's late replies end
	})
}

// A send that the fleet never kept waiting leaves no turn state behind: a
// lease given back wakes a waiting asker only, and a process that crawls
// many scopes keeps nothing per scope once their sends are done.
func TestNoTurnStateLeftBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		c := newClient(store)
		c.Subscribe(func(string, time.Duration, fleet.Reason) {})
		defer c.Close()
		l := &local{rate: 1000, limit: 4}
		for _, scope := range []string{"a", "b", "c"} {
			send, err := c.Before(context.Background(), scope, l, false)
			require.NoError(t, err)
			c.After(scope, l, Report{Lease: send.Lease})
		}
		synctest.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		assert.Empty(t, c.turns)
		assert.Empty(t, c.pending)
	})
}

// keeper is a scope whose law keeps a decrease the store refused, as
// polite's does when the fleet's state has not seen it.
type keeper struct {
	local
	settled []fleet.Settlement
}

func (k *keeper) Settled(st fleet.Settlement, _ []byte) ([]byte, uint64) {
	k.settled = append(k.settled, st)
	if st.Committed || st.State == nil {
		return nil, 0
	}
	return []byte("mine, lower"), st.Version
}

// A decrease the store refused (another process committed first) and the
// law kept is committed at once on the fleet's version, not at the
// process's next return: that comes after the decrease's pause, by when
// the others have doubled again on the fleet's state.
func TestKeptDecreaseCommittedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		ctx := context.Background()
		g, err := store.Lease(ctx, fleet.LeaseRequest{Scope: "a", Process: "other", Rate: 1, Seed: []byte("theirs, doubled"), TTL: time.Second})
		require.NoError(t, err)
		c := newClient(store)
		defer c.Close()
		k := &keeper{local: local{rate: 1}}
		c.After("a", k, Report{State: []byte("mine"), Version: g.Version - 1})
		require.Len(t, k.settled, 2, "refused, then committed again")
		assert.False(t, k.settled[0].Committed)
		assert.Equal(t, "theirs, doubled", string(k.settled[0].State))
		assert.True(t, k.settled[1].Committed, "committed on the fleet's version")
		g, err = store.Lease(ctx, fleet.LeaseRequest{Scope: "a", Process: "third", Rate: 1, TTL: time.Second})
		require.NoError(t, err)
		assert.Equal(t, "mine, lower", string(g.State), "the fleet's state is the kept decrease")
	})
}

// contended is a store where another process commits a state just before
// each of the next n returns: each commit of this process's is refused.
type contended struct {
	*fleet.MemoryStore
	n int
}

func (c *contended) Return(ctx context.Context, r fleet.Return) (fleet.Settlement, error) {
	if c.n > 0 {
		c.n--
		g, err := c.MemoryStore.Lease(ctx, fleet.LeaseRequest{Scope: r.Scope, Process: "other", Rate: 1000, TTL: time.Second})
		if err != nil {
			return fleet.Settlement{}, err
		}
		if _, err := c.MemoryStore.Return(ctx, fleet.Return{Scope: r.Scope, Process: "other", Lease: g.ID, State: []byte("theirs, doubled again"), Version: g.Version}); err != nil {
			return fleet.Settlement{}, err
		}
	}
	return c.MemoryStore.Return(ctx, r)
}

// A kept decrease refused again (others committed within each round
// trip) is committed again, up to maxRecommits times; past that it is
// lost, and no more store calls are made for it.
func TestKeptDecreaseCommittedThroughContention(t *testing.T) {
	for _, tc := range []struct {
		refusals  int
		committed bool
	}{{2, true}, {maxRecommits + 1, false}} {
		refusals, committed := tc.refusals, tc.committed
		t.Run(fmt.Sprintf("refused %d times", refusals), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &contended{MemoryStore: &fleet.MemoryStore{}}
				ctx := context.Background()
				g, err := store.Lease(ctx, fleet.LeaseRequest{Scope: "a", Process: "other", Rate: 1, Seed: []byte("theirs, doubled"), TTL: time.Second})
				require.NoError(t, err)
				store.n = refusals
				c := newClient(store)
				defer c.Close()
				k := &keeper{local: local{rate: 1}}
				c.After("a", k, Report{State: []byte("mine"), Version: g.Version})
				g, err = store.Lease(ctx, fleet.LeaseRequest{Scope: "a", Process: "third", Rate: 1, TTL: time.Second})
				require.NoError(t, err)
				if committed {
					require.Len(t, k.settled, refusals+1, "refused %d times, then committed", refusals)
					assert.True(t, k.settled[refusals].Committed)
					assert.Equal(t, "mine, lower", string(g.State), "the fleet's state is the kept decrease")
					return
				}
				assert.Len(t, k.settled, maxRecommits+1, "bounded")
				assert.Equal(t, "theirs, doubled again", string(g.State))
			})
		})
	}
}

// lostOnCancel is a MemoryStore whose Lease, while lose is set, grants
// and then holds its reply until the caller's context ends: the lease is
// taken there, and the caller that gave up never hears of it.
type lostOnCancel struct {
	fleet.MemoryStore
	lose atomic.Bool
}

func (s *lostOnCancel) Lease(ctx context.Context, r fleet.LeaseRequest) (fleet.Lease, error) {
	g, err := s.MemoryStore.Lease(ctx, r)
	if err != nil || !s.lose.Load() {
		return g, err
	}
	<-ctx.Done()
	return fleet.Lease{}, ctx.Err()
}

// A send given up while its lease was being granted gives that lease back
// at once: the fleet's only slot (limit 1) is free for another process
// long before the lease's TTL (a minute here), and the store is not taken
// for down.
func TestGivenUpLeaseGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lostOnCancel{}
		a, b := newClient(store, time.Minute), newClient(store, time.Minute)
		defer a.Close()
		defer b.Close()
		l := &local{rate: 1000, limit: 1}

		store.lose.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := a.Before(ctx, "s", l, false)
			errc <- err
		}()
		synctest.Wait() // granted; the reply is on its way
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		store.lose.Store(false)
		assert.False(t, a.Down(), "a caller giving up is no store failure")

		synctest.Wait() // the lease goes back in the background
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		send, err := b.Before(ctx, "s", l, false)
		require.NoError(t, err, "the fleet's only slot is still held by the send given up")
		assert.NotEmpty(t, send.Lease)
		b.After("s", l, Report{Lease: send.Lease})
	})
}

// panicky is a MemoryStore whose next Lease panics once armed.
type panicky struct {
	fleet.MemoryStore
	armed atomic.Bool
}

func (p *panicky) Lease(ctx context.Context, r fleet.LeaseRequest) (fleet.Lease, error) {
	if p.armed.CompareAndSwap(true, false) {
		panic("store: boom")
	}
	return p.MemoryStore.Lease(ctx, r)
}

// A Store that panics while a send asks for its process (the fleet being
// busy for it) lets the panic go on, and hands the asking on: the send
// waiting behind it asks, and takes the lease when it comes back, rather
// than waiting until its context ends.
func TestStorePanicHandsTheAskingOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &panicky{}
		c := listening(store)
		defer c.Close()
		l := &local{rate: 1000, limit: 1}
		ctx := context.Background()
		first, err := c.Before(ctx, "s", l, false)
		require.NoError(t, err)

		panicked := make(chan any, 1)
		go func() {
			defer func() { panicked <- recover() }()
			_, _ = c.Before(ctx, "s", l, false) // refused: it asks for the process
		}()
		synctest.Wait()
		store.armed.Store(true) // its next ask panics
		third := make(chan error, 1)
		var send Send
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var err error
			send, err = c.Before(ctx, "s", l, false) // behind the asker
			third <- err
		}()
		synctest.Wait()
		assert.Equal(t, "store: boom", <-panicked)

		c.After("s", l, Report{Lease: first.Lease})
		require.NoError(t, <-third, "the send behind the panicked asker never asked")
		assert.NotEmpty(t, send.Lease)
		c.After("s", l, Report{Lease: send.Lease})
	})
}

// grantPanics is a scope whose Granted panics once armed.
type grantPanics struct {
	local
	armed atomic.Bool
}

func (g *grantPanics) Granted(state []byte, version uint64, live int, ceiling float64, rejoining bool) {
	if g.armed.CompareAndSwap(true, false) {
		panic("granted: boom")
	}
	g.local.Granted(state, version, live, ceiling, rejoining)
}

// A lease granted to a send whose Granted panics goes back at once: the
// fleet's only slot (limit 1) is not held for the lease's TTL (a minute
// here) by a send that is gone.
func TestGrantedPanicGivesTheLeaseBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fleet.MemoryStore{}
		c := newClient(store, time.Minute)
		defer c.Close()
		l := &grantPanics{local: local{rate: 1000, limit: 1}}
		l.armed.Store(true)
		func() {
			defer func() { assert.Equal(t, "granted: boom", recover()) }()
			_, _ = c.Before(context.Background(), "s", l, false)
			t.Error("Before returned: the panic was lost")
		}()
		synctest.Wait() // the lease goes back in the background
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		send, err := c.Before(ctx, "s", l, false)
		require.NoError(t, err, "the fleet's only slot is still held by the send that panicked")
		c.After("s", l, Report{Lease: send.Lease})
	})
}

// countingStore counts the leases asked of it.
type countingStore struct {
	fleet.MemoryStore
	leases atomic.Int64
}

func (s *countingStore) Lease(ctx context.Context, r fleet.LeaseRequest) (fleet.Lease, error) {
	s.leases.Add(1)
	return s.MemoryStore.Lease(ctx, r)
}

// After Close the controller goes on on its own, at its share of the
// fleet as when its store is down: no send asks the store again. Before,
// its sends still took leases, which nothing renewed after Close: a send
// longer than a lease's life lost its slot while in flight, and the fleet
// handed it to another process, over its concurrency limit.
func TestClosedClientTakesNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{}
		c := newClient(store)
		l := &local{rate: 10, limit: 4}
		send, err := c.Before(context.Background(), "a", l, false)
		require.NoError(t, err)
		require.NotEmpty(t, send.Lease)
		c.After("a", l, Report{Lease: send.Lease})
		asked := store.leases.Load()
		c.Close()
		_, err = c.Before(context.Background(), "a", l, false)
		require.ErrorIs(t, err, ErrAgain, "the first send after Close takes its slot again, at its share")
		send, err = c.Before(context.Background(), "a", l, false)
		require.NoError(t, err)
		assert.Empty(t, send.Lease, "no lease: the store is not asked")
		assert.Equal(t, asked, store.leases.Load())
	})
}

// A turn announced for a scope where no send of this process wants a
// lease any more (it gave up since) leaves no state behind: before, each
// such notice kept a turn state for good, one per contended host a crawl
// met. A notice that beats the refusal it answers (a send still wants)
// is kept, as before.
func TestStaleTurnLeavesNoState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(&fleet.MemoryStore{})
		defer c.Close()
		for i := range 50 {
			c.wake(fmt.Sprintf("h%d.test", i), true)
		}
		c.mu.Lock()
		n := len(c.turns)
		c.pending["w.test"] = 1
		c.mu.Unlock()
		assert.Zero(t, n, "no send wanted: no state")
		c.wake("w.test", true)
		c.mu.Lock()
		st := c.turns["w.test"]
		delete(c.pending, "w.test")
		delete(c.turns, "w.test")
		c.mu.Unlock()
		require.NotNil(t, st, "a send still wants: the turn is kept for it")
		assert.True(t, st.turn)
	})
}
