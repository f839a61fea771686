package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/scenarios"
)

// lab is the recorded run the importer's unit tests read (see
// scenarios/importer/testdata/lab/README.md).
const lab = "../../scenarios/importer/testdata/lab"

// TestImportRecorded runs the command end to end on the recorded run:
// the console and pg_stat_statements samples (--from-raw), the csvlog and
// pgbench's logs.
func TestImportRecorded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "app.yaml")
	args := []string{"import", "-q", "--from-raw", lab, "--csvlog", lab + "/postgresql.csv",
		"--pgbench-log", lab + "/pgbench_log.0", "--pgbench-log", lab + "/pgbench_log.1", "--out", out, "--replications", "4"}
	code, stdout, stderr := runCmd(args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	for _, want := range []string{"Wrote " + out, "transactions/s", "pgbench latency", "Verdict: FITS"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Command: poolsim import -q --from-raw", "clients: 6", "stmts_per_txn: 3", "mode: transaction",
		"default_pool_size: 2", "# Fidelity:", "# Verdict: FITS", "# Dropped"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the scenario lacks %q", want)
		}
	}
	// It is a scenario like any other: run it at another pool size.
	code, stdout, stderr = runCmd("run", out, "--set", "pooler.default_pool_size=6", "--format", "csv")
	if code != exitOK || !strings.Contains(stdout, "transaction") {
		t.Fatalf("run the imported scenario: exit %d: %s%s", code, stdout, stderr)
	}
	if _, err := scenarios.Load(out); err != nil {
		t.Fatal(err)
	}
	// Without --out the scenario, report included, goes to stdout.
	code, stdout, _ = runCmd(args[:len(args)-4]...)
	if code != exitOK || !strings.HasPrefix(stdout, "# Imported by poolsim import") || !strings.Contains(stdout, "# Verdict: FITS") {
		t.Errorf("to stdout: exit %d, %.200s", code, stdout)
	}
}

func TestImportUsage(t *testing.T) {
	dir := t.TempDir()
	stderrLog := filepath.Join(dir, "pg.log")
	if err := os.WriteFile(stderrLog, []byte("2026-11-30 19:33:06.488 UTC [14022] LOG:  database system is ready to accept connections\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import"}, exitUsage, "no source"},
		{[]string{"import", "x.csv"}, exitUsage, "every source is a flag"},
		{[]string{"import", "--csvlog", stderrLog}, exitUsage, "log_destination = 'csvlog'"},
		{[]string{"import", "--csvlog", lab + "/pgbench_log.0"}, exitUsage, "give it with --pgbench-log"},
		{[]string{"import", "--pgbench-log", lab + "/postgresql.csv"}, exitUsage, "want pgbench -l lines"},
		{[]string{"import", "--pgbench-log", lab + "/pgbench_log.0"}, exitFail, "add --pgbouncer, --pg or --csvlog"},
		{[]string{"import", "--pgbouncer", "postgres://a@h/pgbouncer", "--interval", "0s"}, exitUsage, "--interval"},
		{[]string{"import", "--pgbouncer", "postgres://[::1"}, exitUsage, "does not parse"},
		{[]string{"import", "--pgbouncer", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pgbouncer", closed), "--duration", "1s"}, exitFail, "is it running"},
		{[]string{"import", "--from-raw", dir}, exitUsage, "neither console.json nor pg.json"},
		{[]string{"import", "--from-raw", lab, "--pg", "postgres://a@h/b"}, exitUsage, "not with them"},
		{[]string{"import", "--csvlog", lab + "/postgresql.csv", "--save-raw", dir}, exitUsage, "--save-raw saves the live sources"},
		{[]string{"import", "--csvlog", lab + "/postgresql.csv", "--replications", "0"}, exitUsage, "--replications 0"},
	} {
		code, _, errOut := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("poolsim %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
		}
	}
}

func TestImportHelp(t *testing.T) {
	code, _, errOut := runCmd("import", "--help")
	for _, want := range []string{"--pgbouncer DSN", "--pg DSN", "--csvlog FILE", "--pgbench-log FILE", "Exit status"} {
		if code != exitOK || !strings.Contains(errOut, want) {
			t.Errorf("import --help: exit %d, lacks %q", code, want)
		}
	}
}

func TestRedactArgs(t *testing.T) {
	got := redactArgs([]string{"--pgbouncer", "postgres://admin:s3cret@h:6432/pgbouncer", "--pg=postgres://u:pw@h/db", "--pg", "host=h password=pw user=u"})
	if s := strings.Join(got, " "); strings.Contains(s, "s3cret") || strings.Contains(s, "pw@") || strings.Contains(s, "password=pw") {
		t.Errorf("redactArgs left a password: %s", s)
	}
}
