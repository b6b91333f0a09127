package fleetclient

import (
	"context"
	"errors"
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

// local is a scope as the client sees it, with a fixed rate and limit.
type local struct {
	rate  float64
	limit int
	mu    sync.Mutex
	alone bool
}

func (l *local) Ask(time.Duration) Ask                { return Ask{Rate: l.rate, Limit: l.limit} }
func (l *local) Granted([]byte, uint64, int, float64) { l.mu.Lock(); l.alone = false; l.mu.Unlock() }
func (l *local) Random() float64                      { return 0.5 }
func (l *local) Waited(time.Duration, bool) bool      { return false }
func (l *local) Settled(fleet.Settlement, []byte)     {}
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

// held counts the leases the store holds on scope, by asking for them
// all as another process with a limit of n.
func held(t *testing.T, s fleet.Store, scope string, n int) int {
	t.Helper()
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
		a, b := newClient(store), newClient(store)
		a.Subscribe(func(string, time.Duration, fleet.Reason) {})
		b.Subscribe(func(string, time.Duration, fleet.Reason) {})
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
