package validate

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// A sweep over the pool size is a curve: throughput and latency against
// pool size, one line per value of the other swept keys (e.g. the
// clients), model beside measurement. Its peak pool size is the one a
// capacity planner deploys: the smallest pool size whose throughput is
// within PeakWithin of the line's highest — a plateau's first point, so
// that noise between points of a flat top does not move it.

// CurveKey is the swept key a curve runs along.
const CurveKey = "pooler.default_pool_size"

// PeakWithin is how close to a line's highest throughput its peak pool
// size must come.
const PeakWithin = 0.05

// CurvePoint is one row of a curve.
type CurvePoint struct {
	X                      float64
	Model, Cal, Meas       float64 // TPS: the scenario's model, the calibrated model, measured (median)
	MeasLo, MeasHi         float64 // the measured TPS's 95 % interval over the runs (= Meas with one run)
	P50Cal, P50Meas        float64
	P99Cal, P99Meas        float64
	P50Model, P99Model     float64
	Pass                   bool
	TPSErr, P50Err, P99Err float64 // the calibrated model's judged relative errors (Cell.judgedErr), %
	// Runs are the point's live runs: TPS and, through PgBouncer, where
	// its thread and the pool's servers ran.
	Runs []Measured
}

// runsText is a point's runs for the curve table: each run's TPS and the
// share of the pool's servers on the pooler's core.
func (pt CurvePoint) runsText() string {
	var xs []string
	for _, x := range pt.Runs {
		s := fmt.Sprintf("%.0f", x.TPS)
		if x.Placement != nil {
			s += fmt.Sprintf(" (%.0f %%)", 100*x.Placement.Shared)
		}
		xs = append(xs, s)
	}
	return strings.Join(xs, ", ")
}

// CurveLine is the points that share every swept value but the curve's.
type CurveLine struct {
	Label  string // the other swept values, e.g. "workload.clients=50"
	Points []CurvePoint
	// PeakCal and PeakMeas are the peak pool sizes of the calibrated model
	// and of the measurement; PeakModel the scenario model's.
	PeakModel, PeakCal, PeakMeas float64
	// PeakMeasLo and PeakMeasHi bound the measured peak by the runs' 95 %
	// intervals: the smallest pool size whose interval reaches within
	// PeakWithin of the highest median (it may be on the plateau), and
	// the smallest whose whole interval does (it surely is; the last
	// pool size if none). With one run they equal PeakMeas.
	PeakMeasLo, PeakMeasHi float64
}

// Curves groups the report's rows into lines along CurveKey; nil when the
// sweep does not vary it.
func (rep *Report) Curves() []CurveLine {
	var lines []CurveLine
	at := map[string]int{}
	for _, r := range rep.Rows {
		if r.Skipped != "" || r.Class != "" {
			continue
		}
		x, others, ok := splitParams(r)
		if !ok {
			continue
		}
		i, seen := at[others]
		if !seen {
			i = len(lines)
			at[others] = i
			lines = append(lines, CurveLine{Label: others})
		}
		pt := CurvePoint{X: x, Model: r.Model.TPS, Cal: r.Calibrated.TPS, Meas: r.Measured.TPS, MeasLo: r.Measured.TPS, MeasHi: r.Measured.TPS,
			P50Cal: r.Calibrated.P50Ms, P50Meas: r.Measured.P50Ms, P99Cal: r.Calibrated.P99Ms, P99Meas: r.Measured.P99Ms,
			P50Model: r.Model.P50Ms, P99Model: r.Model.P99Ms, Pass: r.Pass(), Runs: r.Repeats}
		for _, c := range r.Cells {
			switch c.Metric {
			case "tps":
				pt.TPSErr = 100 * c.judgedErr()
				if c.Runs > 1 {
					// Cut at zero: with two runs (t = 12.7) the interval
					// can reach below it, where no throughput lies.
					pt.MeasLo, pt.MeasHi = max(0, c.MeasMean-c.MeasHalf), c.MeasMean+c.MeasHalf
				}
			case "p50_ms":
				pt.P50Err = 100 * c.judgedErr()
			case "p99_ms":
				pt.P99Err = 100 * c.judgedErr()
			}
		}
		lines[i].Points = append(lines[i].Points, pt)
	}
	for i := range lines {
		l := &lines[i]
		slices.SortFunc(l.Points, func(a, b CurvePoint) int { return int(math.Copysign(1, a.X-b.X)) })
		l.PeakModel = peak(l.Points, func(p CurvePoint) float64 { return p.Model })
		l.PeakCal = peak(l.Points, func(p CurvePoint) float64 { return p.Cal })
		l.PeakMeas = peak(l.Points, func(p CurvePoint) float64 { return p.Meas })
		l.PeakMeasLo, l.PeakMeasHi = peakRange(l.Points)
	}
	return lines
}

// splitParams is a row's CurveKey value and its other swept values.
func splitParams(r Row) (float64, string, bool) {
	var x float64
	found := false
	var others []string
	for _, p := range r.Params {
		if p.Key == CurveKey {
			v, err := strconv.ParseFloat(p.Value, 64)
			if err != nil {
				return 0, "", false
			}
			x, found = v, true
			continue
		}
		others = append(others, p.Key+"="+p.Value)
	}
	return x, strings.Join(others, ", "), found
}

// peak is the smallest x whose value is within PeakWithin of the highest.
func peak(pts []CurvePoint, f func(CurvePoint) float64) float64 {
	var top float64
	for _, p := range pts {
		top = max(top, f(p))
	}
	for _, p := range pts {
		if f(p) >= (1-PeakWithin)*top {
			return p.X
		}
	}
	return 0
}

// peakRange is the measured peak's range by the runs' intervals (see
// CurveLine.PeakMeasLo): the top is the highest median, as in peak. The
// top's own point meets the lower bound's test, and a point that meets
// the upper's meets the lower's, so lo <= hi.
func peakRange(pts []CurvePoint) (lo, hi float64) {
	if len(pts) == 0 {
		return 0, 0
	}
	var top float64
	for _, p := range pts {
		top = max(top, p.Meas)
	}
	bar := (1 - PeakWithin) * top
	lo, hi = math.Inf(1), pts[len(pts)-1].X
	for _, p := range slices.Backward(pts) { // sorted by X: the smallest wins
		if max(p.MeasHi, p.Meas) >= bar {
			lo = p.X
		}
		if min(p.MeasLo, p.Meas) >= bar {
			hi = p.X
		}
	}
	return lo, hi
}

// peakNote is the peak line's verdict: the same, the same within the
// runs' intervals (the calibrated peak lies where the measured plateau
// may start), or not.
func (l CurveLine) peakNote() string {
	switch {
	case l.PeakCal == l.PeakMeas:
		return "the same"
	case l.PeakMeasLo <= l.PeakCal && l.PeakCal <= l.PeakMeasHi:
		return fmt.Sprintf("NOT the same by the medians; within the runs' 95 %% intervals the measured plateau may start anywhere from %g to %g, and the calibrated %g lies there", l.PeakMeasLo, l.PeakMeasHi, l.PeakCal)
	case l.PeakMeasLo != l.PeakMeasHi:
		return fmt.Sprintf("NOT the same: within the runs' 95 %% intervals the measured plateau starts between %g and %g", l.PeakMeasLo, l.PeakMeasHi)
	}
	return "NOT the same"
}

// writeCurves writes the report's curve section alone (templates/curve.md.tmpl).
func (rep *Report) writeCurves(p func(string, ...any)) {
	var b strings.Builder
	if err := reportTemplates.ExecuteTemplate(&b, "curves", rep.markdownView()); err != nil {
		p("curves: %v\n", err)
		return
	}
	p("%s", b.String())
}

// WritePlot draws the report's curves: throughput, p50 and p99 against the
// pool size (log₂ axis), one colour per line; measured solid with its 95 %
// interval as error bars, the calibrated model dashed (the scenario's own
// model, a production what-if without the load driver, is in the report's
// tables, not drawn: its scale would flatten the others).
func (rep *Report) WritePlot(path string) error {
	lines := rep.Curves()
	if len(lines) == 0 {
		return fmt.Errorf("validate plot: the sweep does not vary %s", CurveKey)
	}
	panels := []struct {
		title, y  string
		meas, cal func(CurvePoint) float64
	}{
		{"Throughput", "transactions per second", func(p CurvePoint) float64 { return p.Meas }, func(p CurvePoint) float64 { return p.Cal }},
		{"Latency p50", "ms", func(p CurvePoint) float64 { return p.P50Meas }, func(p CurvePoint) float64 { return p.P50Cal }},
		{"Latency p99", "ms", func(p CurvePoint) float64 { return p.P99Meas }, func(p CurvePoint) float64 { return p.P99Cal }},
	}
	colors := []color.RGBA{{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0x94, 0x67, 0xbd, 0xff}}
	const w, h = 6 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w*vg.Length(len(panels)), h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels)}
	for pi, pn := range panels {
		pl := gplot.New()
		pl.Title.Text = fmt.Sprintf("%s: %s (%s)", rep.Scenario, pn.title, rep.Target)
		pl.X.Label.Text = CurveKey + " (log₂)"
		pl.Y.Label.Text = pn.y
		pl.X.Scale = gplot.LogScale{}
		pl.X.Tick.Marker = gplot.LogTicks{Prec: -1}
		pl.Add(plotter.NewGrid())
		for li, l := range lines {
			col := colors[li%len(colors)]
			var meas, cal plotter.XYs
			var errs plotter.YErrors
			for _, pt := range l.Points {
				meas = append(meas, plotter.XY{X: pt.X, Y: pn.meas(pt)})
				cal = append(cal, plotter.XY{X: pt.X, Y: pn.cal(pt)})
				if pi == 0 {
					errs = append(errs, struct{ Low, High float64 }{pt.Meas - pt.MeasLo, pt.MeasHi - pt.Meas})
				} else {
					errs = append(errs, struct{ Low, High float64 }{0, 0})
				}
			}
			lm, pm, err := plotter.NewLinePoints(meas)
			if err != nil {
				return err
			}
			lm.Color, pm.Color, pm.Shape = col, col, draw.CircleGlyph{}
			lc, err := plotter.NewLine(cal)
			if err != nil {
				return err
			}
			lc.Color, lc.Dashes, lc.Width = col, []vg.Length{vg.Points(6), vg.Points(3)}, vg.Points(1.5)
			pl.Add(lm, pm, lc)
			if pi == 0 {
				eb, err := plotter.NewYErrorBars(struct {
					plotter.XYer
					plotter.YErrorer
				}{meas, errs})
				if err == nil {
					eb.Color = col
					pl.Add(eb)
				}
			}
			if pi == 0 {
				name := shortLabel(l.Label)
				pl.Legend.Add(name+": measured (95% CI)", lm, pm)
				pl.Legend.Add(name+": calibrated model", lc)
			}
		}
		// Bottom right: the throughput rises from the smallest pools and
		// levels off, so its lines stay clear of that corner.
		pl.Legend.Top = false
		pl.Y.Min = 0
		pl.Draw(draw.Crop(tiles.At(dc, pi, 0), 0, 0, 0, 0))
	}
	return writeImage(path, img)
}

// writeImage saves img as a PNG (the only format WritePlot offers).
func writeImage(path string, img *vgimg.Canvas) error {
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".png" {
		return fmt.Errorf("validate plot %s: want a .png file", path)
	}
	return savePNG(path, img)
}

func savePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("validate plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("validate plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("validate plot %s: %w", path, err)
	}
	return nil
}

// shortLabel names a line for a legend: "workload.clients=50" becomes
// "50 clients".
func shortLabel(l string) string {
	if v, ok := strings.CutPrefix(l, "workload.clients="); ok && !strings.Contains(v, ",") {
		return v + " clients"
	}
	if l == "" {
		return "all"
	}
	return l
}
