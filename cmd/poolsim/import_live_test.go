package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/proxy/pgcluster"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/importer"
	"github.com/poolsim/poolsim/scenarios/importer/importtest"
	"github.com/poolsim/poolsim/sim"
)

// importCase is one end-to-end run: pgbench through PgBouncer at pool
// size a, imported from the console, pg_stat_statements and the logs; the
// imported scenario then predicts pool size b, and the same load runs live
// at b.
type importCase struct {
	clients, a, b, stmts int
	query, think         time.Duration
	window, bWindow      time.Duration
}

// TestImportLive is issue 13's end-to-end check. The workload is sleep
// bound (pg_sleep at the server, \sleep at the client), so its answer
// depends on the pool, not on how busy the machine is: 16 clients, 3 round
// trips of 10 ms with 10 ms between them hold a server about 50 ms of a
// 60 ms cycle, so the knee is near 13 servers; pool 4 is well below it,
// pool 16 above. POOLSIM_IMPORT_LONG=1 runs both directions with minute-long
// windows, and POOLSIM_IMPORT_OUT=DIR writes the report there (see
// results/import/README.md).
func TestImportLive(t *testing.T) {
	long := os.Getenv("POOLSIM_IMPORT_LONG") == "1"
	base := importCase{clients: 16, a: 4, b: 16, stmts: 3, query: 10 * time.Millisecond, think: 10 * time.Millisecond,
		window: 20 * time.Second, bWindow: 12 * time.Second}
	cases := []importCase{base}
	if long {
		base.window, base.bWindow = 60*time.Second, 45*time.Second
		rev := base
		rev.a, rev.b = base.b, base.a
		cases = []importCase{base, rev}
	}
	lab := importtest.Start(t)
	var rep importReport
	for _, c := range cases {
		t.Run(fmt.Sprintf("pool%d_to_%d", c.a, c.b), func(t *testing.T) {
			rep.runs = append(rep.runs, runImportCase(t, lab, c))
		})
	}
	if out := os.Getenv("POOLSIM_IMPORT_OUT"); out != "" && !t.Failed() {
		dir := out
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", "..", dir) // relative to the repository, not to cmd/poolsim
		}
		if err := rep.write(dir, out, lab); err != nil {
			t.Fatal(err)
		}
	}
}

// importRun is what one case measured and predicted.
type importRun struct {
	c                              importCase
	liveCmd, rawCmd                string // the two import commands (paths relative to the run's folder)
	pgbenchA, pgbenchB             string // pgbench command lines
	scenario                       []byte // the imported scenario (with pgbench's log)
	liveReport, rawReport          string // their fidelity reports
	tpsB, latB, waitA, waitB       float64
	modelTPS, modelLat, modelWaitB float64
	modelTPSHalf, modelLatHalf     float64
	modelWaitA                     float64
	load                           string
}

func runImportCase(t *testing.T, lab *importtest.Lab, c importCase) importRun {
	run := importRun{c: c}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), c.window+c.bWindow+4*time.Minute)
	defer cancel()
	script := importtest.Script(c.stmts, c.query, c.think)

	// Pool size a: pgbench, and poolsim import while it runs.
	pa := lab.PgBouncer(t, c.a)
	lead := 3 * time.Second
	bench := lab.StartPgbench(t, pa.DSN(pgcluster.UserDatabase, pgcluster.UserName), dir, script, c.clients, c.window+2*lead+4*time.Second)
	run.pgbenchA = strings.Join(bench.Args, " ")
	if err := importtest.WaitClients(ctx, pa.AdminDSN(), c.clients); err != nil {
		t.Fatalf("pgbench clients at pool %d: %v", c.a, err)
	}
	if err := importtest.WaitXacts(ctx, pa.AdminDSN(), 2*c.clients); err != nil {
		t.Fatalf("warm-up at pool %d: %v", c.a, err)
	}
	raw := filepath.Join(dir, "raw")
	args := []string{"import", "-q", "--pgbouncer", pa.AdminDSN(), "--pg", lab.Cluster.UserDSN(),
		"--duration", c.window.String(), "--save-raw", raw, "--out", filepath.Join(dir, "live.yaml")}
	for _, f := range lab.CSVLogs(t) {
		args = append(args, "--csvlog", f)
	}
	code, out, errOut := runCmd(args...)
	if code != 0 {
		t.Fatalf("poolsim %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	run.liveCmd, run.liveReport = "poolsim "+strings.Join(args, " "), out
	t.Logf("import at pool %d, live:\n%s", c.a, out)
	if !strings.Contains(out, "Verdict: FITS") {
		t.Errorf("the imported scenario does not fit what it was imported from:\n%s", out)
	}
	if _, err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// The same import again, offline, with pgbench's log (whole now).
	yamlPath := filepath.Join(dir, "imported.yaml")
	args = []string{"import", "-q", "--from-raw", raw, "--out", yamlPath}
	for _, f := range lab.CSVLogs(t) {
		args = append(args, "--csvlog", f)
	}
	for _, f := range bench.Logs(t) {
		args = append(args, "--pgbench-log", f)
	}
	code, out, errOut = runCmd(args...)
	if code != 0 {
		t.Fatalf("poolsim %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	run.rawCmd, run.rawReport = "poolsim "+strings.Join(args, " "), out
	t.Logf("import at pool %d, with the pgbench log:\n%s", c.a, out)
	if !strings.Contains(out, "Verdict: FITS") {
		t.Errorf("the imported scenario does not fit what it was imported from:\n%s", out)
	}
	var err error
	if run.scenario, err = os.ReadFile(yamlPath); err != nil {
		t.Fatal(err)
	}
	raw0, err := importer.AnalyzeConsole(mustConsole(t, raw), "")
	if err != nil {
		t.Fatal(err)
	}
	run.waitA = msOf(raw0.WaitPerXact())

	// The model at pool size b, with the fidelity report's definitions.
	sc, err := scenarios.Load(yamlPath)
	if err != nil {
		t.Fatalf("the imported scenario does not load: %v", err)
	}
	if err := sc.Set("pooler.default_pool_size", fmt.Sprint(c.b)); err != nil {
		t.Fatal(err)
	}
	stat := func(pool int, metric string) (float64, float64) {
		s := sc
		if pool != c.b {
			s2 := *sc
			if err := s2.Set("pooler.default_pool_size", fmt.Sprint(pool)); err != nil {
				t.Fatal(err)
			}
			s = &s2
		}
		points, err := s.Points()
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
	run.modelTPS, run.modelTPSHalf = stat(c.b, "tps")
	run.modelLat, run.modelLatHalf = stat(c.b, "pgbench_ms")
	run.modelWaitB, _ = stat(c.b, "wait_per_txn_ms")
	run.modelWaitA, _ = stat(c.a, "wait_per_txn_ms")

	// The same load live at pool size b.
	pb := lab.PgBouncer(t, c.b)
	dirB := filepath.Join(dir, "b")
	if err := os.Mkdir(dirB, 0o755); err != nil {
		t.Fatal(err)
	}
	benchB := lab.StartPgbench(t, pb.DSN(pgcluster.UserDatabase, pgcluster.UserName), dirB, script, c.clients, c.bWindow+2*lead+4*time.Second)
	run.pgbenchB = strings.Join(benchB.Args, " ")
	if err := importtest.WaitClients(ctx, pb.AdminDSN(), c.clients); err != nil {
		t.Fatalf("pgbench clients at pool %d: %v", c.b, err)
	}
	if err := importtest.WaitXacts(ctx, pb.AdminDSN(), 2*c.clients); err != nil {
		t.Fatalf("warm-up at pool %d: %v", c.b, err)
	}
	recB, err := importer.SampleConsole(ctx, pb.AdminDSN(), time.Second, c.bWindow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := benchB.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	run.load = loadAverage()
	cB, err := importer.AnalyzeConsole(recB, "")
	if err != nil {
		t.Fatal(err)
	}
	pgbB, err := importer.AnalyzePgbench(benchB.Logs(t), cB.Window.From, cB.Window.To)
	if err != nil {
		t.Fatal(err)
	}
	run.tpsB, run.latB, run.waitB = pgbB.TxnsPerSec(), msOf(pgbB.Mean), msOf(cB.WaitPerXact())
	t.Logf("pool %d -> %d: tps model %.1f ± %.1f, live %.1f; pgbench latency model %.2f ± %.2f ms, live %.2f ms; wait per transaction model %.2f -> %.2f ms, live %.2f -> %.2f ms (load %s)",
		c.a, c.b, run.modelTPS, run.modelTPSHalf, run.tpsB, run.modelLat, run.modelLatHalf, run.latB, run.modelWaitA, run.modelWaitB, run.waitA, run.waitB, run.load)
	if e := run.modelTPS/run.tpsB - 1; math.Abs(e) > importer.Tolerance {
		t.Errorf("pool %d: predicted %.1f transactions/s, measured %.1f (%+.1f%%, allowed %.0f%%)", c.b, run.modelTPS, run.tpsB, 100*e, 100*importer.Tolerance)
	}
	if e := run.modelLat/run.latB - 1; math.Abs(e) > importer.Tolerance {
		t.Errorf("pool %d: predicted pgbench latency %.2f ms, measured %.2f ms (%+.1f%%, allowed %.0f%%)", c.b, run.modelLat, run.latB, 100*e, 100*importer.Tolerance)
	}
	if (run.modelWaitB < run.modelWaitA) != (run.waitB < run.waitA) {
		t.Errorf("wait for a server from pool %d to %d: the model goes %.2f -> %.2f ms, the measurement %.2f -> %.2f ms: opposite directions",
			c.a, c.b, run.modelWaitA, run.modelWaitB, run.waitA, run.waitB)
	}
	return run
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

// loadAverage is /proc/loadavg's first three fields, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// importReport writes results/import/.
type importReport struct{ runs []importRun }

func (r *importReport) write(dir, name string, lab *importtest.Lab) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# poolsim import, end to end\n\n")
	fmt.Fprintf(&b, "Produced by `POOLSIM_IMPORT_LONG=%s POOLSIM_IMPORT_OUT=%s go test ./cmd/poolsim -run TestImportLive -v -timeout 30m` "+
		"on %s (%d CPUs, %s; PostgreSQL %s, shared with other work: load average at the end of each run below).\n\n",
		os.Getenv("POOLSIM_IMPORT_LONG"), name, time.Now().UTC().Format("2006-01-02 15:04Z"), runtime.NumCPU(), runtime.GOOS, lab.Cluster.Version())
	b.WriteString("Each run: a throwaway PostgreSQL with pg_stat_statements and a csvlog of every statement, a real PgBouncer 1.18 in " +
		"transaction mode at pool size A, and pgbench running the script below through it; `poolsim import` reads PgBouncer's " +
		"console and pg_stat_statements while pgbench runs (and saves them), then again offline with the csvlog and pgbench's log. " +
		"The imported scenario is run at pool size B (`--set pooler.default_pool_size=B`, 10 replications) and the same pgbench " +
		"load runs live through a PgBouncer at pool size B.\n\n")
	b.WriteString("The pgbench script (3 round trips of `pg_sleep(0.01)`, 10 ms of `\\sleep` after each; `\\;` sends BEGIN and COMMIT with a round trip):\n\n```\n")
	b.WriteString(importtest.Script(3, 10*time.Millisecond, 10*time.Millisecond))
	b.WriteString("```\n\n")
	b.WriteString("| A → B | transactions/s at B, model / live | pgbench latency at B (ms), model / live | wait per transaction (ms), model A → B / live A → B | load average |\n|---|---|---|---|---|\n")
	for _, x := range r.runs {
		fmt.Fprintf(&b, "| %d → %d | %.1f ± %.1f / %.1f (%+.1f%%) | %.2f ± %.2f / %.2f (%+.1f%%) | %.2f → %.2f / %.2f → %.2f | %s |\n",
			x.c.a, x.c.b, x.modelTPS, x.modelTPSHalf, x.tpsB, 100*(x.modelTPS/x.tpsB-1), x.modelLat, x.modelLatHalf, x.latB,
			100*(x.modelLat/x.latB-1), x.modelWaitA, x.modelWaitB, x.waitA, x.waitB, x.load)
	}
	b.WriteString("\nThe model's pgbench latency is its transaction latency plus the think after the transaction's last statement, which pgbench times too (the script's last `\\sleep`).\n")
	for i, x := range r.runs {
		name := fmt.Sprintf("imported-pool%d.yaml", x.c.a)
		if err := os.WriteFile(filepath.Join(dir, name), x.scenario, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&b, "\n## Run %d: pool %d → %d\n\nThe commands (the throwaway servers' ports and folders were these):\n\n```\n%s\n%s\n%s\n%s\npoolsim run %s --set pooler.default_pool_size=%d --replications 10\n%s\n```\n\n",
			i+1, x.c.a, x.c.b, x.pgbenchA, x.liveCmd, x.rawCmd, "# then, at pool size B:", name, x.c.b, x.pgbenchB)
		fmt.Fprintf(&b, "The imported scenario: [%s](%s). The live import's report:\n\n```\n%s```\n\nWith the csvlog and pgbench's log:\n\n```\n%s```\n", name, name, x.liveReport, x.rawReport)
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(b.String()), 0o644)
}
