package load

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws results as an SVG (or any format gonum/plot knows by
// path's extension) beside the table: CPU per delivery against the
// session count N, one line per system, N on a log scale — the peers'
// lines against the gateway's show the ratio the table's "vs gateway"
// column gives at each N.
func WritePlot(path string, results []Result) error {
	p := plot.New()
	p.Title.Text = "One event to N sessions: server CPU per delivery"
	p.X.Label.Text = "sessions (N)"
	p.Y.Label.Text = "CPU per delivery (µs)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Centimeter
	var systems []string
	for _, r := range results {
		if !slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
		}
	}
	var lines []any
	for _, s := range systems {
		var xys plotter.XYs
		for _, r := range results {
			if r.System == s && r.N > 0 {
				xys = append(xys, plotter.XY{X: float64(r.N), Y: float64(r.CPUPerDelivery.Nanoseconds()) / 1e3})
			}
		}
		slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		lines = append(lines, s, xys)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("load: plot: %w", err)
	}
	p.Y.Min = 0
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
		return fmt.Errorf("load: save plot %s: %w", path, err)
	}
	return nil
}

// Line is one named line of a Chart: points in drawing order.
type Line struct {
	Name   string
	Points plotter.XYs
}

// Chart describes a line plot: title, axis labels and whether X is on a
// log scale.
type Chart struct {
	Title, X, Y string
	LogX        bool
}

// WriteLines draws lines on c as an SVG at path (the other harnesses'
// plots: latency CDFs, reconnect-storm timelines, post-to-screen by
// stream size). Lines without points are left out; none at all is an
// error, so a harness that measured nothing does not write an empty
// figure over a committed one.
func WriteLines(path string, c Chart, lines []Line) error {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.X
	p.Y.Label.Text = c.Y
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Centimeter
	var args []any
	for _, l := range lines {
		if len(l.Points) > 0 {
			args = append(args, l.Name, l.Points)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("load: plot %s: no points", path)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return fmt.Errorf("load: plot: %w", err)
	}
	p.Y.Min = 0
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
		return fmt.Errorf("load: save plot %s: %w", path, err)
	}
	return nil
}

// WriteCDFPlot draws the send→receive latency CDF of each result (one
// line per system and N, from Result.Percentiles) at path, latency on a
// log scale.
func WriteCDFPlot(path string, results []Result) error {
	var lines []Line
	for _, r := range results {
		var pts plotter.XYs
		for p, d := range r.Percentiles {
			if ms := float64(d) / 1e6; ms > 0 {
				pts = append(pts, plotter.XY{X: ms, Y: float64(p) / 100})
			}
		}
		lines = append(lines, Line{Name: fmt.Sprintf("%s N=%d", r.System, r.N), Points: pts})
	}
	return WriteLines(path, Chart{Title: "One event to N sessions: send→receive latency CDF",
		X: "latency (ms)", Y: "share of deliveries", LogX: true}, lines)
}
