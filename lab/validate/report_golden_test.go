package validate

import (
	"bytes"
	"flag"
	"github.com/poolsim/poolsim/lab/testbed"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestReportMarkdownGolden renders whole reports - every section and
// branch of report.md the fixtures below reach - against reviewed
// outputs in testdata/ (go test ./lab/validate -run
// TestReportMarkdownGolden -update rewrites them).
func TestReportMarkdownGolden(t *testing.T) {
	for name, rep := range map[string]*Report{
		"full":     fullReport(),
		"prepared": preparedReport(),
		"plain":    testReport(),
	} {
		var b bytes.Buffer
		if err := rep.WriteMarkdown(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden := filepath.Join("testdata", "report-"+name+".md")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run 'go test ./lab/validate -run TestReportMarkdownGolden -update' to create it)", err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("report %s differs from %s:\n%s", name, golden, b.String())
		}
	}
}

// goldenVersions is a machine busier than its CPUs (Report.busy).
func goldenVersions() Versions {
	return Versions{PostgreSQL: "15.8", PgBouncer: "1.18.0", Go: "go1.26.8", Commit: "abc1234", CPUs: 2, OS: "linux/amd64",
		Date: "2026-12-06", LoadStart: "3.10 2.00 1.00", LoadEnd: "1.50 1.80 1.00", Sched: "thread by thread (autogroup off)"}
}

// fullReport reaches every section of a report without prepared
// statements: a pool-size curve through PgBouncer with a testbed, its
// arrangements and three runs each (placements, intervals, a pass by the
// interval), a failing row with every explanation, a skipped row, classes
// (an app class and all of them), requests, waits known and mean-only,
// run delays, probes (agreeing, not, failed, with a note) and notes.
func fullReport() *Report {
	web, all := goldenClasses()
	return &Report{Scenario: "golden-live", Description: "Every section of a report, from fixtures.", Target: TargetPgBouncer,
		Command: "poolsim validate golden-live --target pgbouncer", Versions: goldenVersions(), Elapsed: 95 * time.Second, RowNs: 2.5, Joins: 3,
		Rows: []Row{goldenCurveRow("1", 20000, 0.9), goldenCurveRow("2", 26000, 0.4), goldenFailingRow(), goldenMeanOnlyRow(),
			{Params: goldenParams("pooler.mode", "direct"), Mode: poolmode.Direct, Skipped: "needs a pooler"}, goldenByCIRow(), web, all},
		Probes: goldenProbes(),
		Notes:  []string{"A note.", "Another note."}}
}

// goldenParams are swept key=value pairs: goldenParams("k", "v", ...).
func goldenParams(kv ...string) []scenarios.Param {
	var ps []scenarios.Param
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, scenarios.Param{Key: kv[i], Value: kv[i+1]})
	}
	return ps
}

// goldenCal is a pooled row's calibration with a hold at the target.
func goldenCal() Calibration {
	return Calibration{Connect: 2100 * time.Microsecond, QueryMean: 1050 * time.Microsecond, QueryP99: 1900 * time.Microsecond, QueryNominal: time.Millisecond,
		ThinkMean: 5100 * time.Microsecond, ThinkNominal: 5 * time.Millisecond, Hop: 30 * time.Microsecond, HopRTT: 120 * time.Microsecond,
		ServersOpen: 1, Hold: 1100 * time.Microsecond, ConnectLoaded: 2500 * time.Microsecond, HoldConns: 4, HoldLogins: 3, HoldQueries: 80, Concurrency: 4, Samples: 200}
}

// goldenTestbed is a pgbench-driven testbed with both arrangements, its
// wake-up curve and the run's own CPU.
func goldenTestbed() *Testbed {
	tb := &Testbed{Cores: 2, ThroughClients: 50, ThroughTPS: 950, ThroughBusy: 0.93, Pgbench: true, Server: 25 * time.Microsecond,
		Driver: 20 * time.Microsecond, Pooler: 22 * time.Microsecond,
		WakeCurve: []testbed.WakePoint{{Idle: 40 * sim.Microsecond, Wake: 12 * sim.Microsecond}, {Idle: 130 * sim.Microsecond, Wake: 40 * sim.Microsecond}},
		Together:  &Arrangement{TPS: 22000, Placement: &Placement{Samples: 150, Shared: 1}, Model: ModelRun{Metrics: system.Metrics{TPS: 21500}}},
		Apart:     &Arrangement{Apart: true, TPS: 13000, Model: ModelRun{Metrics: system.Metrics{TPS: 12500}}}}
	tb.Run = RunCPU{Driver: 21 * time.Microsecond, Pooler: 24 * time.Microsecond, Server: 40 * time.Microsecond, OK: true, OtherOK: true}
	return tb
}

// goldenCurveRow is a point of the curve at 50 clients, three runs each.
func goldenCurveRow(pool string, tps float64, shared float64) Row {
	cal := goldenCal()
	m := system.Metrics{OKTxns: 3000, TPS: tps, TPSSteady: tps, P50Ms: 2, P99Ms: 4, WaitP99Ms: 1.5, WaitMeanMs: 0.6, CPUUtil: 0.9}
	stats := testbed.Stats{RunQueueServerUs: 30, RunQueuePoolerUs: 12, RunQueueDriverUs: 8, DriverThreadSpread: 1.2}
	x := Measured{OKTxns: 3000, TPS: tps * 0.97, TPSSteady: tps * 0.98, P50Ms: 2.05, P99Ms: 4.4, WaitKnown: true, WaitMeanMs: 0.62, WaitP50Ms: 0.4, WaitP99Ms: 1.6,
		StmtMeanMs: 1.9, StmtP99Ms: 3.9, ThinkMeanMs: 0, WallMs: 3000, CPUBusy: 0.95, CPUSelf: 0.2, CPUSteal: 0.01,
		RunDelay:     RunDelay{Server: 31 * time.Microsecond, Pooler: 11 * time.Microsecond, Driver: 9 * time.Microsecond, OK: true, PoolerPreempts: 0.7, PreemptsOK: true},
		DriverSpread: 1.3, Placement: &Placement{Samples: 120, Shared: shared}}
	var runs []Measured
	var models []ModelRun
	for i, f := range []float64{0.96, 0.97, 0.99} {
		y := x
		y.TPS, y.P50Ms, y.P99Ms = tps*f, 2.0+0.05*float64(i), 4.3+0.1*float64(i)
		y.Placement = &Placement{Samples: 100 + i, Shared: shared}
		runs = append(runs, y)
		models = append(models, ModelRun{Metrics: system.Metrics{TPS: tps * (1 - 0.01*float64(i)), P50Ms: 2, P99Ms: 4}})
	}
	r := Row{Params: goldenParams(CurveKey, pool, "workload.clients", "50"), Mode: poolmode.Transaction, Clients: 50,
		Model: m, Calibrated: ModelRun{Metrics: m, Stats: stats}, Measured: x, Repeats: runs, RepeatModels: models,
		Before: &ModelRun{Metrics: system.Metrics{TPS: tps * 0.95, P50Ms: 2.1, P99Ms: 4.2}},
		Cal:    cal, Load: "1.20 1.10 1.00 → 1.30 1.10 1.00", testbed: true, cores: 2, poolSize: 1, calStmt: 1.11, calThinkMs: 5.1}
	r.Cal.Testbed = goldenTestbed()
	judge(&r)
	return r
}

// goldenFailingRow fails with every explanation: failed clients,
// statements and think longer than calibrated, busy CPUs without a
// testbed, steal, a longer wait, a p99 beyond; one run.
func goldenFailingRow() Row {
	cal := goldenCal()
	failM := system.Metrics{OKTxns: 120, ConnRefused: 3, TPS: 300, P50Ms: 100, P99Ms: 200, WaitP99Ms: 10, WaitMeanMs: 2}
	fail := Row{Params: goldenParams("pooler.mode", "statement"), Mode: poolmode.Statement, Clients: 40, Model: failM, Calibrated: ModelRun{Metrics: failM},
		Measured: Measured{OKTxns: 118, ConnRefused: 3, Failed: 2, Errors: []string{"server closed the connection", "timeout"}, TPS: 200, P50Ms: 150, P99Ms: 400,
			WaitKnown: true, WaitMeanMs: 5, WaitP99Ms: 30, StmtMeanMs: 9, StmtP99Ms: 20, ThinkMeanMs: 6, WallMs: 1000,
			CPUBusy: 0.9, CPUSelf: 0.3, CPUSteal: 0.04, HoldMs: 1.2, HoldQueries: 500, StartsInRun: 4, StartGapMs: 2.2},
		Cal: cal, Load: "3.00 2.00 1.00 → 3.10 2.10 1.00", calStmt: 4, calThinkMs: 5}
	fail.Repeats = []Measured{fail.Measured}
	fail.RepeatModels = []ModelRun{{Metrics: failM}}
	judge(&fail)
	return fail

}

// goldenMeanOnlyRow has PgBouncer's mean-only waits, a session row with
// run delays of this process as one, and a wait timeout.
func goldenMeanOnlyRow() Row {
	cal := goldenCal()
	meanM := system.Metrics{OKTxns: 500, WaitTimeouts: 1, TPS: 100, P50Ms: 10, P99Ms: 20, WaitMeanMs: 1}
	meanOnly := Row{Params: goldenParams("pooler.mode", "session"), Mode: poolmode.Session, Clients: 10, Model: meanM, Calibrated: ModelRun{Metrics: meanM},
		Measured: Measured{OKTxns: 500, WaitTimeouts: 1, TPS: 101, P50Ms: 10.1, P99Ms: 19, WaitMeanOnly: true, WaitMeanMs: 1.1, Assignments: 480,
			StmtMeanMs: 5, ThinkMeanMs: 4, WallMs: 5000, CPUBusy: 0.4, CPUSelf: 0.1,
			RunDelay: RunDelay{Server: 5 * time.Microsecond, Driver: 3 * time.Microsecond, SelfBoth: true, OK: true}},
		Cal: cal, Load: "0.50 0.40 0.30 → 0.60 0.40 0.30"}
	meanOnly.Calibrated.RunQueueServerUs, meanOnly.Calibrated.RunQueueDriverUs, meanOnly.Calibrated.RunQueuePoolerUs = 6, 2, 1
	judge(&meanOnly)
	return meanOnly

}

// goldenByCIRow has two runs whose calibrated models miss by 5 and 17 %:
// outside the tolerance, within the runs' interval. Its calibration
// loop's model beside it (Before), servers opened with no loaded connect
// measured.
func goldenByCIRow() Row {
	cal := goldenCal()
	ciM := system.Metrics{OKTxns: 400, TPS: 111, P50Ms: 9, P99Ms: 18}
	byCI := Row{Params: goldenParams("pooler.mode", "transaction"), Mode: poolmode.Transaction, Clients: 20, Model: ciM, Calibrated: ModelRun{Metrics: ciM},
		Measured: Measured{OKTxns: 400, TPS: 100, P50Ms: 9.1, P99Ms: 18.5, StmtMeanMs: 1, ThinkMeanMs: 5, WallMs: 4000, CPUBusy: 0.3, CPUSelf: 0.1,
			StartsInRun: 3, StartGapMs: 1.8},
		Repeats:      []Measured{{OKTxns: 400, TPS: 100, P50Ms: 9.1, P99Ms: 18.5}, {OKTxns: 400, TPS: 100, P50Ms: 9.1, P99Ms: 18.5}},
		RepeatModels: []ModelRun{{Metrics: system.Metrics{OKTxns: 400, TPS: 105, P50Ms: 9, P99Ms: 18}}, {Metrics: system.Metrics{OKTxns: 400, TPS: 117, P50Ms: 9, P99Ms: 18}}},
		Before:       &ModelRun{Metrics: system.Metrics{TPS: 104, P50Ms: 9.2, P99Ms: 19}},
		Cal:          cal, Load: "0.3 0.3 0.3 → 0.4 0.3 0.3", calStmt: 1.1, calThinkMs: 5}
	byCI.Cal.ConnectLoaded = 0
	judge(&byCI)
	return byCI

}

// goldenClasses are an app class with requests, and every class together.
func goldenClasses() (web, all Row) {
	cal := goldenCal()
	reqM := system.Metrics{OKTxns: 900, TPS: 90, P50Ms: 3, P99Ms: 9, OKReqs: 300, ReqTPS: 30, ReqP50Ms: 12, ReqP99Ms: 40, WaitMeanMs: 0.3}
	appCal := cal
	appCal.App = true
	web = Row{Params: goldenParams(), Mode: poolmode.Transaction, Clients: 30, Class: "web", Pool: "web (app/web, transaction, 5)",
		Model: reqM, Calibrated: ModelRun{Metrics: reqM}, Cal: appCal, reqLevel: true, calStmt: 1.1, calThinkMs: 20,
		Measured: Measured{OKTxns: 900, TPS: 91, P50Ms: 3.1, P99Ms: 9.5, OKReqs: 300, ReqTPS: 30.5, ReqP50Ms: 12.2, ReqP99Ms: 41, WaitKnown: true, WaitMeanMs: 0.31, WaitP99Ms: 1,
			StmtMeanMs: 1.2, ThinkMeanMs: 2, AppMeanMs: 21, WallMs: 10000, CPUBusy: 0.3, CPUSelf: 0.1}, Load: "0.1 0.1 0.1 → 0.2 0.1 0.1"}
	judge(&web)
	all = Row{Params: goldenParams(), Mode: poolmode.Transaction, Clients: 30, Class: allClasses, Pool: "every pool",
		Model: reqM, Calibrated: ModelRun{Metrics: reqM}, Cal: cal, reqLevel: true,
		Measured: Measured{OKTxns: 900, TPS: 90.5, P50Ms: 3.05, P99Ms: 9.2, OKReqs: 300, ReqTPS: 30.2, ReqP50Ms: 12.1, ReqP99Ms: 40.5, WaitKnown: true, WaitMeanMs: 0.3, WaitP99Ms: 0.9,
			StmtMeanMs: 1.15, StmtP99Ms: 2.5, WallMs: 10000, CPUBusy: 0.3, CPUSelf: 0.1}, Load: "0.1 0.1 0.1 → 0.2 0.1 0.1"}
	judge(&all)
	return web, all

}

// goldenProbes agree with compat, disagree on one feature after three
// tries on the same server, and fail; one has a note.
func goldenProbes() []ProbeRow {
	var ok probe.Result
	ok.Mode = poolmode.Transaction
	for _, f := range compat.Features {
		ok.Outcomes = append(ok.Outcomes, probe.Outcome{Feature: f, OK: compat.Works(poolmode.Transaction, 0, f), Changed: true, Tries: 1, Detail: "as compat says"})
	}
	bad := ok
	bad.Outcomes = append([]probe.Outcome(nil), ok.Outcomes...)
	bad.Outcomes[compat.SetReset].OK = true
	bad.Outcomes[compat.SetReset].Changed, bad.Outcomes[compat.SetReset].Tries = false, 3
	return []ProbeRow{
		{Mode: poolmode.Transaction, Expected: compat.For(poolmode.Transaction, 0), Result: ok, Note: "PgBouncer 1.18 has no max_prepared_statements"},
		{Mode: poolmode.Transaction, Expected: compat.For(poolmode.Transaction, 0), Result: bad},
		{Mode: poolmode.Session, Expected: compat.For(poolmode.Session, 0), Err: "connection refused"},
	}
}

// preparedReport is a prepared-statement validation: a row the proxy
// tracks (its counters), one it does not (the driver's counts, failed
// transactions), several runs, a skipped row.
func preparedReport() *Report {
	cal := Calibration{Connect: 2 * time.Millisecond, QueryMean: 300 * time.Microsecond, QueryP99: 500 * time.Microsecond, QueryNominal: 250 * time.Microsecond,
		ThinkMean: 1100 * time.Microsecond, ThinkNominal: time.Millisecond, Hop: 25 * time.Microsecond, HopRTT: 100 * time.Microsecond, ServersOpen: 1,
		Concurrency: 1, Samples: 100, Prepared: true, Kind: load.KindCPU, RTT: 90 * time.Microsecond, Unnamed: 400 * time.Microsecond,
		Parse: 150 * time.Microsecond, ParseNominal: 140 * time.Microsecond}
	tracked := system.Metrics{OKTxns: 1000, TPS: 500, P50Ms: 1, P99Ms: 3, PreparedHitRate: 0.99, ServerParsesPerS: 5, ServerParses: 10, StmtExecs: 3000}
	trackedRow := Row{Params: []scenarios.Param{{Key: "pooler.max_prepared_statements", Value: "100"}}, Mode: poolmode.Transaction, Clients: 20,
		Prepared: true, maxPrepared: 100, threshold: 5, Model: tracked, Calibrated: ModelRun{Metrics: tracked}, Cal: cal, Load: "0.2 0.2 0.2 → 0.3 0.2 0.2",
		Measured: Measured{OKTxns: 1000, TPS: 505, P50Ms: 1.01, P99Ms: 3.2, StmtMeanMs: 0.35, ThinkMeanMs: 1.1, WallMs: 2000, CPUBusy: 0.5, CPUSelf: 0.2,
			Prepared: PreparedMeasured{Counts: load.PreparedCounts{Unnamed: 0, Binds: 3000, NamedParses: 12}, FromProxy: true, ProxyServerParses: 11, ProxyBinds: 3000,
				ProxyClientParses: 12, ServerParses: 11, HitRate: 0.996, ServerParsesPerS: 5.5, StmtExecs: 3000}}}
	for i := range 2 {
		y := trackedRow.Measured
		y.TPS = 500 + float64(i)
		trackedRow.Repeats = append(trackedRow.Repeats, y)
		trackedRow.RepeatModels = append(trackedRow.RepeatModels, ModelRun{Metrics: system.Metrics{TPS: 498, PreparedHitRate: 0.99, ServerParsesPerS: 5, PreparedErrorTxns: 0}})
	}
	judge(&trackedRow)
	loose := system.Metrics{OKTxns: 900, PreparedErrorTxns: 100, TPS: 450, P50Ms: 1, P99Ms: 3, PreparedHitRate: 0.7, ServerParsesPerS: 50, ServerParses: 100, StmtExecs: 2700}
	looseRow := Row{Params: []scenarios.Param{{Key: "pooler.max_prepared_statements", Value: "0"}}, Mode: poolmode.Transaction, Clients: 20,
		Prepared: true, maxPrepared: 0, threshold: 5, Model: loose, Calibrated: ModelRun{Metrics: loose}, Cal: cal, Load: "0.2 0.2 0.2 → 0.3 0.2 0.2", cores: 2, poolSize: 4,
		Measured: Measured{OKTxns: 850, TPS: 300, P50Ms: 1.5, P99Ms: 5, StmtMeanMs: 0.5, ThinkMeanMs: 1.1, WallMs: 2000, CPUBusy: 0.6, CPUSelf: 0.2,
			Prepared: PreparedMeasured{Counts: load.PreparedCounts{Unnamed: 10, Binds: 2600, NamedParses: 90, Failed: 150, FailedTxns: 150}, ServerParses: 100,
				HitRate: 0.5, ServerParsesPerS: 50, StmtExecs: 2610, PreparedFailedStatements: 150}}}
	judge(&looseRow)
	return &Report{Scenario: "prepared-live", Target: TargetProxy, Command: "poolsim validate prepared-live", Versions: goldenVersions(), Elapsed: 40 * time.Second,
		Rows:  []Row{trackedRow, looseRow, {Params: []scenarios.Param{{Key: "pooler.max_prepared_statements", Value: "5"}}, Mode: poolmode.Session, Skipped: "session mode tracks nothing"}},
		Notes: []string{"Prepared statements note."}}
}
