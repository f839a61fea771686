// Package plot draws a sweep: throughput, p50 and p99 transaction latency
// and the p99 wait for a server against one swept key, one line per value
// of the other swept keys (e.g. one per pool mode), four panels in one
// PNG or SVG image (gonum.org/v1/plot).
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
}

// Panel is one of the four panels: a metric and its axis label.
type Panel struct {
	Title string
	YAxis string
	Value func(m *system.Metrics) float64
}

// Panels are drawn left to right, top to bottom.
var Panels = []Panel{
	{"Throughput", "transactions per second", func(m *system.Metrics) float64 { return m.TPS }},
	{"Transaction latency, p50", "p50 latency (ms)", func(m *system.Metrics) float64 { return m.P50Ms }},
	{"Transaction latency, p99", "p99 latency (ms)", func(m *system.Metrics) float64 { return m.P99Ms }},
	{"Wait for a server connection, p99", "p99 acquire wait (ms)", func(m *system.Metrics) float64 { return m.WaitP99Ms }},
}

// appPanel replaces the last panel when the rows use an application pool:
// the wait the application sees (for a pooled connection) and, on a CPU
// server, the wait it cannot see (queueing for the server's CPU).
var appPanel = Panel{"Visible wait (app pool, solid) vs hidden wait (CPU queue, dashed), p99", "p99 wait per transaction (ms)",
	func(m *system.Metrics) float64 { return m.DecAppWaitP99Ms }}

// hidden is appPanel's second, dashed series.
func hidden(m *system.Metrics) float64 { return m.DecCPUQueueP99Ms }

// panels chooses the panels for the rows.
func panels(in Input) []Panel {
	for _, r := range in.Rows {
		if r.Config.AppPool.Mode != system.NoAppPool {
			return append(Panels[:3:3], appPanel)
		}
	}
	return Panels
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
	if err := CheckPath(path); err != nil {
		return err
	}
	c, err := Draw(in, strings.ToLower(filepath.Ext(path)) == ".svg")
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

	plots := make([][]*gplot.Plot, 2)
	for pi, panel := range panels(in) {
		p := gplot.New()
		p.Title.Text = panel.Title
		p.Title.TextStyle.Font.Size = vg.Points(13)
		p.X.Label.Text = xlabel
		p.Y.Label.Text = panel.YAxis
		p.X.Label.TextStyle.Font.Size = vg.Points(11)
		p.Y.Label.TextStyle.Font.Size = vg.Points(11)
		p.X.Tick.Label.Font.Size = vg.Points(10)
		p.Y.Tick.Label.Font.Size = vg.Points(10)
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		if logX {
			p.X.Scale = gplot.LogScale{}
			p.X.Tick.Marker = ticks125{}
		}
		if !numeric {
			p.X.Tick.Marker = categoryTicks(cats)
		}
		values := []func(*system.Metrics) float64{panel.Value}
		if panel.Title == appPanel.Title {
			values = append(values, hidden)
		}
		for vi, value := range values {
			for li, l := range lines {
				pts := make(plotter.XYs, 0, len(l.idx))
				for _, j := range l.idx {
					y := value(&in.Rows[j].Metrics)
					if math.IsNaN(y) || math.IsInf(y, 0) {
						continue
					}
					pts = append(pts, plotter.XY{X: xs[j], Y: y})
				}
				sort.SliceStable(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
				ln, err := plotter.NewLine(pts)
				if err != nil {
					return nil, fmt.Errorf("plot: %s: %v", l.label, err)
				}
				ln.Color = lineColor(li)
				ln.Width = vg.Points(1.8)
				ln.Dashes = plotutil.Dashes(li/len(palette) + vi)
				p.Add(ln)
				var sc *plotter.Scatter
				if len(pts) <= 40 {
					sc, err = plotter.NewScatter(pts)
					if err != nil {
						return nil, err
					}
					sc.Color = ln.Color
					sc.Shape = plotutil.Shape(li)
					sc.Radius = vg.Points(2.5)
					p.Add(sc)
				}
				if pi == 0 && vi == 0 && l.label != "" {
					if sc != nil {
						p.Legend.Add(l.label, ln, sc)
					} else {
						p.Legend.Add(l.label, ln)
					}
				}
			}
		}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.TextStyle.Font.Size = vg.Points(10)
		p.Legend.XOffs = vg.Points(8)
		p.Legend.YOffs = -vg.Points(4)
		// Headroom so the legend and the top line do not collide.
		_, _, _, ymax := p.X.Min, p.X.Max, p.Y.Min, p.Y.Max
		p.Y.Max = ymax * 1.12
		if p.Y.Max == 0 {
			p.Y.Max = 1
		}
		plots[pi/2] = append(plots[pi/2], p)
	}

	const w, h = 12 * vg.Inch, 8.5 * vg.Inch
	var cw vg.CanvasWriterTo
	if svg {
		cw = vgsvg.New(w, h)
	} else {
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(150))}
	}
	dc := draw.New(cw)
	dc.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: w, Y: 0}, {X: w, Y: h}, {X: 0, Y: h}})
	const titleH = 0.45 * vg.Inch
	title := in.Title
	if title != "" {
		sty := gplot.New().Title.TextStyle
		sty.Font.Size = vg.Points(15)
		sty.XAlign = draw.XCenter
		sty.YAlign = draw.YTop
		dc.FillText(sty, vg.Point{X: w / 2, Y: h - vg.Points(8)}, title)
	}
	body := draw.Crop(dc, 0, 0, 0, -titleH)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(18), PadY: vg.Points(18), PadLeft: vg.Points(8), PadRight: vg.Points(14), PadBottom: vg.Points(8), PadTop: vg.Points(4)}
	canvases := gplot.Align(plots, tiles, body)
	for r := range plots {
		for c := range plots[r] {
			plots[r][c].Draw(canvases[r][c])
		}
	}
	return cw, nil
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
