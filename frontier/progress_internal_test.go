package frontier

import (
	"math"
	"testing"
	"time"
)

// The meter's rate: a steady stream reads as its rate from the first
// second on, and a stream that stopped fades.
func TestMeter(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, c := range []struct {
		name     string
		every    time.Duration
		events   int
		after    time.Duration // since the last event
		min, max float64
	}{
		{"10/s for 2 s", 100 * time.Millisecond, 20, 0, 9, 11},
		{"10/s for 5 min", 100 * time.Millisecond, 3000, 0, 9.5, 10.5},
		{"1/s for 10 s", time.Second, 10, 0, 0.9, 1.1},
		{"10/s for 5 min, then a minute of nothing", 100 * time.Millisecond, 3000, time.Minute, 1, 2},
		{"one event", 0, 1, 0, 0.9, 1.1},
	} {
		var m meter
		m.begin(t0)
		now := t0
		for i := range c.events {
			now = t0.Add(time.Duration(i+1) * c.every)
			m.add(now)
		}
		if r := m.rate(now.Add(c.after)); r < c.min || r > c.max {
			t.Errorf("%s: %.2f/s, want %.1f to %.1f", c.name, r, c.min, c.max)
		}
	}
	var zero meter
	if zero.rate(t0) != 0 {
		t.Error("a meter that never began reads 0")
	}
}

// An ETA over a rate decayed near zero is unknown, never negative: a
// backlog of 40 over a rate of 1e-12/s wrapped past int64 to -2562047h,
// sorted the slowest scope last and hid it from the total.
func TestETANeverNegative(t *testing.T) {
	for _, rate := range []float64{1e-12, 1e-300, math.SmallestNonzeroFloat64} {
		if got := eta(40, rate); got != Unknown {
			t.Errorf("eta(40, %g) = %v, want Unknown", rate, got)
		}
	}
	if got := eta(40, 2); got != 20*time.Second {
		t.Errorf("eta(40, 2) = %v", got)
	}
	if got := eta(0, 0); got != 0 {
		t.Errorf("eta(0, 0) = %v", got)
	}
}
