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

// WriteMarkdown writes report.md.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# poolsim validate %s — target %s\n\n", rep.Scenario, rep.Target)
	if rep.Description != "" {
		p("%s\n\n", rep.Description)
	}
	p("Command: `%s`\n\n", rep.Command)
	v := rep.Versions
	p("PostgreSQL %s; PgBouncer %s; %s; poolsim %s; %d CPUs (%s); %s; run took %s. Load average (1, 5, 15 min) %s at the start, %s at the end: other work shares these CPUs, and every time below moves with it.\n\n",
		v.PostgreSQL, v.PgBouncer, v.Go, v.Commit, v.CPUs, v.OS, v.Date, rep.Elapsed.Round(time.Second), v.LoadStart, v.LoadEnd)
	if v.Sched != "" {
		p("Scheduling: %s.\n\n", v.Sched)
	}
	if rep.prepared() {
		p("Tolerances (prepared statements): counts that follow from the rules must equal the model exactly — conn_refused, txns_ended (every transaction ends ok or failed on a missing prepared statement), and ok_txns and prepared_error_txns (0) where no statement can go missing; where statements can go missing (max_prepared_statements 0 with prepare_threshold > 0), which transactions fail depends on which server each lands on — a race live, a seeded draw in the model — so prepared_error_txns must be above 0 in the model, the calibrated model and the run, and ok_txns is shown, not judged. The calibrated model must be within %.2f (absolute) of the measured prepared hit rate and within %.0f%% of the measured server parses per second and TPS; p50 and p99 are shown, not judged. Error %% is (prediction − measured) / measured.\n\n", TolHitRate, 100*TolPrepared)
		rep.writePreparedSummary(&b)
	} else {
		p("Tolerances: ok_txns and conn_refused must equal the model exactly; the calibrated model must be within %.0f%% of the measured TPS and p50 and within %.0f%% of p99. Error %% is (prediction − measured) / measured. Each run has its own calibrated model, so with several runs the error judged is the runs' mean of each run's own (its model against its measurement, the last column); the medians' error is shown beside it, not judged, since the median model and the median measurement can be different runs'.\n\n", 100*TolTPS, 100*TolP99)
	}

	p("## Summary\n\n")
	p("| row | ok_txns model / measured | refused model / measured | tps model / calibrated / measured | p50_ms model / calibrated / measured | p99_ms model / calibrated / measured | wait_p99_ms model / calibrated / measured | verdict |\n")
	p("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			p("| %s | | | | | | | %s |\n", r.Title(), r.verdict())
			continue
		}
		m, c, x := r.Model, r.Calibrated, r.Measured
		wait := "—"
		if x.WaitKnown {
			wait = fmt.Sprintf("%.2f", x.WaitP99Ms)
		}
		p("| %s | %d / %d | %d / %d | %.1f / %.1f / %.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f / %.2f / %s | %s |\n",
			r.Title(), m.OKTxns, x.OKTxns, m.ConnRefused, x.ConnRefused, m.TPS, c.TPS, x.TPS,
			m.P50Ms, c.P50Ms, x.P50Ms, m.P99Ms, c.P99Ms, x.P99Ms, m.WaitP99Ms, c.WaitP99Ms, wait, r.verdict())
	}
	p("\n%s.\n\n", strings.ToUpper(rep.tally()[:1])+rep.tally()[1:])
	rep.writeClassSummary(&b)
	rep.writeProbeSummary(&b)
	rep.writeCurves(p)
	rep.writeTestbed(p)
	rep.writeArrangements(p)

	p("## Calibration\n\n")
	p("Measured right before each live run and put into that run's calibrated model; the table shows the medians over a row's runs: ")
	p("connect = median time to open one PostgreSQL connection as the load's role, one at a time (pooled rows only: direct clients connect before time zero); ")
	p("query and think = the scenario's statement straight to PostgreSQL (round trip included: the model's direct statement) and the driver's think timer, alternating on several connections at once so that pg_sleep and the timers see the concurrency of a full pool, fitted as a lognormal (mean, σ of the logs); ")
	p("hop = (empty query round trip through the target − direct) / 2, timed alternately; ")
	p("open = the servers the target's pool held right before the load started, counted at PostgreSQL (pooled rows: the hop's connection through it opened one, a CPU-bound row's through loop up to its pool size), with which the calibrated model's pool starts (validate.servers_open).")
	if rep.held() {
		p(" In pooled rows of a sleep, cpu or sql statement the same loop then runs through a fresh start of the target (as many connections as the direct loop, at most the pool size; 20 statements each): held = how long a statement held its server as the target saw it (SHOW STATS (total_query_time − total_wait_time) / total_query_count), and the connect column's second figure the median gap between the backend starts of the servers the pool opened one after another for it, a login with the machine busy. The calibrated model of such a row holds the server as long as the run itself showed (the target's SHOW STATS over the run; Diagnostics), the scenario's shape scaled to it, takes the rest of the direct round trip (this driver's own wake-ups, outside the server's time behind a pooler) as the client's, half on each hop, and opens its servers one every gap between the run's own server starts — how long pg_sleep and a login take moves with what else the machine runs, as a CPU-bound row's CPU per statement does; the model from held and the loaded connect alone, before the run, is given below each such row.")
	}
	if rep.prepared() {
		p(" In prepared-statement rows the query column is a prepared execution of the statement and think is the driver's timer alone, both measured as described below the table (1 connection).")
	}
	p("\n\n")
	p("| row | connect | query (scenario → measured mean, p99) | think (scenario → measured mean) | hop | open | connections × statements |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		if r.Skipped != "" || r.Class == allClasses {
			continue
		}
		c := r.Cal
		app := ""
		if c.App {
			app = "app "
		}
		open := "—"
		if r.Mode.Pooled() {
			open = strconv.Itoa(c.ServersOpen)
		}
		connect, held := ms(c.Connect), ""
		if c.ConnectLoaded > 0 {
			connect += " → " + ms(c.ConnectLoaded) + " loaded"
		}
		if c.Hold > 0 {
			held = ", held " + ms(c.Hold)
		}
		p("| %s | %s | %s → %s, %s%s | %s%s → %s | %s | %s | %d × %d |\n", r.Title(), connect, ms(c.QueryNominal), ms(c.QueryMean), ms(c.QueryP99), held,
			app, ms(c.ThinkNominal), ms(c.ThinkMean), us(c.Hop), open, c.Concurrency, c.Samples)
	}
	if rep.classes() {
		p("\nWith classes each class is calibrated on its own, as its pool's user on its database, with as many connections at once as its pool has servers. For a class with requests and workload.app the think column is its app pause (marked app): those timers are measured, and its think between requests gets the same overshoot in the calibrated model. One hop (through the first pool) serves every class.\n")
	}
	if rep.prepared() {
		p("\nPrepared statements, measured right before and right after each run on one connection straight to PostgreSQL with nothing else running (the run's calibration is the mean of the two; the table shows medians over the row's runs): a prepared execution (Bind/Execute of a named statement at the statement's mean time), a prepared trivial `SELECT 1` (the round trip), an unnamed execution of the same text (Parse/Bind/Execute), and parse = the median of (unnamed − prepared), timed alternately. The calibrated model takes the prepared execution less the trivial round trip as its server time (CPU for a cpu statement, shaped as the scenario's distribution), the trivial round trip as fixed non-CPU time, and the measured parse as workload.parse.\n\n")
		p("| row | prepared execution (scenario query+cpu → measured) | trivial round trip | unnamed execution | parse (scenario → measured) |\n|---|---|---|---|---|\n")
		for _, r := range rep.Rows {
			if r.Skipped != "" {
				continue
			}
			c := r.Cal
			p("| %s | %s → %s | %s | %s | %s → %s |\n", r.Title(), ms(c.QueryNominal), ms(c.QueryMean), us(c.RTT), ms(c.Unnamed), us(c.ParseNominal), us(c.Parse))
		}
	}
	if rep.RowNs > 0 {
		p("\nThe cpu statement was calibrated on the spot: %.2f ns of server time per generate_series row.\n", rep.RowNs)
	}
	if rep.Joins > 0 {
		p("Its parse and plan cost comes from %d one-row generate_series joined to it (the planner weighs every join order): the number of joins whose measured cost was nearest the scenario's workload.parse.\n", rep.Joins)
	}
	p("\n")

	p("## Rows\n\n")
	for _, r := range rep.Rows {
		p("### %s\n\n", r.Title())
		if r.Skipped != "" {
			p("Skipped: %s\n\n", r.Skipped)
			continue
		}
		p("| metric | model | calibrated model | measured | measured mean ± 95%% CI | error %% model | error %% calibrated (medians) | error %% calibrated, runs' mean ± 95%% CI (judged) |\n|---|---|---|---|---|---|---|---|\n")
		for _, c := range r.Cells {
			meas, em, ec, mm, ci := "—", "—", "—", "—", "—"
			if c.Known {
				meas, em, ec = fnum(c.Metric, c.Measured), pct(c.Model, c.Measured), pct(c.Calibrated, c.Measured)
			}
			if t := c.measText(); t != "" {
				mm = t
			}
			if t := c.ciText(); t != "" {
				ci = t
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Metric, fnum(c.Metric, c.Model), fnum(c.Metric, c.Calibrated), meas, mm, em, ec, ci)
		}
		p("\n**Verdict: %s**", r.verdict())
		for _, c := range r.Cells {
			switch {
			case !c.Pass:
				p("\n- %s outside tolerance: %s.", c.Metric, c.Why)
			case c.By == ByCI:
				p("\n- %s passes by the runs' interval, not the tolerance: the calibrated model's error per run is %s %% (tolerance ±%s %%), its 95%% interval reaching into the band — run-to-run noise cannot be told apart from the miss.", c.Metric, c.ciText(), tolText(c))
			}
		}
		if !r.Pass() && rep.busy() {
			p("\n- The machine was busy with other work during the run (load average %s at the start, %s at the end, on %d CPUs): stalls of the driver, the pooler and PostgreSQL that no model of this scenario contains.", v.LoadStart, v.LoadEnd, v.CPUs)
		}
		x := r.Measured
		stmtNote := ""
		if r.Mode == poolmode.Statement {
			stmtNote = ", waits for a server included"
		}
		if r.Prepared {
			pm := x.Prepared
			n := pm.Counts
			src := "the driver's own count of named Parses (the pooler does not track prepared statements here, so each reaches a server); hits = executions of named statements with no Parse that succeeded"
			if pm.FromProxy {
				src = fmt.Sprintf("the proxy's counters over the run (Proxy.Stats): server parses %d (named Parses it forwarded or injected), binds %d, client parses %d; hit rate = 1 − server parses / binds", pm.ProxyServerParses, pm.ProxyBinds, pm.ProxyClientParses)
			}
			p("\n\nPrepared statements (first run): %d executions — %d unnamed (each a parse at the server), %d of named statements (%d with the driver's named Parse, %d failed: prepared statement does not exist, in %d transactions); server parses = named Parses at the servers + unnamed executions = %d, %.1f/s over the wall; named Parses at the servers from %s.",
				n.Unnamed+n.Binds, n.Unnamed, n.Binds, n.NamedParses, n.Failed, n.FailedTxns, pm.ServerParses, pm.ServerParsesPerS, src)
		}
		switch {
		case r.Class == allClasses:
			p("\n\nDiagnostics (every class together; the calibration is per class, on the class rows): hop %s (empty query round trip through the target %s); statements after a transaction's first %.3f ms mean, %.3f ms p99 under load%s; wall %.1f ms; %d wait timeouts, %d failed clients",
				us(r.Cal.Hop), us(r.Cal.HopRTT), x.StmtMeanMs, x.StmtP99Ms, stmtNote, x.WallMs, x.WaitTimeouts, x.Failed)
		case r.Cal.App:
			p("\n\nDiagnostics: hop %s (empty query round trip through the target %s); statements after a transaction's first %.3f ms mean, %.3f ms p99 under load%s (calibrated query + 2 hops %.3f ms); app pauses %.3f ms mean (calibrated %.3f ms), think between requests %.3f ms mean; wall %.1f ms; %d wait timeouts, %d failed clients",
				us(r.Cal.Hop), us(r.Cal.HopRTT), x.StmtMeanMs, x.StmtP99Ms, stmtNote, r.calStmt, x.AppMeanMs, r.calThinkMs, x.ThinkMeanMs, x.WallMs, x.WaitTimeouts, x.Failed)
		default:
			p("\n\nDiagnostics: hop %s (empty query round trip through the target %s); statements after a transaction's first %.3f ms mean, %.3f ms p99 under load%s (calibrated query + 2 hops %.3f ms); think %.3f ms mean (calibrated %.3f ms); wall %.1f ms; %d wait timeouts, %d failed clients",
				us(r.Cal.Hop), us(r.Cal.HopRTT), x.StmtMeanMs, x.StmtP99Ms, stmtNote, r.calStmt, x.ThinkMeanMs, r.calThinkMs, x.WallMs, x.WaitTimeouts, x.Failed)
		}
		if x.HoldQueries > 0 {
			p("; a statement held its server %.3f ms at the target (%d requests; calibrated %.3f ms)", x.HoldMs, x.HoldQueries, float64(r.Cal.Hold)/1e6)
		}
		if x.StartsInRun > 1 {
			cal := r.Cal.ConnectLoaded
			if cal == 0 {
				cal = r.Cal.Connect
			}
			p("; the pool opened %d servers during the run, one every %.3f ms (median gap of their backend starts; calibrated %.3f ms)", x.StartsInRun, x.StartGapMs, float64(cal)/1e6)
		}
		if x.WaitMeanOnly {
			p("; wait percentiles: PgBouncer reports only a mean (SHOW STATS total_wait_time / %d assignments counted by the driver)", x.Assignments)
		}
		p("; CPUs %.0f%% busy (this process %.0f%%, steal %.0f%%)", 100*x.CPUBusy, 100*x.CPUSelf, 100*x.CPUSteal)
		if r.Cal.Testbed != nil && r.Calibrated.CPUUtil > 0 {
			p(", the calibrated model's cores %.0f%%", 100*r.Calibrated.CPUUtil)
		}
		if d, m := x.RunDelay, r.Calibrated; d.OK && m.RunQueueServerUs > 0 {
			micros := func(t time.Duration) float64 { return float64(t) / 1e3 }
			p("; waits for a core per statement (schedstat run delay; the calibrated model's in parentheses): servers %.0f µs (%.0f)", micros(d.Server), m.RunQueueServerUs)
			if d.SelfBoth {
				p(", driver and pooler (this process) %.0f µs (%.0f)", micros(d.Driver), m.RunQueueDriverUs+m.RunQueuePoolerUs)
			} else {
				p(", pooler %.0f µs (%.0f), driver %.0f µs (%.0f)", micros(d.Pooler), m.RunQueuePoolerUs, micros(d.Driver), m.RunQueueDriverUs)
			}
		}
		if x.DriverSpread > 0 && r.Calibrated.DriverThreadSpread > 0 {
			p("; pgbench's threads: the slowest's transactions took %.2f times as long as the fastest's on average (the calibrated model's driver threads %.2f: Linux keeps a thread on its core, and the clients of one on the busier core fare worse)", x.DriverSpread, r.Calibrated.DriverThreadSpread)
		}
		if d := x.RunDelay; d.PreemptsOK {
			p("; PgBouncer taken off its core while it could run %.2f times a statement (nonvoluntary_ctxt_switches: a thread woken onto its core ran first; the calibrated model's pooler is preempted only in a pool-1 row's apart arrangement, at its pinned loop's rate)", d.PoolerPreempts)
		}
		p("; machine load average (1, 5, 15 min) %s.\n", r.Load)
		if b := r.Before; b != nil && r.Cal.Testbed == nil && r.Cal.Hold > 0 {
			p("\nBefore the run alone (held %.3f ms, a login every %.3f ms, from the loop through the target): the calibrated model gives tps %.1f (%+.1f %%), p50 %.2f ms (%+.1f %%), p99 %.2f ms (%+.1f %%).\n",
				float64(r.Cal.Hold)/1e6, float64(r.Cal.ConnectLoaded)/1e6, b.TPS, 100*relErr(b.TPS, x.TPS), b.P50Ms, 100*relErr(b.P50Ms, x.P50Ms), b.P99Ms, 100*relErr(b.P99Ms, x.P99Ms))
		}
		if len(r.Repeats) > 1 {
			p("\nRuns (measured / calibrated model; the table holds their medians):")
			for i, y := range r.Repeats {
				if i < len(r.RepeatModels) {
					k := r.RepeatModels[i]
					if r.Prepared {
						p(" #%d tps %.1f / %.1f, hit rate %.3f / %.3f, server parses/s %.1f / %.1f, failed txns %d / %d;", i+1, y.TPS, k.TPS, y.Prepared.HitRate, k.PreparedHitRate, y.Prepared.ServerParsesPerS, k.ServerParsesPerS, y.Prepared.Counts.FailedTxns, k.PreparedErrorTxns)
						continue
					}
					p(" #%d tps %.1f / %.1f, p50 %.2f / %.2f ms, p99 %.2f / %.2f ms", i+1, y.TPS, k.TPS, y.P50Ms, k.P50Ms, y.P99Ms, k.P99Ms)
					if y.Placement != nil {
						p(", %.0f %% of the servers on PgBouncer's core (%d samples)", 100*y.Placement.Shared, y.Placement.Samples)
					}
					p(";")
				}
			}
			p("\n")
		}
		p("\n")
	}
	rep.writeProbeDetail(&b)
	if len(rep.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range rep.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (rep *Report) writeProbeSummary(b *strings.Builder) {
	if len(rep.Probes) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Feature probes (live vs compat)\n\n| mode |")
	for _, f := range compat.Features {
		p(" %s |", f)
	}
	p(" agrees |\n|---|")
	for range compat.Features {
		p("---|")
	}
	p("---|\n")
	for _, pr := range rep.Probes {
		p("| %s |", pr.Mode)
		got := pr.Result.Matrix()
		for _, f := range compat.Features {
			if pr.Err != "" || int(f) >= len(pr.Result.Outcomes) {
				p(" — |")
				continue
			}
			cell := compat.Word(got[f])
			if got[f] != pr.Expected[f] {
				cell += " (compat: " + compat.Word(pr.Expected[f]) + ")"
			}
			p(" %s |", cell)
		}
		if pr.Agrees() {
			p(" yes |\n")
		} else {
			p(" **no** |\n")
		}
	}
	p("\n")
}

func (rep *Report) writeProbeDetail(b *strings.Builder) {
	if len(rep.Probes) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Probe details\n\n")
	for _, pr := range rep.Probes {
		if pr.Note != "" {
			p("Note (%s): %s.\n\n", pr.Mode, pr.Note)
		}
	}
	p("Each feature is set up in one transaction and used in the next, while another client keeps the server just released busy (pool size 2), so a pooled second transaction runs on another server.\n\n")
	for _, pr := range rep.Probes {
		if pr.Err != "" {
			p("- %s: probe failed: %s\n", pr.Mode, pr.Err)
			continue
		}
		for _, o := range pr.Result.Outcomes {
			ch := "same server"
			if o.Changed {
				ch = "server changed"
			}
			tries := "1 try"
			if o.Tries != 1 {
				tries = fmt.Sprintf("%d tries", o.Tries)
			}
			p("- %s / %s: %s — %s (%s, %s)\n", pr.Mode, o.Feature, compat.Word(o.OK), o.Detail, ch, tries)
		}
	}
	p("\n")
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

// writeClassSummary is the per-class table: each class's pool and its
// figures, the requests' beside the transactions'.
func (rep *Report) writeClassSummary(b *strings.Builder) {
	if !rep.classes() {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Classes\n\nEach class's pool (name: database/user, pool_mode, pool_size) and its figures, model / calibrated model / measured; requests are a class's own unit (without requests_per_session every transaction is one). Wait is the mean wait for a server at the pooler (the proxy's record of every assignment; PgBouncer's SHOW STATS total_wait_time of the pool's database entry over the driver's assignments).\n\n")
	p("| row | pool | tps | p50_ms | p99_ms | req_tps | req_p50_ms | req_p99_ms | wait_mean_ms | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			continue
		}
		m, c, x := r.Model, r.Calibrated, r.Measured
		wait := "—"
		if x.WaitKnown || x.WaitMeanOnly {
			wait = fmt.Sprintf("%.2f", x.WaitMeanMs)
		}
		p("| %s | %s | %.1f / %.1f / %.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.1f / %.1f / %.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f / %.2f / %s | %s |\n",
			r.Title(), r.Pool, m.TPS, c.TPS, x.TPS, m.P50Ms, c.P50Ms, x.P50Ms, m.P99Ms, c.P99Ms, x.P99Ms,
			m.ReqTPS, c.ReqTPS, x.ReqTPS, m.ReqP50Ms, c.ReqP50Ms, x.ReqP50Ms, m.ReqP99Ms, c.ReqP99Ms, x.ReqP99Ms,
			m.WaitMeanMs, c.WaitMeanMs, wait, r.verdict())
	}
	p("\n")
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

// writePreparedSummary is the prepared-statement table: the metrics of
// issue 7 side by side.
func (rep *Report) writePreparedSummary(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Prepared statements\n\n")
	p("| row | max_prepared_statements | prepare_threshold | ok_txns model / calibrated / measured | failed (statement missing) model / calibrated / measured | hit rate model / calibrated / measured | server parses/s model / calibrated / measured | tps model / calibrated / measured | verdict |\n")
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			p("| %s | | | | | | | | %s |\n", r.Title(), r.verdict())
			continue
		}
		m, c, x := r.Model, r.Calibrated, r.Measured
		p("| %s | %d | %d | %d / %d / %d | %d / %d / %d | %.2f / %.2f / %.2f | %.0f / %.0f / %.0f | %.1f / %.1f / %.1f | %s |\n",
			r.Title(), r.maxPrepared, r.threshold, m.OKTxns, c.OKTxns, x.OKTxns, m.PreparedErrorTxns, c.PreparedErrorTxns, x.Prepared.Counts.FailedTxns,
			m.PreparedHitRate, c.PreparedHitRate, x.Prepared.HitRate, m.ServerParsesPerS, c.ServerParsesPerS, x.Prepared.ServerParsesPerS,
			m.TPS, c.TPS, x.TPS, r.verdict())
	}
	p("\n")
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
