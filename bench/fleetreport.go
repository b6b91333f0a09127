package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
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
	Workers  int           `json:"workers_per_host_per_process"`
	Robots   bool          `json:"robots_txt"`
	Redis    string        `json:"redis"`
	Short    bool          `json:"short,omitempty"`
	TookS    float64       `json:"took_s"`
	Results  []fleetResult `json:"results"`
}

// The fleet's targets.
const (
	fleetGoodputTarget   = 95.0 // % of capacity, at least
	fleetRejectedTarget  = 1.0  // % of requests, at most
	outageRejectedTarget = 2.0  // % of requests while Redis is down, at most
	outageOverTarget     = 10.0 // % over the last shared rate, any second of the outage, at most
	sharedAgainTarget    = 5 * time.Second
)

func (r *fleetResult) oneLine() string {
	if r.Err != "" && r.Sent == 0 {
		return "error: " + r.Err
	}
	s := fmt.Sprintf("a.test %.2f req/s (%.1f %%), rejected %.2f %%, violations %d; b.test %.2f req/s (ceiling %.0f); store %.2f ms mean, %.2f calls/send; CPU busy %.0f %%",
		r.Goodput, r.GoodputPct, r.RejectedPct, r.Violations, r.CeilingRate, r.Ceiling, r.Store.MeanMs, r.Store.CallsPerSend, r.CPU.BusyPct)
	if o := r.Outage; o != nil {
		s += fmt.Sprintf("; outage: rejected %.2f %%, max %d/s against %.2f shared (%+.1f %%), b.test max %d/s (%+.1f %%), shared again after %s",
			o.RejectedPct, o.MaxBin, o.SharedRate, o.OverSharedPct, o.CeilingMaxBin, o.CeilingOverPct, o.sharedAgain())
	}
	if r.Err != "" {
		s += "; error: " + r.Err
	}
	return s
}

func (o *outage) sharedAgain() string {
	if o.SharedAgainS == nil {
		return "never (a process did not say so)"
	}
	return fmt.Sprintf("%.1f s", *o.SharedAgainS)
}

// printSeconds prints the cell's counts per second (-v).
func (r *fleetResult) printSeconds(out io.Writer) {
	n := r.n.Truncate(time.Second)
	fmt.Fprintf(out, "      a.test accepted/s %v\n      a.test rejected/s %v\n      b.test sent/s     %v\n",
		bins(r.accepted, 0, n), bins(r.rejected, 0, n), bins(r.ceiled, 0, n))
	if o := r.Outage; o != nil {
		for _, t := range o.Timeline {
			fmt.Fprintf(out, "      process %d a.test rate/s %v\n      process %d a.test limit  %v\n", t.Proc, t.Rate, t.Proc, t.Limit)
		}
	}
}

// printFleet prints the fleet run: its set-up, a table of the cells by
// process count, the outage cell, and the targets.
func printFleet(out io.Writer, d *fleetDoc) {
	fmt.Fprintln(out, d.Command)
	if d.Short {
		fmt.Fprintln(out, "(-short: a smoke run, cells too short; the figures mean nothing and no target is judged)")
	}
	robots := "off"
	if d.Robots {
		robots = "on"
	}
	fmt.Fprintf(out, "fleet cells of %s (warm-up %s), %d goroutines per host in each process, robots.txt %s, Redis: %s; %s, %d CPUs, %s, took %v\n",
		d.Duration, d.Warmup, d.Workers, robots, d.Redis, d.Go, d.CPUs, d.Date[:10], time.Duration(d.TookS)*time.Second)
	fmt.Fprintf(out, "  %s\n\n", d.Hosts)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "procs\tgoodput req/s\t% of capacity\trejected %\tviolations\tper process min\tmax\tb.test req/s\tmax 1 s\tceiling kept\tstore RTT mean\tp50\tp99\tcalls/send\ta.test calls/send\tCPU busy %\tfleet %\tredis %\tothers %\t")
	for _, r := range d.Results {
		kept := "yes"
		if !r.CeilingKept {
			kept = "NO"
		}
		lo, hi := r.shares()
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%.2f\t%d\t%.2f\t%.2f\t%.2f\t%d\t%s\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
			r.name(), r.Goodput, r.GoodputPct, r.RejectedPct, r.Violations, lo, hi, r.CeilingRate, r.CeilingMaxBin, kept,
			r.Store.MeanMs, r.Store.P50Ms, r.Store.P99Ms, r.Store.CallsPerSend, r.Store.TargetCallsPerSend,
			r.CPU.BusyPct, r.CPU.FleetPct, r.CPU.RedisPct, r.CPU.OthersPct)
	}
	tw.Flush()

	for _, r := range d.Results {
		o := r.Outage
		if o == nil {
			continue
		}
		fmt.Fprintf(out, "\noutage cell: %d processes, %.0f s; Redis killed at %.1f s, answering again at %.1f s (server's clock)\n",
			r.Procs, r.LengthS, o.KillAtS, o.BackAtS)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "before: sent/s\tlast shared rate\tdown: rejected %\tsent/s\tmax 1 s\tover shared\tb.test sent/s\tmax 1 s\tover ceiling\tshared again after\tafter: % of capacity\trejected %\tviolations\t")
		fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%.2f\t%d\t%+.1f %%\t%.2f\t%d\t%+.1f %%\t%s\t%.1f\t%.2f\t%d\t\n",
			o.BeforeRate, o.SharedRate, o.RejectedPct, o.Rate, o.MaxBin, o.OverSharedPct, o.CeilingRate, o.CeilingMaxBin, o.CeilingOverPct,
			o.sharedAgain(), o.AfterGoodputPct, o.AfterRejectedPct, r.Violations)
		tw.Flush()
		var each []string
		for i, s := range o.SharedAgainProcS {
			if s == nil {
				each = append(each, fmt.Sprintf("%d: never", i+1))
			} else {
				each = append(each, fmt.Sprintf("%d: %.1f s", i+1, *s))
			}
		}
		fmt.Fprintf(out, "  sent per second while down: a.test %v, b.test %v; shared again, per process: %s; log lines: %d unreachable, %d back\n",
			o.Bins, o.CeilingBins, strings.Join(each, ", "), o.Unreachable, o.Back)
	}

	fmt.Fprintf(out, "\nagainst the targets (>= %.0f %% of capacity, <= %.0f %% rejected, 0 violations, the ceiling kept fleet-wide;\n", fleetGoodputTarget, fleetRejectedTarget)
	fmt.Fprintf(out, "outage: <= %.0f %% rejected while down, no second above the last shared rate by more than %.0f %%, shared again within %v):\n",
		outageRejectedTarget, outageOverTarget, sharedAgainTarget)
	for _, r := range d.Results {
		if d.Short {
			fmt.Fprintf(out, "  %-18s (smoke run: not judged)\n", r.name())
			continue
		}
		verdict := "all met"
		if miss := r.misses(); len(miss) > 0 {
			verdict = "MISSED: " + strings.Join(miss, "; ")
		}
		if r.Err != "" {
			verdict = "ERROR: " + r.Err
		}
		fmt.Fprintf(out, "  %-18s %s\n", r.name(), verdict)
	}
}

// shares are the least and the most a process sent per second on a.test
// after the warm-up.
func (r *fleetResult) shares() (lo, hi float64) {
	if len(r.ProcSends) == 0 {
		return 0, 0
	}
	return slices.Min(r.ProcSends), slices.Max(r.ProcSends)
}

// misses lists the targets cell r missed.
func (r *fleetResult) misses() []string {
	var miss []string
	if o := r.Outage; o != nil {
		// the whole cell's goodput includes the outage: judged apart
		if o.RejectedPct > outageRejectedTarget {
			miss = append(miss, fmt.Sprintf("rejected %.2f %% while down > %.0f %%", o.RejectedPct, outageRejectedTarget))
		}
		if o.OverSharedPct > outageOverTarget+1e-9 { // 11 sends against 10 is 10 %, not more
			miss = append(miss, fmt.Sprintf("%d sends in one second while down: %+.1f %% over the last shared rate %.2f", o.MaxBin, o.OverSharedPct, o.SharedRate))
		}
		if o.SharedAgainS == nil || *o.SharedAgainS > sharedAgainTarget.Seconds() {
			miss = append(miss, "shared again after "+o.sharedAgain())
		}
		if o.CeilingOverPct > outageOverTarget+1e-9 {
			miss = append(miss, fmt.Sprintf("b.test %d sends in one second while down: %+.1f %% over its ceiling %.0f", o.CeilingMaxBin, o.CeilingOverPct, fleetCeiling))
		}
	} else {
		if r.GoodputPct < fleetGoodputTarget {
			miss = append(miss, fmt.Sprintf("goodput %.1f %% < %.0f %%", r.GoodputPct, fleetGoodputTarget))
		}
		if r.RejectedPct > fleetRejectedTarget {
			miss = append(miss, fmt.Sprintf("rejected %.2f %% > %.0f %%", r.RejectedPct, fleetRejectedTarget))
		}
	}
	if r.Violations > 0 {
		miss = append(miss, fmt.Sprintf("%d violations", r.Violations))
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
