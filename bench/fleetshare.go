package main

import (
	"strconv"
	"time"

	"github.com/colly-polite/polite/testserver"
)

// clientHeader names the fleet process that sent a request ("1", "2",
// ...): each process sets it on every request it puts on the wire, and
// the cell's testserver splits each host's log by it
// (testserver.Config.ClientHeader).
const clientHeader = "X-Fleet-Process"

// shareWindow is the window over which the fleet's split between its
// processes is judged.
const shareWindow = 10 * time.Second

// shareWindows is how one host's requests split between the processes of
// a cell, on the server's log, in consecutive windows while every process
// had URLs queued.
type shareWindows struct {
	Host string `json:"host"`
	// FromS is where the first window starts (server's clock) and WindowS
	// their length: shareWindow, or the whole span when it is shorter.
	FromS   float64 `json:"from_s"`
	WindowS float64 `json:"window_s"`
	Windows int     `json:"windows"`
	// Requests[p][w] are process p+1's requests (accepted and rejected) in
	// window w, Successes[p][w] those the host accepted.
	Requests  [][]int `json:"requests"`
	Successes [][]int `json:"successes"`
	// Empty counts windows with no request at all (left out of the
	// shares). MinShareN and MaxShareN are the least and the most share of
	// the window's requests a process had in any other window, times N:
	// 1 and 1 is an even split.
	Empty     int     `json:"empty_windows"`
	MinShareN float64 `json:"min_share_x_n"`
	MaxShareN float64 `json:"max_share_x_n"`
}

// measureShares splits host's log (by clients, keyed by process number)
// between procs processes over [from, to) in windows of shareWindow (the
// last partial one left out), or one window when the span is shorter.
func measureShares(host string, clients map[string]testserver.ClientStats, procs int, from, to time.Duration) shareWindows {
	w := shareWindow
	n := int((to - from) / w)
	if n < 1 && to > from {
		n, w = 1, to-from
	}
	n = max(n, 0)
	sh := shareWindows{Host: host, FromS: from.Seconds(), WindowS: w.Seconds(), Windows: n}
	count := func(ts []time.Duration, into []int) {
		for _, t := range ts {
			if t >= from {
				if i := int((t - from) / w); i < n {
					into[i]++
				}
			}
		}
	}
	for p := range procs {
		req, ok := make([]int, n), make([]int, n)
		c := clients[strconv.Itoa(p+1)]
		count(c.Accepted, ok)
		count(c.Accepted, req)
		count(c.Rejected, req)
		sh.Requests, sh.Successes = append(sh.Requests, req), append(sh.Successes, ok)
	}
	first := true
	for i := range n {
		total := 0
		for p := range procs {
			total += sh.Requests[p][i]
		}
		if total == 0 {
			sh.Empty++
			continue
		}
		for p := range procs {
			s := float64(sh.Requests[p][i]) * float64(procs) / float64(total)
			if first || s < sh.MinShareN {
				sh.MinShareN = s
			}
			if first || s > sh.MaxShareN {
				sh.MaxShareN = s
			}
			first = false
		}
	}
	return sh
}

// judged reports whether any window had requests.
func (sh *shareWindows) judged() bool { return sh != nil && sh.Windows > sh.Empty }
