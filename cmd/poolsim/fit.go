package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/usl"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func init() {
	register(command{name: "fit", short: "fit the Universal Scalability Law to measured throughput", run: runFit})
}

const fitHelp = `Usage: poolsim fit DATA.csv [--plot out.png|out.svg] [--format table|json]

Fits Gunther's Universal Scalability Law

  X(N) = λN / (1 + σ(N−1) + κN(N−1))

to measured throughput by nonlinear least squares (Levenberg–Marquardt,
σ, κ ≥ 0), and prints σ (contention), κ (coherency), λ (throughput at
N = 1), the concurrency at which throughput peaks, √((1−σ)/κ), with the
throughput there and at the best whole concurrency, and R². With κ = 0
there is no peak: throughput rises towards λ/σ.

DATA.csv has two columns, concurrency and throughput (per second, or any
unit: λ and the peak come out in the same unit), one measurement a line,
at least 6 lines at 3 or more distinct concurrencies. A header line is
allowed, and lines starting with # are comments:

  # pgbench -c N, tps
  clients,tps
  1,955.16
  2,1878.91
  ...

Examples:
  poolsim fit bench.csv
  poolsim fit bench.csv --plot bench-usl.png
  poolsim fit bench.csv --format json

Flags:
%s
Exit status: 0 success, 1 failure (the fit did not converge, the plot
could not be written), 2 usage error (bad flags, a missing or malformed
file, too few points).
`

func runFit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("fit", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "table", "output format: table or json")
	plotPath := fs.String("plot", "", "also draw the data and the fitted curve to this file (.png, .svg or .pdf)")
	fs.Usage = func() { fmt.Fprintf(stderr, fitHelp, fs.FlagUsages()) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usagef("--format %q: want table or json", *format)
	}
	if *plotPath != "" {
		switch strings.ToLower(filepath.Ext(*plotPath)) {
		case ".png", ".svg", ".pdf":
		default:
			return usagef("--plot %q: want a file ending in .png, .svg or .pdf", *plotPath)
		}
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one DATA.csv, got %d arguments; see 'poolsim fit --help'", fs.NArg())
	}
	path := fs.Arg(0)
	pts, err := readFitCSV(path)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil { // interrupted while the data was read
		return err
	}
	m, st, err := usl.Fit(pts)
	if err != nil {
		if errors.Is(err, usl.ErrBadData) {
			return usagef("%s: %v", path, strings.TrimPrefix(err.Error(), "usl: "))
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	res := newFitResult(path, pts, m, st)
	if *plotPath != "" {
		if err := plotFit(*plotPath, path, pts, m); err != nil {
			return fmt.Errorf("--plot %s: %v", *plotPath, err)
		}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return writeFitTable(stdout, res)
}

// readFitCSV reads (concurrency, throughput) pairs. Every problem with the
// file is a usage error naming the file and, for a bad cell, its line.
func readFitCSV(path string) ([]usl.Point, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usage(err)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a spreadsheet's UTF-8 BOM
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	var pts []usl.Point
	for first := true; ; first = false {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, usagef("%s: %v", path, err)
		}
		line, _ := r.FieldPos(0)
		if first && isHeader(rec) {
			continue
		}
		if len(rec) != 2 {
			return nil, usagef("%s:%d: want 2 columns (concurrency, throughput), got %d", path, line, len(rec))
		}
		var v [2]float64
		for i, name := range []string{"concurrency", "throughput"} {
			cell := strings.TrimSpace(rec[i])
			x, err := strconv.ParseFloat(cell, 64)
			if err != nil {
				return nil, usagef("%s:%d: %s %q is not a number", path, line, name, cell)
			}
			if !(x > 0) || math.IsInf(x, 0) {
				return nil, usagef("%s:%d: %s %s must be positive and finite", path, line, name, cell)
			}
			v[i] = x
		}
		pts = append(pts, usl.Point{N: v[0], X: v[1]})
	}
	if len(pts) < usl.MinPoints {
		return nil, usagef("%s: %d data points; the fit needs at least %d", path, len(pts), usl.MinPoints)
	}
	return pts, nil
}

// isHeader reports whether a record is a header: no cell is a number.
func isHeader(rec []string) bool {
	for _, c := range rec {
		if _, err := strconv.ParseFloat(strings.TrimSpace(c), 64); err == nil {
			return false
		}
	}
	return true
}

// fitResult is what fit prints. Peak is nil when κ = 0 (no peak); Ceiling
// is then λ/σ, the throughput approached as N grows (nil if σ = 0 too).
type fitResult struct {
	File    string   `json:"file"`
	Points  int      `json:"points"`
	MinN    float64  `json:"min_concurrency"`
	MaxN    float64  `json:"max_concurrency"`
	Sigma   float64  `json:"sigma"`
	Kappa   float64  `json:"kappa"`
	Lambda  float64  `json:"lambda"`
	Peak    *fitPeak `json:"peak"`
	Ceiling *float64 `json:"ceiling,omitempty"`
	R2      *float64 `json:"r2"`
	SSE     float64  `json:"sse"`
}

type fitPeak struct {
	Concurrency     float64 `json:"concurrency"`
	Throughput      float64 `json:"throughput"`
	BestConcurrency float64 `json:"best_whole_concurrency"`
	BestThroughput  float64 `json:"best_whole_throughput"`
}

func newFitResult(path string, pts []usl.Point, m usl.Model, st usl.Stats) fitResult {
	res := fitResult{File: path, Points: st.Points, MinN: math.Inf(1), Sigma: m.Sigma, Kappa: m.Kappa, Lambda: m.Lambda, SSE: st.SSE}
	for _, p := range pts {
		res.MinN = math.Min(res.MinN, p.N)
		res.MaxN = math.Max(res.MaxN, p.N)
	}
	if !math.IsNaN(st.R2) {
		r2 := st.R2
		res.R2 = &r2
	}
	n, x := m.Peak()
	if math.IsInf(n, 1) {
		if !math.IsInf(x, 1) {
			res.Ceiling = &x
		}
	} else {
		b := m.BestN()
		res.Peak = &fitPeak{Concurrency: n, Throughput: x, BestConcurrency: b, BestThroughput: m.X(b)}
	}
	return res
}

func writeFitTable(w io.Writer, r fitResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Universal Scalability Law fit of %s: %d points, concurrency %s to %s\n",
		r.File, r.Points, fmtG(r.MinN), fmtG(r.MaxN))
	b.WriteString("X(N) = λN / (1 + σ(N−1) + κN(N−1))\n\n")
	row := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-24s"+format+"\n", append([]any{k}, a...)...) }
	row("σ  contention", "%.7g", r.Sigma)
	row("κ  coherency", "%.7g", r.Kappa)
	row("λ  throughput at N=1", "%.7g /s", r.Lambda)
	switch {
	case r.Peak != nil:
		note := ""
		if r.Peak.Concurrency > r.MaxN {
			note = "  (beyond the data: extrapolated)"
		}
		row("peak concurrency", "%.4g = √((1−σ)/κ)%s", r.Peak.Concurrency, note)
		row("peak throughput", "%.7g /s", r.Peak.Throughput)
		row("best whole concurrency", "%g, throughput %.7g /s", r.Peak.BestConcurrency, r.Peak.BestThroughput)
	case r.Ceiling != nil:
		row("peak", "none: κ = 0, throughput rises towards λ/σ = %.7g /s", *r.Ceiling)
	default:
		row("peak", "none: σ = κ = 0, throughput grows linearly")
	}
	if r.R2 != nil {
		row("R²", "%.6f", *r.R2)
	} else {
		row("R²", "undefined (every throughput is the same)")
	}
	row("sum of squared errors", "%.6g", r.SSE)
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtG prints a concurrency compactly: 32, 0.5, 1e+06.
func fmtG(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// plotFit draws the data, the fitted curve and the peak.
func plotFit(out, data string, pts []usl.Point, m usl.Model) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("USL fit of %s: σ = %.4g, κ = %.4g, λ = %.4g/s", filepath.Base(data), m.Sigma, m.Kappa, m.Lambda)
	p.X.Label.Text = "concurrency N"
	p.Y.Label.Text = "throughput (per second)"
	p.Add(plotter.NewGrid())

	var maxN, maxX float64
	xys := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xys[i].X, xys[i].Y = pt.N, pt.X
		maxN, maxX = math.Max(maxN, pt.N), math.Max(maxX, pt.X)
	}
	// Show the peak when it is not far past the data.
	nPeak, xPeak := m.Peak()
	showPeak := !math.IsInf(nPeak, 1) && nPeak <= 3*maxN
	xMax := maxN * 1.05
	if showPeak && nPeak*1.15 > xMax {
		xMax = nPeak * 1.15
	}

	curve := plotter.NewFunction(m.X)
	curve.XMin, curve.XMax, curve.Samples = 0, xMax, 400
	curve.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	curve.Width = vg.Points(2)

	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(3), Color: color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}}
	p.Add(curve, sc)
	p.Legend.Add("measured", sc)
	p.Legend.Add("USL fit", curve)

	yMax := math.Max(maxX, m.X(math.Min(xMax, math.Max(nPeak, 1))))
	if showPeak {
		red := color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
		vline, err := plotter.NewLine(plotter.XYs{{X: nPeak, Y: 0}, {X: nPeak, Y: xPeak}})
		if err != nil {
			return err
		}
		vline.Color, vline.Dashes = red, []vg.Length{vg.Points(4), vg.Points(3)}
		mark, err := plotter.NewScatter(plotter.XYs{{X: nPeak, Y: xPeak}})
		if err != nil {
			return err
		}
		mark.GlyphStyle = draw.GlyphStyle{Shape: draw.PyramidGlyph{}, Radius: vg.Points(5), Color: red}
		lbl, err := plotter.NewLabels(plotter.XYLabels{
			XYs:    plotter.XYs{{X: nPeak, Y: xPeak}},
			Labels: []string{fmt.Sprintf("peak N = %.4g, X = %.5g/s", nPeak, xPeak)},
		})
		if err != nil {
			return err
		}
		for i := range lbl.TextStyle {
			lbl.TextStyle[i].Color = red
			lbl.TextStyle[i].XAlign = draw.XCenter
			lbl.TextStyle[i].YAlign = draw.YBottom
		}
		lbl.Offset = vg.Point{Y: vg.Points(8)}
		p.Add(vline, mark, lbl)
		p.Legend.Add("peak √((1−σ)/κ)", mark)
	}
	switch {
	case math.IsInf(nPeak, 1):
		p.Legend.Add("no peak: κ = 0")
	case !showPeak:
		p.Legend.Add(fmt.Sprintf("peak at N = %.4g, off the chart", nPeak))
	}
	p.Title.Padding = vg.Points(6)
	p.X.Min, p.X.Max = 0, xMax
	p.Y.Min, p.Y.Max = 0, yMax*1.12
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = vg.Points(10)
	return p.Save(18*vg.Centimeter, 12*vg.Centimeter, out)
}
