package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// fleetDoc is the fleet run, as printed and as -json writes it.
type fleetDoc struct {
	Command  string        `json:"command"`
	Date     string        `json:"date"`
	Go       string        `json:"go"`
	CPUs     int           `json:"cpus"`
	Hosts    string        `json:"hosts"`
	Duration string        `json:"duration"`
	Warmup   string        `json:"warmup"`
	Outage   string        `json:"outage"`
	Fault    string        `json:"fault"`
	Timeout  string        `json:"request_timeout"`
	Workers  int           `json:"workers_per_host_per_process"`
	Runs     int           `json:"runs"`
	Robots   bool          `json:"robots_txt"`
	Redis    string        `json:"redis"`
	Short    bool          `json:"short,omitempty"`
	TookS    float64       `json:"took_s"`
	Results  []fleetResult `json:"results"`
}

// The fleet's targets.
const (
	fleetGoodputTarget  = 95.0 // % of capacity, at least
	fleetRejectedTarget = 1.0  // % of requests, at most
	// each process's share of a window's requests, times N, within these
	shareLowTarget, shareHighTarget = 0.5, 2.0
	outageRejectedTarget            = 2.0  // % of requests while Redis is down, at most
	faultOverTarget                 = 10.0 // % over the last shared rate (b.test: its ceiling), any second of a fault and its recovery window, at most
	recoveryTarget                  = 90.0 // % of capacity in the recovery window after Redis is back, at least
	sharedAgainTarget               = 5 * time.Second
)

func (r *fleetResult) oneLine() string {
	if r.Err != "" && r.Sent == 0 && r.Requests.Started == 0 {
		return "error: " + r.Err
	}
	var s string
	if r.Cell == cellCeiling {
		s = fmt.Sprintf("b.test %.2f req/s (ceiling %.0f), max %d in 1 s", r.CeilingRate, r.Ceiling, r.CeilingMaxBin)
	} else {
		s = fmt.Sprintf("a.test %.2f req/s (%.1f %%), rejected %.2f %%; b.test %.2f req/s (ceiling %.0f)",
			r.Goodput, r.GoodputPct, r.RejectedPct, r.CeilingRate, r.Ceiling)
	}
	s += ", violations " + r.violations(true)
	if sh := r.judgedShares(); sh.judged() {
		s += fmt.Sprintf("; share x N %.2f-%.2f", sh.MinShareN, sh.MaxShareN)
	}
	s += fmt.Sprintf("; requests %d, timed out %d, unended %d; store %.2f ms mean, %.2f calls/send; CPU busy %.0f %%",
		r.Requests.Started, r.Requests.TimedOut, r.Requests.Unended, r.Store.MeanMs, r.Store.CallsPerSend, r.CPU.BusyPct)
	if f := r.Fault; f != nil {
		s += fmt.Sprintf("; %s: rejected %.2f %% during, worst second %+.1f %% over the last shared %.2f (b.test %+.1f %% over its ceiling), shared again after %s, next %v %.1f %% of capacity, longest silence %.1f s",
			f.Kind, f.RejectedPct, f.maxOverSharedPct(), f.SharedRate, f.maxOverCeilingPct(), f.sharedAgain(), recoveryWindow, f.Recovery.GoodputPct, f.LongestSilenceS)
	}
	if r.Err != "" {
		s += "; error: " + r.Err
	}
	return s
}

// what says what the store did and when.
func (f *faultResult) what() string {
	switch cellKind(f.Kind) {
	case cellOutage:
		empty := "no"
		if f.RestartedEmpty != nil && *f.RestartedEmpty {
			empty = "yes"
		}
		return fmt.Sprintf("Redis killed (SIGKILL) at %.1f s, answering again at %.1f s, restarted empty: %s", f.StartS, f.EndS, empty)
	case cellGarbage:
		return fmt.Sprintf("the proxy answering bytes that are not RESP from %.1f s to %.1f s", f.StartS, f.EndS)
	case cellSlow:
		return fmt.Sprintf("the proxy holding every reply %v from %.1f s to %.1f s", slowReply, f.StartS, f.EndS)
	}
	return f.Kind
}

func (f *faultResult) sharedAgain() string {
	if f.SharedAgainS == nil {
		return "never (a process did not sample it shared)"
	}
	return fmt.Sprintf("%.1f s", *f.SharedAgainS)
}

// printSeconds prints the cell's counts per second (-v).
func (r *fleetResult) printSeconds(out io.Writer) {
	n := r.n.Truncate(time.Second)
	fmt.Fprintf(out, "      a.test accepted/s %v\n      a.test rejected/s %v\n      b.test sent/s     %v\n",
		bins(r.accepted, 0, n), bins(r.rejected, 0, n), bins(r.ceiled, 0, n))
	for _, sh := range r.Shares {
		for p, reqs := range sh.Requests {
			fmt.Fprintf(out, "      process %d %s requests per %.0f s %v, accepted %v\n", p+1, sh.Host, sh.WindowS, reqs, sh.Successes[p])
		}
	}
	if f := r.Fault; f != nil {
		for _, t := range f.Timeline {
			fmt.Fprintf(out, "      process %d a.test rate/s %v\n      process %d a.test fleet rate/s %v\n      process %d a.test limit  %v\n      process %d a.test shared %v\n",
				t.Proc, t.Rate, t.Proc, t.FleetRate, t.Proc, t.Limit, t.Proc, t.Shared)
		}
	}
}

// printFleet prints the fleet run: its set-up, a table of the cells, how
// each cell's requests split between its processes, the store-fault
// cells, the median and the worst of several runs, and the targets.
func printFleet(out io.Writer, d *fleetDoc) {
	fmt.Fprintln(out, d.Command)
	if d.Short {
		fmt.Fprintln(out, "(-short: a smoke run, cells too short; the figures mean nothing and no target is judged)")
	}
	robots := "off"
	if d.Robots {
		robots = "on"
	}
	fmt.Fprintf(out, "fleet cells of %s (warm-up %s), %d goroutines per host in each process, requests' deadline %s, robots.txt %s, Redis: %s; %s, %d CPUs, %s, took %v\n",
		d.Duration, d.Warmup, d.Workers, d.Timeout, robots, d.Redis, d.Go, d.CPUs, d.Date[:10], time.Duration(d.TookS)*time.Second)
	fmt.Fprintf(out, "  %s\n\n", d.Hosts)
	label := func(r *fleetResult) string { return r.label(d.Runs) }

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cell\tgoodput req/s\t% of capacity\trejected %\tviolations\tshare x N min\tmax\tper process req/s min\tmax\tb.test req/s\tmax 1 s\tceiling kept\trequests\ttimed out\tunended\tslowest\tstore RTT mean\tp50\tp99\tcalls/send\ta.test calls/send\tfailed calls\tCPU busy %\tfleet %\tredis %\tothers %\t")
	for i := range d.Results {
		r := &d.Results[i]
		kept := "yes"
		if !r.CeilingKept {
			kept = "NO"
		}
		good, pct, rej := fmt.Sprintf("%.2f", r.Goodput), fmt.Sprintf("%.1f", r.GoodputPct), fmt.Sprintf("%.2f", r.RejectedPct)
		lo, hi := r.shares()
		procLo, procHi := fmt.Sprintf("%.2f", lo), fmt.Sprintf("%.2f", hi)
		if r.Cell == cellCeiling { // a.test is not crawled
			good, pct, rej, procLo, procHi = "-", "-", "-", "-", "-"
		}
		shLo, shHi := "-", "-"
		if sh := r.judgedShares(); sh.judged() {
			shLo, shHi = fmt.Sprintf("%.2f", sh.MinShareN), fmt.Sprintf("%.2f", sh.MaxShareN)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t%s\t%d\t%d\t%d\t%.1f s\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f\t%.2f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
			label(r), good, pct, rej, r.violations(false), shLo, shHi, procLo, procHi, r.CeilingRate, r.CeilingMaxBin, kept,
			r.Requests.Started, r.Requests.TimedOut, r.Requests.Unended, r.Requests.SlowestMs/1000,
			r.Store.MeanMs, r.Store.P50Ms, r.Store.P99Ms, r.Store.CallsPerSend, r.Store.TargetCallsPerSend, r.Store.Failed,
			r.CPU.BusyPct, r.CPU.FleetPct, r.CPU.RedisPct, r.CPU.OthersPct)
	}
	tw.Flush()

	fmt.Fprintf(out, "\nthe split on the server's log (share x N: a process's share of a window's requests times N; judged on a.test, in the ceiling cell b.test):\n")
	for i := range d.Results {
		r := &d.Results[i]
		sh := r.judgedShares()
		if sh == nil || r.Procs < 2 {
			continue
		}
		var each []string
		for p := range sh.Successes {
			lost := 0
			if p < len(r.ProcRequests) {
				lost = r.ProcRequests[p].TimedOut
			}
			each = append(each, fmt.Sprintf("%d: %v (%d timed out)", p+1, sh.Successes[p], lost))
		}
		fmt.Fprintf(out, "  %-18s %s accepted per %.0f s from %.0f s: %s\n", label(r), sh.Host, sh.WindowS, sh.FromS, strings.Join(each, ", "))
	}

	for i := range d.Results {
		r := &d.Results[i]
		f := r.Fault
		if f == nil {
			continue
		}
		fmt.Fprintf(out, "\n%s cell (%s): %d processes, %.0f s; %s (server's clock)\n", f.Kind, label(r), r.Procs, r.LengthS, f.what())
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "before: sent/s\tlast shared rate\tduring: rejected %\tsent/s\tmax 1 s\tover shared\tb.test sent/s\tmax 1 s\tover ceiling\tnext 10 s: % of capacity\tmax 1 s\tover shared\tb.test over ceiling\tshared again after\tlongest silence\ttimed out\tunended\tafter: % of capacity\trejected %\tviolations\t")
		fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%.2f\t%d\t%+.1f %%\t%.2f\t%d\t%+.1f %%\t%.1f\t%d\t%+.1f %%\t%+.1f %%\t%s\t%.1f s\t%d\t%d\t%.1f\t%.2f\t%d\t\n",
			f.BeforeRate, f.SharedRate, f.RejectedPct, f.Rate, f.MaxBin, f.OverSharedPct, f.CeilingRate, f.CeilingMaxBin, f.CeilingOverPct,
			f.Recovery.GoodputPct, f.Recovery.MaxBin, f.Recovery.OverSharedPct, f.Recovery.CeilingOverPct,
			f.sharedAgain(), f.LongestSilenceS, r.Requests.TimedOut, r.Requests.Unended, f.AfterGoodputPct, f.AfterRejectedPct, r.Violations)
		tw.Flush()
		var each []string
		for i, s := range f.SharedAgainProcS {
			if s == nil {
				each = append(each, fmt.Sprintf("%d: never", i+1))
			} else {
				each = append(each, fmt.Sprintf("%d: %.1f s", i+1, *s))
			}
		}
		fmt.Fprintf(out, "  a.test sent per second during %v, next 10 s %v; b.test during %v, next 10 s %v\n  shared again, per process: %s; log lines: %d unreachable, %d back\n",
			f.Bins, f.Recovery.Bins, f.CeilingBins, f.Recovery.CeilingBins, strings.Join(each, ", "), f.Unreachable, f.Back)
	}

	if d.Runs > 1 {
		printFleetRuns(out, d.Results)
	}

	fmt.Fprintf(out, "\nagainst the targets:\n")
	fmt.Fprintf(out, "  N procs: >= %.0f %% of capacity, <= %.0f %% rejected, 0 violations, the ceiling kept, share x N within [%.1f, %.0f] in every %v window\n",
		fleetGoodputTarget, fleetRejectedTarget, shareLowTarget, shareHighTarget, shareWindow)
	fmt.Fprintf(out, "  ceiling: the ceiling kept, share x N within [%.1f, %.0f] in every window, no request timed out, 0 violations\n", shareLowTarget, shareHighTarget)
	fmt.Fprintf(out, "  outage: <= %.0f %% rejected while down, >= %.0f %% of capacity in the %v after, no second over the last shared rate (b.test: its ceiling) by more than %.0f %% while down and in the %v after, shared again within %v, 0 violations\n",
		outageRejectedTarget, recoveryTarget, recoveryWindow, faultOverTarget, recoveryWindow, sharedAgainTarget)
	fmt.Fprintf(out, "  garbage, slow: shared again within %v of the heal, no request lost (timed out or unended), no second over the last shared rate (b.test: its ceiling) by more than %.0f %% during the fault and in the %v after, 0 violations\n",
		sharedAgainTarget, faultOverTarget, recoveryWindow)
	for i := range d.Results {
		r := &d.Results[i]
		if d.Short {
			fmt.Fprintf(out, "  %-22s (smoke run: not judged)\n", label(r))
			continue
		}
		verdict := "all met"
		if miss := r.misses(); len(miss) > 0 {
			verdict = "MISSED: " + strings.Join(miss, "; ")
		}
		if r.Err != "" {
			verdict = "ERROR: " + r.Err
		}
		fmt.Fprintf(out, "  %-22s %s\n", label(r), verdict)
	}
}

// printFleetRuns prints, per cell, the median and the worst of its runs.
func printFleetRuns(out io.Writer, rs []fleetResult) {
	var order []string
	by := map[string][]*fleetResult{}
	for i := range rs {
		n := rs[i].name()
		if by[n] == nil {
			order = append(order, n)
		}
		by[n] = append(by[n], &rs[i])
	}
	fmt.Fprintln(out, "\nevery run counts: each cell's median and worst (in brackets) over its runs")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cell\truns\t% of capacity\trejected %\tviolations\tshare x N min\tmax\ttimed out\tb.test req/s\tfault: rejected %\tover shared %\tshared again s\tnext 10 s % of capacity\tlongest silence s\t")
	for _, n := range order {
		c := by[n]
		col := func(v func(*fleetResult) (float64, bool), worstIsMax bool, format string) string {
			var xs []float64
			for _, r := range c {
				if x, ok := v(r); ok {
					xs = append(xs, x)
				}
			}
			if len(xs) == 0 {
				return "-"
			}
			w := slices.Min(xs)
			if worstIsMax {
				w = slices.Max(xs)
			}
			return fmt.Sprintf(format+" ("+format+")", medianOf(xs), w)
		}
		aTest := func(v func(*fleetResult) float64) func(*fleetResult) (float64, bool) {
			return func(r *fleetResult) (float64, bool) { return v(r), r.Cell != cellCeiling }
		}
		share := func(lo bool) func(*fleetResult) (float64, bool) {
			return func(r *fleetResult) (float64, bool) {
				sh := r.judgedShares()
				if !sh.judged() || r.Procs < 2 {
					return 0, false
				}
				if lo {
					return sh.MinShareN, true
				}
				return sh.MaxShareN, true
			}
		}
		fault := func(v func(*faultResult) (float64, bool)) func(*fleetResult) (float64, bool) {
			return func(r *fleetResult) (float64, bool) {
				if r.Fault == nil {
					return 0, false
				}
				return v(r.Fault)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", n, len(c),
			col(aTest(func(r *fleetResult) float64 { return r.GoodputPct }), false, "%.1f"),
			col(aTest(func(r *fleetResult) float64 { return r.RejectedPct }), true, "%.2f"),
			col(func(r *fleetResult) (float64, bool) { return float64(r.Violations), true }, true, "%.0f"),
			col(share(true), false, "%.2f"),
			col(share(false), true, "%.2f"),
			col(func(r *fleetResult) (float64, bool) { return float64(r.Requests.lost()), true }, true, "%.0f"),
			col(func(r *fleetResult) (float64, bool) { return r.CeilingRate, true }, true, "%.2f"),
			col(fault(func(f *faultResult) (float64, bool) { return f.RejectedPct, true }), true, "%.2f"),
			col(fault(func(f *faultResult) (float64, bool) { return f.maxOverSharedPct(), true }), true, "%+.1f"),
			col(fault(func(f *faultResult) (float64, bool) {
				if f.SharedAgainS == nil {
					return math.Inf(1), true
				}
				return *f.SharedAgainS, true
			}), true, "%.1f"),
			col(fault(func(f *faultResult) (float64, bool) { return f.Recovery.GoodputPct, true }), false, "%.1f"),
			col(fault(func(f *faultResult) (float64, bool) { return f.LongestSilenceS, true }), true, "%.1f"))
	}
	tw.Flush()
}

// shares are the least and the most a process sent per second on a.test
// after the warm-up, as the processes counted.
func (r *fleetResult) shares() (lo, hi float64) {
	if len(r.ProcSends) == 0 {
		return 0, 0
	}
	return slices.Min(r.ProcSends), slices.Max(r.ProcSends)
}

// misses lists the targets cell r missed.
func (r *fleetResult) misses() []string {
	var miss []string
	shares := func() {
		sh := r.judgedShares()
		switch {
		case !sh.judged():
			miss = append(miss, "no request in any window to judge the split on")
		case sh.MinShareN < shareLowTarget || sh.MaxShareN > shareHighTarget:
			miss = append(miss, fmt.Sprintf("share x N %.2f-%.2f outside [%.1f, %.0f] on %s", sh.MinShareN, sh.MaxShareN, shareLowTarget, shareHighTarget, sh.Host))
		}
	}
	lost := func() {
		if n := r.Requests.lost(); n > 0 {
			miss = append(miss, fmt.Sprintf("%d requests lost (%d timed out, %d unended)", n, r.Requests.TimedOut, r.Requests.Unended))
		}
	}
	over := func(f *faultResult) {
		if f.maxOverSharedPct() > faultOverTarget+1e-9 { // 11 sends against 10 is 10 %, not more
			miss = append(miss, fmt.Sprintf("a.test at %+.1f %% over the last shared rate %.2f in one second (%d during, %d after)",
				f.maxOverSharedPct(), f.SharedRate, f.MaxBin, f.Recovery.MaxBin))
		}
		if f.maxOverCeilingPct() > faultOverTarget+1e-9 {
			miss = append(miss, fmt.Sprintf("b.test at %+.1f %% over its ceiling %.0f in one second (%d during, %d after)",
				f.maxOverCeilingPct(), fleetCeiling, f.CeilingMaxBin, f.Recovery.CeilingMaxBin))
		}
		if f.SharedAgainS == nil || *f.SharedAgainS > sharedAgainTarget.Seconds() {
			miss = append(miss, "shared again after "+f.sharedAgain())
		}
	}
	switch r.Cell {
	case cellProcs:
		if r.GoodputPct < fleetGoodputTarget {
			miss = append(miss, fmt.Sprintf("goodput %.1f %% < %.0f %%", r.GoodputPct, fleetGoodputTarget))
		}
		if r.RejectedPct > fleetRejectedTarget {
			miss = append(miss, fmt.Sprintf("rejected %.2f %% > %.0f %%", r.RejectedPct, fleetRejectedTarget))
		}
		shares()
	case cellCeiling:
		shares()
		lost()
	case cellOutage:
		f := r.Fault
		if f.RejectedPct > outageRejectedTarget {
			miss = append(miss, fmt.Sprintf("rejected %.2f %% while down > %.0f %%", f.RejectedPct, outageRejectedTarget))
		}
		if f.Recovery.GoodputPct < recoveryTarget {
			miss = append(miss, fmt.Sprintf("%.1f %% of capacity in the %v after the restart < %.0f %%", f.Recovery.GoodputPct, recoveryWindow, recoveryTarget))
		}
		over(f)
	case cellGarbage, cellSlow:
		over(r.Fault)
		lost()
	}
	if r.Violations > 0 {
		miss = append(miss, "violations "+r.violations(true))
	}
	if !r.CeilingKept {
		miss = append(miss, fmt.Sprintf("b.test at %.2f req/s > ceiling %.0f", r.CeilingRate, r.Ceiling))
	}
	return miss
}

func writeFleetJSON(path string, d *fleetDoc) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// violations is the run's pause violations, and how many of them were by a
// process that was not told of the pause (another was, and the fleet
// shares it through the store); long, also at most how long after the
// pause began.
func (r *fleetResult) violations(long bool) string {
	s := strconv.Itoa(r.Violations)
	switch {
	case r.ByOthers == 0:
	case long:
		s += fmt.Sprintf(" (%d by a process not told, at most %.2f ms after the pause began)", r.ByOthers, r.OthersLateMs)
	default:
		s += fmt.Sprintf(" (%d not told)", r.ByOthers)
	}
	return s
}
