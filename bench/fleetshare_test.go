package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/colly-polite/polite/testserver"
)

func secs(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

func TestMeasureShares(t *testing.T) {
	clients := map[string]testserver.ClientStats{
		// window [5, 15): 1 has 3 (2 accepted), 2 has 1; [15, 25): 1 has 1, 2 has 3; [25, 35): none
		"1": {Accepted: secs(4, 5, 6, 16), Rejected: secs(14.9)},
		"2": {Accepted: secs(10, 20, 21), Rejected: secs(24.9, 35)},
		"":  {Accepted: secs(7, 8, 9)}, // no process: not counted
	}
	sh := measureShares("a.test", clients, 2, 5*time.Second, 38*time.Second)
	assert.Equal(t, shareWindows{Host: "a.test", FromS: 5, WindowS: 10, Windows: 3,
		Requests:  [][]int{{3, 1, 0}, {1, 3, 0}},
		Successes: [][]int{{2, 1, 0}, {1, 2, 0}},
		Empty:     1, MinShareN: 0.5, MaxShareN: 1.5}, sh)
	assert.True(t, sh.judged())

	// a process that sent nothing in a window has a share of 0
	sh = measureShares("a.test", clients, 3, 5*time.Second, 25*time.Second)
	assert.Equal(t, 0.0, sh.MinShareN)
	assert.Equal(t, 2.25, sh.MaxShareN)

	// a span shorter than a window is one window
	sh = measureShares("a.test", clients, 2, 5*time.Second, 12*time.Second)
	assert.Equal(t, 7.0, sh.WindowS)
	assert.Equal(t, [][]int{{2}, {1}}, sh.Requests)

	// no span, no window
	sh = measureShares("a.test", clients, 2, 5*time.Second, 5*time.Second)
	assert.Equal(t, 0, sh.Windows)
	assert.False(t, sh.judged())
}
