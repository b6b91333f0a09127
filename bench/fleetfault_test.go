package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// at0 reads sample times as offsets from zero.
func at0(ns int64) time.Duration { return time.Duration(ns) }

func smp(at time.Duration, host string, shared bool, rate, fleetRate float64) sample {
	return sample{At: int64(at), Host: host, Shared: shared, Rate: rate, FleetRate: fleetRate}
}

func TestSharedAgain(t *testing.T) {
	s := time.Second
	r := childReport{Samples: []sample{
		smp(1*s, "a.test", true, 10, 20), smp(1*s, "b.test", true, 5, 10),
		smp(2*s, "a.test", false, 5, 20), smp(2*s, "b.test", false, 5, 10),
		smp(4*s, "a.test", true, 10, 20), smp(4*s, "b.test", false, 5, 10),
		smp(5*s, "a.test", false, 10, 20), smp(5*s, "b.test", true, 5, 10),
	}}
	// from 3 s on: a.test shared at 4 s, b.test at 5 s: every host at 5 s
	d, ok := sharedAgain(r, 3*s, at0)
	assert.True(t, ok)
	assert.Equal(t, 2*s, d)
	// from 4.5 s on, a.test is never shared again
	_, ok = sharedAgain(r, 4500*time.Millisecond, at0)
	assert.False(t, ok)
	_, ok = sharedAgain(childReport{}, 0, at0)
	assert.False(t, ok, "no sample")
}

func TestLastSharedRate(t *testing.T) {
	s := time.Second
	rs := []childReport{
		{Samples: []sample{smp(1*s, "a.test", true, 10, 20), smp(2*s, "a.test", true, 10, 18), smp(3*s, "a.test", false, 5, 18)}},
		{Samples: []sample{smp(1*s, "a.test", true, 16, 0), smp(4*s, "a.test", true, 10, 30)}}, // no fleet rate: its own
		{Samples: []sample{smp(1*s, "a.test", false, 10, 20)}},                                 // never shared: left out
	}
	assert.Equal(t, 17.0, lastSharedRate(rs, "a.test", 3*s, at0))
	assert.Equal(t, 0.0, lastSharedRate(nil, "a.test", 3*s, at0))
}

func TestLongestSilence(t *testing.T) {
	ts := secs(1, 2, 2.5, 6, 7, 12)
	assert.Equal(t, 3500*time.Millisecond, longestSilence(ts, 0, 10*time.Second), "2.5 to 6")
	assert.Equal(t, 3*time.Second, longestSilence(ts, 7*time.Second, 10*time.Second), "7 to the end")
	assert.Equal(t, 5*time.Second, longestSilence(nil, 5*time.Second, 10*time.Second), "nothing at all")
}
