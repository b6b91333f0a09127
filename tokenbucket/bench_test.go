package tokenbucket_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/colly-polite/polite/tokenbucket"
	"golang.org/x/time/rate"
)

// Every benchmark runs a bare rate.Limiter (or a map of them) side by side
// with Bucket and Registry, in the same run. The rates are high enough that
// nearly every take succeeds, so that the arithmetic runs, not the
// early-outs.
const (
	benchRate  = rate.Limit(2e6) // two tokens per microsecond
	benchBurst = 1000
)

func BenchmarkTakeUncontended(b *testing.B) {
	// Explicit times, one microsecond apart: a token is always there.
	run := func(b *testing.B, take func(now time.Time) bool) {
		b.ReportAllocs()
		now := time.Now()
		refused := 0
		for b.Loop() {
			now = now.Add(time.Microsecond)
			if !take(now) {
				refused++
			}
		}
		if refused > 0 {
			b.Fatalf("%d refused", refused)
		}
	}
	b.Run("rate.Limiter", func(b *testing.B) {
		lim := rate.NewLimiter(benchRate, 1)
		run(b, func(now time.Time) bool { return lim.AllowN(now, 1) })
	})
	b.Run("Bucket", func(b *testing.B) {
		bk := tokenbucket.NewBucket(benchRate, 1)
		run(b, bk.AllowAt)
	})
	b.Run("Registry", func(b *testing.B) {
		reg := mustNew(b, tokenbucket.Config{Rate: benchRate, Burst: 1})
		run(b, func(now time.Time) bool { return reg.AllowAt("example.com", now) })
	})
}

func BenchmarkWaitUncontended(b *testing.B) {
	ctx := context.Background()
	b.Run("rate.Limiter", func(b *testing.B) {
		b.ReportAllocs()
		lim := rate.NewLimiter(rate.Inf, 1)
		for b.Loop() {
			_ = lim.Wait(ctx)
		}
	})
	b.Run("Bucket", func(b *testing.B) {
		b.ReportAllocs()
		bk := tokenbucket.NewBucket(rate.Inf, 1)
		for b.Loop() {
			_ = bk.Wait(ctx)
		}
	})
	b.Run("Registry", func(b *testing.B) {
		b.ReportAllocs()
		reg := mustNew(b, tokenbucket.Config{Rate: rate.Inf})
		for b.Loop() {
			_ = reg.Wait(ctx, "example.com")
		}
	})
}

// parallel64 runs take from about 64 goroutines.
func parallel64(b *testing.B, take func(now time.Time) bool) {
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(max(1, (64+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			take(time.Now())
		}
	})
}

func BenchmarkTakeContended64(b *testing.B) {
	b.Run("rate.Limiter", func(b *testing.B) {
		lim := rate.NewLimiter(benchRate, benchBurst)
		parallel64(b, func(now time.Time) bool { return lim.AllowN(now, 1) })
	})
	b.Run("Bucket", func(b *testing.B) {
		bk := tokenbucket.NewBucket(benchRate, benchBurst)
		parallel64(b, bk.AllowAt)
	})
	b.Run("Registry", func(b *testing.B) {
		reg := mustNew(b, tokenbucket.Config{Rate: benchRate, Burst: benchBurst})
		parallel64(b, func(now time.Time) bool { return reg.AllowAt("example.com", now) })
	})
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "host-" + strconv.Itoa(i) + ".example"
	}
	return keys
}

func BenchmarkTake10kKeys(b *testing.B) {
	keys := benchKeys(10_000)
	run := func(b *testing.B, take func(key string, now time.Time) bool) {
		b.ReportAllocs()
		b.ResetTimer() // not the building of the keys
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(keys))
			for pb.Next() {
				i++
				if i == len(keys) {
					i = 0
				}
				take(keys[i], time.Now())
			}
		})
	}
	b.Run("rate.Limiter", func(b *testing.B) {
		// The lower bound: a read-only map, built beforehand, no lock.
		m := make(map[string]*rate.Limiter, len(keys))
		for _, k := range keys {
			m[k] = rate.NewLimiter(benchRate, benchBurst)
		}
		run(b, func(key string, now time.Time) bool { return m[key].AllowN(now, 1) })
	})
	b.Run("Registry", func(b *testing.B) {
		reg := mustNew(b, tokenbucket.Config{Rate: benchRate, Burst: benchBurst})
		for _, k := range keys {
			reg.Get(k)
		}
		run(b, reg.AllowAt)
	})
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIdleKey measures the memory a key holds once idle: its key
// string, its map entry and its limiter or Bucket, over 100,000 keys.
func BenchmarkIdleKey(b *testing.B) {
	const n = 100_000
	run := func(b *testing.B, build func(keys []string) any) {
		b.ReportAllocs()
		var perKey float64
		for b.Loop() {
			b.StopTimer()
			before := heapAlloc()
			b.StartTimer()
			keys := benchKeys(n) // counted: the structure keeps the strings
			kept := build(keys)
			b.StopTimer()
			keys = nil
			perKey = float64(heapAlloc()-before) / n
			runtime.KeepAlive(kept)
			b.StartTimer()
		}
		b.ReportMetric(perKey, "B/key")
		b.ReportMetric(0, "ns/op") // the build time is not the point
	}
	b.Run("rate.Limiter", func(b *testing.B) {
		run(b, func(keys []string) any {
			m := make(map[string]*rate.Limiter)
			for _, k := range keys {
				m[k] = rate.NewLimiter(1, 1)
			}
			return m
		})
	})
	b.Run("Registry", func(b *testing.B) {
		now := time.Now()
		run(b, func(keys []string) any {
			reg := mustNew(b, tokenbucket.Config{Rate: 1})
			for _, k := range keys {
				reg.GetAt(k, now)
			}
			return reg
		})
	})
	b.Logf("unsafe.Sizeof: rate.Limiter %d B, tokenbucket.Bucket %d B",
		unsafe.Sizeof(rate.Limiter{}), unsafe.Sizeof(tokenbucket.Bucket{}))
}
