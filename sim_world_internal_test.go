package polite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The kinds' servers do what their comments say: the figures of
// docs/harness.md are only as good as these models.
func TestSimServers(t *testing.T) {
	ms := int64(time.Millisecond)
	sec := int64(time.Second)

	t.Run("nginx limit_req without nodelay queues, then refuses", func(t *testing.T) {
		l := &simLeaky{rate: 10, burst: 2}
		var got []int64
		for range 4 { // four at once: the first at once, two queued 100 and 200 ms, the fourth refused
			ok, leave, status, ra := l.arriveFor(0, 5*ms)
			if ok {
				got = append(got, leave)
			} else {
				assert.Equal(t, 503, status)
				assert.Zero(t, ra, "no Retry-After")
			}
		}
		assert.Equal(t, []int64{5 * ms, 105 * ms, 205 * ms}, got)
		ok, _, _, _ := l.arriveFor(250*ms, 0) // the queue drained by 2.5 requests: 1 left, +1
		assert.True(t, ok)
	})

	t.Run("HAProxy's rate weights the previous period by what is left of it", func(t *testing.T) {
		h := &simHAProxy{n: 10, period: sec, k: -2}
		for i := range 10 {
			ok, _, _, _ := h.arrive(int64(i) * 90 * ms)
			assert.True(t, ok, "request %d", i)
		}
		ok, _, status, ra := h.arrive(950 * ms)
		assert.False(t, ok)
		assert.Equal(t, 429, status)
		assert.Equal(t, int64(1), ra)
		// at 1.5 s the 11 counted in [0, 1 s) weigh 5.5: four more pass,
		// the fifth makes 10.5 > 10, and being counted, so does a sixth
		for i := range 6 {
			ok, _, _, _ := h.arrive(1500 * ms)
			assert.Equal(t, i < 4, ok, "request %d at 1.5 s", i)
		}
		ok, _, _, _ = h.arrive(1900 * ms) // 11 × 0.1 + 7
		assert.True(t, ok)
	})

	t.Run("a penalty box refuses for its whole length whatever it says", func(t *testing.T) {
		p := &simPenalty{inner: &simFixedWindow{n: 1, w: sec, k: -1}, box: 10 * sec}
		f := &simFront{adm: p, cost: simConstCost(0), ra: 1, w: &simWorld{}}
		ok, _, _, _ := f.arrive(0)
		assert.True(t, ok)
		ok, _, _, ra := f.arrive(ms)
		assert.False(t, ok)
		assert.Equal(t, int64(1), ra, "the lie")
		ok, _, _, _ = f.arrive(5 * sec) // a new window, still in the box
		assert.False(t, ok)
		ok, _, _, _ = f.arrive(11 * sec)
		assert.True(t, ok)
	})

	t.Run("a concurrency cap counts what is in service", func(t *testing.T) {
		c := &simConnCap{c: 2}
		f := &simFront{adm: c, cost: simConstCost(350 * time.Millisecond), w: &simWorld{}}
		for i, want := range []bool{true, true, false} {
			ok, leave, status, ra := f.arrive(0)
			assert.Equal(t, want, ok, "request %d", i)
			if ok {
				assert.Equal(t, 350*ms, leave)
			} else {
				assert.Equal(t, 503, status)
				assert.Zero(t, ra)
			}
		}
		ok, _, _, _ := f.arrive(350 * ms)
		assert.True(t, ok, "a slot freed")
	})

	t.Run("a front answers excess as told, on the limiter's clock", func(t *testing.T) {
		f := &simFront{adm: &simFixedWindow{n: 1, w: sec, k: -1}, cost: simConstCost(10 * time.Millisecond),
			status: 403, ra: -1, w: &simWorld{phase: 900 * ms}}
		ok, leave, _, _ := f.arrive(0)
		assert.True(t, ok)
		assert.Equal(t, 10*ms, leave, "the crawl's clock")
		ok, _, status, ra := f.arrive(50 * ms)
		assert.False(t, ok)
		assert.Equal(t, 403, status)
		assert.Zero(t, ra)
		ok, _, _, _ = f.arrive(100 * ms) // the limiter's window turned at 1 s on its clock
		assert.True(t, ok)
	})
}

// The ideal world changes nothing; a drawn one stays within its profile.
func TestSimWorld(t *testing.T) {
	w := newSimWorld(simProfile{}, 7, time.Minute)
	assert.Equal(t, int64(123), w.late(123))
	up, down := w.halves(100)
	assert.Equal(t, [2]int64{100, 100}, [2]int64{up, down})
	assert.Equal(t, int64(1000), w.cost(1000, 5))
	assert.Zero(t, w.uniform())

	p := simProfile{Phase: time.Second, RTTJitter: 0.2, CostSpread: 0.3, Drift: 0.1, Busy: 1}
	for seed := uint64(1); seed <= 20; seed++ {
		w := newSimWorld(p, seed, time.Minute)
		assert.True(t, w.busy)
		assert.Less(t, w.phase, int64(time.Second))
		up, down := w.halves(int64(100 * time.Millisecond))
		for _, h := range []int64{up, down} {
			assert.GreaterOrEqual(t, h, int64(100*time.Millisecond))
			assert.Less(t, h, int64(120*time.Millisecond))
		}
		for _, s := range w.stalls {
			assert.GreaterOrEqual(t, w.late(s.from), s.to, "what falls due in a stall waits for its end")
		}
		for i := 1; i < len(w.stalls); i++ {
			assert.Greater(t, w.stalls[i].from, w.stalls[i-1].to, "stalls are sorted and disjoint")
		}
	}
	assert.Equal(t, newSimWorld(p, 3, time.Minute), newSimWorld(p, 3, time.Minute), "a seed is one world")
	assert.NotEqual(t, newSimWorld(p, 3, time.Minute), newSimWorld(p, 4, time.Minute))
}
