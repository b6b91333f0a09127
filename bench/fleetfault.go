package main

import (
	"slices"
	"strings"
	"time"

	"github.com/colly-polite/polite/internal/demo"
	"github.com/colly-polite/polite/testserver"
)

// recoveryWindow is the time after a store fault ends over which the
// fleet's return is judged: its goodput, and its rate against the one it
// last shared.
const recoveryWindow = 10 * time.Second

// faultResult is what a store-fault cell measures: the store failing from
// StartS to EndS on the server's clock (Redis killed and answering again,
// or the proxy misbehaving and healed), on a.test against the rate the
// fleet last shared, and on b.test against its ceiling.
type faultResult struct {
	Kind   string  `json:"kind"` // killed, garbage, slow
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// RestartedEmpty (killed): a key written before the kill was gone
	// after the restart, so the store came back with nothing.
	RestartedEmpty *bool `json:"restarted_empty,omitempty"`
	// SharedRate is the rate the fleet last shared before the fault: the
	// mean over processes of a.test's fleet rate (Snapshot.FleetRate; its
	// Rate if that is 0) at their last sample with the store shared;
	// BeforeRate the fleet's send rate on a.test over the 5 s before.
	SharedRate float64 `json:"shared_rate"`
	BeforeRate float64 `json:"before_rate"`
	// During the fault, on a.test: requests and rejections, the mean send
	// rate, the sends of each whole second, the busiest, and how far it
	// went over SharedRate.
	Sent          int     `json:"sent"`
	Rejected      int     `json:"rejected"`
	RejectedPct   float64 `json:"rejected_pct"`
	Rate          float64 `json:"rate"`
	Bins          []int   `json:"sends_per_s"`
	MaxBin        int     `json:"max_1s"`
	OverSharedPct float64 `json:"max_over_shared_pct"`
	// The same on b.test, against its ceiling (the rate its fleet shares
	// is Rule.Rate).
	CeilingRate    float64 `json:"ceiling_rate"`
	CeilingBins    []int   `json:"ceiling_sends_per_s"`
	CeilingMaxBin  int     `json:"ceiling_max_1s"`
	CeilingOverPct float64 `json:"ceiling_max_over_pct"`
	// Recovery is the recoveryWindow after the fault (to the end of the
	// cell at most): a.test's accepted requests as a share of its
	// capacity, and the same per-second figures as during the fault.
	Recovery faultRecovery `json:"recovery"`
	// LongestSilenceS is the longest time, from the fault's start to the
	// end of the cell, with no request arriving at a.test.
	LongestSilenceS float64 `json:"longest_silence_s"`
	// SharedAgainS is the time from the fault's end to the last process
	// sampling the store as shared again (Snapshot.FleetShared, on every
	// host it crawls); null if one never did.
	SharedAgainS     *float64   `json:"shared_again_s"`
	SharedAgainProcS []*float64 `json:"shared_again_per_proc_s"`
	// Unreachable and Back count the processes' log lines about the store
	// going and coming back.
	Unreachable int `json:"unreachable_lines"`
	Back        int `json:"back_lines"`
	// After: from 5 s after the fault's end to the end of the cell.
	AfterGoodputPct  float64 `json:"after_goodput_pct"`
	AfterRejectedPct float64 `json:"after_rejected_pct"`
	// Timeline is each process's view of a.test, second by second of the
	// server's clock (its last sample in that second): how the fleet's
	// rate, estimate, concurrency limit and sharing went through the
	// fault.
	Timeline []procTimeline `json:"timeline"`
}

type faultRecovery struct {
	FromS          float64 `json:"from_s"`
	ToS            float64 `json:"to_s"`
	GoodputPct     float64 `json:"goodput_pct"`
	RejectedPct    float64 `json:"rejected_pct"`
	Bins           []int   `json:"sends_per_s"`
	MaxBin         int     `json:"max_1s"`
	OverSharedPct  float64 `json:"max_over_shared_pct"`
	CeilingBins    []int   `json:"ceiling_sends_per_s"`
	CeilingMaxBin  int     `json:"ceiling_max_1s"`
	CeilingOverPct float64 `json:"ceiling_max_over_pct"`
}

// maxOverSharedPct is the worst second of the fault and its recovery over
// the last shared rate; maxOverCeilingPct the same on b.test.
func (f *faultResult) maxOverSharedPct() float64 {
	return max(f.OverSharedPct, f.Recovery.OverSharedPct)
}
func (f *faultResult) maxOverCeilingPct() float64 {
	return max(f.CeilingOverPct, f.Recovery.CeilingOverPct)
}

// procTimeline is one process's a.test snapshots, one per second (-1:
// no sample in that second; Shared 1 or 0).
type procTimeline struct {
	Proc      int       `json:"proc"`
	Rate      []float64 `json:"rate"`
	FleetRate []float64 `json:"fleet_rate"`
	Estimate  []float64 `json:"estimate"`
	Limit     []float64 `json:"limit"`
	Shared    []int     `json:"shared"`
}

// timeline is r's a.test samples, one per second of [0, n).
func timeline(r childReport, n time.Duration, at func(int64) time.Duration) procTimeline {
	secs := int(n / time.Second)
	t := procTimeline{Proc: r.Proc, Rate: make([]float64, secs), FleetRate: make([]float64, secs), Estimate: make([]float64, secs),
		Limit: make([]float64, secs), Shared: make([]int, secs)}
	for i := range secs {
		t.Rate[i], t.FleetRate[i], t.Estimate[i], t.Limit[i], t.Shared[i] = -1, -1, -1, -1, -1
	}
	for _, s := range r.Samples {
		if i := int(at(s.At) / time.Second); s.Host == fleetTarget && i >= 0 && i < secs {
			t.Rate[i], t.FleetRate[i], t.Estimate[i], t.Limit[i] = round2(s.Rate), round2(s.FleetRate), round2(s.Estimate), round2(s.Limit)
			t.Shared[i] = 0
			if s.Shared {
				t.Shared[i] = 1
			}
		}
	}
	return t
}

// measureFault fills f: a.test's and b.test's requests while the store
// failed from start to end and in the recovery window after, against the
// rate the fleet last shared, and how soon each process shared again.
func measureFault(f *faultResult, a, b testserver.Stats, reports []childReport, warm, start, end, length time.Duration,
	capacity float64, at func(int64) time.Duration) {
	f.StartS, f.EndS = start.Seconds(), end.Seconds()
	sends := append(slices.Clone(a.Accepted), a.Rejected...)
	slices.Sort(sends)
	ceiled := append(slices.Clone(b.Accepted), b.Rejected...)
	before := max(warm, start-5*time.Second)
	if start > before {
		f.BeforeRate = float64(demo.CountIn(sends, before, start)) / (start - before).Seconds()
	}
	f.SharedRate = lastSharedRate(reports, fleetTarget, start, at)
	over := func(maxBin int, rate float64) float64 {
		if rate <= 0 {
			return 0
		}
		return (float64(maxBin)/rate - 1) * 100
	}

	f.Rejected = demo.CountIn(a.Rejected, start, end)
	f.Sent = demo.CountIn(a.Accepted, start, end) + f.Rejected
	f.RejectedPct = percent(f.Rejected, f.Sent)
	if end > start {
		f.Rate = float64(f.Sent) / (end - start).Seconds()
		f.CeilingRate = float64(demo.CountIn(ceiled, start, end)) / (end - start).Seconds()
	}
	f.Bins = bins(sends, start, end)
	f.MaxBin = slices.Max(append(f.Bins, 0))
	f.OverSharedPct = over(f.MaxBin, f.SharedRate)
	f.CeilingBins = bins(ceiled, start, end)
	f.CeilingMaxBin = slices.Max(append(f.CeilingBins, 0))
	f.CeilingOverPct = over(f.CeilingMaxBin, fleetCeiling)

	rec := &f.Recovery
	to := min(end+recoveryWindow, length)
	rec.FromS, rec.ToS = end.Seconds(), to.Seconds()
	if to > end {
		acc, rej := demo.CountIn(a.Accepted, end, to), demo.CountIn(a.Rejected, end, to)
		rec.GoodputPct = float64(acc) / (to - end).Seconds() / capacity * 100
		rec.RejectedPct = percent(rej, acc+rej)
	}
	rec.Bins = bins(sends, end, to)
	rec.MaxBin = slices.Max(append(rec.Bins, 0))
	rec.OverSharedPct = over(rec.MaxBin, f.SharedRate)
	rec.CeilingBins = bins(ceiled, end, to)
	rec.CeilingMaxBin = slices.Max(append(rec.CeilingBins, 0))
	rec.CeilingOverPct = over(rec.CeilingMaxBin, fleetCeiling)

	f.LongestSilenceS = longestSilence(sends, start, length).Seconds()

	var slowest time.Duration
	all := len(reports) > 0
	for _, r := range reports {
		d, ok := sharedAgain(r, end, at)
		var got *float64
		if ok {
			v := d.Seconds()
			got = &v
			slowest = max(slowest, d)
		}
		all = all && ok
		f.SharedAgainProcS = append(f.SharedAgainProcS, got)
		for _, l := range r.Logs {
			switch {
			case strings.Contains(l.Msg, "unreachable"):
				f.Unreachable++
			case strings.Contains(l.Msg, "back"):
				f.Back++
			}
		}
		f.Timeline = append(f.Timeline, timeline(r, length, at))
	}
	if all {
		v := slowest.Seconds()
		f.SharedAgainS = &v
	}
	if after := end + 5*time.Second; after < length {
		acc, rej := demo.CountIn(a.Accepted, after, length), demo.CountIn(a.Rejected, after, length)
		f.AfterGoodputPct = float64(acc) / (length - after).Seconds() / capacity * 100
		f.AfterRejectedPct = percent(rej, acc+rej)
	}
}

// lastSharedRate is the mean over processes of host's fleet rate at their
// last sample before t with the store shared (Rate where FleetRate is 0).
func lastSharedRate(reports []childReport, host string, t time.Duration, at func(int64) time.Duration) float64 {
	var sum float64
	n := 0
	for _, r := range reports {
		var last *sample
		for i := range r.Samples {
			if s := &r.Samples[i]; s.Host == host && s.Shared && at(s.At) < t {
				last = s
			}
		}
		if last != nil {
			rate := last.FleetRate
			if rate <= 0 {
				rate = last.Rate
			}
			sum += rate
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// sharedAgain is how long after end process r first sampled the store as
// shared on every host it crawls; false if it never did.
func sharedAgain(r childReport, end time.Duration, at func(int64) time.Duration) (time.Duration, bool) {
	first := map[string]time.Duration{}
	hosts := map[string]bool{}
	for _, s := range r.Samples {
		hosts[s.Host] = true
		if d := at(s.At); d >= end && s.Shared {
			if _, ok := first[s.Host]; !ok {
				first[s.Host] = d - end
			}
		}
	}
	if len(hosts) == 0 {
		return 0, false
	}
	var worst time.Duration
	for h := range hosts {
		d, ok := first[h]
		if !ok {
			return 0, false
		}
		worst = max(worst, d)
	}
	return worst, true
}

// longestSilence is the longest gap in sorted ts within [from, to), its
// ends included.
func longestSilence(ts []time.Duration, from, to time.Duration) time.Duration {
	last, gap := from, time.Duration(0)
	for _, t := range ts {
		if t < from {
			continue
		}
		if t >= to {
			break
		}
		gap = max(gap, t-last)
		last = t
	}
	return max(gap, to-last)
}
