package plot

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// AdviceInput is an advise to draw: one row of two panels per class, its
// latency p99 (with its SLO) and its p99 wait for a server (with its
// maximum) against its pool's size, one line per mode (direct, which has
// no pool, flat across), each with its 95 % band, and the answer ringed.
type AdviceInput struct {
	Title  string
	Advice *advise.Advice
}

// WriteAdvice draws in to path (.png or .svg).
func WriteAdvice(path string, in AdviceInput) error {
	return save(path, func(svg bool) (vg.CanvasWriterTo, error) { return DrawAdvice(in, svg) })
}

// advicePanel is one panel of an advise plot.
type advicePanel struct {
	title, yaxis string
	metric       system.Field
	bar          float64 // the class's bar in ms (0: none)
	barLabel     string
}

// DrawAdvice renders an advise plot.
func DrawAdvice(in AdviceInput, svg bool) (vg.CanvasWriterTo, error) {
	a := in.Advice
	if a == nil || len(a.Evaluated) == 0 {
		return nil, errors.New("nothing to plot: no configuration was evaluated")
	}
	var rows [][]*gplot.Plot
	for ci, c := range a.Classes {
		pi := slices.IndexFunc(a.Pools, func(p *advise.Pool) bool { return p.Name == c.Pool })
		if pi < 0 {
			continue
		}
		pool := a.Pools[pi]
		lat, _ := system.FieldByName(c.Latency)
		wait, _ := system.FieldByName("wait_p99_ms")
		name := c.Name
		if name == "" {
			name = "the workload"
		}
		what := "transaction"
		if c.Latency == "req_p99_ms" {
			what = "request"
		}
		pans := []advicePanel{
			{title: fmt.Sprintf("%s: %s latency, p99", name, what), yaxis: "p99 latency (ms)", metric: lat, bar: float64(c.Need.SLOP99) / 1e6, barLabel: "SLO"},
			{title: fmt.Sprintf("%s: wait for a server, p99", name), yaxis: "p99 wait (ms)", metric: wait, bar: float64(c.Need.MaxWait) / 1e6, barLabel: "max wait"},
		}
		var row []*gplot.Plot
		for _, pan := range pans {
			p, err := advicePanelPlot(pool, ci, pan)
			if err != nil {
				return nil, err
			}
			row = append(row, p)
		}
		rows = append(rows, row)
	}
	return tile(in.Title, 13, rows, svg), nil
}

// advicePanelPlot draws one panel: class ci's metric against pool's size,
// one line per evaluated mode.
func advicePanelPlot(pool *advise.Pool, ci int, pan advicePanel) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = pan.title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text = fmt.Sprintf("pool %s: pool_size (server connections), log scale", pool.Name)
	p.Y.Label.Text = pan.yaxis
	p.X.Label.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.TextStyle.Font.Size = vg.Points(10)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	xmax := float64(max(pool.Cap, 2))
	var ys []float64
	for _, v := range pool.Verdicts {
		for _, e := range v.Evals {
			if y, _ := e.Classes[ci].Stat(pan.metric); y > 0 {
				ys = append(ys, y)
			}
		}
	}
	if pan.bar > 0 {
		ys = append(ys, pan.bar)
	}
	logY := yScale(p, ys)
	for li, v := range pool.Verdicts {
		if len(v.Evals) == 0 {
			continue
		}
		if err := modeLine(p, pool, ci, li, v, pan.metric, logY, xmax); err != nil {
			return nil, err
		}
	}
	if pan.bar > 0 {
		bar, err := plotter.NewLine(plotter.XYs{{X: 1, Y: pan.bar}, {X: xmax, Y: pan.bar}})
		if err != nil {
			return nil, err
		}
		bar.Color, bar.Width = color.RGBA{200, 0, 0, 255}, vg.Points(1.4)
		bar.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(bar)
		p.Legend.Add(fmt.Sprintf("%s %g ms", pan.barLabel, pan.bar), bar)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
	if logY {
		p.Y.Max *= 2
	} else if p.Y.Max *= 1.15; p.Y.Max == 0 {
		p.Y.Max = 1
	}
	return p, nil
}

// modeLine draws verdict v (the li-th mode of pool) as a line of class
// ci's metric against the pool size (direct flat from 1 to xmax), with its
// band, its points and the answer ringed.
func modeLine(p *gplot.Plot, pool *advise.Pool, ci, li int, v *advise.Verdict, metric system.Field, logY bool, xmax float64) error {
	var pts, lo, hi, marks plotter.XYs
	for _, e := range v.Evals {
		y, half := e.Classes[ci].Stat(metric)
		if math.IsNaN(y) || (logY && y <= 0) {
			continue
		}
		xs := []float64{float64(e.Size)}
		if e.Mode == poolmode.Direct {
			xs = []float64{1, xmax}
		}
		for _, x := range xs {
			pts = append(pts, plotter.XY{X: x, Y: y})
			lo = append(lo, plotter.XY{X: x, Y: y - half})
			hi = append(hi, plotter.XY{X: x, Y: y + half})
		}
		if e == pool.Choice {
			marks = append(marks, plotter.XY{X: xs[0], Y: y})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	col := lineColor(li)
	if band := ciBand(lo, hi, col, logY); band != nil {
		p.Add(band)
	}
	ln, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	ln.Color, ln.Width = col, vg.Points(1.6)
	if v.Hypothetical {
		ln.Dashes = plotutil.Dashes(2)
	}
	p.Add(ln)
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	sc.Color, sc.Shape, sc.Radius = col, plotutil.Shape(li), vg.Points(2.2)
	p.Add(sc)
	label := v.Name()
	if v.Hypothetical {
		label += " (after the change)"
	}
	p.Legend.Add(label, ln, sc)
	if len(marks) > 0 {
		mk, err := plotter.NewScatter(marks)
		if err != nil {
			return err
		}
		mk.Shape, mk.Radius, mk.Color = draw.RingGlyph{}, vg.Points(7), color.RGBA{200, 0, 0, 255}
		p.Add(mk)
		p.Legend.Add("answer", mk)
	}
	return nil
}

// sizeTicks labels a pool-size axis: 1, 2, 5 times each power of ten, and
// the ends, so that a short range (1 to 8) still reads.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []gplot.Tick {
	out := ticks125{}.Ticks(lo, hi)
	has := func(v float64) bool {
		return slices.ContainsFunc(out, func(t gplot.Tick) bool { return math.Abs(t.Value-v) < 1e-9*max(1, v) })
	}
	for _, v := range []float64{math.Ceil(lo), math.Floor(hi)} {
		if v >= lo && v <= hi && !has(v) {
			out = append(out, gplot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
		}
	}
	slices.SortFunc(out, func(a, b gplot.Tick) int {
		switch {
		case a.Value < b.Value:
			return -1
		case a.Value > b.Value:
			return 1
		}
		return 0
	})
	return out
}
