package tokenbucket_test

import (
	"testing"
	"time"

	"github.com/colly-polite/polite/tokenbucket"
)

// BenchmarkTake is the pacer's cost per send on a scope's hot path.
func BenchmarkTake(b *testing.B) {
	var bk tokenbucket.Bucket
	bk.SetRate(1e6)
	now := time.Duration(0)
	b.ReportAllocs()
	for b.Loop() {
		if !bk.Take(now) {
			now = bk.Next()
		}
	}
}

// BenchmarkSetRate re-prices the schedule, as every decision of the law does.
func BenchmarkSetRate(b *testing.B) {
	var bk tokenbucket.Bucket
	bk.SetRate(10)
	bk.Take(0)
	r := 10.0
	b.ReportAllocs()
	for b.Loop() {
		r = 20 - r
		bk.SetRate(r)
	}
}
