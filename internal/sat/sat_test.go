package sat

import (
	"math"
	"testing"
	"time"
)

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want time.Duration
	}{
		{0, 0}, {-1, 0}, {math.Inf(-1), 0}, {1.5, 1500 * time.Millisecond},
		{math.NaN(), Forever}, {math.Inf(1), Forever}, {1e300, Forever}, {Forever.Seconds(), Forever},
	} {
		if got := Seconds(tc.x); got != tc.want {
			t.Errorf("Seconds(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{
		{4, 250 * time.Millisecond}, {0, Forever}, {-3, Forever}, {math.NaN(), Forever},
		{1e-300, Forever}, {math.Inf(1), 0},
	} {
		if got := Interval(tc.r); got != tc.want {
			t.Errorf("Interval(%v) = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func FuzzSeconds(f *testing.F) {
	f.Add(1.0)
	f.Add(math.MaxFloat64)
	f.Fuzz(func(t *testing.T, x float64) {
		if d := Seconds(x); d < 0 || d > Forever {
			t.Fatalf("Seconds(%v) = %v", x, d)
		}
		if d := Interval(x); d < 0 || d > Forever {
			t.Fatalf("Interval(%v) = %v", x, d)
		}
	})
}
