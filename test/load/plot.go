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
