// Package plot draws a sweep so that it answers its question: throughput,
// p50 and p99 transaction latency (with the SLO as a line when one is
// given), the wait for a server, the clients refused and timed out, and
// how busy the server connections were, against one swept key, one line
// per value of the other swept keys (e.g. one per pool mode), six panels in
// one PNG or SVG image (gonum.org/v1/plot). With replications each line
// carries its 95 % confidence interval as a shaded band; a chosen
// configuration is marked on every panel; axes whose values span decades
// are logarithmic.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Input is what to draw.
type Input struct {
	Title string
	Rows  []scenarios.Row
	// XKey is the key on the x axis; empty picks the first swept key whose
	// values are all numbers, durations or rates (else the first key).
	XKey string
	// LogKeys are keys whose values were log-spaced; the x axis is then
	// logarithmic. Keys not listed get a log axis when their values are
	// positive, span a factor of 50 or more and are not evenly spaced.
	LogKeys map[string]bool
	// SLOP99Ms draws the p99 SLO as a line on the p99 panels (0: none).
	SLOP99Ms float64
	// Chosen marks these rows (by index) on every panel: the answer.
	Chosen []int
	// ChosenLabel names the mark in the legend ("answer" when empty).
	ChosenLabel string
}

// Series is one metric drawn as a line in a panel; dashed series share
// their line's colour.
type Series struct {
	Label  string // in the legend when a panel has several series ("" for one)
	Metric string // the metric's JSON name
	Dashed bool
	Dotted bool
}

// Panel is one panel: its title, axis label and series.
type Panel struct {
	Title  string
	YAxis  string
	Series []Series
	// SLO marks the panel that carries the p99 SLO line.
	SLO bool
}

// Panels are drawn left to right, top to bottom.
var Panels = []Panel{
	{Title: "Throughput (steady)", YAxis: "transactions per second", Series: []Series{{Metric: "tps_steady"}}},
	{Title: "Transaction latency, p50", YAxis: "p50 latency (ms)", Series: []Series{{Metric: "p50_ms"}}},
	{Title: "Transaction latency, p99", YAxis: "p99 latency (ms)", Series: []Series{{Metric: "p99_ms"}}, SLO: true},
	{Title: "Wait for a server connection, p99", YAxis: "p99 acquire wait (ms)", Series: []Series{{Metric: "wait_p99_ms"}}},
	{Title: "Refused (solid) and timed out (dashed)", YAxis: "connections or clients", Series: []Series{{Label: "refused", Metric: "conn_refused"}, {Label: "timed out", Metric: "wait_timeouts", Dashed: true}}},
	{Title: "Server connections busy (solid) and linked (dashed)", YAxis: "share of the pool", Series: []Series{{Label: "busy", Metric: "server_busy"}, {Label: "linked", Metric: "server_linked", Dashed: true}}},
}

// appPanel replaces the wait panel when the rows use an application pool:
// the wait the application sees (for a pooled connection) and, on a CPU
// server, the wait it cannot see (queueing for the server's CPU).
var appPanel = Panel{Title: "Visible wait (app pool, solid) vs hidden wait (CPU queue, dashed), p99", YAxis: "p99 wait per transaction (ms)",
	Series: []Series{{Label: "app pool", Metric: "app_wait_txn_p99_ms"}, {Label: "CPU queue", Metric: "cpu_queue_txn_p99_ms", Dashed: true}}}

// requestPanel replaces the p50 panel when the rows have requests: the
// request latency the SLO is about.
var requestPanel = Panel{Title: "Request latency, p50 (solid) and p99 (dashed)", YAxis: "request latency (ms)",
	Series: []Series{{Label: "p50", Metric: "req_p50_ms"}, {Label: "p99", Metric: "req_p99_ms", Dashed: true}}}

// panels chooses the panels for the rows.
func panels(in Input) []Panel {
	out := append([]Panel(nil), Panels...)
	for _, r := range in.Rows {
		if r.Config.AppPool.Mode != system.NoAppPool {
			out[3] = appPanel
		}
		if r.Config.Workload.RequestLevel() {
			out[1] = requestPanel
		}
	}
	// App-pool timeouts count with the pooler's.
	for _, r := range in.Rows {
		if r.Config.AppPool.Mode == system.QueuePool {
			p := out[4]
			p.Series = append(append([]Series(nil), p.Series...), Series{Label: "app-pool timeouts (dotted)", Metric: "app_timeouts", Dotted: true})
			out[4] = p
			break
		}
	}
	return out
}

// CheckPath accepts .png and .svg file names.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
		return nil
	}
	return fmt.Errorf("--plot %q: want a file name ending in .png or .svg", path)
}

// number reads a swept value as a number for the x axis, with its unit.
func number(s string) (float64, string, bool) {
	if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return v, "", true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return float64(d) / 1e6, "ms", true
	}
	if num, unit, ok := strings.Cut(s, "/"); ok {
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, "", false
		}
		per := map[string]float64{"s": 1, "ms": 1e-3, "min": 60, "h": 3600}[unit]
		if per == 0 {
			return 0, "", false
		}
		return v / per, "per second", true
	}
	return 0, "", false
}

// axisLabels names the units of well-known keys.
var axisLabels = map[string]string{
	"workload.clients":          "clients (closed workload)",
	"workload.arrival_rate":     "session arrivals per second",
	"pooler.default_pool_size":  "pool size (default_pool_size)",
	"server.max_connections":    "server max_connections",
	"workload.stmts_per_txn":    "statements per transaction",
	"workload.txns_per_session": "transactions per session",
}

// Write draws in to path (.png or .svg).
func Write(path string, in Input) error {
	return save(path, func(svg bool) (vg.CanvasWriterTo, error) { return Draw(in, svg) })
}

// save renders with draw (SVG when path ends in .svg, else PNG) to path.
func save(path string, draw func(svg bool) (vg.CanvasWriterTo, error)) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	c, err := draw(strings.ToLower(filepath.Ext(path)) == ".svg")
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Draw renders the four panels onto a canvas (SVG or PNG at 150 dpi).
func Draw(in Input, svg bool) (vg.CanvasWriterTo, error) {
	if len(in.Rows) == 0 || len(in.Rows[0].Params) == 0 {
		return nil, errors.New("nothing to plot: the sweep varies no key")
	}
	keys := make([]string, len(in.Rows[0].Params))
	for i, p := range in.Rows[0].Params {
		keys[i] = p.Key
	}
	xi := -1
	for i, k := range keys {
		if k == in.XKey {
			xi = i
		}
	}
	if in.XKey != "" && xi < 0 {
		return nil, fmt.Errorf("plot: %s is not swept", in.XKey)
	}
	if xi < 0 {
		for i := range keys {
			ok := true
			for _, r := range in.Rows {
				if _, _, n := number(r.Params[i].Value); !n {
					ok = false
					break
				}
			}
			if ok {
				xi = i
				break
			}
		}
	}
	numeric := xi >= 0
	if !numeric {
		xi = 0
	}
	xkey := keys[xi]

	// x values: numbers, or positions of categories in order of appearance.
	var cats []string
	catIndex := map[string]int{}
	unit := ""
	xs := make([]float64, len(in.Rows))
	for j, r := range in.Rows {
		v := r.Params[xi].Value
		if numeric {
			xs[j], unit, _ = number(v)
			continue
		}
		if _, ok := catIndex[v]; !ok {
			catIndex[v] = len(cats)
			cats = append(cats, v)
		}
		xs[j] = float64(catIndex[v])
	}
	logX := numeric && (in.LogKeys[xkey] || looksLog(xs))

	// Lines: one per combination of the other keys, in order of appearance.
	type line struct {
		label string
		idx   []int
	}
	var lines []*line
	byLabel := map[string]*line{}
	for j, r := range in.Rows {
		var parts []string
		for i, p := range r.Params {
			if i == xi {
				continue
			}
			name := p.Key[strings.LastIndexByte(p.Key, '.')+1:]
			if len(r.Params) == 2 && p.Key == "pooler.mode" {
				parts = append(parts, p.Value)
			} else {
				parts = append(parts, name+"="+p.Value)
			}
		}
		label := strings.Join(parts, ", ")
		l, ok := byLabel[label]
		if !ok {
			l = &line{label: label}
			byLabel[label] = l
			lines = append(lines, l)
		}
		l.idx = append(l.idx, j)
	}

	xlabel := axisLabels[xkey]
	if xlabel == "" {
		xlabel = xkey
	}
	if unit != "" && !strings.Contains(xlabel, unit) {
		xlabel += " (" + unit + ")"
	}
	if logX {
		xlabel += ", log scale"
	}

	pans := panels(in)
	plots := make([][]*gplot.Plot, (len(pans)+1)/2)
	chosen := map[int]bool{}
	for _, j := range in.Chosen {
		chosen[j] = true
	}
	markLegend := false
	for pi, panel := range pans {
		p := gplot.New()
		p.Title.Text = panel.Title
		p.Title.TextStyle.Font.Size = vg.Points(12)
		p.X.Label.Text = xlabel
		p.Y.Label.Text = panel.YAxis
		p.X.Label.TextStyle.Font.Size = vg.Points(10)
		p.Y.Label.TextStyle.Font.Size = vg.Points(10)
		p.X.Tick.Label.Font.Size = vg.Points(9)
		p.Y.Tick.Label.Font.Size = vg.Points(9)
		p.Add(plotter.NewGrid())
		if logX {
			p.X.Scale = gplot.LogScale{}
			p.X.Tick.Marker = ticks125{}
		}
		if !numeric {
			p.X.Tick.Marker = categoryTicks(cats)
		}
		// The y axis is logarithmic when the panel's values are all above
		// zero and span a factor of 50 or more (latency from 5 ms to 5 s).
		var ys []float64
		for _, se := range panel.Series {
			f, _ := system.FieldByName(se.Metric)
			for j := range in.Rows {
				ys = append(ys, f.Get(&in.Rows[j].Metrics))
			}
		}
		if panel.SLO && in.SLOP99Ms > 0 {
			ys = append(ys, in.SLOP99Ms)
		}
		logY := yScale(p, ys)
		for si, se := range panel.Series {
			f, ok := system.FieldByName(se.Metric)
			if !ok {
				return nil, fmt.Errorf("plot: no metric %s", se.Metric)
			}
			for li, l := range lines {
				var pts, lo, hi plotter.XYs
				var marks plotter.XYs
				for _, j := range l.idx {
					r := &in.Rows[j]
					y, half := r.Stat(f)
					if len(r.Reps) == 0 {
						y, half = f.Get(&r.Metrics), 0
					}
					if math.IsNaN(y) || math.IsInf(y, 0) || (logY && y <= 0) {
						continue
					}
					pts = append(pts, plotter.XY{X: xs[j], Y: y})
					lo = append(lo, plotter.XY{X: xs[j], Y: y - half})
					hi = append(hi, plotter.XY{X: xs[j], Y: y + half})
					if chosen[j] {
						marks = append(marks, plotter.XY{X: xs[j], Y: y})
					}
				}
				if len(pts) == 0 {
					continue
				}
				byX := func(v plotter.XYs) { sort.SliceStable(v, func(a, b int) bool { return v[a].X < v[b].X }) }
				byX(pts)
				byX(lo)
				byX(hi)
				col := lineColor(li)
				if band := ciBand(lo, hi, col, logY); band != nil {
					p.Add(band)
				}
				ln, err := plotter.NewLine(pts)
				if err != nil {
					return nil, fmt.Errorf("plot: %s: %v", l.label, err)
				}
				ln.Color = col
				ln.Width = vg.Points(1.6)
				dash := li / len(palette)
				if se.Dashed {
					dash++
				}
				if se.Dotted {
					dash += 3
				}
				ln.Dashes = plotutil.Dashes(dash)
				p.Add(ln)
				var sc *plotter.Scatter
				if len(pts) <= 40 {
					sc, err = plotter.NewScatter(pts)
					if err != nil {
						return nil, err
					}
					sc.Color = col
					sc.Shape = plotutil.Shape(li)
					sc.Radius = vg.Points(2.2)
					p.Add(sc)
				}
				if len(marks) > 0 {
					mk, err := plotter.NewScatter(marks)
					if err != nil {
						return nil, err
					}
					mk.Shape = draw.RingGlyph{}
					mk.Radius = vg.Points(7)
					mk.Color = color.RGBA{200, 0, 0, 255}
					p.Add(mk)
					if pi == 0 && si == 0 && !markLegend {
						markLegend = true
						label := in.ChosenLabel
						if label == "" {
							label = "answer"
						}
						p.Legend.Add(label, mk)
					}
				}
				switch {
				case pi == 0 && si == 0 && l.label != "":
					if sc != nil {
						p.Legend.Add(l.label, ln, sc)
					} else {
						p.Legend.Add(l.label, ln)
					}
				case li == 0 && len(panel.Series) > 1:
					p.Legend.Add(se.Label, ln)
				}
			}
		}
		if panel.SLO && in.SLOP99Ms > 0 {
			x0, x1 := minMax(xs)
			slo, err := plotter.NewLine(plotter.XYs{{X: x0, Y: in.SLOP99Ms}, {X: x1, Y: in.SLOP99Ms}})
			if err != nil {
				return nil, err
			}
			slo.Color = color.RGBA{200, 0, 0, 255}
			slo.Width = vg.Points(1.4)
			slo.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			p.Add(slo)
			p.Legend.Add(fmt.Sprintf("SLO p99 %g ms", in.SLOP99Ms), slo)
		}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		p.Legend.XOffs = vg.Points(8)
		p.Legend.YOffs = -vg.Points(4)
		// Headroom so the legend and the top line do not collide.
		if logY {
			p.Y.Max *= 2
		} else {
			p.Y.Max *= 1.15
			if p.Y.Max == 0 {
				p.Y.Max = 1
			}
		}
		plots[pi/2] = append(plots[pi/2], p)
	}

	return tile(in.Title, 15, plots, svg), nil
}

// tile lays plots out two to a row under a title (of fontSize points) on
// one white canvas, 12 inches wide and 4.1 a row (SVG, or PNG at 150 dpi).
func tile(title string, fontSize float64, plots [][]*gplot.Plot, svg bool) vg.CanvasWriterTo {
	w, h := 12*vg.Inch, 4.1*vg.Inch*vg.Length(len(plots))
	var cw vg.CanvasWriterTo
	if svg {
		cw = vgsvg.New(w, h)
	} else {
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(150))}
	}
	dc := draw.New(cw)
	dc.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: w, Y: 0}, {X: w, Y: h}, {X: 0, Y: h}})
	const titleH = 0.45 * vg.Inch
	if title != "" {
		sty := gplot.New().Title.TextStyle
		sty.Font.Size = vg.Points(fontSize)
		sty.XAlign = draw.XCenter
		sty.YAlign = draw.YTop
		dc.FillText(sty, vg.Point{X: w / 2, Y: h - vg.Points(8)}, title)
	}
	body := draw.Crop(dc, 0, 0, 0, -titleH)
	tiles := draw.Tiles{Rows: len(plots), Cols: 2, PadX: vg.Points(18), PadY: vg.Points(18), PadLeft: vg.Points(8), PadRight: vg.Points(14), PadBottom: vg.Points(8), PadTop: vg.Points(4)}
	canvases := gplot.Align(plots, tiles, body)
	for r := range plots {
		for c := range plots[r] {
			plots[r][c].Draw(canvases[r][c])
		}
	}
	return cw
}

// FirstMeeting is, for each line of rows (the combinations of the keys
// other than the first numeric one, as Draw groups them), the row with the
// smallest x whose p99 is within sloMs and which refused and timed out
// nothing: in a pool-size sweep, the smallest pool that meets the SLO.
func FirstMeeting(rows []scenarios.Row, sloMs float64) []int {
	if len(rows) == 0 || len(rows[0].Params) == 0 {
		return nil
	}
	xi := 0
	for i := range rows[0].Params {
		all := true
		for _, r := range rows {
			_, _, ok := number(r.Params[i].Value)
			all = all && ok
		}
		if all {
			xi = i
			break
		}
	}
	best := map[string]int{}
	var order []string
	for j, r := range rows {
		m := &r.Metrics
		if m.P99Ms > sloMs || m.ConnRefused > 0 || m.WaitTimeouts > 0 || m.AppTimeouts > 0 || m.OKTxns == 0 {
			continue
		}
		var key []string
		for i, p := range r.Params {
			if i != xi {
				key = append(key, p.Value)
			}
		}
		k := strings.Join(key, "\x00")
		x, _, _ := number(r.Params[xi].Value)
		if b, ok := best[k]; ok {
			if bx, _, _ := number(rows[b].Params[xi].Value); x >= bx {
				continue
			}
		} else {
			order = append(order, k)
		}
		best[k] = j
	}
	out := make([]int, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	sort.Ints(out)
	return out
}

// ciBand is the shaded 95 % interval between lo and hi (nil when every
// half-width is zero: one replication, or a deterministic point).
func ciBand(lo, hi plotter.XYs, col color.Color, logY bool) *plotter.Polygon {
	wide := false
	for i := range lo {
		wide = wide || hi[i].Y > lo[i].Y
	}
	if !wide || len(lo) < 2 {
		return nil
	}
	ring := append(plotter.XYs(nil), hi...)
	for i := len(lo) - 1; i >= 0; i-- {
		p := lo[i]
		if logY && p.Y <= 0 {
			p.Y = hi[i].Y / 1e3
		}
		ring = append(ring, p)
	}
	poly, err := plotter.NewPolygon(ring)
	if err != nil {
		return nil
	}
	r, g, b, _ := col.RGBA()
	poly.Color = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 50}
	poly.LineStyle.Width = 0
	return poly
}

// yScale makes p's y axis logarithmic when ys span decades (spansDecades),
// else linear from 0, and reports which.
func yScale(p *gplot.Plot, ys []float64) bool {
	if !spansDecades(ys) {
		p.Y.Min = 0
		return false
	}
	p.Y.Scale = gplot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Y.Label.Text += ", log scale"
	return true
}

// spansDecades: every value above zero, the largest at least 50 times the
// smallest.
func spansDecades(ys []float64) bool {
	if len(ys) < 2 {
		return false
	}
	lo, hi := math.Inf(1), 0.0
	for _, y := range ys {
		if !(y > 0) || math.IsInf(y, 0) {
			return false
		}
		lo, hi = min(lo, y), max(hi, y)
	}
	return hi/lo >= 50
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// palette: distinguishable colours (Okabe-Ito, colour-blind safe).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 0, 0, 255},       // black
	color.RGBA{240, 228, 66, 255},  // yellow
}

func lineColor(i int) color.Color { return palette[i%len(palette)] }

// looksLog: positive values spanning a factor of 50 or more whose gaps are
// not all equal.
func looksLog(xs []float64) bool {
	u := uniq(xs)
	if len(u) < 3 || u[0] <= 0 || u[len(u)-1]/u[0] < 50 {
		return false
	}
	gap := u[1] - u[0]
	for i := 2; i < len(u); i++ {
		if math.Abs((u[i]-u[i-1])-gap) > 1e-9*math.Abs(gap)+1e-12 {
			return true
		}
	}
	return false
}

func uniq(xs []float64) []float64 {
	u := append([]float64(nil), xs...)
	sort.Float64s(u)
	out := u[:0]
	for i, v := range u {
		if i == 0 || v != u[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// ticks125 marks 1, 2 and 5 times each power of ten on a log axis.
type ticks125 struct{}

func (ticks125) Ticks(min, max float64) []gplot.Tick {
	var out []gplot.Tick
	if min <= 0 {
		min = 1e-300
	}
	for e := math.Floor(math.Log10(min)) - 1; e <= math.Ceil(math.Log10(max)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			out = append(out, gplot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	if len(out) < 2 {
		return gplot.LogTicks{Prec: -1}.Ticks(min, max)
	}
	return out
}

// categoryTicks labels positions 0..n-1 with the category names.
type categoryTicks []string

func (c categoryTicks) Ticks(min, max float64) []gplot.Tick {
	out := make([]gplot.Tick, len(c))
	for i, s := range c {
		out[i] = gplot.Tick{Value: float64(i), Label: s}
	}
	return out
}
