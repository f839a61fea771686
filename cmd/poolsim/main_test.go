package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/report"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestRunGolden(t *testing.T) {
	for _, format := range report.Formats {
		checkGolden(t, "pgbouncer-modes."+format, "run", "pgbouncer-modes", "--format", format)
	}
}

// TestRunExplainGolden holds --explain's text and JSON: issue 54's request
// workload, whose run is at its closed-system bound (not 488.9 % of it),
// erlang-c's Little's law and Erlang C, and two scenarios with classes
// explained per pool and per class: web-and-report (closed, a pool each)
// and rails-app (three workers classes).
func TestRunExplainGolden(t *testing.T) {
	checkGolden(t, "request-bound.explain", "run", "testdata/request-bound.yaml", "--explain")
	checkGolden(t, "request-bound.explain.json", "run", "testdata/request-bound.yaml", "--explain", "--format", "json")
	checkGolden(t, "erlang-c.explain", "run", "erlang-c", "--explain")
	checkGolden(t, "web-and-report.explain", "run", "web-and-report", "--explain")
	checkGolden(t, "rails-app.explain", "run", "rails-app", "--explain")
	_, out, _ := runCmd("run", "testdata/request-bound.yaml", "--explain")
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "The simulation ran at 222.222/s (100.0% of the bound)") {
		t.Errorf("the issue's run is not at its bound:\n%s", out)
	}
}

// checkGolden runs poolsim with args and compares its output with
// testdata/golden (-update rewrites the file instead).
func checkGolden(t *testing.T, golden string, args ...string) {
	t.Helper()
	code, out, errOut := runCmd(args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	golden = filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run 'go test ./cmd/poolsim -update' to create it)", err)
	}
	if out != string(want) {
		t.Errorf("%v differs from %s:\n%s", args, golden, out)
	}
}

func TestRunIsByteIdentical(t *testing.T) {
	skipUnderRace(t)
	// JSON carries every metric, so two identical JSON runs of a built-in
	// mean identical runs; the other formats only re-print them.
	for _, b := range scenarios.Builtins() {
		_, a, _ := runCmd("run", b.Name, "--format", "json")
		_, c, _ := runCmd("run", b.Name, "--format", "json")
		if a != c || a == "" {
			t.Errorf("run %s --format json: two runs differ (or printed nothing)", b.Name)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"malformed yaml", []string{"run", write("bad.yaml", "name: x\nworkload: [\n")}, "not valid YAML"},
		{"unknown key", []string{"run", write("key.yaml", "name: x\nworkload:\n  clients: 3\n  thinks: 1ms\n")}, `key.yaml:4: unknown key "thinks" in workload`},
		{"negative duration", []string{"run", write("neg.yaml", "name: x\nworkload:\n  clients: 3\n  query: -1ms\n")}, "workload.query: must not be negative"},
		{"unknown mode", []string{"run", "pgbouncer-modes", "--set", "pooler.mode=pooled"}, `unknown pool mode "pooled"`},
		{"tab", []string{"run", write("tab.yaml", "name: x\nworkload:\n\tclients: 3\n")}, "tab character at line 3: YAML indents with spaces"},
		{"did you mean a key", []string{"run", "pgbouncer-modes", "--set", "pooler.default_pool_sise=3"}, "unknown key `pooler.default_pool_sise`; did you mean `pooler.default_pool_size`?"},
		{"did you mean a key in a file", []string{"run", write("think.yaml", "name: x\nworkload:\n  clients: 3\n  thinks: 1ms\n")}, "did you mean `think`?"},
		{"did you mean a mode", []string{"run", "pgbouncer-modes", "--set", "pooler.mode=transation"}, "did you mean `transaction`?"},
		{"did you mean a distribution", []string{"run", "pgbouncer-modes", "--set", "workload.query={dist: expo, mean: 1ms}"}, `unknown distribution "expo": want const, exp, uniform, lognormal or empirical; did you mean ` + "`exp`?"},
		{"no far-fetched guess", []string{"run", "pgbouncer-modes", "--set", "pooler.mode=zzzzzz"}, `unknown pool mode "zzzzzz": want one of direct, session, transaction, statement`},
		{"set missing path", []string{"run", "pgbouncer-modes", "--set", "pooler.size=3"}, "unknown key `pooler.size`; did you mean `pooler.default_pool_size`?"},
		{"set without =", []string{"run", "pgbouncer-modes", "--set", "pooler.mode"}, "want key=value"},
		{"unknown scenario", []string{"run", "no-such"}, `no such scenario "no-such"`},
		{"missing file", []string{"run", "./nope.yaml"}, "file not found"},
		{"bad format", []string{"run", "pgbouncer-modes", "--format", "xml"}, `--format "xml"`},
		{"bad flag", []string{"run", "pgbouncer-modes", "--bogus"}, "unknown flag: --bogus"},
		{"no scenario", []string{"run"}, "want exactly one SCENARIO"},
		{"unknown command", []string{"simulate"}, `unknown command "simulate"`},
	}
	for _, tt := range tests {
		code, out, errOut := runCmd(tt.args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d (stderr %q)", tt.name, code, exitUsage, errOut)
		}
		if out != "" {
			t.Errorf("%s: printed to stdout: %q", tt.name, out)
		}
		if !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: stderr %q, want it to contain %q", tt.name, errOut, tt.want)
		}
		if tt.name != "unknown command" && strings.Count(strings.TrimSpace(errOut), "\n") > 0 && !strings.Contains(errOut, "Usage") {
			t.Errorf("%s: error is more than one line: %q", tt.name, errOut)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"run", "--help"}, {"scenarios", "--help"}} {
		code, out, errOut := runCmd(args...)
		if code != exitOK || !strings.Contains(out+errOut, "Exit status") {
			t.Errorf("%v: exit %d, help without an exit-status section:\n%s%s", args, code, out, errOut)
		}
	}
	code, out, _ := runCmd("scenarios")
	if code != 0 || !strings.Contains(out, "pgbouncer-modes") {
		t.Errorf("scenarios: exit %d, output %q", code, out)
	}
	code, out, _ = runCmd("scenarios", "pgbouncer-modes")
	if code != 0 || !strings.Contains(out, "name: pgbouncer-modes") {
		t.Errorf("scenarios pgbouncer-modes: exit %d, output %q", code, out)
	}
}

func TestRunExplain(t *testing.T) {
	code, out, errOut := runCmd("run", "erlang-c", "--explain")
	if code != 0 || !strings.Contains(out, "Little's law says L = λW") || !strings.Contains(out, "Erlang C gives") {
		t.Errorf("run erlang-c --explain: exit %d, stderr %q, output:\n%s", code, errOut, out)
	}
	if code, _, errOut := runCmd("run", "erlang-c", "--explain", "--format", "csv"); code != exitUsage || !strings.Contains(errOut, "--explain") {
		t.Errorf("--explain with csv: exit %d, stderr %q; want a usage error", code, errOut)
	}
}

// skipUnderRace skips a test that only repeats long seeded model runs:
// under the race detector they take five to ten times as long and show it
// nothing new, since the worker pool they go through is the one
// TestSweepParallelIsSequential and TestSweepInterruptWritesFinishedPoints
// check under -race. The plain `go test` runs them.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("long seeded model runs, checked by the plain test run; the race detector watches the worker pool in the sweep tests")
	}
}
