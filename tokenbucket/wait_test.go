package tokenbucket_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// waitAll starts one Wait per context, in order (each queued before the
// next starts), and returns, per waiter, the virtual time it took and its
// error, once all are done.
func waitAll(t *testing.T, b *tokenbucket.Bucket, ctxs ...context.Context) ([]time.Duration, []error) {
	t.Helper()
	start := time.Now()
	took := make([]time.Duration, len(ctxs))
	errs := make([]error, len(ctxs))
	var wg sync.WaitGroup
	for i, ctx := range ctxs {
		wg.Go(func() {
			errs[i] = b.Wait(ctx)
			took[i] = time.Since(start)
		})
		synctest.Wait() // queued, in order
	}
	wg.Wait()
	return took, errs
}

func contexts(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = context.Background()
	}
	return ctxs
}

func TestWaitBlocksForTheExactInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(2, 1)
		took, errs := waitAll(t, b, contexts(4)...)
		for _, err := range errs {
			require.NoError(t, err)
		}
		// First from the burst, then one per 500ms, in arrival order.
		assert.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond}, took)
	})
}

func TestWaitInfiniteRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(rate.Inf, 0)
		start := time.Now()
		for range 100 {
			require.NoError(t, b.Wait(context.Background()))
		}
		assert.Equal(t, time.Duration(0), time.Since(start))
	})
}

func TestWaitCanceledGivesTheTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		require.True(t, b.Allow())

		// Three queued: due at 1s, 2s, 3s. The first gives up at 0.5s.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel)
		took, errs := waitAll(t, b, ctx, context.Background(), context.Background())

		require.ErrorIs(t, errs[0], context.Canceled)
		assert.ErrorContains(t, errs[0], "tokenbucket: ")
		require.NoError(t, errs[1])
		require.NoError(t, errs[2])
		assert.Equal(t, 500*time.Millisecond, took[0])
		// Those behind move up: its token goes to the next in line.
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, took[1:])
	})
}

func TestWaitCanceledLastGivesTheTokenToALaterCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		require.True(t, b.Allow())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- b.Wait(ctx) }()
		time.Sleep(300 * time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)

		// The canceled token is back: the next caller waits 0.7s, not 1.7s.
		start := time.Now()
		require.NoError(t, b.Wait(context.Background()))
		assert.Equal(t, 700*time.Millisecond, time.Since(start))
	})
}

func TestWaitContextDoneBeforehand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(rate.Inf, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := b.Wait(ctx)
		require.ErrorIs(t, err, context.Canceled)
		assert.True(t, b.Allow())
	})
}

func TestWaitWouldExceedDeadlineFailsAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(b *tokenbucket.Bucket)
		timeout time.Duration
	}{
		{"rate", func(b *tokenbucket.Bucket) { b.Allow() }, 499 * time.Millisecond},
		{"queue", func(b *tokenbucket.Bucket) { b.Allow(); b.Reserve() }, 999 * time.Millisecond},
		{"drain", func(b *tokenbucket.Bucket) { b.Drain(time.Now().Add(10 * time.Second)) }, 10 * time.Second},
		{"closed by rate 0", func(b *tokenbucket.Bucket) { b.Allow(); b.SetRate(0, 1) }, time.Hour},
		{"closed by burst 0", func(b *tokenbucket.Bucket) { b.SetRate(2, 0) }, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := tokenbucket.NewBucket(2, 1)
				tt.setup(b)
				before := b.Tokens()
				ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
				defer cancel()
				start := time.Now()
				err := b.Wait(ctx)
				require.ErrorIs(t, err, tokenbucket.ErrWouldExceedDeadline)
				assert.Equal(t, time.Duration(0), time.Since(start), "no time passes")
				assert.Equal(t, before, b.Tokens(), "no token is spent")
			})
		})
	}
}

func TestWaitWithinDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(2, 1)
		b.Allow()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		require.NoError(t, b.Wait(ctx))
		assert.Equal(t, 500*time.Millisecond, time.Since(start))
	})
}

func TestWaitFailedForDeadlineLeavesTheQueueIntact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		b.Allow()
		short, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		// Second in line needs 2s: it fails at once; the third takes its place.
		took, errs := waitAll(t, b, context.Background(), short, context.Background())
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], tokenbucket.ErrWouldExceedDeadline)
		require.NoError(t, errs[2])
		assert.Equal(t, []time.Duration{time.Second, 0, 2 * time.Second}, took)
	})
}

func TestWaitDrainBlocksUntilTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(10, 5)
		start := time.Now()
		b.DrainAt(start, start.Add(5*time.Second))
		took, errs := waitAll(t, b, contexts(3)...)
		for _, err := range errs {
			require.NoError(t, err)
		}
		// No burst of saved tokens at resume: one per 100ms from the deadline.
		assert.Equal(t, []time.Duration{5100 * time.Millisecond, 5200 * time.Millisecond, 5300 * time.Millisecond}, took)
	})
}

func TestWaitDrainWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		b.Allow()
		start := time.Now()
		// Queued for 1s and 2s; at 0.5s a 429 drains until 3s, and at 0.7s
		// a shorter drain changes nothing.
		time.AfterFunc(500*time.Millisecond, func() { b.Drain(start.Add(3 * time.Second)) })
		time.AfterFunc(700*time.Millisecond, func() { b.Drain(start.Add(2 * time.Second)) })
		took, errs := waitAll(t, b, contexts(2)...)
		for _, err := range errs {
			require.NoError(t, err)
		}
		assert.Equal(t, []time.Duration{4 * time.Second, 5 * time.Second}, took)
		assert.Equal(t, start.Add(3*time.Second), b.DrainedUntil())
	})
}

func TestWaitDrainFailsWaitersItPushesPastTheirDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		b.Allow()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		time.AfterFunc(500*time.Millisecond, func() { b.Drain(start.Add(10 * time.Second)) })
		took, errs := waitAll(t, b, ctx)
		require.ErrorIs(t, errs[0], tokenbucket.ErrWouldExceedDeadline)
		assert.Equal(t, 500*time.Millisecond, took[0], "fails as soon as the drain makes the deadline unreachable")
	})
}

func TestWaitSetRateRepricesQueuedCallers(t *testing.T) {
	tests := []struct {
		name string
		rate rate.Limit
		want []time.Duration
	}{
		// Due at 1s, 2s, 3s at 1/s. At 0.5s the rate changes; half a token has
		// accrued, the rest of the queue is priced at the new rate.
		{"raise", 4, []time.Duration{625 * time.Millisecond, 875 * time.Millisecond, 1125 * time.Millisecond}},
		{"cut", 0.5, []time.Duration{1500 * time.Millisecond, 3500 * time.Millisecond, 5500 * time.Millisecond}},
		{"same", 1, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
		{"infinite", rate.Inf, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := tokenbucket.NewBucket(1, 1)
				b.Allow()
				time.AfterFunc(500*time.Millisecond, func() { b.SetRate(tt.rate, 1) })
				took, errs := waitAll(t, b, contexts(3)...)
				for _, err := range errs {
					require.NoError(t, err)
				}
				assert.Equal(t, tt.want, took)
			})
		})
	}
}

func TestWaitClosedBucketWaitsForSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(0, 1)
		b.Allow()
		time.AfterFunc(time.Minute, func() { b.SetRate(2, 1) })
		took, errs := waitAll(t, b, contexts(2)...)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		// Opened at 1m, empty: 500ms per token from then.
		assert.Equal(t, []time.Duration{time.Minute + 500*time.Millisecond, time.Minute + time.Second}, took)
	})
}

func TestWaitClosedBucketCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(2, 0)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		took, errs := waitAll(t, b, ctx)
		require.ErrorIs(t, errs[0], context.Canceled)
		assert.Equal(t, time.Second, took[0])
	})
}

func TestWaitRateCutFailsWaitersPastTheirDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		b.Allow()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		time.AfterFunc(500*time.Millisecond, func() { b.SetRate(0.1, 1) })
		took, errs := waitAll(t, b, context.Background(), ctx)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], tokenbucket.ErrWouldExceedDeadline)
		// 0.5 token at 0.5s, the rest at 0.1/s: 5.5s; the second fails at 0.5s.
		assert.Equal(t, []time.Duration{5500 * time.Millisecond, 500 * time.Millisecond}, took)
	})
}

func TestWaitReservationCanceledAheadOfWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		b.Allow()
		start := time.Now()
		r := b.ReserveAt(start) // due at 1s
		time.AfterFunc(200*time.Millisecond, func() { r.Cancel() })
		took, errs := waitAll(t, b, contexts(2)...)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, took)
	})
}

func TestAllowDoesNotJumpTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 3)
		for range 3 {
			b.Allow()
		}
		done := make(chan error)
		go func() { done <- b.Wait(context.Background()) }()
		synctest.Wait()
		time.Sleep(time.Second)
		assert.False(t, b.Allow(), "the token of 1s belongs to the waiter")
		require.NoError(t, <-done)
		time.Sleep(time.Second)
		assert.True(t, b.Allow())
	})
}

func TestWaitManyCallersKeepTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		b := tokenbucket.NewBucket(10, 5)
		start := time.Now()
		var (
			mu    sync.Mutex
			times []time.Duration
			wg    sync.WaitGroup
		)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := range n {
			wg.Go(func() {
				wctx := ctx
				if i%7 == 3 { // some give up along the way
					var c context.CancelFunc
					wctx, c = context.WithTimeout(ctx, time.Duration(i)*50*time.Millisecond)
					defer c()
				}
				if err := b.Wait(wctx); err == nil {
					mu.Lock()
					times = append(times, time.Since(start))
					mu.Unlock()
				}
			})
		}
		// Rate changes and a drain along the way.
		time.AfterFunc(2*time.Second, func() { b.SetRate(5, 2) })
		time.AfterFunc(4*time.Second, func() { b.Drain(time.Now().Add(3 * time.Second)) })
		time.AfterFunc(9*time.Second, func() { b.SetRate(20, 1) })
		wg.Wait()

		// Rate changes and the drain bound what can have been granted by any
		// time: 5 at first, then 10/s, 5/s from 2s, nothing from 4s to 7s
		// (the drain wipes what was saved), 5/s from 7s, 20/s from 9s.
		avail := func(d time.Duration) float64 {
			s := d.Seconds()
			switch {
			case s < 2:
				return 5 + 10*s
			case s < 4:
				return 25 + 5*(s-2)
			case s < 7:
				return 35
			case s < 9:
				return 35 + 5*(s-7)
			default:
				return 45 + 20*(s-9)
			}
		}
		slices.Sort(times)
		require.Greater(t, len(times), n/2)
		for k, d := range times {
			assert.LessOrEqual(t, float64(k+1), avail(d)+1e-6, "grant %d at %v", k+1, d)
			assert.False(t, d > 4*time.Second && d < 7*time.Second+200*time.Millisecond, "granted at %v while drained", d)
		}
	})
}

func TestWaitResumeRepricesQueuedCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := tokenbucket.NewBucket(1, 1)
		start := time.Now()
		b.Drain(start.Add(time.Hour))
		time.AfterFunc(10*time.Second, b.Resume)
		took, errs := waitAll(t, b, contexts(2)...)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		assert.Equal(t, []time.Duration{11 * time.Second, 12 * time.Second}, took)
	})
}
