package main

import (
	"strings"
	"testing"
	"time"
)

// evenly returns the arrival times of rate requests per second, evenly
// spaced over [from, to).
func evenly(rate float64, from, to time.Duration) []time.Duration {
	var ts []time.Duration
	step := time.Duration(float64(time.Second) / rate)
	for t := from + step/2; t < to; t += step {
		ts = append(ts, t)
	}
	return ts
}

func TestConverge(t *testing.T) {
	sec := time.Second
	cap30 := func(time.Duration) float64 { return 30 }
	drop := func(t time.Duration) float64 {
		if t < 10*sec {
			return 40
		}
		return 10
	}
	tests := []struct {
		name     string
		accepted []time.Duration
		capacity func(time.Duration) float64
		from, to time.Duration
		want     time.Duration
		ok       bool
	}{
		{"at capacity from 3 s", append(evenly(10, 0, 3*sec), evenly(30, 3*sec, 20*sec)...), cap30, 0, 20 * sec, 3 * sec, true},
		{"at 90 % is within 10 %", evenly(27, 0, 20*sec), cap30, 0, 20 * sec, 0, true},
		{"at 85 % never", evenly(25.5, 0, 20*sec), cap30, 0, 20 * sec, 0, false},
		{"too short to hold 5 s", evenly(30, 16*sec, 20*sec), cap30, 0, 20 * sec, 0, false},
		{"a dip restarts the count", append(append(evenly(30, 0, 4*sec), evenly(10, 4*sec, 5*sec)...), evenly(30, 5*sec, 20*sec)...),
			cap30, 0, 20 * sec, 5 * sec, true},
		// 5/s: 2 s bins (10 requests), three of them
		{"5/s in 2 s bins", append(evenly(2, 0, 4*sec), evenly(5, 4*sec, 20*sec)...),
			func(time.Duration) float64 { return 5 }, 0, 20 * sec, 4 * sec, true},
		// S4: counted from the drop, against the capacity after it
		{"after a drop", append(append(evenly(40, 0, 10*sec), evenly(20, 10*sec, 12*sec)...), evenly(10, 12*sec, 20*sec)...),
			drop, 10 * sec, 20 * sec, 2 * sec, true},
		// 1/s: one 10 s bin
		{"1/s in 10 s bins", evenly(1, 0, 20*sec), func(time.Duration) float64 { return 1 }, 0, 20 * sec, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := converge(tt.accepted, tt.capacity, tt.from, tt.to)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("converge = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestGapViolations(t *testing.T) {
	ms := time.Millisecond
	ts := []time.Duration{3000 * ms, 0, 1000 * ms, 1999 * ms, 2500 * ms}
	// sorted: 0, 1000, 1999, 2500, 3000: gaps 1000, 999, 501, 500
	if got := gapViolations(ts, time.Second); got != 3 {
		t.Errorf("gapViolations = %d, want 3", got)
	}
	if ts[0] != 3000*ms {
		t.Error("gapViolations sorted its argument in place")
	}
}

func TestMeanCapacity(t *testing.T) {
	c := func(t time.Duration) float64 {
		if t < 10*time.Second {
			return 40
		}
		return 10
	}
	if got := meanCapacity(c, 5*time.Second, 20*time.Second); got < 19.99 || got > 20.01 {
		t.Errorf("meanCapacity = %v, want 20", got)
	}
}

func TestMedian(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		in   []time.Duration
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{[]time.Duration{300 * ms, 100 * ms, 200 * ms}, 200 * ms, true},
		{[]time.Duration{400 * ms, 100 * ms, 200 * ms, 300 * ms}, 250 * ms, true},
	} {
		if got, ok := median(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("median(%v) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseRTTs(t *testing.T) {
	got, err := parseRTTs("0, 200ms,0")
	if err != nil || len(got) != 2 || got[0] != 0 || got[1] != 200*time.Millisecond {
		t.Errorf("parseRTTs(\"0, 200ms,0\") = %v, %v; want [0 200ms]", got, err)
	}
	for _, bad := range []string{"", "200", "-1s", "0,,1s"} {
		if _, err := parseRTTs(bad); err == nil {
			t.Errorf("parseRTTs(%q): no error", bad)
		}
	}
}

// A smoke run states that it judges nothing, whatever the figures.
func TestTargetsSmoke(t *testing.T) {
	rs := []result{
		{Scenario: "S1", Contender: "adaptive", RTT: "0s", GoodputPct: 10, RejectedPct: 50},
		{Scenario: "S11", Contender: "adaptive", RTT: "0s", Crawl: []crawlHost{{Host: "a.test", Pages: 21, Lost: 3}}},
	}
	var smoke, full strings.Builder
	printTargets(&smoke, rs, true)
	printTargets(&full, rs, false)
	if strings.Contains(smoke.String(), "MISSED") || strings.Count(smoke.String(), "(smoke run: not judged)") != 2 {
		t.Errorf("smoke run:\n%s", smoke.String())
	}
	if !strings.Contains(full.String(), "goodput 10.0 % < 95 %") || !strings.Contains(full.String(), "a.test lost 3 of 21 pages") {
		t.Errorf("full run:\n%s", full.String())
	}
}
