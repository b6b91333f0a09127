package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

func (r *result) converge() string {
	if r.ConvergeS == nil {
		return "never"
	}
	s := fmt.Sprintf("%.0f s", *r.ConvergeS)
	if r.ChangeAtS != nil {
		s = "+" + s
	}
	return s
}

func (r *result) banned() string {
	if r.Banned == nil {
		return "-"
	}
	if *r.Banned {
		return fmt.Sprintf("yes (%d)", r.BanCount)
	}
	return "no"
}

func (r *result) latency() string {
	if r.MedianLatencyX == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *r.MedianLatencyX)
}

func (r *result) oneLine() string {
	if r.Err != "" {
		return "error: " + r.Err
	}
	if r.Crawl != nil {
		return r.crawlLine()
	}
	lat := ""
	if r.MedianLatencyX != nil {
		lat = fmt.Sprintf(", median latency %s unloaded", r.latency())
	}
	return fmt.Sprintf("%.2f req/s (%.1f %%)%s, rejected %.2f %%, converge %s, in flight %d, violations %d, banned %s",
		r.Goodput, r.GoodputPct, lat, r.RejectedPct, r.converge(), r.MaxInFlight, r.Violations, r.banned())
}

// printTable prints the timed scenarios (S1–S10), a row per cell.
func printTable(out io.Writer, results []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tRTT\tcontender\tgoodput req/s\t% of capacity\tmedian latency\trejected %\tconverge\tmax in flight\tviolations\tbanned\t")
	runs := slices.ContainsFunc(results, func(r result) bool { return r.Run > 1 })
	prev := ""
	var busy []string
	for _, r := range results {
		if r.Crawl != nil || r.Scenario == "" {
			continue
		}
		group := r.Scenario + " " + r.RTT
		if group != prev && prev != "" {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t")
		}
		prev = group
		name := r.Contender
		if runs {
			name += fmt.Sprintf(" #%d", r.Run)
		}
		if r.othersCPU() > busyMark {
			name += "*"
			busy = append(busy, fmt.Sprintf("%s %s %s %.0f %%", r.Scenario, r.rtt(), name, r.othersCPU()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.1f\t%s\t%.2f\t%s\t%d\t%d\t%s\t\n",
			r.Scenario, r.rtt(), name, r.Goodput, r.GoodputPct, r.latency(), r.RejectedPct, r.converge(), r.MaxInFlight, r.Violations, r.banned())
	}
	tw.Flush()
	if len(busy) > 0 {
		fmt.Fprintf(out, "* other processes used more than %d %% of the CPU during the cell: %s\n", busyMark, strings.Join(busy, ", "))
	}
}

// printCrawl prints the whole crawls (S11), a row per host of each cell.
func printCrawl(out io.Writer, results []result) {
	i := slices.IndexFunc(results, func(r result) bool { return r.Crawl != nil })
	if i < 0 {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tRTT\tcontender\thost\thidden limit\tpages\tideal s\tfinish s\tlost\trejected %\tviolations\tmax in flight\t")
	for _, r := range results[i:] {
		if r.Crawl == nil {
			continue
		}
		name := r.Contender
		if r.othersCPU() > busyMark {
			name += "*"
		}
		if r.CrawlCut {
			name += " (cut)"
		}
		for j, h := range r.Crawl {
			inFlight := ""
			if j == 0 {
				inFlight = fmt.Sprint(r.MaxInFlight)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%d\t%.2f\t%d\t%s\t\n",
				r.Scenario, r.rtt(), name, h.Host, h.About, h.Pages, h.IdealS, h.FinishS, h.Lost, h.RejectedPct, h.Violations, inFlight)
		}
	}
	tw.Flush()
	if slices.ContainsFunc(results, func(r result) bool { return r.CrawlCut }) {
		fmt.Fprintln(out, "(cut: stopped at the deadline, twice the slowest host's ideal time plus 30 s; pages not fetched by then are lost)")
	}
}

// busyMark is the share of the CPU (percent) taken by other processes above
// which a cell is marked as perturbed.
const busyMark = 20

// rtt is the RTT column: at the server, and on the wire.
func (r *result) rtt() string {
	if r.Wire == "" {
		return r.RTT
	}
	if r.RTT == "0s" {
		return r.Wire + " wire"
	}
	return r.RTT + " + " + r.Wire + " wire"
}

// printRuns prints each cell's runs side by side: the median and the
// worst goodput (a whole crawl's: its worst host's ideal time over its
// finish), the rejected share (of sends after the warm-up, every host),
// and how busy the machine was.
func printRuns(out io.Writer, results []result) {
	type cell struct {
		key     string
		rs      []result
		crawled bool
	}
	var cells []*cell
	byKey := map[string]*cell{}
	for _, r := range results {
		if r.Scenario == "" {
			continue
		}
		key := r.Scenario + "\t" + r.rtt() + "\t" + r.Contender
		c := byKey[key]
		if c == nil {
			c = &cell{key: key, crawled: r.Crawl != nil}
			byKey[key] = c
			cells = append(cells, c)
		}
		c.rs = append(c.rs, r)
	}
	fmt.Fprintln(out, "every run counts: the median and the worst of each cell's runs")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tRTT\tcontender\truns\tgoodput % median\tworst\teach run\trejected % median\tworst\tothers' CPU %\t")
	for _, c := range cells {
		var good, rej, cpu []float64
		var each []string
		for _, r := range c.rs {
			good = append(good, r.GoodputPct)
			rej = append(rej, r.RejectedPct)
			each = append(each, fmt.Sprintf("%.1f", r.GoodputPct))
			if r.OthersCPU != nil {
				cpu = append(cpu, *r.OthersCPU)
			}
		}
		load := "-"
		if len(cpu) > 0 {
			load = fmt.Sprintf("%.0f-%.0f", slices.Min(cpu), slices.Max(cpu))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%.2f\t%.2f\t%s\t\n", c.key, len(c.rs), medianOf(good), slices.Min(good),
			strings.Join(each, " "), medianOf(rej), slices.Max(rej), load)
	}
	tw.Flush()
}

// medianOf is the median of xs (the mean of the middle two for an even
// count); 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// printTargets lists where adaptive misses the bench's targets: at least
// 95 % of capacity, at most 1 % rejected, no violations, never banned, and
// no baseline at least as fast while at least as polite; and those of the
// newer scenarios: a median latency at most 1.5 times the unloaded one
// (S9), 90 % of a new capacity within 30 s (S10), each host of a whole
// crawl (S11) done within 5 s of pages / capacity with no page lost. A
// smoke run (-short) judges nothing: its cells are too short to mean
// anything.
func printTargets(out io.Writer, results []result, smoke bool) {
	type group struct {
		name string
		rs   []result
	}
	var groups []*group
	byName := map[string]*group{}
	for _, r := range results {
		if r.Scenario == "" {
			continue
		}
		key := r.Scenario + " rtt " + r.rtt()
		g := byName[key]
		if g == nil {
			g = &group{name: key}
			byName[key] = g
			groups = append(groups, g)
		}
		g.rs = append(g.rs, r)
	}
	fmt.Fprintln(out, "adaptive against the targets (>= 95 % of capacity, <= 1 % rejected, 0 violations, never banned, no baseline as fast and as polite;")
	fmt.Fprintf(out, "S9 median latency <= %.1fx unloaded; S10 90 %% of the new capacity within 30 s; S11 each host done within pages / capacity + %v, no page lost):\n", maxLatency, finishSlack)
	for _, g := range groups {
		// with several runs, the worst of adaptive's is judged
		i := -1
		for j, r := range g.rs {
			if r.Contender == "adaptive" && (i < 0 || r.GoodputPct < g.rs[i].GoodputPct) {
				i = j
			}
		}
		if i < 0 {
			continue
		}
		if smoke {
			fmt.Fprintf(out, "  %-16s (smoke run: not judged)\n", g.name)
			continue
		}
		a := g.rs[i]
		var miss, faster []string
		if a.Crawl != nil {
			miss = crawlMisses(a)
		} else {
			miss, faster = timedMisses(a, g.rs)
		}
		verdict := "all met"
		if a.Err != "" {
			verdict = "ERROR: " + a.Err
		} else if len(miss) > 0 {
			verdict = "MISSED: " + strings.Join(miss, "; ")
		}
		fmt.Fprintf(out, "  %-16s %s", g.name, verdict)
		if len(faster) > 0 {
			fmt.Fprintf(out, " (faster but less polite: %s)", strings.Join(faster, ", "))
		}
		fmt.Fprintln(out)
	}
}

// timedMisses lists the targets adaptive's cell a misses among the cells
// rs of the same scenario and RTT, and the baselines faster but less
// polite.
func timedMisses(a result, rs []result) (miss, faster []string) {
	if a.GoodputPct < 95 {
		miss = append(miss, fmt.Sprintf("goodput %.1f %% < 95 %%", a.GoodputPct))
	}
	if a.MedianLatencyX != nil && *a.MedianLatencyX > maxLatency {
		miss = append(miss, fmt.Sprintf("median latency %.2fx > %.1fx unloaded", *a.MedianLatencyX, maxLatency))
	}
	if sc := scenarioNamed(a.Scenario); sc != nil && sc.reachWithin > 0 {
		if a.ConvergeS == nil {
			miss = append(miss, "never reached 90 % of the new capacity")
		} else if *a.ConvergeS > sc.reachWithin.Seconds() {
			miss = append(miss, fmt.Sprintf("reached 90 %% of the new capacity after %.0f s > %.0f s", *a.ConvergeS, sc.reachWithin.Seconds()))
		}
	}
	if a.RejectedPct > 1 {
		miss = append(miss, fmt.Sprintf("rejected %.2f %% > 1 %%", a.RejectedPct))
	}
	if a.Violations > 0 {
		miss = append(miss, fmt.Sprintf("%d violations", a.Violations))
	}
	if a.Banned != nil && *a.Banned {
		miss = append(miss, "banned")
	}
	for _, b := range rs {
		if b.Contender == "adaptive" || b.Err != "" || b.Goodput < a.Goodput {
			continue
		}
		asPolite := b.RejectedPct <= a.RejectedPct && b.Violations <= a.Violations &&
			!(b.Banned != nil && *b.Banned && !(a.Banned != nil && *a.Banned)) &&
			!(b.MedianLatencyX != nil && a.MedianLatencyX != nil && *b.MedianLatencyX > *a.MedianLatencyX)
		if asPolite {
			miss = append(miss, fmt.Sprintf("%s as fast (%.2f req/s) and as polite", b.Contender, b.Goodput))
		} else {
			faster = append(faster, b.Contender)
		}
	}
	return miss, faster
}

// crawlMisses lists the targets adaptive's whole crawl a misses, per host.
func crawlMisses(a result) []string {
	var miss []string
	if a.CrawlCut {
		miss = append(miss, "stopped at the deadline")
	}
	for _, h := range a.Crawl {
		if h.FinishS > h.IdealS+finishSlack.Seconds() {
			miss = append(miss, fmt.Sprintf("%s done at %.1f s > %.1f s + %.0f s", h.Host, h.FinishS, h.IdealS, finishSlack.Seconds()))
		}
		if h.Lost > 0 {
			miss = append(miss, fmt.Sprintf("%s lost %d of %d pages", h.Host, h.Lost, h.Pages))
		}
		if h.RejectedPct > 1 {
			miss = append(miss, fmt.Sprintf("%s rejected %.2f %% > 1 %%", h.Host, h.RejectedPct))
		}
		if h.Violations > 0 {
			miss = append(miss, fmt.Sprintf("%s %d violations", h.Host, h.Violations))
		}
	}
	return miss
}

func scenarioNamed(name string) *scenario {
	all := allScenarios()
	for i := range all {
		if all[i].name == name {
			return &all[i]
		}
	}
	return nil
}

func writeJSON(path string, d time.Duration, parallel int, results []result) error {
	doc := struct {
		Command string `json:"command"`
		// the -duration flag as given: a row's own length and the moment
		// it is judged from are its length_s and judged_from_s (the kinds
		// run three times the flag, S10 its own)
		Duration  string   `json:"duration_flag"`
		Parallel  int      `json:"parallel"`
		Go        string   `json:"go"`
		CPUs      int      `json:"cpus"`
		Date      string   `json:"date"`
		Scenarios []string `json:"scenarios"`
		Results   []result `json:"results"`
	}{
		Command: "go run ./bench " + strings.Join(os.Args[1:], " "), Duration: d.String(),
		Parallel: parallel, Go: runtime.Version(), CPUs: runtime.NumCPU(), Date: time.Now().Format(time.RFC3339),
		Results: results,
	}
	for _, sc := range allScenarios() {
		doc.Scenarios = append(doc.Scenarios, sc.name+": "+sc.title)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
