package validate

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// cpuSaturated is the busy fraction of all CPUs above which a miss is put
// down to CPU contention.
const cpuSaturated = 0.85

// Tolerances of the calibrated model against the measurement (issue 4):
// counts that follow from the rules match exactly; TPS and p50 within 10%,
// p99 within 25%.
const (
	TolTPS = 0.10
	TolP50 = 0.10
	TolP99 = 0.25
)

// Cell checks.
const (
	checkDefault      = ""
	checkAbs          = "abs"      // |calibrated − measured| <= Tol
	checkBothPositive = "positive" // model, calibrated and measured all above 0
)

// Report is one validation: every row side by side, and the probes.
type Report struct {
	Scenario    string
	Description string
	Source      string
	Seed        uint64
	Target      string
	Command     string
	Versions    Versions
	RowNs       float64 // cpu statements: server time per generate_series row
	Joins       int     // prepared cpu statements: one-row joins that give the statement its planning cost
	Rows        []Row
	Probes      []ProbeRow
	Notes       []string
	Elapsed     time.Duration
}

// Versions is what the run ran on.
type Versions struct {
	PostgreSQL string
	PgBouncer  string
	Go         string
	Commit     string
	CPUs       int
	OS         string
	Date       string
	LoadStart  string // load averages (1, 5, 15 min) when the run started
	LoadEnd    string // and when it ended
	// Sched is how the kernel shared the cores among the testbed's
	// threads (CPU-bound rows only): one by one, or by session under the
	// kernel's autogroup (sched.go).
	Sched string
}

// Row is one point of the sweep.
type Row struct {
	Params     []scenarios.Param
	Mode       poolmode.Mode
	Clients    int
	Skipped    string // why the row was not run, if it was not
	Model      system.Metrics
	Calibrated ModelRun
	Measured   Measured
	// Repeats are the row's live runs and RepeatModels their calibrated
	// models; Measured and Calibrated are their metric-by-metric medians
	// (counts: every run must match).
	Repeats      []Measured
	RepeatModels []ModelRun
	// Before is a pooled CPU-bound row's calibrated model from what its
	// runs' calibrations measured before each run alone (the through
	// loop's CPU per statement, not the run's), medians; nil otherwise.
	Before   *ModelRun
	Prepared bool        // the row runs prepared statements (preparedCells)
	Cal      Calibration // medians of the calibrations made right before each run
	Load     string      // the machine's load averages before and after the row's runs
	Cells    []Cell
	// Class is the client class a row of a scenario with classes shows
	// (allClasses for the row of all of them), Pool its pool: name
	// (database/user, mode, size).
	Class, Pool string

	reqLevel               bool    // the row's workload runs requests (request cells)
	maxPrepared, threshold int     // the row's pooler.max_prepared_statements and workload.prepare_threshold
	cores, poolSize        int     // the row's server.cores and pooler.default_pool_size
	testbed                bool    // a CPU-bound row calibrated with a testbed (testbed.go)
	calStmt                float64 // calibrated statement round trip through the target (query + 2 hops), ms
	calThinkMs             float64 // calibrated think, ms
}

// Measured is what the load driver and the target recorded.
type Measured struct {
	OKTxns       int64
	ConnRefused  int64
	WaitTimeouts int64
	Failed       int64
	WallMs       float64
	TPS          float64
	// TPSSteady is the closed run's steady window's rate, as the model's
	// tps_steady (load.Result.SteadyTPS).
	TPSSteady float64
	MeanMs    float64
	P50Ms     float64
	P95Ms     float64
	P99Ms     float64
	// Waits: from the proxy's record (one per assignment); PgBouncer gives
	// only a mean (SHOW STATS total_wait_time / assignments).
	WaitKnown    bool // WaitP50Ms and WaitP99Ms are measured
	WaitMeanMs   float64
	WaitP50Ms    float64
	WaitP99Ms    float64
	WaitMeanOnly bool // WaitMeanMs measured, percentiles not
	Assignments  int64
	// Diagnostics: statement round trips and think times under load.
	// HoldMs is how long a request held its server on average, from the
	// target's SHOW STATS (total_query_time less total_wait_time, per
	// request; HoldQueries requests); StartsInRun servers started during
	// the run, StartGapMs the median gap between their backend_starts.
	HoldMs      float64
	HoldQueries int64
	StartsInRun int
	StartGapMs  float64
	// RunDelay is a CPU-bound pooled row's waits for a core per statement
	// (rundelay.go).
	RunDelay RunDelay
	// DriverSpread is, through pgbench, its slowest thread's transactions'
	// mean latency over its fastest's (0: not measured).
	DriverSpread float64
	StmtMeanMs   float64
	StmtP99Ms    float64
	ThinkMeanMs  float64
	// Requests: completed ones, per second of the wall, and their latency.
	OKReqs    int64
	ReqTPS    float64
	ReqP50Ms  float64
	ReqP99Ms  float64
	AppMeanMs float64 // the app pauses' real mean
	// CPUBusy is the fraction of all the machine's CPUs busy during the run
	// (PostgreSQL, a pgbouncer, this process and anything else); CPUSelf
	// is this process's share (the driver, and the proxy when in process).
	CPUBusy, CPUSelf float64
	// CPUSteal is the fraction of all CPUs taken by the hypervisor for
	// other guests during the run (steal time, counted in CPUBusy).
	CPUSteal float64
	// Placement is where PgBouncer's thread and the pool's servers ran
	// (CPU-bound rows through PgBouncer; nil otherwise).
	Placement *Placement
	Errors    []string
	// Prepared is a prepared-statement row's measurement.
	Prepared PreparedMeasured
}

// Cell is one metric of one row.
type Cell struct {
	Metric     string
	Model      float64
	Calibrated float64
	Measured   float64
	Known      bool    // Measured holds a measurement
	Tol        float64 // relative tolerance; 0 = must match exactly; -1 = not judged
	Check      string  // checkDefault (Tol as above), checkAbs (Tol absolute) or checkBothPositive
	Pass       bool
	By         string // what a pass of a judged cell rests on: ByTolerance or ByCI (spread.go)
	Why        string // for a judged cell outside its tolerance

	// Runs is how many live runs the row has. MeasMean and MeasHalf are
	// the measured mean over them and its 95 % half-width; ErrMean and
	// ErrHalf the calibrated model's relative error per run, its mean and
	// half-width; HasCI says the runs gave an interval (two or more with an
	// error each). Set for the metrics in runMetrics.
	Runs               int
	MeasMean, MeasHalf float64
	ErrMean, ErrHalf   float64
	HasCI              bool
}

// ProbeRow is one mode's live feature probes next to compat.
type ProbeRow struct {
	Mode poolmode.Mode
	// MaxPrepared is the scenario's max_prepared_statements, Effective the
	// one the target put in force (0 when it has no such setting, with a
	// Note); Expected is compat at Effective.
	MaxPrepared, Effective int
	Note                   string
	Expected               compat.Matrix
	Result                 probe.Result
	Err                    string
}

// Agrees reports whether every probed feature matches compat.
func (p ProbeRow) Agrees() bool {
	if p.Err != "" || len(p.Result.Outcomes) == 0 {
		return false
	}
	return p.Result.Matrix() == p.Expected
}

// relErr is (x - measured) / measured, NaN when it is undefined.
func relErr(x, measured float64) float64 {
	if measured == 0 {
		if x == 0 {
			return 0
		}
		return math.NaN()
	}
	return (x - measured) / measured
}

// judge fills a row's cells and verdicts. Counts must equal the calibrated
// model's (and the model's, whose rules are the same); TPS, p50 and p99
// are held to their tolerances; wait p99 is shown but not judged.
func judge(r *Row) {
	m, c, x := r.Model, r.Calibrated, r.Measured
	cells := []Cell{
		{Metric: "ok_txns", Model: float64(m.OKTxns), Calibrated: float64(c.OKTxns), Measured: float64(x.OKTxns), Known: true, Tol: 0},
		{Metric: "conn_refused", Model: float64(m.ConnRefused), Calibrated: float64(c.ConnRefused), Measured: float64(x.ConnRefused), Known: true, Tol: 0},
		{Metric: "tps", Model: m.TPS, Calibrated: c.TPS, Measured: x.TPS, Known: true, Tol: TolTPS},
		{Metric: "p50_ms", Model: m.P50Ms, Calibrated: c.P50Ms, Measured: x.P50Ms, Known: true, Tol: TolP50},
		{Metric: "p99_ms", Model: m.P99Ms, Calibrated: c.P99Ms, Measured: x.P99Ms, Known: true, Tol: TolP99},
		{Metric: "wait_p99_ms", Model: m.WaitP99Ms, Calibrated: c.WaitP99Ms, Measured: x.WaitP99Ms, Known: x.WaitKnown, Tol: -1},
	}
	if x.WaitMeanOnly || x.WaitKnown {
		cells = append(cells, Cell{Metric: "wait_mean_ms", Model: m.WaitMeanMs, Calibrated: c.WaitMeanMs, Measured: x.WaitMeanMs, Known: true, Tol: -1})
	}
	if m.WaitTimeouts != 0 || x.WaitTimeouts != 0 || c.WaitTimeouts != 0 {
		cells = append(cells[:2], append([]Cell{{Metric: "wait_timeouts", Model: float64(m.WaitTimeouts), Calibrated: float64(c.WaitTimeouts), Measured: float64(x.WaitTimeouts), Known: true, Tol: 0}}, cells[2:]...)...)
	}
	if r.testbed {
		// A CPU-bound closed run: its steady window too, the rate a pool
		// size gives while every client takes part.
		cells = append(cells[:3], append([]Cell{{Metric: "tps_steady", Model: m.TPSSteady, Calibrated: c.TPSSteady, Measured: x.TPSSteady, Known: x.TPSSteady > 0, Tol: TolTPS}}, cells[3:]...)...)
	}
	if r.reqLevel {
		cells = append(cells,
			Cell{Metric: "ok_reqs", Model: float64(m.OKReqs), Calibrated: float64(c.OKReqs), Measured: float64(x.OKReqs), Known: true, Tol: 0},
			Cell{Metric: "req_tps", Model: m.ReqTPS, Calibrated: c.ReqTPS, Measured: x.ReqTPS, Known: true, Tol: TolTPS},
			Cell{Metric: "req_p50_ms", Model: m.ReqP50Ms, Calibrated: c.ReqP50Ms, Measured: x.ReqP50Ms, Known: true, Tol: TolP50},
			Cell{Metric: "req_p99_ms", Model: m.ReqP99Ms, Calibrated: c.ReqP99Ms, Measured: x.ReqP99Ms, Known: true, Tol: TolP99},
		)
	}
	if r.Prepared {
		cells = preparedCells(r)
	}
	for i := range cells {
		cl := &cells[i]
		switch {
		case cl.Check == checkBothPositive:
			cl.Pass = cl.Model > 0 && cl.Calibrated > 0 && cl.Measured > 0
		case cl.Tol < 0 || !cl.Known:
			cl.Pass = true
		case cl.Check == checkAbs:
			cl.Pass = math.Abs(cl.Calibrated-cl.Measured) <= cl.Tol+1e-9
		case cl.Tol == 0:
			cl.Pass = cl.Measured == cl.Calibrated && cl.Measured == cl.Model
		default:
			spread(cl, r)
			e := cl.judgedErr()
			cl.Pass = !math.IsNaN(e) && math.Abs(e) <= cl.Tol+1e-9
			if cl.Pass {
				cl.By = ByTolerance
			} else if cl.withinByCI() {
				cl.Pass, cl.By = true, ByCI
			}
		}
		if !cl.Pass {
			cl.Why = why(*cl, r)
		}
	}
	r.Cells = cells
}

// Pass reports whether every judged cell of the row is within tolerance.
func (r Row) Pass() bool {
	if r.Skipped != "" {
		return true
	}
	for _, c := range r.Cells {
		if !c.Pass {
			return false
		}
	}
	return len(r.Cells) > 0
}

// passedByCI lists the metrics that pass by the runs' interval, not the
// tolerance.
func (r Row) passedByCI() []string {
	var out []string
	for _, c := range r.Cells {
		if c.Pass && c.By == ByCI {
			out = append(out, c.Metric)
		}
	}
	return out
}

// Failing lists the metrics outside tolerance.
func (r Row) Failing() []string {
	var out []string
	for _, c := range r.Cells {
		if !c.Pass {
			out = append(out, c.Metric)
		}
	}
	return out
}

// coresWhy compares how busy the machine's CPUs were during a CPU-bound
// row's run with the calibrated model's cores (util): the model runs the
// processes' measured CPU per statement, so where it idles cores the
// machine kept busy, how it queues the threads on the cores is the first
// suspect, not what a statement costs. The machine's figure also holds
// the kernel's work for no process and steal time, which the model has
// not: a few points' difference says nothing (coresApart).
func coresWhy(x Measured, util float64, tb *Testbed) string {
	who := "the driver and the in-process proxy"
	if tb.Pgbench {
		who = "the in-process proxy alone: pgbench drives"
	}
	costs := fmt.Sprintf("as measured before the run with its %d clients through the target", tb.ThroughClients)
	if tb.Run.OK {
		costs = "as read over the run itself"
	}
	other := "the other work measured before it"
	if tb.Run.OtherOK {
		other = "the other work over the run"
	}
	s := fmt.Sprintf("the machine's CPUs were %.0f%% busy during the run (this process — %s — %.0f%% of them), the calibrated model's cores %.0f%% (the driver's, the pooler's and the backends' CPU per statement %s, and %s)",
		100*x.CPUBusy, who, 100*x.CPUSelf, 100*util, costs, other)
	switch d := util - x.CPUBusy; {
	case d < -coresApart:
		return s + fmt.Sprintf(": the model's cores idled %.0f%% of the time, the machine's %.0f%% — with the same CPU per statement, cores left idler run fewer statements, and how the model queues the threads on its cores (validate.scheduler, validate.idle_balance) is where they idle", 100*(1-util), 100*(1-x.CPUBusy))
	case d > coresApart:
		return s + fmt.Sprintf(": the model kept its cores busier than the machine kept its own (idle %.0f%% against %.0f%%)", 100*(1-util), 100*(1-x.CPUBusy))
	}
	return s + ": as busy as the machine's, so the miss is not in how long the cores idled"
}

// coresApart is how far apart (a fraction of all the cores) the machine's
// and the calibrated model's busy cores must be for coresWhy to say one
// idled more.
const coresApart = 0.03

// why explains a cell outside its tolerance from what the run measured:
// failed clients, the statements' and think times' real length under load
// against the calibration, and the wait at the pooler.
func why(c Cell, r *Row) string {
	x := r.Measured
	var parts []string
	if c.HasCI {
		parts = append(parts, fmt.Sprintf("the runs' 95%% interval of the calibrated model's error, %s %%, lies wholly outside ±%s %%", c.ciText(), tolText(c)))
	} else if c.Runs == 1 {
		parts = append(parts, "one run gives no interval to weigh the miss against")
	}
	if x.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d clients failed (%s)", x.Failed, strings.Join(x.Errors, "; ")))
	}
	switch c.Metric {
	case "ok_txns", "conn_refused", "wait_timeouts", "ok_reqs":
		if c.Model != c.Calibrated {
			parts = append(parts, fmt.Sprintf("the measured times change the count in the model (%s vs %s)", num(c.Model), num(c.Calibrated)))
		}
		if len(parts) == 0 {
			parts = append(parts, "the count does not follow from the rules here: a race between the clients' timing and the limit")
		}
		return strings.Join(parts, "; ")
	}
	if c.Metric == "prepared_hit_rate" || c.Metric == "prepared_error_txns" {
		if r.Model.PreparedErrorTxns > 0 {
			parts = append(parts, fmt.Sprintf("with the pooler not tracking prepared statements, a prepared execution hits only when its transaction lands on the server its connection's Parse went to, else it fails: which server a transaction gets is a race between the clients live and a seeded draw in the model, and in this run %d transactions failed against %d in the model", x.Prepared.Counts.FailedTxns, r.Model.PreparedErrorTxns))
		} else {
			parts = append(parts, "the hits depend on which statements each server has already seen (the cache warming up) and so on which server each transaction lands on, a race live and a seeded draw in the model")
		}
		return strings.Join(parts, "; ")
	}
	if cal := r.calStmt; cal > 0 && x.StmtMeanMs > 0 && r.Mode != poolmode.Statement && !(r.Prepared && r.cores > 0) {
		d := (x.StmtMeanMs - cal) / cal
		if math.Abs(d) > 0.03 {
			parts = append(parts, fmt.Sprintf("statements took %.3f ms on average under load against %.3f ms calibrated right before the run (%+.0f%%)", x.StmtMeanMs, cal, 100*d))
		}
	}
	pause, what := x.ThinkMeanMs, "think"
	if r.Cal.App {
		pause, what = x.AppMeanMs, "app pauses"
	}
	if pause > 0 {
		if t := r.calThinkMs; t > 0 && math.Abs(pause-t)/t > 0.02 {
			parts = append(parts, fmt.Sprintf("%s took %.3f ms on average against %.3f ms calibrated", what, pause, t))
		}
	}
	switch tb := r.Cal.Testbed; {
	case tb == nil:
		if x.CPUBusy >= cpuSaturated {
			parts = append(parts, fmt.Sprintf("the machine's CPUs were %.0f%% busy during the run (this process — the driver and the in-process proxy — %.0f%% of them): the driver, the pooler and PostgreSQL compete for the cores, and the model gives the pooler and the clients no CPU time", 100*x.CPUBusy, 100*x.CPUSelf))
		}
	case r.Calibrated.CPUUtil > 0:
		parts = append(parts, coresWhy(x, r.Calibrated.CPUUtil, tb))
	}
	if x.CPUSteal >= 0.02 {
		parts = append(parts, fmt.Sprintf("the hypervisor gave %.0f%% of the CPUs to other guests during the run (steal time), capacity that neither the calibration on one connection nor the model sees", 100*x.CPUSteal))
	}
	if r.Prepared && r.cores > 0 && c.Calibrated > c.Measured {
		parts = append(parts, fmt.Sprintf("the calibrated model shares the %d cores among the running statements at the speed measured on one connection with nothing else running; live, up to %d backends, the proxy and the driver run at once on them (context switches, caches), which the model does not charge", r.cores, r.poolSize))
	}
	if (x.WaitKnown || x.WaitMeanOnly) && r.Mode.Pooled() {
		if d := x.WaitMeanMs - r.Calibrated.WaitMeanMs; math.Abs(d) > 0.5 && math.Abs(d) > 0.1*r.Calibrated.WaitMeanMs {
			parts = append(parts, fmt.Sprintf("the mean wait for a server was %.2f ms against %.2f ms in the calibrated model", x.WaitMeanMs, r.Calibrated.WaitMeanMs))
		}
	}
	if c.Metric == "p99_ms" && x.P99Ms > c.Calibrated {
		parts = append(parts, "the tail holds the slowest of a few hundred transactions: one scheduler or timer stall on this machine moves it")
	}
	if len(parts) == 0 {
		parts = append(parts, "no single measured part accounts for it (see the diagnostics line)")
	}
	return strings.Join(parts, "; ")
}

func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func pct(x, measured float64) string {
	e := relErr(x, measured)
	if math.IsNaN(e) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f", 100*e)
}

// Title names a row by its swept keys.
func (r Row) Title() string {
	var b []string
	for _, p := range r.Params {
		b = append(b, p.Key+"="+p.Value)
	}
	t := strings.Join(b, ", ")
	if len(b) == 0 {
		t = r.Mode.String()
	}
	switch {
	case r.Class == allClasses:
		if len(b) == 0 {
			return allClasses
		}
		return t + " · " + allClasses
	case r.Class != "":
		if len(b) == 0 {
			return "class " + r.Class
		}
		return t + " · class " + r.Class
	}
	return t
}

func (r Row) verdict() string {
	switch {
	case r.Skipped != "":
		return "SKIPPED: " + r.Skipped
	case r.Pass():
		if ci := r.passedByCI(); len(ci) > 0 {
			return "PASS (" + strings.Join(ci, ", ") + " outside the tolerance, within the runs' 95% interval)"
		}
		return "PASS"
	default:
		return "FAIL (" + strings.Join(r.Failing(), ", ") + ")"
	}
}

func fnum(metric string, v float64) string {
	switch metric {
	case "ok_txns", "conn_refused", "wait_timeouts", "prepared_error_txns", "txns_ended", "server_parses", "stmt_execs", "ok_reqs":
		return num(math.Round(v))
	case "tps", "server_parses_per_s", "req_tps":
		return strconv.FormatFloat(v, 'f', 1, 64)
	case "prepared_hit_rate":
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) + " ms" }
func us(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) + " µs" }

// tolText is a cell's tolerance for rows.csv and the terminal: a relative
// one in percent, "abs 0.05" for an absolute one, ">0" when all must be
// positive, "" when not judged.
func tolText(c Cell) string {
	switch {
	case c.Check == checkBothPositive:
		return ">0"
	case c.Tol < 0:
		return ""
	case c.Check == checkAbs:
		return "abs " + strconv.FormatFloat(c.Tol, 'f', 2, 64)
	}
	return strconv.FormatFloat(100*c.Tol, 'f', 0, 64)
}

// classes reports whether the report's rows are a scenario's classes.
func (rep *Report) classes() bool {
	for _, r := range rep.Rows {
		if r.Class != "" {
			return true
		}
	}
	return false
}

// prepared reports whether the report's rows run prepared statements.
func (rep *Report) prepared() bool {
	for _, r := range rep.Rows {
		if r.Prepared {
			return true
		}
	}
	return false
}

// held reports whether a row's calibration has a statement's hold at
// the target (calibrateHold).
func (rep *Report) held() bool {
	for _, r := range rep.Rows {
		if r.Cal.Hold > 0 {
			return true
		}
	}
	return false
}

// WriteCSV writes rows.csv: one line per row and metric.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"target", "row", "mode", "clients", "metric", "model", "calibrated", "measured", "err_model_pct", "err_calibrated_pct", "tolerance_pct", "pass",
		"runs", "measured_mean", "measured_ci95", "err_calibrated_runs_mean_pct", "err_calibrated_runs_ci95_pct", "pass_by"})
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			continue
		}
		for _, c := range r.Cells {
			meas, em, ec := "", "", ""
			if c.Known {
				meas, em, ec = fnum(c.Metric, c.Measured), pct(c.Model, c.Measured), pct(c.Calibrated, c.Measured)
			}
			tol := tolText(c)
			row := []string{rep.Target, r.Title(), r.Mode.String(), strconv.Itoa(r.Clients), c.Metric,
				fnum(c.Metric, c.Model), fnum(c.Metric, c.Calibrated), meas, em, ec, tol, strconv.FormatBool(c.Pass)}
			row = append(row, c.csvRuns()...)
			_ = cw.Write(row)
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteText prints the summary for a terminal.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("%s — target %s\n\n", rep.Scenario, rep.Target)
	p("%-34s %-14s %9s %9s %9s %9s %9s %9s   %s\n", "row", "metric", "model", "calib", "measured", "err%", "err%cal", "tol%", "")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			p("%-34s skipped: %s\n", r.Title(), r.Skipped)
			continue
		}
		for i, c := range r.Cells {
			title := ""
			if i == 0 {
				title = r.Title()
			}
			meas, em, ec := "—", "", ""
			if c.Known {
				meas, em, ec = fnum(c.Metric, c.Measured), pct(c.Model, c.Measured), pct(c.Calibrated, c.Measured)
			}
			tol, mark := tolText(c), ""
			if tol != "" {
				mark = "ok"
				switch {
				case !c.Pass:
					mark = "OUT"
				case c.By == ByCI:
					mark = "ok by CI"
				}
			}
			if t := c.ciText(); t != "" {
				mark += "   runs " + t
			}
			p("%-34s %-14s %9s %9s %9s %9s %9s %9s   %s\n", title, c.Metric, fnum(c.Metric, c.Model), fnum(c.Metric, c.Calibrated), meas, em, ec, tol, mark)
		}
		p("%-34s verdict: %s\n\n", "", r.verdict())
	}
	p("%s\n\n", rep.tally())
	if len(rep.Probes) > 0 {
		p("feature probes (live vs compat):\n")
		for _, pr := range rep.Probes {
			agree := "agrees"
			if !pr.Agrees() {
				agree = "DISAGREES"
			}
			p("  %-12s", pr.Mode)
			got := pr.Result.Matrix()
			for _, f := range compat.Features {
				if pr.Err != "" || int(f) >= len(pr.Result.Outcomes) {
					continue
				}
				p(" %s=%s", f, compat.Word(got[f]))
			}
			if pr.Err != "" {
				p(" error: %s", pr.Err)
			}
			p("  [%s]\n", agree)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// busy reports a 1-minute load average above the CPU count at the start or
// the end of the run.
func (rep *Report) busy() bool {
	for _, l := range []string{rep.Versions.LoadStart, rep.Versions.LoadEnd} {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if x, err := strconv.ParseFloat(f[0], 64); err == nil && rep.Versions.CPUs > 0 && x > float64(rep.Versions.CPUs) {
			return true
		}
	}
	return false
}

// Pass reports whether every row passed and every probe agreed.
func (rep *Report) Pass() bool {
	for _, r := range rep.Rows {
		if !r.Pass() {
			return false
		}
	}
	for _, p := range rep.Probes {
		if !p.Agrees() {
			return false
		}
	}
	return true
}

// tally counts the rows by verdict: within the tolerance, passing only by
// the runs' 95% interval, outside, skipped.
func (rep *Report) tally() string {
	var tol, ci, fail, skip int
	for _, r := range rep.Rows {
		switch {
		case r.Skipped != "":
			skip++
		case !r.Pass():
			fail++
		case len(r.passedByCI()) > 0:
			ci++
		default:
			tol++
		}
	}
	out := fmt.Sprintf("rows: %d within the tolerances, %d only within the runs' 95%% interval, %d outside", tol, ci, fail)
	if skip > 0 {
		out += fmt.Sprintf(", %d skipped", skip)
	}
	return out
}
