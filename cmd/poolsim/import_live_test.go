package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/importtest"
	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/importer"
	"github.com/poolsim/poolsim/sim"
)

// The end-to-end workload: 16 pgbench clients, each transaction three
// round trips of pg_sleep(0.01) with a 10 ms \sleep after each. A client
// holds a server about 50 of every 60 ms, so the knee is near 13 servers:
// a pool of 4 is well below it, a pool of 16 above.
const (
	e2eClients = 16
	e2eStmts   = 3
	e2eQuery   = 10 * time.Millisecond
	e2eThink   = 10 * time.Millisecond
)

// importSide is one pool size of the end-to-end run: a PgBouncer with
// that pool in front of its own database, pgbench through it, and poolsim
// import of it.
type importSide struct {
	pool     int
	db       string
	dsn      string // the poolsim role's DSN for db, straight to PostgreSQL
	pgb      *pgbouncer.PgBouncer
	bench    *importtest.Pgbench
	dir      string
	yamlPath string

	liveArgs, rawArgs     []string
	liveReport, rawReport string
	liveErr               string

	console *importer.ConsoleFacts // from the saved samples
	pgbench *importer.PgbenchFacts // pgbench's log over the console's window
}

// TestImportLive is issue 13's end-to-end check. Both pool sizes run at
// the same time, each through its own PgBouncer 1.18 (transaction mode) to
// its own database of one PostgreSQL with pg_stat_statements and a csvlog;
// poolsim import reads each (console, pg_stat_statements, csvlog,
// pgbench's log), and the scenario imported at one pool size predicts the
// other, which was measured at the same moment under the same machine load
// (on a shared 2-core machine that load moves by factors from one minute
// to the next; the workload is sleep bound so its answer depends on the
// pool). Predicted TPS and pgbench latency must be within 15 % of the
// measurement and the wait for a server must move the same way.
// POOLSIM_IMPORT_LONG=1 measures for a minute instead of 20 s, and
// POOLSIM_IMPORT_OUT=DIR writes the report there (results/import).
func TestImportLive(t *testing.T) {
	window := 20 * time.Second
	if os.Getenv("POOLSIM_IMPORT_LONG") == "1" {
		window = time.Minute
	}
	lab := importtest.Start(t)
	sides := []*importSide{
		{pool: 4, db: pgcluster.UserDatabase, dsn: lab.UserDSN(pgcluster.UserDatabase)},
		{pool: 16, db: "poolsim_b", dsn: lab.Database(t, "poolsim_b")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), window+4*time.Minute)
	defer cancel()
	script := importtest.Script(e2eStmts, e2eQuery, e2eThink)
	const lead = 4 * time.Second
	for _, s := range sides {
		s.pgb = lab.PgBouncer(t, s.pool)
		s.dir = t.TempDir()
		s.bench = lab.StartPgbench(t, s.pgb.DSN(s.db, pgcluster.UserName), s.dir, script, e2eClients, window+3*lead)
	}
	for _, s := range sides {
		warmUp(ctx, t, s)
	}
	// Both imports at once, over the same window.
	logs := lab.CSVLogs(t)
	importLive(t, sides, window, logs)
	for _, s := range sides {
		if _, err := s.bench.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	load := loadAverage()
	// The same imports again, offline, with pgbench's logs (whole now).
	for _, s := range sides {
		importFromRaw(t, s, logs)
	}
	rep := comparePredictions(ctx, t, sides, load)
	if out := os.Getenv("POOLSIM_IMPORT_OUT"); out != "" && !t.Failed() {
		dir := out
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", "..", dir) // relative to the repository, not to cmd/poolsim
		}
		if err := rep.write(dir, out, lab, sides); err != nil {
			t.Fatal(err)
		}
	}
}

// importLive runs poolsim import live on both sides at once for window,
// each against its PgBouncer and PostgreSQL with the clusters' CSV logs,
// and checks that each imported scenario fits what it was imported from.
func importLive(t *testing.T, sides []*importSide, window time.Duration, logs []string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range sides {
		s.yamlPath = filepath.Join(s.dir, "imported.yaml")
		s.liveArgs = []string{"import", "-q", "--pgbouncer", s.pgb.AdminDSN(), "--pg", s.dsn, "--duration", window.String(),
			"--save-raw", filepath.Join(s.dir, "raw"), "--out", filepath.Join(s.dir, "live.yaml")}
		for _, f := range logs {
			s.liveArgs = append(s.liveArgs, "--csvlog", f)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, errOut := runCmd(s.liveArgs...)
			if s.liveReport = out; code != 0 {
				s.liveErr = fmt.Sprintf("exit %d\n%s%s", code, out, errOut)
			}
		}()
	}
	wg.Wait()
	for _, s := range sides {
		if s.liveErr != "" {
			t.Fatalf("poolsim %s: %s", strings.Join(s.liveArgs, " "), s.liveErr)
		}
		t.Logf("import at pool %d, live:\n%s", s.pool, s.liveReport)
		if !strings.Contains(s.liveReport, "Verdict: FITS") {
			t.Errorf("pool %d: the imported scenario does not fit what it was imported from:\n%s", s.pool, s.liveReport)
		}
	}
}

// importFromRaw imports side s again, offline, from what the live import
// saved and pgbench's logs, checks that it fits, and reads the console's
// and pgbench's records for the predictions.
func importFromRaw(t *testing.T, s *importSide, logs []string) {
	t.Helper()
	s.rawArgs = []string{"import", "-q", "--from-raw", filepath.Join(s.dir, "raw"), "--out", s.yamlPath}
	for _, f := range logs {
		s.rawArgs = append(s.rawArgs, "--csvlog", f)
	}
	for _, f := range s.bench.Logs(t) {
		s.rawArgs = append(s.rawArgs, "--pgbench-log", f)
	}
	code, out, errOut := runCmd(s.rawArgs...)
	if code != 0 {
		t.Fatalf("poolsim %s: exit %d\n%s%s", strings.Join(s.rawArgs, " "), code, out, errOut)
	}
	s.rawReport = out
	t.Logf("import at pool %d, with the pgbench log:\n%s", s.pool, out)
	if !strings.Contains(out, "Verdict: FITS") {
		t.Errorf("pool %d: the imported scenario does not fit what it was imported from:\n%s", s.pool, out)
	}
	var err error
	if s.console, err = importer.AnalyzeConsole(mustConsole(t, filepath.Join(s.dir, "raw")), ""); err != nil {
		t.Fatal(err)
	}
	if s.pgbench, err = importer.AnalyzePgbench(s.bench.Logs(t), s.console.Window.From, s.console.Window.To); err != nil {
		t.Fatal(err)
	}
}

// comparePredictions predicts each side from the other's import and
// holds the predictions to the measurement: throughput and pgbench's
// latency within importer.Tolerance, the wait for a server moving the
// same way.
func comparePredictions(ctx context.Context, t *testing.T, sides []*importSide, load string) importReport {
	t.Helper()
	var rep importReport
	for i, from := range sides {
		to := sides[1-i]
		p := predict(ctx, t, from, to)
		p.load = load
		rep.runs = append(rep.runs, p)
		t.Logf("pool %d -> %d: tps model %.1f ± %.1f, live %.1f; pgbench latency model %.2f ± %.2f ms, live %.2f ms; wait per transaction model %.2f -> %.2f ms, live %.2f -> %.2f ms (load %s)",
			from.pool, to.pool, p.modelTPS, p.modelTPSHalf, p.tpsB, p.modelLat, p.modelLatHalf, p.latB, p.modelWaitA, p.modelWaitB, p.waitA, p.waitB, load)
		if e := p.modelTPS/p.tpsB - 1; math.Abs(e) > importer.Tolerance {
			t.Errorf("pool %d from %d: predicted %.1f transactions/s, measured %.1f (%+.1f%%, allowed %.0f%%)", to.pool, from.pool, p.modelTPS, p.tpsB, 100*e, 100*importer.Tolerance)
		}
		if e := p.modelLat/p.latB - 1; math.Abs(e) > importer.Tolerance {
			t.Errorf("pool %d from %d: predicted pgbench latency %.2f ms, measured %.2f ms (%+.1f%%, allowed %.0f%%)", to.pool, from.pool, p.modelLat, p.latB, 100*e, 100*importer.Tolerance)
		}
		if (p.modelWaitB < p.modelWaitA) != (p.waitB < p.waitA) {
			t.Errorf("wait for a server from pool %d to %d: the model goes %.2f -> %.2f ms, the measurement %.2f -> %.2f ms: opposite directions",
				from.pool, to.pool, p.modelWaitA, p.modelWaitB, p.waitA, p.waitB)
		}
	}
	return rep
}

// warmUp waits until a side's pgbench clients are all connected and have
// done two transactions each on average.
func warmUp(ctx context.Context, t *testing.T, s *importSide) {
	t.Helper()
	if err := importtest.WaitClients(ctx, s.pgb.AdminDSN(), s.db, e2eClients); err != nil {
		t.Fatalf("pgbench clients at pool %d: %v", s.pool, err)
	}
	if err := importtest.WaitXacts(ctx, s.pgb.AdminDSN(), s.db, 2*e2eClients); err != nil {
		t.Fatalf("warm-up at pool %d: %v", s.pool, err)
	}
}

// importRun is one direction: the scenario imported at pool a, its
// prediction at pool b, and the measurement at b.
type importRun struct {
	a, b                           int
	scenario                       string // the imported scenario's file name in the report
	tpsB, latB, waitA, waitB       float64
	modelTPS, modelLat, modelWaitB float64
	modelTPSHalf, modelLatHalf     float64
	modelWaitA                     float64
	load                           string
}

// predict runs from's imported scenario at to's pool size, with the
// fidelity report's definitions of each figure, beside to's measurement.
func predict(ctx context.Context, t *testing.T, from, to *importSide) importRun {
	r := importRun{a: from.pool, b: to.pool, scenario: fmt.Sprintf("imported-pool%d.yaml", from.pool)}
	stat := func(pool int, metric string) (float64, float64) {
		sc, err := scenarios.Load(from.yamlPath)
		if err != nil {
			t.Fatalf("the imported scenario does not load: %v", err)
		}
		if err := sc.Set("pooler.default_pool_size", fmt.Sprint(pool)); err != nil {
			t.Fatal(err)
		}
		points, err := sc.Points()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := scenarios.RunStudy(ctx, points, scenarios.Study{Replications: 10}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]float64, len(rows[0].Reps))
		for i := range rows[0].Reps {
			if xs[i], err = importer.ModelFigure(metric, rows[0].Config, &rows[0].Reps[i]); err != nil {
				t.Fatal(err)
			}
		}
		mean, half, _ := sim.MeanCI(xs)
		return mean, half
	}
	r.modelTPS, r.modelTPSHalf = stat(to.pool, "tps")
	r.modelLat, r.modelLatHalf = stat(to.pool, "pgbench_ms")
	r.modelWaitB, _ = stat(to.pool, "wait_per_txn_ms")
	r.modelWaitA, _ = stat(from.pool, "wait_per_txn_ms")
	r.tpsB, r.latB = to.pgbench.TxnsPerSec(), msOf(to.pgbench.Mean)
	r.waitA, r.waitB = msOf(from.console.WaitPerXact()), msOf(to.console.WaitPerXact())
	return r
}

func mustConsole(t *testing.T, raw string) *importer.ConsoleRecord {
	t.Helper()
	var req importer.Request
	if err := loadRaw(raw, &req); err != nil {
		t.Fatal(err)
	}
	if req.ConsoleRecord == nil {
		t.Fatalf("%s has no console.json", raw)
	}
	return req.ConsoleRecord
}

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

// loadAverage is /proc/loadavg's three load averages, or "unknown".
func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// importReport writes results/import/.
type importReport struct{ runs []importRun }

func (r *importReport) write(dir, name string, lab *importtest.Lab, sides []*importSide) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# poolsim import, end to end\n\n")
	fmt.Fprintf(&b, "Produced by `POOLSIM_IMPORT_LONG=%s POOLSIM_IMPORT_OUT=%s go test ./cmd/poolsim -run TestImportLive -v -timeout 30m` "+
		"on %s (%d CPUs, %s; PostgreSQL %s; the machine was shared with other work: load average %s at the end).\n\n",
		os.Getenv("POOLSIM_IMPORT_LONG"), name, time.Now().UTC().Format("2006-01-02 15:04Z"), runtime.NumCPU(), runtime.GOOS,
		lab.Cluster.Version(), r.runs[0].load)
	b.WriteString("One throwaway PostgreSQL with pg_stat_statements and a csvlog of every statement; two real PgBouncer 1.18 in " +
		"transaction mode, one with a pool of 4 in front of database `poolsim`, one with a pool of 16 in front of database " +
		"`poolsim_b`; pgbench running the script below with 16 clients through each, both at once, so both pool sizes are " +
		"measured under the same machine load. `poolsim import` reads each PgBouncer's console and pg_stat_statements while " +
		"pgbench runs (and saves them), then again offline with the csvlog and pgbench's log. The scenario imported at one " +
		"pool size is run at the other (`--set pooler.default_pool_size=B`, 10 replications) and put beside its measurement.\n\n")
	b.WriteString("The pgbench script (3 round trips of `pg_sleep(0.01)`, 10 ms of `\\sleep` after each; `\\;` sends BEGIN and COMMIT with a round trip):\n\n```\n")
	b.WriteString(importtest.Script(e2eStmts, e2eQuery, e2eThink))
	b.WriteString("```\n\n")
	b.WriteString("| imported at A → predicted at B | transactions/s at B, model / live | pgbench latency at B (ms), model / live | wait per transaction (ms), model A → B / live A → B |\n|---|---|---|---|\n")
	for _, x := range r.runs {
		fmt.Fprintf(&b, "| %d → %d | %.1f ± %.1f / %.1f (%+.1f%%) | %.2f ± %.2f / %.2f (%+.1f%%) | %.2f → %.2f / %.2f → %.2f |\n",
			x.a, x.b, x.modelTPS, x.modelTPSHalf, x.tpsB, 100*(x.modelTPS/x.tpsB-1), x.modelLat, x.modelLatHalf, x.latB,
			100*(x.modelLat/x.latB-1), x.modelWaitA, x.modelWaitB, x.waitA, x.waitB)
	}
	b.WriteString("\nThe model's pgbench latency is its transaction latency plus the think after the transaction's last statement, " +
		"which pgbench times too (the script's last `\\sleep`). The live figures at B are pgbench's log and PgBouncer's SHOW STATS over the window B's import sampled.\n")
	for _, s := range sides {
		name := fmt.Sprintf("imported-pool%d.yaml", s.pool)
		text, err := os.ReadFile(s.yamlPath)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			return err
		}
		other := 16
		if s.pool == 16 {
			other = 4
		}
		fmt.Fprintf(&b, "\n## Pool %d\n\nThe commands (the throwaway servers' ports and folders were these):\n\n```\n%s\npoolsim %s\npoolsim %s\npoolsim run %s --set pooler.default_pool_size=%d --replications 10\n```\n\n",
			s.pool, strings.Join(s.bench.Args, " "), strings.Join(s.liveArgs, " "), strings.Join(s.rawArgs, " "), name, other)
		fmt.Fprintf(&b, "The imported scenario: [%s](%s). The live import's report:\n\n```\n%s```\n\nWith the csvlog and pgbench's log:\n\n```\n%s```\n", name, name, s.liveReport, s.rawReport)
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(b.String()), 0o644)
}
