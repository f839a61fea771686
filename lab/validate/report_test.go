package validate

import (
	"bytes"
	"encoding/csv"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// row builds a judged row whose model and calibrated model agree and whose
// measurement is m.
func row(model system.Metrics, m Measured) Row {
	r := Row{Params: []scenarios.Param{{Key: "pooler.mode", Value: "transaction"}}, Mode: poolmode.Transaction,
		Clients: 40, Model: model, Calibrated: ModelRun{Metrics: model}, Measured: m}
	judge(&r)
	return r
}

func cell(r Row, metric string) Cell {
	for _, c := range r.Cells {
		if c.Metric == metric {
			return c
		}
	}
	return Cell{Metric: "missing " + metric}
}

func TestJudge(t *testing.T) {
	model := system.Metrics{OKTxns: 120, ConnRefused: 0, TPS: 300, P50Ms: 100, P99Ms: 200, WaitP99Ms: 50}
	exact := Measured{OKTxns: 120, TPS: 300, P50Ms: 100, P99Ms: 200, WaitKnown: true, WaitP99Ms: 500}
	with := func(f func(*Measured)) Measured { m := exact; f(&m); return m }
	tests := []struct {
		name     string
		m        Measured
		pass     bool
		failing  string
		wantCell string // the cell to check
		cellPass bool
	}{
		{"all equal", exact, true, "", "tps", true},
		{"wait is shown, not judged", exact, true, "", "wait_p99_ms", true},
		{"one transaction short", with(func(m *Measured) { m.OKTxns = 119 }), false, "ok_txns", "ok_txns", false},
		{"a refusal the model has not", with(func(m *Measured) { m.ConnRefused = 1 }), false, "conn_refused", "conn_refused", false},
		{"tps 9% low is in", with(func(m *Measured) { m.TPS = 330 }), true, "", "tps", true},        // (300-330)/330 = -9.1%
		{"tps 11% off is out", with(func(m *Measured) { m.TPS = 270 }), false, "tps", "tps", false}, // (300-270)/270 = +11.1%
		{"p50 10% is the edge", with(func(m *Measured) { m.P50Ms = 100 / 1.1 }), true, "", "p50_ms", true},
		{"p99 24% is in", with(func(m *Measured) { m.P99Ms = 200 / 1.24 }), true, "", "p99_ms", true},
		{"p99 26% is out", with(func(m *Measured) { m.P99Ms = 200 / 1.26 }), false, "p99_ms", "p99_ms", false},
		{"zero measured is out", with(func(m *Measured) { m.TPS = 0 }), false, "tps", "tps", false},
	}
	for _, tt := range tests {
		r := row(model, tt.m)
		if got := r.Pass(); got != tt.pass {
			t.Errorf("%s: Pass() = %v, want %v (cells %+v)", tt.name, got, tt.pass, r.Cells)
		}
		if got := strings.Join(r.Failing(), ","); got != tt.failing {
			t.Errorf("%s: Failing() = %q, want %q", tt.name, got, tt.failing)
		}
		c := cell(r, tt.wantCell)
		if c.Pass != tt.cellPass {
			t.Errorf("%s: cell %s pass = %v, want %v", tt.name, c.Metric, c.Pass, tt.cellPass)
		}
		if !c.Pass && c.Why == "" {
			t.Errorf("%s: cell %s is outside its tolerance but says no why", tt.name, c.Metric)
		}
	}
}

// TestJudgeWithRuns: a row's runs give the measured side its interval,
// and each run is judged against its own calibrated model. The runs'
// mean error within the tolerance passes, even where the medians miss
// (the median model and the median measurement are different runs'); a
// mean miss passes only when the runs' 95% interval of the error reaches
// into the tolerance band, and the verdict says so; a tight interval
// outside the band, or one run, fails.
func TestJudgeWithRuns(t *testing.T) {
	model := system.Metrics{OKTxns: 120, TPS: 300, P50Ms: 100, P99Ms: 200}
	runs := func(tps, cal []float64) Row {
		r := Row{Params: []scenarios.Param{{Key: "pooler.mode", Value: "transaction"}}, Mode: poolmode.Transaction,
			Clients: 40, Model: model}
		for i, x := range tps {
			r.Repeats = append(r.Repeats, Measured{OKTxns: 120, TPS: x, P50Ms: 100, P99Ms: 200})
			m := model
			if cal != nil {
				m.TPS = cal[i]
			}
			r.RepeatModels = append(r.RepeatModels, ModelRun{Metrics: m})
		}
		r.Measured = combineMeasured(r.Repeats, model)
		r.Calibrated = combineModels(r.RepeatModels, model)
		judge(&r)
		return r
	}
	tests := []struct {
		name     string
		tps, cal []float64 // measured and calibrated per run (nil: the model's 300 in each)
		pass     bool
		by       string
		verdict  string
	}{
		{"within the tolerance", []float64{290, 300, 310}, nil, true, ByTolerance, "PASS"},
		// Per run +9.3%, +11.7%, +7.6%: mean +9.5% is in; the medians
		// (335 against 300, different runs' ends) would be +11.7%.
		{"each run against its own model", []float64{270, 300, 330}, []float64{295, 335, 355}, true, ByTolerance, "PASS"},
		// Errors +25%, +25%, 0%: mean +16.7% is out, the runs' interval
		// (half-width about 36%) reaches into ±10%.
		{"a noisy miss passes by the interval", []float64{240, 240, 300}, nil, true, ByCI, "PASS (tps outside the tolerance, within the runs' 95% interval)"},
		// Errors +11.1%, +11.5%, +11.9%: a tight interval wholly outside.
		{"a tight miss fails", []float64{270, 269, 268}, nil, false, "", "FAIL (tps)"},
		{"one run has no interval", []float64{270}, nil, false, "", "FAIL (tps)"},
	}
	for _, tt := range tests {
		r := runs(tt.tps, tt.cal)
		c := cell(r, "tps")
		if c.Pass != tt.pass || c.By != tt.by {
			t.Errorf("%s: tps pass %v by %q, want %v by %q (error %+.3f ± %.3f, %d runs)", tt.name, c.Pass, c.By, tt.pass, tt.by, c.ErrMean, c.ErrHalf, c.Runs)
		}
		if got := r.verdict(); got != tt.verdict {
			t.Errorf("%s: verdict %q, want %q", tt.name, got, tt.verdict)
		}
		if c.Runs != len(tt.tps) {
			t.Errorf("%s: runs %d, want %d", tt.name, c.Runs, len(tt.tps))
		}
		if len(tt.tps) > 1 {
			var sum float64
			for _, x := range tt.tps {
				sum += x
			}
			if want := sum / float64(len(tt.tps)); math.Abs(c.MeasMean-want) > 1e-9 || c.MeasHalf <= 0 {
				t.Errorf("%s: measured mean %v ± %v, want %v with a positive half-width", tt.name, c.MeasMean, c.MeasHalf, want)
			}
		}
		switch {
		case !c.Pass && len(tt.tps) > 1 && !strings.Contains(c.Why, "lies wholly outside ±10 %"):
			t.Errorf("%s: why %q does not give the interval", tt.name, c.Why)
		case !c.Pass && len(tt.tps) == 1 && !strings.Contains(c.Why, "one run gives no interval"):
			t.Errorf("%s: why %q does not say one run has no interval", tt.name, c.Why)
		}
	}
}

func TestJudgeCountsMatchBothModels(t *testing.T) {
	// The calibrated model's count differs from the model's: a count then
	// fails even when the measurement equals one of them, and says why.
	r := Row{Mode: poolmode.Direct, Model: system.Metrics{OKTxns: 60, ConnRefused: 20, TPS: 1, P50Ms: 1, P99Ms: 1},
		Calibrated: ModelRun{Metrics: system.Metrics{OKTxns: 63, ConnRefused: 19, TPS: 1, P50Ms: 1, P99Ms: 1}},
		Measured:   Measured{OKTxns: 63, ConnRefused: 19, TPS: 1, P50Ms: 1, P99Ms: 1}}
	judge(&r)
	c := cell(r, "conn_refused")
	if c.Pass || !strings.Contains(c.Why, "20 vs 19") {
		t.Errorf("conn_refused cell = %+v, want a failure naming 20 vs 19", c)
	}
}

func TestWaitTimeoutsCellOnlyWhenThereAreAny(t *testing.T) {
	m := system.Metrics{OKTxns: 1, TPS: 1, P50Ms: 1, P99Ms: 1}
	r := row(m, Measured{OKTxns: 1, TPS: 1, P50Ms: 1, P99Ms: 1})
	if c := cell(r, "wait_timeouts"); c.Metric == "wait_timeouts" {
		t.Errorf("row without timeouts has a wait_timeouts cell")
	}
	r = row(m, Measured{OKTxns: 1, TPS: 1, P50Ms: 1, P99Ms: 1, WaitTimeouts: 2})
	if c := cell(r, "wait_timeouts"); c.Pass {
		t.Errorf("2 measured wait timeouts against 0 predicted: cell passes")
	}
}

func TestRelErr(t *testing.T) {
	for _, tt := range []struct{ x, m, want float64 }{{110, 100, 0.1}, {90, 100, -0.1}, {0, 0, 0}} {
		if got := relErr(tt.x, tt.m); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("relErr(%v, %v) = %v, want %v", tt.x, tt.m, got, tt.want)
		}
	}
	if got := relErr(1, 0); !math.IsNaN(got) {
		t.Errorf("relErr(1, 0) = %v, want NaN", got)
	}
}

func TestDistFrom(t *testing.T) {
	same := []time.Duration{3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}
	d, mean, _ := distFrom(same)
	if d.Kind != sim.Const || mean != 3*time.Millisecond {
		t.Errorf("distFrom(3ms x3) = %v, mean %v; want const 3ms", d, mean)
	}
	spread := []time.Duration{3 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 8 * time.Millisecond}
	d, mean, p99 := distFrom(spread)
	if d.Kind != sim.Lognormal || mean != 5*time.Millisecond || d.MeanValue() != sim.FromDuration(mean) || p99 != 8*time.Millisecond {
		t.Errorf("distFrom(3,4,5,8 ms) = %v, mean %v, p99 %v; want lognormal with mean 5ms, p99 8ms", d, mean, p99)
	}
}

func testReport() *Report {
	model := system.Metrics{OKTxns: 120, TPS: 300, P50Ms: 100, P99Ms: 200}
	pass := row(model, Measured{OKTxns: 120, TPS: 310, P50Ms: 101, P99Ms: 210, WaitKnown: true})
	fail := row(model, Measured{OKTxns: 120, TPS: 200, P50Ms: 150, P99Ms: 400, StmtMeanMs: 9})
	fail.Params = []scenarios.Param{{Key: "pooler.mode", Value: "statement"}}
	fail.calStmt = 4
	judge(&fail)
	skipped := Row{Params: []scenarios.Param{{Key: "pooler.mode", Value: "session"}}, Mode: poolmode.Session, Skipped: "needs a pooler"}
	var ok probe.Result
	ok.Mode = poolmode.Transaction
	for _, f := range compat.Features {
		ok.Outcomes = append(ok.Outcomes, probe.Outcome{Feature: f, OK: compat.Works(poolmode.Transaction, 0, f), Changed: true, Tries: 1, Detail: "x"})
	}
	bad := ok
	bad.Outcomes = append([]probe.Outcome(nil), ok.Outcomes...)
	bad.Outcomes[compat.SetReset].OK = true
	return &Report{Scenario: "s", Target: TargetProxy, Command: "poolsim validate s",
		Rows: []Row{pass, fail, skipped},
		Probes: []ProbeRow{
			{Mode: poolmode.Transaction, Expected: compat.For(poolmode.Transaction, 0), Result: ok},
			{Mode: poolmode.Transaction, Expected: compat.For(poolmode.Transaction, 0), Result: bad},
		}}
}

func TestReportWriters(t *testing.T) {
	rep := testReport()
	if rep.Pass() {
		t.Errorf("Pass() = true for a report with a failing row and a disagreeing probe")
	}
	if !rep.Probes[0].Agrees() || rep.Probes[1].Agrees() {
		t.Errorf("Agrees() = %v, %v; want true, false", rep.Probes[0].Agrees(), rep.Probes[1].Agrees())
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**Verdict: PASS**",
		"**Verdict: FAIL (tps, p50_ms, p99_ms)**",
		"- tps outside tolerance: statements took 9.000 ms on average under load against 4.000 ms calibrated right before the run",
		"SKIPPED: needs a pooler",
		"Rows: 1 within the tolerances, 0 only within the runs' 95% interval, 1 outside, 1 skipped.",
		"| transaction | ok | broken |",
		"ok (compat: broken)",
		"| **no** |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
	var c bytes.Buffer
	if err := rep.WriteCSV(&c); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(recs), 1+7+6; got != want { // header, two judged rows (one with wait_mean_ms); the skipped row has none
		t.Fatalf("rows.csv has %d records, want %d", got, want)
	}
	if got := strings.Join(recs[0], ","); got != "target,row,mode,clients,metric,model,calibrated,measured,err_model_pct,err_calibrated_pct,tolerance_pct,pass,runs,measured_mean,measured_ci95,err_calibrated_runs_mean_pct,err_calibrated_runs_ci95_pct,pass_by" {
		t.Errorf("rows.csv header = %s", got)
	}
	for _, r := range recs[1:] {
		if r[4] == "tps" && r[1] == "pooler.mode=statement" && (r[7] != "200.0" || r[9] != "+50.0" || r[11] != "false") {
			t.Errorf("rows.csv tps line of the failing row = %v, want measured 200.0, error +50.0, pass false", r)
		}
	}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "rows: 1 within the tolerances, 0 only within the runs' 95% interval, 1 outside, 1 skipped") {
		t.Errorf("text summary lacks the tally of the rows:\n%s", txt.String())
	}
	if !strings.Contains(txt.String(), "DISAGREES") || !strings.Contains(txt.String(), "OUT") {
		t.Errorf("text summary lacks the failures:\n%s", txt.String())
	}
}

func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	if err := testReport().WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "rows.csv", "command.txt", "versions.txt"} {
		if _, err := readFile(dir, f); err != nil {
			t.Errorf("WriteDir: %v", err)
		}
	}
	if b, _ := readFile(dir, "command.txt"); string(b) != "poolsim validate s\n" {
		t.Errorf("command.txt = %q", b)
	}
}

func TestCombine(t *testing.T) {
	model := system.Metrics{OKTxns: 120, ConnRefused: 20}
	xs := []Measured{
		{OKTxns: 120, ConnRefused: 20, TPS: 300, P50Ms: 10},
		{OKTxns: 120, ConnRefused: 20, TPS: 100, P50Ms: 30}, // disturbed
		{OKTxns: 120, ConnRefused: 20, TPS: 310, P50Ms: 11},
	}
	m := combineMeasured(xs, model)
	if m.TPS != 300 || m.P50Ms != 11 || m.OKTxns != 120 || m.ConnRefused != 20 {
		t.Errorf("combineMeasured = tps %v, p50 %v, ok %d, refused %d; want medians 300, 11 and the shared counts", m.TPS, m.P50Ms, m.OKTxns, m.ConnRefused)
	}
	xs[2].ConnRefused = 19
	if m := combineMeasured(xs, model); m.ConnRefused != 19 {
		t.Errorf("one run refused 19: combined %d, want the differing 19 shown", m.ConnRefused)
	}
	c := combineModels([]ModelRun{{Metrics: system.Metrics{OKTxns: 120, TPS: 1}}, {Metrics: system.Metrics{OKTxns: 120, TPS: 3}}, {Metrics: system.Metrics{OKTxns: 120, TPS: 2}}, {Metrics: system.Metrics{OKTxns: 120, TPS: 10}}}, model)
	if c.TPS != 2.5 || c.OKTxns != 120 {
		t.Errorf("combineModels = tps %v, ok %d; want 2.5 (even count: mean of the middle two), 120", c.TPS, c.OKTxns)
	}
	cal := combineCal([]Calibration{{Hop: 10}, {Hop: 30}, {Hop: 20}})
	if cal.Hop != 20 {
		t.Errorf("combineCal hop = %v, want 20ns", cal.Hop)
	}
}

// TestWhyBusyCoresWithATestbed: a CPU-bound row's miss says how busy the
// machine's CPUs were against the calibrated model's cores, which idled
// more (the model's run queues) or whether neither did, where its CPU per
// statement came from, and who this process was; without a testbed, that
// the model gives the pooler and the clients no CPU time.
func TestWhyBusyCoresWithATestbed(t *testing.T) {
	for _, tc := range []struct {
		tb         *Testbed
		util, busy float64
		want       []string
	}{
		{nil, 0, 0.95, []string{"the model gives the pooler and the clients no CPU time"}},
		{&Testbed{ThroughClients: 8}, 0.85, 0.95, []string{
			"CPUs were 95% busy during the run (this process — the driver and the in-process proxy — 20% of them), the calibrated model's cores 85%",
			"as measured before the run with its 8 clients through the target",
			"the model's cores idled 15% of the time, the machine's 5%", "validate.idle_balance"}},
		{&Testbed{ThroughClients: 8, Pgbench: true, Run: RunCPU{OK: true}}, 0.96, 0.95, []string{
			"this process — the in-process proxy alone: pgbench drives — 20% of them)", "as read over the run itself",
			"as busy as the machine's"}},
		{&Testbed{ThroughClients: 8}, 0.97, 0.80, []string{"busier than the machine kept its own (idle 3% against 20%)"}},
	} {
		m := system.Metrics{OKTxns: 100, TPS: 1000, P50Ms: 1, P99Ms: 2, CPUUtil: tc.util}
		x := Measured{OKTxns: 100, TPS: 700, P50Ms: 1, P99Ms: 2, CPUBusy: tc.busy, CPUSelf: 0.2}
		r := Row{Params: []scenarios.Param{{Key: "pooler.mode", Value: "transaction"}}, Mode: poolmode.Transaction,
			Clients: 40, Model: m, Calibrated: ModelRun{Metrics: m}, Measured: x, Cal: Calibration{Testbed: tc.tb}}
		judge(&r)
		c := cell(r, "tps")
		if c.Pass {
			t.Fatalf("tps %v against %v passes", c.Calibrated, c.Measured)
		}
		for _, w := range tc.want {
			if !strings.Contains(c.Why, w) {
				t.Errorf("testbed %+v: why %q, want %q in it", tc.tb, c.Why, w)
			}
		}
	}
}

// TestReportHasNoBadVerbs renders a report with a CPU-bound row and its
// testbed: no text may carry a fmt error ("%!o(MISSING)" came out of a
// "98 % of" in a format string once).
func TestReportHasNoBadVerbs(t *testing.T) {
	m := system.Metrics{OKTxns: 100, TPS: 1000, P50Ms: 1, P99Ms: 2, CPUUtil: 0.88}
	x := Measured{OKTxns: 100, TPS: 990, P50Ms: 1, P99Ms: 2, CPUBusy: 0.95, CPUSelf: 0.2}
	r := Row{Params: []scenarios.Param{{Key: "pooler.mode", Value: "transaction"}}, Mode: poolmode.Transaction,
		Clients: 40, Model: m, Calibrated: ModelRun{Metrics: m}, Measured: x,
		Cal: Calibration{Testbed: &Testbed{Cores: 2, ThroughClients: 40, ThroughTPS: 950, ThroughBusy: 0.93, Pgbench: true, Server: 25 * time.Microsecond,
			WakeCurve: []testbed.WakePoint{{Idle: 40 * sim.Microsecond, Wake: 12 * sim.Microsecond}, {Idle: 130 * sim.Microsecond, Wake: 40 * sim.Microsecond}},
			Together:  &Arrangement{TPS: 22000, Placement: &Placement{Samples: 150, Shared: 1}, Model: ModelRun{Metrics: system.Metrics{TPS: 21500}}},
			Apart:     &Arrangement{Apart: true, TPS: 13000, Model: ModelRun{Metrics: system.Metrics{TPS: 12500}}}}},
		Repeats: []Measured{{TPS: 21000, Placement: &Placement{Samples: 100, Shared: 0.9}}}, RepeatModels: []ModelRun{{Metrics: system.Metrics{TPS: 20600}}},
		Before: &ModelRun{Metrics: system.Metrics{TPS: 940}}}
	r.Cal.Testbed.Run = RunCPU{Driver: 21 * time.Microsecond, Pooler: 24 * time.Microsecond, Server: 40 * time.Microsecond, OK: true}
	judge(&r)
	rep := &Report{Scenario: "t", Target: "pgbouncer", Rows: []Row{r}}
	var b strings.Builder
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "## Testbed") || !strings.Contains(b.String(), "| 22000 (21500) |") || !strings.Contains(b.String(), "21000 (90 %) → 20600") {
		t.Fatalf("no testbed section in:\n%s", b.String())
	}
	// The calibrated model (1000/s, the run's CPU) against the run
	// (990/s), the loop's model (940/s) against its loop (950/s) and the
	// loop against the run; the run's CPU per statement the model ran;
	// the wake-up curve the models took.
	// The machine's busy CPUs in the loop (the through column) and in the
	// run beside the calibrated model's cores (Diagnostics).
	for _, want := range []string{"| 40 → 950, CPUs 93 % busy |", "CPUs 95% busy (this process 20%, steal 0%), the calibrated model's cores 88%;",
		"| 1000 | 940 | 950 | 990 | +1.0 | -1.1 | -4.0 |", "| 21.0 µs / 24.0 µs / 40.0 µs |", "12.0 µs after 40.0 µs idle, 40.0 µs after 130.0 µs idle"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if i := strings.Index(b.String(), "%!"); i >= 0 {
		t.Errorf("fmt error in the report: %q", b.String()[max(0, i-60):min(len(b.String()), i+40)])
	}
}
