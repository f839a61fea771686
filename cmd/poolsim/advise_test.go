package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// adviceDoc is the part of advise's JSON the tests read.
type adviceDoc struct {
	Incomplete    bool     `json:"incomplete"`
	Answer        bool     `json:"answer"`
	Split         string   `json:"split"`
	Spend         int      `json:"spend"`
	Binding       []string `json:"binding"`
	Replications  int      `json:"replications"`
	Deterministic bool     `json:"deterministic"`
	Help          []string `json:"help"`
	Budget        struct {
		Total int `json:"Total"`
	} `json:"budget"`
	Pools []struct {
		Name  string `json:"name"`
		Mode  string `json:"mode"`
		Size  int    `json:"pool_size"`
		Spend int    `json:"server_conns"`
		Low   int    `json:"pool_low"`
		High  int    `json:"pool_high"`
		Modes []struct {
			Mode       string   `json:"mode"`
			Allowed    bool     `json:"allowed"`
			Workaround string   `json:"workaround"`
			Min        *evalDoc `json:"smallest"`
			Broken     []string `json:"broken"`
			After      bool     `json:"after_change"`
		} `json:"modes"`
	} `json:"pools"`
	Classes []struct {
		Name    string             `json:"name"`
		Meets   bool               `json:"meets"`
		Fails   []string           `json:"fails"`
		Offered float64            `json:"offered_tps"`
		Metrics map[string]float64 `json:"metrics"`
	} `json:"classes"`
	Frees []struct {
		Pool   string `json:"pool"`
		From   int    `json:"server_conns_now"`
		To     int    `json:"server_conns_after"`
		Assume string `json:"assume"`
	} `json:"frees"`
	MaxPrepared int       `json:"max_prepared_statements"`
	Evaluated   []evalDoc `json:"evaluated"`
}

type evalDoc struct {
	Pool        string             `json:"pool"`
	Mode        string             `json:"mode"`
	PoolSize    int                `json:"pool_size"`
	MaxPrepared int                `json:"max_prepared_statements"`
	Saved       bool               `json:"max_prepared_raised"`
	Meets       bool               `json:"meets"`
	Fails       []string           `json:"fails"`
	Metrics     map[string]float64 `json:"metrics"`
}

// adviseJSON runs advise --format json and decodes the answer.
func adviseJSON(t *testing.T, args ...string) adviceDoc {
	t.Helper()
	code, out, errOut := runCmd(append(append([]string{"advise"}, args...), "--format", "json", "--quiet")...)
	if code != 0 {
		t.Fatalf("advise %v: exit %d: %s", args, code, errOut)
	}
	var a adviceDoc
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("advise %v: %v\n%s", args, err, out)
	}
	return a
}

// The seed-001 decision tree, one branch per case, under the budget of
// seed 001's 20 connections (2 kept as headroom).
func TestAdviseSeedBranches(t *testing.T) {
	// Many more clients than server slots, no session features:
	// transaction pooling, inside the budget.
	a := adviseJSON(t, "pgbouncer-modes", "--set", "workload.clients=200")
	if !a.Answer || a.Pools[0].Mode != "transaction" || a.Spend > a.Budget.Total || a.Budget.Total != 18 || !a.Deterministic {
		t.Fatalf("200 clients: %q spending %d of %d, want transaction inside 18", a.Split, a.Spend, a.Budget.Total)
	}
	for _, m := range a.Pools[0].Modes {
		if m.Mode == "direct" && (m.Min == nil || m.Min.Metrics["client_conns_peak"] != 200) {
			t.Errorf("direct: %+v, want 200 connections (one per client)", m.Min)
		}
	}
	// Session-level advisory locks: only session (or direct) keeps them;
	// the change that frees the pool is transaction-level locks.
	b := adviseJSON(t, "pgbouncer-modes", "--set", "workload.clients=200", "--features", "advisory_locks")
	if !b.Answer || b.Pools[0].Mode != "session" {
		t.Fatalf("advisory locks: %q, want session", b.Split)
	}
	for _, m := range b.Pools[0].Modes {
		if (m.Mode == "transaction" || m.Mode == "statement") && m.Allowed {
			t.Errorf("%s allowed with session-level advisory locks", m.Mode)
		}
		if m.Mode == "transaction" && (!m.After || !strings.Contains(m.Workaround, "pg_advisory_xact_lock")) {
			t.Errorf("transaction: after change %v, workaround %q", m.After, m.Workaround)
		}
	}
	// Protocol-level prepared statements: transaction pooling is saved by
	// max_prepared_statements.
	c := adviseJSON(t, "pgbouncer-modes", "--set", "workload.clients=200", "--features", "prepared", "--slo-p99", "100ms")
	if !c.Answer || c.Pools[0].Mode != "transaction" || c.MaxPrepared != 200 {
		t.Fatalf("prepared: %q with max_prepared_statements %d, want transaction with 200", c.Split, c.MaxPrepared)
	}
	code, out, _ := runCmd("advise", "pgbouncer-modes", "--set", "workload.clients=200", "--features", "prepared", "--slo-p99", "100ms", "-q")
	if code != 0 || !strings.HasPrefix(out, "Answer: transaction mode, default_pool_size=") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "with max_prepared_statements=200") {
		t.Errorf("text answer does not come first or does not name max_prepared_statements:\n%s", out)
	}
	// Fewer clients than the budget: direct or session, no pooler needed
	// for the load.
	d := adviseJSON(t, "pgbouncer-modes", "--set", "workload.clients=10")
	if !d.Answer || d.Spend > 10 {
		t.Fatalf("10 clients: %q spending %d", d.Split, d.Spend)
	}
}

// An SLO no configuration meets, and a throughput floor beyond the
// server: the answer says so and names what binds.
func TestAdviseImpossibleBars(t *testing.T) {
	a := adviseJSON(t, "pgbouncer-modes", "--set", "workload.clients=200", "--slo-p99", "1ms")
	if a.Answer || len(a.Binding) == 0 || !strings.Contains(a.Binding[0], "above its SLO 1ms") {
		t.Fatalf("answer %v, binding %q: want none, the p99 SLO binding", a.Answer, a.Binding)
	}
	code, out, _ := runCmd("advise", "pgbouncer-modes", "--set", "workload.clients=200", "--slo-p99", "1ms", "-q")
	if code != 0 || !strings.HasPrefix(out, "Answer: no configuration qualifies.") || !strings.Contains(out, "What binds:") {
		t.Errorf("exit %d, text:\n%s", code, out)
	}
	b := adviseJSON(t, "pgbouncer-modes", "--set", "workload.clients=200", "--min-tps", "50000")
	if b.Answer || !strings.Contains(strings.Join(b.Binding, ";"), "below the minimum 50000") {
		t.Fatalf("binding %q: want the throughput floor", b.Binding)
	}
}

func TestAdviseReasonsAndClassics(t *testing.T) {
	code, out, _ := runCmd("advise", "pgbouncer-modes", "--set", "workload.clients=200", "--server-cores", "4", "--spindles", "2", "-q")
	for _, want := range []string{"Budget: max_connections 20 - superuser_reserved_connections 0 - headroom 2 (10%, --headroom) = 18", "What binds:", "How sure:",
		"every draw of this workload is constant", "Little's law L = λW", "HikariCP cores*2 + spindles, for the whole server: 4*2 + 2 = 10",
		"statement:   dropped: breaks transactions", "Evaluated:", "<- the answer", "the exact smallest"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("advise output lacks %q:\n%s", want, out)
		}
	}
	_, a, _ := runCmd("advise", "pgbouncer-modes", "--set", "workload.clients=200", "--format", "json", "-q")
	_, b, _ := runCmd("advise", "pgbouncer-modes", "--set", "workload.clients=200", "--format", "json", "--workers", "1", "-q")
	if a != b {
		t.Error("advise output depends on --workers")
	}
}

func TestAdviseUsageErrors(t *testing.T) {
	tests := []struct {
		scenario string
		args     []string
		want     string
	}{
		{"pgbouncer-modes", []string{"--features", "prepared,cursors"}, `--features "cursors": unknown feature "cursors"`},
		{"pgbouncer-modes", []string{"--slo-p99", "fast"}, `--slo-p99 "fast": want a duration`},
		{"pgbouncer-modes", []string{"--max-wait", "-5ms"}, `--max-wait "-5ms": want a duration above 0`},
		{"pgbouncer-modes", []string{"--pool-sizes", "10..1"}, `--pool-sizes "10..1"`},
		{"pgbouncer-modes", []string{"--pool-sizes", "0,5"}, "pool size 0"},
		{"pgbouncer-modes", []string{"--min-tps", "-1"}, `--min-tps "-1"`},
		{"pgbouncer-modes", []string{"--format", "csv"}, `--format "csv": want table or json`},
		{"pgbouncer-modes", []string{"--set", "workload.clients=0"}, "must be from 1"},
		{"pgbouncer-modes", []string{"--headroom", "150%"}, "--headroom: headroom \"150%\""},
		{"pgbouncer-modes", []string{"--headroom", "20"}, "leaves none"},
		{"pgbouncer-modes", []string{"--objective", "throughput"}, `unknown objective "throughput"`},
		{"pgbouncer-modes", []string{"--modes", "pooled"}, `--modes "pooled": unknown mode "pooled"`},
		{"pgbouncer-modes", []string{"--slo-p99", "web=10ms"}, "has no classes"},
		{"pgbouncer-modes", []string{"--assume", "xact_locks"}, "no class uses advisory_locks"},
		{"pgbouncer-modes", []string{"--assume", "web=xact_locks"}, `no class "web"`},
		{"pgbouncer-modes", []string{"--features", "listen", "--assume", "listen_direct"}, "listen_direct:4"},
		{"pgbouncer-modes", []string{"--assume", "flux"}, `unknown change "flux"`},
		{"web-and-report", []string{"--min-tps", "api=10"}, `no class "api"`},
	}
	for _, tt := range tests {
		code, out, errOut := runCmd(append([]string{"advise", tt.scenario}, tt.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tt.args, code, errOut, tt.want)
		}
	}
}

// --min-tps takes a class, and a class held to a floor it cannot reach
// leaves no answer; within reach, the answer meets it.
func TestAdviseMinTPSPerClass(t *testing.T) {
	a := adviseJSON(t, "web-and-report", "--replications", "2", "--set", "classes.web.workload.requests_per_session=5", "--min-tps", "report=1000")
	if a.Answer || !strings.Contains(strings.Join(a.Binding, ";"), "below the minimum 1000") {
		t.Fatalf("report held to 1000 tps: %q, binding %q", a.Split, a.Binding)
	}
}

// Twice the traffic the server can carry (web-app: 8 cores top out near
// 1,300 transactions/s; 1,300 requests/s offer 2,600): no configuration
// qualifies, whatever its percentiles; what would help names the CPU.
func TestAdviseOverloadQualifiesNothing(t *testing.T) {
	skipUnderRace(t)
	args := []string{"web-app", "--set", "workload.arrival_rate=1300/s", "--set", "workload.duration=10s",
		"--pool-sizes", "8,32", "--replications", "3", "--slo-p99", "100ms"}
	a := adviseJSON(t, args...)
	if a.Answer {
		t.Fatalf("answer %q: 2,600 tps offered to a server that carries about 1,300 must not qualify", a.Split)
	}
	if a.Classes[0].Offered != 2600 || a.Classes[0].Meets || !strings.Contains(strings.Join(a.Classes[0].Fails, ";"), "even with a server for every connection it carries") {
		t.Fatalf("class %+v: want the offered 2600 tps not carried even with servers to spare", a.Classes[0])
	}
	found := false
	for _, h := range a.Help {
		found = found || strings.Contains(h, "CPU is saturated") && strings.Contains(h, "a bigger pool only queues more work")
	}
	if !found {
		t.Errorf("help %q: want the saturated CPU named, and that a bigger pool does not help", a.Help)
	}
	for _, e := range a.Evaluated {
		if e.Meets {
			t.Errorf("%s pool %d qualifies under a 2x overload", e.Mode, e.PoolSize)
		}
	}
}

// The answer does not hang on the seed: seeds of the web-app example give
// the same mode, and the pool sizes they give stay inside the uncertainty
// each one reports.
func TestAdviseStableAcrossSeeds(t *testing.T) {
	skipUnderRace(t)
	seeds := 3
	if os.Getenv("POOLSIM_LONG") != "" {
		seeds = 10
	}
	var mode string
	lo, hi := 0, 1<<30
	var pools []int
	for s := 1; s <= seeds; s++ {
		a := adviseJSON(t, "web-app", "--slo-p99", "100ms", "--seed", strconv.Itoa(s))
		if !a.Answer {
			t.Fatalf("seed %d: no answer: %q", s, a.Binding)
		}
		p := a.Pools[0]
		if mode == "" {
			mode = p.Mode
		}
		if p.Mode != mode {
			t.Errorf("seed %d: %s, seed 1: %s", s, p.Mode, mode)
		}
		pools = append(pools, p.Size)
		high := p.High
		if high == 0 {
			high = 1 << 30
		}
		lo, hi = max(lo, min(p.Low, p.Size)), min(hi, max(high, p.Size))
	}
	for i, p := range pools {
		if p < lo-1 || p > hi+1 {
			t.Errorf("seed %d chose pool %d, outside the uncertainty all seeds report (%d to %d) by more than one; pools %v", i+1, p, lo, hi, pools)
		}
	}
	t.Logf("mode %s, pools %v, common uncertainty %d..%d", mode, pools, lo, hi)
}

// SIGINT during a long advise: it stops, prints what finished marked
// INCOMPLETE, and exits 130.
func TestAdviseInterruptKeepsWhatFinished(t *testing.T) {
	out := filepath.Join(t.TempDir(), "advise.txt")
	cmd, stderr := poolsimProcess(t, out, "advise", "web-app", "--slo-p99", "100ms", "--replications", "20", "--workers", "1")
	deadline := time.Now().Add(2 * time.Minute)
	for done, _ := runsDone(stderr.String()); done < 40; done, _ = runsDone(stderr.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress on stderr after 2 minutes: %q", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want status %d; stderr %q", err, exitInterrupted, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, "INCOMPLETE: interrupted after ") || strings.Count(text, "\n  - ") == 0 || strings.Contains(text, "Answer:") {
		t.Fatalf("output %q: want INCOMPLETE and the finished configurations, no answer", text)
	}
}

// A three-pool app in any order of classes and pools: the same answer,
// byte for byte.
func TestAdviseOrderDoesNotMatter(t *testing.T) {
	skipUnderRace(t)
	dir := t.TempDir()
	write := func(name string, classes, pools []string) string {
		c := map[string]string{
			"web":    "  web:\n    pool: web\n    workload: {clients: 30, requests_per_session: 8, txns_per_request: 2, think: {dist: exp, mean: 50ms}}\n",
			"jobs":   "  jobs:\n    pool: jobs\n    workload: {clients: 10, requests_per_session: 4, stmts_per_txn: 4, think: {dist: exp, mean: 20ms}}\n",
			"report": "  report:\n    pool: report\n    workload: {clients: 2, requests_per_session: 2, stmts_per_txn: 6, think: 100ms}\n",
		}
		p := map[string]string{
			"web":    "  web: {database: app, user: web, mode: transaction, size: 10}\n",
			"jobs":   "  jobs: {database: app, user: jobs, mode: session, size: 10}\n",
			"report": "  report: {database: app, user: report, mode: session, size: 2}\n",
		}
		s := "name: three\nseed: 3\nworkload: {query: {dist: exp, mean: 2ms}, stmts_per_txn: 2, app: 1ms}\npooler: {hop: 50us, max_client_conn: 2000}\nserver: {max_connections: 60, connect: 2ms}\nclasses:\n"
		for _, n := range classes {
			s += c[n]
		}
		s += "pools:\n"
		for _, n := range pools {
			s += p[n]
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	args := []string{"--slo-p99", "web=60ms", "--features", "jobs=advisory_locks", "--replications", "3", "-q"}
	a := write("a.yaml", []string{"web", "jobs", "report"}, []string{"web", "jobs", "report"})
	b := write("b.yaml", []string{"report", "jobs", "web"}, []string{"jobs", "report", "web"})
	_, x, _ := runCmd(append([]string{"advise", a}, args...)...)
	_, y, _ := runCmd(append([]string{"advise", b}, args...)...)
	if x != y || !strings.HasPrefix(x, "Answer: ") {
		t.Fatalf("the order of classes and pools changed the output:\n%s\n-----\n%s", x, y)
	}
}

// --plot draws a scenario with classes: a PNG, one row of panels a class.
func TestAdvisePlotClasses(t *testing.T) {
	p := filepath.Join(t.TempDir(), "advise.png")
	code, _, errOut := runCmd("advise", "web-and-report", "--set", "classes.web.workload.requests_per_session=4", "--slo-p99", "web=150ms",
		"--features", "report=with_hold", "--replications", "2", "--plot", p, "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(p)
	if err != nil || len(data) < 10_000 || string(data[1:4]) != "PNG" {
		t.Fatalf("plot: %d bytes, %v", len(data), err)
	}
}

// An advise estimated far above the limits is refused before it runs,
// with the estimate and --yes.
func TestAdviseCostRefused(t *testing.T) {
	code, out, errOut := runCmd("advise", "pgbouncer-modes", "--set", "workload.clients=5000000", "--set", "pooler.max_client_conn=5000000")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "give --yes") || !strings.Contains(errOut, "GB of memory") {
		t.Fatalf("exit %d, stderr %q: want a refusal with the estimate", code, errOut)
	}
}
