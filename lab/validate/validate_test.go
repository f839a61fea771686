package validate

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/autogroup"
	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/scenarios"
)

func TestMain(m *testing.M) {
	RunWakeSide()
	goleak.VerifyTestMain(m)
}

func readFile(dir, name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }

// needPostgres skips t without PostgreSQL binaries, or fails it under CI.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := pgcluster.FindBinDir(); err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and PostgreSQL is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// small is a few-second live validation: 6 clients, 4 backend slots, a pool
// of 2, one transaction of two 2 ms sleeps; direct refuses 2 clients.
const small = `
name: small-live
seed: 1
workload:
  clients: 6
  txns_per_session: 1
  stmts_per_txn: 2
  query: 2ms
  think: 1ms
pooler:
  mode: transaction
  hop: 50us
  max_client_conn: 100
  default_pool_size: 2
  max_prepared_statements: 0
server:
  max_connections: 4
  superuser_reserved_connections: 0
validate:
  statement: sleep
sweep:
  pooler.mode: [direct, transaction]
`

// runLive validates the scenario in src through the proxy, quickly, and
// checks it has rows rows.
func runLive(t *testing.T, src string, rows int) *Report {
	t.Helper()
	return runLiveThrough(t, src, rows, TargetProxy)
}

// runLiveThrough is runLive through target.
func runLiveThrough(t *testing.T, src string, rows int, target string) *Report {
	t.Helper()
	needPostgres(t)
	sc, err := scenarios.Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a guard: Run starts its own cluster
	defer cancel()
	rep, err := Run(ctx, Options{Scenario: sc, Target: target, Quick: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != rows {
		t.Fatalf("%d rows, want %d", len(rep.Rows), rows)
	}
	return rep
}

// throughBoth validates the scenario src (file name) quickly through the
// proxy and through PgBouncer (where installed; under CI it must be),
// within limit each, and hands each report to check.
func throughBoth(t *testing.T, src, name string, limit time.Duration, check func(t *testing.T, rep *Report)) {
	t.Helper()
	needPostgres(t)
	sc, err := scenarios.Parse([]byte(src), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{TargetProxy, TargetPgBouncer} {
		t.Run(target, func(t *testing.T) {
			if target == TargetPgBouncer {
				needBouncer(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			rep, err := Run(ctx, Options{Scenario: sc, Target: target, Quick: true, Command: "test"})
			if err != nil {
				t.Fatal(err)
			}
			check(t, rep)
		})
	}
}

// countsPass checks that row r failed no client and that each metric's
// cell is there and passes.
func countsPass(t *testing.T, r Row, metrics ...string) {
	t.Helper()
	if r.Measured.Failed != 0 {
		t.Errorf("%s: %d failures: %v", r.Title(), r.Measured.Failed, r.Measured.Errors)
	}
	for _, m := range metrics {
		c := cell(r, m)
		switch {
		case c.Metric != m:
			t.Errorf("%s: no %s cell", r.Title(), m)
		case !c.Pass:
			t.Errorf("%s: %s model %v, measured %v: %s", r.Title(), m, c.Model, c.Measured, c.Why)
		}
	}
}

func TestValidateLive(t *testing.T) {
	rep := runLive(t, small, 2)
	for _, r := range rep.Rows {
		// Counts follow from the rules and must match exactly; times on a
		// shared CI machine are too noisy to assert here.
		for _, metric := range []string{"ok_txns", "conn_refused"} {
			if c := cell(r, metric); !c.Pass {
				t.Errorf("%s: %s model %v, calibrated %v, measured %v: %s", r.Title(), metric, c.Model, c.Calibrated, c.Measured, c.Why)
			}
		}
		if r.Measured.Failed != 0 {
			t.Errorf("%s: %d clients failed: %v", r.Title(), r.Measured.Failed, r.Measured.Errors)
		}
	}
	if got := rep.Rows[0].Measured.ConnRefused; got != 2 {
		t.Errorf("direct: %d refused, want 2 (6 clients, 4 slots)", got)
	}
	if got := rep.Rows[1].Measured; !got.WaitKnown || got.Assignments != 6 {
		t.Errorf("transaction: waits known %v, %d assignments; want the proxy's record of 6", got.WaitKnown, got.Assignments)
	}
	// The pooled row's calibration through the proxy: the pool kept the
	// hop's server, a statement held its server at least its sleep, and
	// the run's own account of it was read.
	if c := rep.Rows[1].Cal; c.ServersOpen != 1 || c.Hold < c.QueryNominal || c.HoldQueries < int64(c.HoldConns*holdPerConn) {
		t.Errorf("transaction: %d servers open at time zero, held %v for a %v sleep in %d requests of %d connections; want 1, at least the sleep, %d a connection", c.ServersOpen, c.Hold, c.QueryNominal, c.HoldQueries, c.HoldConns, holdPerConn)
	}
	if x := rep.Rows[1].Measured; x.HoldQueries < 6*2 || x.HoldMs < 2 {
		t.Errorf("transaction: the run's hold %.3f ms over %d requests; want at least the 2 ms sleep over the run's 12 statements", x.HoldMs, x.HoldQueries)
	}
	if rep.Versions.PostgreSQL == "" || rep.Versions.CPUs < 1 {
		t.Errorf("versions not filled: %+v", rep.Versions)
	}
	dir := t.TempDir()
	if err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := readFile(dir, "report.md"); !strings.Contains(string(b), "### pooler.mode=transaction") {
		t.Errorf("report.md lacks the transaction row:\n%s", b)
	}
}

func TestUnsupported(t *testing.T) {
	sc, err := scenarios.Parse([]byte(small), "small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Set("app_pool.mode", "queue"); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Scenario: sc})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Run with an application pool: %v, want ErrUnsupported", err)
	}
	sc, _ = scenarios.Parse([]byte(small), "small.yaml")
	if _, err := Run(context.Background(), Options{Scenario: sc, Target: "nope"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Run with target nope: %v, want ErrUnsupported", err)
	}
}

// TestValidateDSNDirect runs against a given server (--dsn) with --target
// direct: the direct row runs, the pooled row is skipped.
func TestValidateDSNDirect(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 4, SuperuserReservedConnections: pgcluster.ReserveNone})
	sc, err := scenarios.Parse([]byte(small), "small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a guard: Run starts its own cluster
	defer cancel()
	rep, err := Run(ctx, Options{Scenario: sc, DSN: c.UserDSN(), Target: TargetDirect, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Skipped != "" || rep.Rows[1].Skipped == "" {
		t.Fatalf("rows skipped %q, %q; want the direct row run and the transaction row skipped", rep.Rows[0].Skipped, rep.Rows[1].Skipped)
	}
	r := rep.Rows[0]
	if x := r.Measured; x.OKTxns != 4 || x.ConnRefused != 2 {
		t.Errorf("direct through --dsn: %d ok, %d refused; want 4 and 2", x.OKTxns, x.ConnRefused)
	}
	if len(rep.Probes) != 0 {
		t.Errorf("quick mode ran %d probe rows, want none", len(rep.Probes))
	}
}

// preparedSmall is a few-second prepared-statement validation: 6 clients
// through a pool of 2 run 5 statements, prepared on first use, with the
// proxy's cache on and off. The think time keeps each session a few
// hundred milliseconds long: without it the whole run could end before
// the pool's second server finished logging in on a busy machine, and with
// one server no statement can go missing (the live run, and the model
// calibrated with the slow login, then rightly show no failures). It is
// exponential: with a constant one every client waits for a server, the
// FIFO hand-offs of the calibrated model fall into a cycle that gives
// each client the same server every time, and no statement goes missing
// there, while the live run's timing is never that regular.
const preparedSmall = `
name: prepared-small
seed: 1
workload:
  clients: 6
  txns_per_session: 20
  stmts_per_txn: 2
  statements: 5
  zipf: 0.8
  cpu: 300us
  parse: 60us
  prepare_threshold: 1
  think: {dist: exp, mean: 10ms}
pooler:
  mode: transaction
  hop: 50us
  max_client_conn: 100
  default_pool_size: 2
  max_prepared_statements: 10
server:
  max_connections: 10
  superuser_reserved_connections: 0
  cores: 2
validate:
  statement: cpu
variants:
  cache-on: {pooler.max_prepared_statements: 10}
  cache-off: {pooler.max_prepared_statements: 0}
sweep:
  variant: [cache-on, cache-off]
`

func TestValidatePrepared(t *testing.T) {
	needPostgres(t)
	sc, err := scenarios.Parse([]byte(preparedSmall), "prepared-small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a guard: Run starts its own cluster
	defer cancel()
	rep, err := Run(ctx, Options{Scenario: sc, Target: TargetProxy, Quick: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Rows))
	}
	const txns = 6 * 20
	on, off := rep.Rows[0], rep.Rows[1]
	for _, r := range rep.Rows {
		if !r.Prepared {
			t.Fatalf("%s: not a prepared-statement row", r.Title())
		}
		if x := r.Measured; x.Failed != 0 {
			t.Errorf("%s: %d clients failed: %v", r.Title(), x.Failed, x.Errors)
		}
		for _, metric := range []string{"txns_ended", "conn_refused", "prepared_error_txns"} {
			if c := cell(r, metric); !c.Pass {
				t.Errorf("%s: %s model %v, calibrated %v, measured %v: %s", r.Title(), metric, c.Model, c.Calibrated, c.Measured, c.Why)
			}
		}
	}
	// The cache on: every transaction ok, nearly every execution a hit,
	// server parses far fewer than executions (at most 5 per server).
	x := on.Measured.Prepared
	if !x.FromProxy {
		t.Errorf("cache on: the hit rate does not come from the proxy's counters")
	}
	if on.Measured.OKTxns != txns || x.Counts.FailedTxns != 0 {
		t.Errorf("cache on: %d ok, %d failed; want %d and 0", on.Measured.OKTxns, x.Counts.FailedTxns, txns)
	}
	if x.HitRate < 0.9 {
		t.Errorf("cache on: live hit rate %.3f, want at least 0.9 (model %.3f)", x.HitRate, on.Model.PreparedHitRate)
	}
	if x.StmtExecs != 2*txns || x.ServerParses > x.StmtExecs/10 || x.ProxyBinds != x.StmtExecs {
		t.Errorf("cache on: %d executions, %d binds, %d server parses; want %d executions, all binds, at most a tenth parsed", x.StmtExecs, x.ProxyBinds, x.ServerParses, 2*txns)
	}
	if d := math.Abs(x.HitRate - on.Calibrated.PreparedHitRate); d > TolHitRate {
		t.Errorf("cache on: live hit rate %.3f, calibrated model %.3f", x.HitRate, on.Calibrated.PreparedHitRate)
	}
	// The cache off with a threshold of 1: statements go missing on the
	// other server and transactions fail, in the model and live.
	y := off.Measured.Prepared
	if off.Model.PreparedErrorTxns == 0 {
		t.Fatalf("cache off: the model has no failed transactions; the test scenario no longer shows the failure")
	}
	if y.Counts.FailedTxns == 0 || y.Counts.Failed == 0 {
		t.Errorf("cache off: no transaction failed on a missing prepared statement live (model: %d)", off.Model.PreparedErrorTxns)
	}
	if y.FromProxy {
		t.Errorf("cache off: counts read from the proxy, which does not track prepared statements")
	}
	if got := off.Measured.OKTxns + y.Counts.FailedTxns; got != txns {
		t.Errorf("cache off: %d ok + %d failed = %d, want %d", off.Measured.OKTxns, y.Counts.FailedTxns, got, txns)
	}
	dir := t.TempDir()
	if err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := readFile(dir, "report.md"); !strings.Contains(string(b), "## Prepared statements") || !strings.Contains(string(b), "### variant=cache-off") {
		t.Errorf("report.md lacks the prepared-statement table or rows:\n%s", b)
	}
	if b, _ := readFile(dir, "rows.csv"); !strings.Contains(string(b), "prepared_hit_rate") || !strings.Contains(string(b), "server_parses_per_s") {
		t.Errorf("rows.csv lacks the prepared-statement metrics:\n%s", b)
	}
}

// TestPreparedPgBouncer118 refuses a cache through a PgBouncer without
// max_prepared_statements.
func TestPreparedPgBouncer118(t *testing.T) {
	v := bouncerVersion(context.Background())
	if pgbouncer.VersionAtLeast(v, 1, 21) || v == "not installed" {
		t.Skipf("pgbouncer %s", v)
	}
	sc, err := scenarios.Parse([]byte(preparedSmall), "prepared-small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Scenario: sc, Target: TargetPgBouncer})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "1.21") {
		t.Errorf("Run prepared statements through pgbouncer %s: %v, want ErrUnsupported naming 1.21", v, err)
	}
}

const pgbenchSmall = `
name: pgbench-small
seed: 3
workload:
  clients: 6
  txns_per_session: 80
  stmts_per_txn: 1
  query: 40us
  cpu: 30us
  think: 0s
pooler:
  mode: transaction
  cpu_per_msg: 8us
  default_pool_size: 1
server:
  max_connections: 12
  superuser_reserved_connections: 0
  cores: 2
validate:
  statement: pgbench-select
sweep:
  pooler.default_pool_size: [1, 2]
`

// pgbenchSmallRow runs pgbenchSmall's pool-2 row with live (the validate
// section's lines after "validate:") in place of its statement line, and
// checks that every transaction completed.
func pgbenchSmallRow(t *testing.T, live string) *Report {
	t.Helper()
	src := strings.Replace(pgbenchSmall, "  statement: pgbench-select\n", live, 1)
	src = strings.Replace(src, "  pooler.default_pool_size: [1, 2]", "  pooler.default_pool_size: [2]", 1)
	rep := runLive(t, src, 1)
	if c := cell(rep.Rows[0], "ok_txns"); !c.Pass || c.Measured != 480 {
		t.Errorf("ok_txns model %v, calibrated %v, measured %v", c.Model, c.Calibrated, c.Measured)
	}
	return rep
}

// TestValidatePgbenchDriver runs pgbench itself as the load driver
// (validate.driver: pgbench) through the proxy: pgbench's logs give every
// transaction, its threads' CPU is the testbed's driver, this process's
// the pooler's.
func TestValidatePgbenchDriver(t *testing.T) {
	rep := pgbenchSmallRow(t, "  statement: pgbench-select\n  driver: pgbench\n")
	r := rep.Rows[0]
	for _, m := range []string{"tps", "tps_steady", "p50_ms", "p99_ms"} {
		if c := cell(r, m); !(c.Measured > 0) || !(c.Calibrated > 0) {
			t.Errorf("%s cell %+v: want pgbench's measurement and the calibrated model's", m, c)
		}
	}
	tb := r.Cal.Testbed
	if tb == nil {
		t.Fatal("no testbed calibration")
	}
	if tb.Driver <= 0 || tb.Server <= 0 || tb.Pooler <= 0 || tb.ThroughClients != 6 || len(tb.Points) != 4 {
		t.Errorf("testbed %+v: want pgbench's, the server's and the proxy's CPU measured, 6 clients through the proxy, 4 direct points", *tb)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "The load driver is pgbench") {
		t.Error("report.md does not say that pgbench drove the load")
	}
}

// TestValidateSQLOnCores runs the user's own SQL (validate.statement: sql)
// in a scenario with server.cores: it is calibrated as CPU on the shared
// cores, as pgbench -S's statement is - the direct points, each process's
// CPU per statement through the proxy, the calibrated model on the cores.
func TestValidateSQLOnCores(t *testing.T) {
	r := pgbenchSmallRow(t, "  statement: sql\n  sql: SELECT count(*) FROM generate_series(1, 2000)\n").Rows[0]
	tb := r.Cal.Testbed
	if tb == nil {
		t.Fatal("validate.statement sql with server.cores: no testbed calibration")
	}
	if tb.Server <= 0 || tb.Pooler <= 0 || tb.ThroughClients != 6 || len(tb.Points) != 4 || !(tb.ThroughTPS > 0) {
		t.Errorf("testbed %+v: want the server's and the proxy's CPU measured with the row's 6 clients, 4 direct points", *tb)
	}
	// generate_series(1, 2000) costs tens of µs or more per statement:
	// the backends', not a trivial query's few µs.
	if tb.Server < 20*time.Microsecond {
		t.Errorf("server CPU per statement %v: too little for the statement", tb.Server)
	}
	if c := cell(r, "tps"); !(c.Calibrated > 0) || !(c.Measured > 0) {
		t.Errorf("tps cell %+v", c)
	}
}

// TestValidatePgbenchSelect runs the CPU-bound statement through the proxy:
// pgbench -i makes the tables, the testbed is measured from /proc, every
// transaction completes and the curve along the pool size is drawn. Times
// on a shared CI machine are too noisy to assert here.
func TestValidatePgbenchSelect(t *testing.T) {
	autogroupBefore, _ := autogroup.Enabled()
	rep := runLive(t, pgbenchSmall, 2)
	for _, r := range rep.Rows {
		if c := cell(r, "ok_txns"); !c.Pass || c.Measured != 480 {
			t.Errorf("%s: ok_txns model %v, calibrated %v, measured %v", r.Title(), c.Model, c.Calibrated, c.Measured)
		}
		if c := cell(r, "tps_steady"); c.Metric != "tps_steady" || !(c.Measured > 0) || !(c.Calibrated > 0) {
			t.Errorf("%s: tps_steady cell %+v", r.Title(), c)
		}
		tb := r.Cal.Testbed
		if tb == nil {
			t.Fatalf("%s: no testbed calibration", r.Title())
		}
		// The driver's CPU is the process's less the proxy loop's; under
		// CPU burners the loop's thread clock can still over-count (a
		// known fault, left open in issue 18), clamping the driver's to 0.
		if tb.Driver < 0 || tb.Server <= 0 || tb.Pooler <= 0 || tb.ThroughClients != 6 || len(tb.Points) != 4 {
			t.Errorf("%s: testbed %+v: want the driver's, the server's and the pooler's CPU measured, 6 clients through the proxy, 4 direct points", r.Title(), *tb)
		}
		if r.Measured.Failed != 0 {
			t.Errorf("%s: %d clients failed: %v", r.Title(), r.Measured.Failed, r.Measured.Errors)
		}
		// The idle core's wake-up was measured by the helper processes
		// (TestMain runs RunWakeSide) before anything started, and the
		// pooled rows' models take it.
		if runtime.NumCPU() >= 2 && len(tb.WakeCurve) < 2 {
			t.Errorf("%s: wake-up curve %v: want a measured point per spin", r.Title(), tb.WakeCurve)
		}
		// The kernel's moves of the pool's servers between cores were
		// counted in the through loop, where the kernel shows them.
		if _, err := os.Stat("/proc/self/sched"); err == nil && !tb.MigrationsOK {
			t.Errorf("%s: the servers' moves between cores not counted in the through loop", r.Title())
		}
		// The processes' CPU per statement was read over the run too,
		// and the row's calibrated model runs it; the loop's alone is
		// kept beside it.
		if !tb.Run.OK || tb.Run.Server <= 0 || tb.Run.Pooler <= 0 || tb.Run.Driver < 0 {
			t.Errorf("%s: the run's CPU per statement %+v: want the servers', the proxy's and the driver's read", r.Title(), tb.Run)
		}
		// And their waits for a core (this process is driver and proxy).
		if d := r.Repeats[0].RunDelay; !d.OK || !d.SelfBoth || d.Server < 0 || d.Driver < 0 {
			t.Errorf("%s: the run's waits for a core %+v: want the servers' and this process's read", r.Title(), d)
		}
		if r.Before == nil || !(r.Before.TPS > 0) {
			t.Errorf("%s: no model from the through loop alone", r.Title())
		}
	}
	// The kernel shared the cores thread by thread, as the model does:
	// as root (here and in CI) the run turned autogroup off and, at its
	// end, back to what it was.
	if rep.Versions.Sched == "" {
		t.Error("a CPU-bound run's report does not say how the cores were shared")
	}
	if os.Geteuid() == 0 || pgclustertest.InCI() {
		if !strings.HasPrefix(rep.Versions.Sched, "thread by thread") {
			t.Errorf("scheduling %q: want thread by thread", rep.Versions.Sched)
		}
		if on, ok := autogroup.Enabled(); ok && on != autogroupBefore {
			t.Errorf("autogroup %v after the run, %v before it: not restored", on, autogroupBefore)
		}
	}
	lines := rep.Curves()
	if len(lines) != 1 || len(lines[0].Points) != 2 {
		t.Fatalf("curves = %+v, want one line of 2 points", lines)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Scheduling: ", "## The curve", "## Testbed", "Peak pool size: calibrated model", "### Where the TPS error comes from", "An idle core's wake-up", "CPU per statement in the run (the model's)", "| model from the loop alone |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if err := rep.WritePlot(filepath.Join(t.TempDir(), "curve.png")); err != nil {
		t.Error(err)
	}
}

// TestValidatePool1Arrangements runs pgbench -S through PgBouncer at pool
// 1: the calibration pins PgBouncer and its one server to one core and
// to two, and the pinning holds (every placement sample together, then
// none); each arrangement has its own measured costs and model, and the
// run's calibrated model is their mix by the run's own placement.
func TestValidatePool1Arrangements(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the arrangements need 2 cores")
	}
	if v := bouncerVersion(context.Background()); v == "not installed" {
		if pgclustertest.InCI() {
			t.Fatal("CI=true and pgbouncer is required")
		}
		t.Skip("pgbouncer not installed")
	}
	src := strings.Replace(pgbenchSmall, "  pooler.default_pool_size: [1, 2]", "  pooler.default_pool_size: [1]", 1)
	src = strings.Replace(src, "  statement: pgbench-select\n", "  statement: pgbench-select\n  driver: pgbench\n", 1)
	rep := runLiveThrough(t, src, 1, TargetPgBouncer)
	r := rep.Rows[0]
	tb := r.Cal.Testbed
	if tb == nil || tb.Together == nil || tb.Apart == nil {
		t.Fatalf("testbed %+v: want both arrangements pinned and measured", tb)
	}
	// The idle core's wake-up was measured by the helper processes
	// (TestMain runs RunWakeSide) before anything started.
	if len(tb.WakeCurve) < 2 {
		t.Errorf("wake-up curve %v: want a measured point per spin", tb.WakeCurve)
	}
	for _, a := range []*Arrangement{tb.Together, tb.Apart} {
		want := 1.0
		if a.Apart {
			want = 0
		}
		// The sampler finds the server on a connection of its own: on a
		// loaded machine a half-second loop may end before it samples.
		if a.Placement == nil {
			t.Logf("%s: no placement sample in the loop", a.name())
		} else if math.Abs(a.Placement.Shared-want) > 0.05 {
			// A sample taken before a pinned process has run since its
			// pinning reads its last core, the old one: on a busy machine
			// a few may (2 of 104 in one CI run). Pinning that did not
			// hold reads about half.
			t.Errorf("%s: placement %+v, want the server on PgBouncer's core in a share %v of the samples, within 0.05 (the pinning held)", a.name(), a.Placement, want)
		}
		if !(a.TPS > 0) || a.Pooler <= 0 || a.Server <= 0 || !(a.Model.TPS > 0) {
			t.Errorf("%s: %+v: want its rate, PgBouncer's and the server's CPU measured, and its model run", a.name(), *a)
		}
	}
	// The model from the loops alone mixes the arrangements' models; the
	// calibrated one mixes them at the run's own CPU per statement
	// (PgBouncer's and the server's schedstat, pgbench's rusage).
	if x := r.Repeats[0]; x.Placement != nil {
		lo, hi := min(tb.Together.Model.TPS, tb.Apart.Model.TPS), max(tb.Together.Model.TPS, tb.Apart.Model.TPS)
		if r.Before == nil {
			t.Error("no model from the loops alone")
		} else if m := r.Before.TPS; m < lo-1e-6 || m > hi+1e-6 {
			t.Errorf("the run's model from the loops %.0f/s is not a mix of the arrangements' %.0f and %.0f", m, tb.Together.Model.TPS, tb.Apart.Model.TPS)
		}
	}
	if !tb.Run.OK || tb.Run.Server <= 0 || tb.Run.Pooler <= 0 || tb.Run.Driver <= 0 {
		t.Errorf("the run's CPU per statement %+v: want PgBouncer's, the server's and pgbench's read", tb.Run)
	}
	if d := r.Repeats[0].RunDelay; !d.OK || d.SelfBoth || d.Server < 0 || d.Pooler < 0 || d.Driver < 0 {
		t.Errorf("the run's waits for a core %+v: want PgBouncer's, the server's and pgbench's read", d)
	}
	if d := r.Repeats[0].RunDelay; !d.PreemptsOK || d.PoolerPreempts < 0 {
		t.Errorf("PgBouncer's involuntary context switches per statement %+v: want them read", d)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "## Pool 1 through PgBouncer: the two arrangements") {
		t.Error("report.md has no arrangements section")
	}
}
