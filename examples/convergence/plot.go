package main

import (
	"fmt"
	"image/color"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	red    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	pink   = color.NRGBA{R: 214, G: 39, B: 40, A: 90}
	grey   = color.RGBA{R: 90, G: 90, B: 90, A: 255}
)

// writePlot draws three panels over one time axis: the concurrency limit
// and the requests in flight; the pacing rate and the accepted throughput
// against the hidden capacity; the 429s per second. perSecond is the
// server's count of accepted requests per second of its clock, start the
// server time at which the crawl began.
func writePlot(path string, samples []sample, perSecond []int, start, duration time.Duration, workers int) error {
	if len(samples) == 0 {
		return fmt.Errorf("no samples to plot")
	}
	secs := duration.Seconds()

	var limit, inflight, rate plotter.XYs
	for _, s := range samples {
		t := s.t.Seconds()
		limit = append(limit, plotter.XY{X: t, Y: s.limit})
		inflight = append(inflight, plotter.XY{X: t, Y: float64(s.inflight)})
		rate = append(rate, plotter.XY{X: t, Y: s.rate})
	}

	// Accepted per second, in the server's own one-second windows (which
	// are the fixed windows of its limit), drawn as steps.
	var accepted plotter.XYs
	off := start.Seconds()
	for k, n := range perSecond {
		x := float64(k) - off
		if x+1 > secs {
			break
		}
		accepted = append(accepted, plotter.XY{X: max(x, 0), Y: float64(n)})
	}
	if len(accepted) > 0 {
		last := accepted[len(accepted)-1]
		accepted = append(accepted, plotter.XY{X: last.X + 1, Y: last.Y})
	}

	// 429s per second of the run, from the cumulative counts sampled at
	// every whole second.
	var rejected plotter.XYs
	prev, from := 0, 0.0
	for _, s := range samples {
		if s.t%time.Second != 0 {
			continue
		}
		rejected = append(rejected, plotter.XY{X: from, Y: float64(s.rejected - prev)})
		prev, from = s.rejected, s.t.Seconds()
	}
	if len(rejected) > 0 {
		rejected = append(rejected, plotter.XY{X: from, Y: rejected[len(rejected)-1].Y})
	}

	top := plot.New()
	top.Title.Text = fmt.Sprintf("adaptive.Attach vs a hidden limit of %d req/s (fixed window, %v latency, %d workers)",
		capacity, latency, workers)
	top.Y.Label.Text = "concurrency"
	top.Y.Min = 0
	addLine(top, limit, "concurrency limit", blue, false, plotter.PostStep)
	addLine(top, inflight, "requests in flight", orange, false, plotter.NoStep)

	mid := plot.New()
	mid.Y.Label.Text = "requests per second"
	mid.Y.Min = 0
	addLine(mid, hline(float64(capacity), secs), fmt.Sprintf("hidden capacity (%d/s)", capacity), grey, true, plotter.NoStep)
	addLine(mid, accepted, "accepted by the server, per second", green, false, plotter.PostStep)
	addLine(mid, rate, "pacing rate", blue, false, plotter.PostStep)

	bot := plot.New()
	bot.Y.Label.Text = "429s per second"
	bot.X.Label.Text = "time since start (s)"
	bot.Y.Min = 0
	if l := addLine(bot, rejected, "429 Too Many Requests", red, false, plotter.PostStep); l != nil {
		l.FillColor = pink
	}

	// Headroom above the data keeps the legends (top right) off the lines.
	top.Y.Max = 1.5 * maxY(limit, inflight)
	mid.Y.Max = 1.3 * maxY(rate, accepted, hline(capacity, 0))
	bot.Y.Max = max(1.4*maxY(rejected), 2)

	plots := [][]*plot.Plot{{top}, {mid}, {bot}}
	for _, row := range plots {
		p := row[0]
		p.X.Min, p.X.Max = 0, secs
		p.X.Tick.Marker = secondTicks{}
		p.Y.Tick.Marker = countTicks{}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = false
	}

	img := vgimg.NewWith(vgimg.UseWH(11*vg.Inch, 10*vg.Inch), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for i, row := range plots {
		row[0].Draw(canvases[i][0])
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// addLine adds a line with a legend entry to p. An empty series is left
// out.
func addLine(p *plot.Plot, xys plotter.XYs, name string, c color.Color, dashed bool, step plotter.StepKind) *plotter.Line {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	l.StepStyle = step
	if dashed {
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return l
}

// hline is a horizontal line at y over [0, xmax].
func hline(y, xmax float64) plotter.XYs {
	return plotter.XYs{{X: 0, Y: y}, {X: xmax, Y: y}}
}

func maxY(series ...plotter.XYs) float64 {
	m := 0.0
	for _, xys := range series {
		for _, p := range xys {
			m = max(m, p.Y)
		}
	}
	return m
}

// secondTicks marks every 5 s (every second on short runs), labelled every
// 10 s (every 2 s).
type secondTicks struct{}

func (secondTicks) Ticks(min, max float64) []plot.Tick {
	step, label := 5.0, 10.0
	if max-min <= 12 {
		step, label = 1, 2
	}
	var ticks []plot.Tick
	for x := min; x <= max+1e-9; x += step {
		t := plot.Tick{Value: x}
		if m := x / label; m == float64(int(m)) {
			t.Label = fmt.Sprintf("%gs", x)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// countTicks labels round whole numbers (steps of 1, 2, 5, 10, 20, ...),
// at most 8 of them: the panels show counts and rates, which read best so.
type countTicks struct{}

func (countTicks) Ticks(min, max float64) []plot.Tick {
	step := 1.0
	for i := 0; (max-min)/step > 8; i++ {
		step *= [...]float64{2, 2.5, 2}[i%3]
	}
	var ticks []plot.Tick
	for y := 0.0; y <= max; y += step {
		ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("%g", y)})
	}
	return ticks
}
