package validate

import (
	"embed"
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// report.md's prose lives in templates/*.md.tmpl; this file hands them
// the report as they read it (mdReport) and the functions that format its
// figures. The sections whose writers live with their data (the testbed,
// the arrangements) come in already written.

//go:embed templates/*.md.tmpl
var templateFiles embed.FS

var reportTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"pc":       func(x float64) float64 { return 100 * x },
	"relPc":    func(x, measured float64) float64 { return 100 * relErr(x, measured) },
	"addf":     func(a, b float64) float64 { return a + b },
	"addi":     func(a, b int64) int64 { return a + b },
	"ms":       ms,
	"us":       us,
	"msOf":     func(d time.Duration) float64 { return float64(d) / 1e6 },
	"usOf":     func(d time.Duration) float64 { return float64(d) / 1e3 },
	"seconds":  func(d time.Duration) time.Duration { return d.Round(time.Second) },
	"fnum":     fnum,
	"pct":      pct,
	"tolText":  tolText,
	"ciText":   func(c Cell) string { return c.ciText() },
	"measText": func(c Cell) string { return c.measText() },
	"byCI":     func(c Cell) bool { return c.By == ByCI },
	"runsText": func(p CurvePoint) string { return p.runsText() },
	"peakNote": func(l CurveLine) string { return l.peakNote() },
	"capital":  func(s string) string { return strings.ToUpper(s[:1]) + s[1:] },
	"word":     compat.Word,
	"features": func() []compat.Feature { return compat.Features },
}).ParseFS(templateFiles, "templates/*.md.tmpl"))

// WriteMarkdown writes report.md.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	if err := reportTemplates.ExecuteTemplate(&b, "report", rep.markdownView()); err != nil {
		return fmt.Errorf("validate: report.md: %w", err)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdReport is the report as its templates read it.
type mdReport struct {
	*Report
	// Rows shadows Report.Rows: each with what its template needs.
	Rows      []mdRow
	ProbeRows []mdProbe
	// Prepared, Held and Classes say which sections and paragraphs apply
	// (Report.prepared, held, classes); Busy that the machine had more
	// work than CPUs (Report.busy); Tally counts the verdicts.
	Prepared, Held, Classes, Busy bool
	Tally                         string
	// Curves are the rows along CurveKey (Report.Curves), Placed whether
	// any of their runs sampled PgBouncer's placement.
	Curves []CurveLine
	Placed bool
	// Testbed and Arrangements are those sections, written by their own
	// files (testbed.go, arrangement.go).
	Testbed, Arrangements string
	// The constants the prose quotes.
	TolTPS, TolP99, TolHitRate, TolPrepared, PeakWithin float64
	CurveKey                                            string
	PlaceEvery                                          time.Duration
}

// mdRow is a row with its verdict and the unexported figures the
// templates quote.
type mdRow struct {
	Row
	Title, Verdict         string
	AllClasses             bool // the row of every class together
	StatementMode          bool // statement pooling: a statement's time includes its wait
	CalStmt, CalThink      float64
	MaxPrepared, Threshold int
	// SeveralRuns: the row has more than one run, each in Runs beside
	// its model.
	SeveralRuns bool
	Runs        []mdRun
}

// mdRun is one of a row's runs and its calibrated model.
type mdRun struct {
	N        int // from 1
	Measured Measured
	Model    system.Metrics
}

// mdProbe is a probe row with each feature's cell.
type mdProbe struct {
	ProbeRow
	Cells []mdProbeCell
}

// mdProbeCell is one feature: what the probe found and compat expected;
// Missing when the probe has no outcome for it.
type mdProbeCell struct {
	Missing   bool
	Got, Want bool
}

func (rep *Report) markdownView() mdReport {
	v := mdReport{Report: rep, Prepared: rep.prepared(), Held: rep.held(), Classes: rep.classes(), Busy: rep.busy(), Tally: rep.tally(),
		Curves: rep.Curves(), Testbed: section(rep.writeTestbed), Arrangements: section(rep.writeArrangements),
		TolTPS: TolTPS, TolP99: TolP99, TolHitRate: TolHitRate, TolPrepared: TolPrepared, PeakWithin: PeakWithin, CurveKey: CurveKey, PlaceEvery: placeEvery}
	for _, r := range rep.Rows {
		mr := mdRow{Row: r, Title: r.Title(), Verdict: r.verdict(), AllClasses: r.Class == allClasses, StatementMode: r.Mode == poolmode.Statement,
			CalStmt: r.calStmt, CalThink: r.calThinkMs, MaxPrepared: r.maxPrepared, Threshold: r.threshold}
		if mr.SeveralRuns = len(r.Repeats) > 1; mr.SeveralRuns {
			for i, y := range r.Repeats[:min(len(r.Repeats), len(r.RepeatModels))] {
				mr.Runs = append(mr.Runs, mdRun{N: i + 1, Measured: y, Model: r.RepeatModels[i].Metrics})
			}
		}
		v.Rows = append(v.Rows, mr)
	}
	for _, l := range v.Curves {
		for _, pt := range l.Points {
			for _, x := range pt.Runs {
				v.Placed = v.Placed || x.Placement != nil
			}
		}
	}
	for _, pr := range rep.Probes {
		mp := mdProbe{ProbeRow: pr}
		got := pr.Result.Matrix()
		for _, f := range compat.Features {
			missing := pr.Err != "" || int(f) >= len(pr.Result.Outcomes)
			mp.Cells = append(mp.Cells, mdProbeCell{Missing: missing, Got: got[f], Want: pr.Expected[f]})
		}
		v.ProbeRows = append(v.ProbeRows, mp)
	}
	return v
}

// section is what a writer of p calls writes.
func section(write func(p func(string, ...any))) string {
	var b strings.Builder
	write(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	return b.String()
}
