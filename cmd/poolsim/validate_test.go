package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

func TestValidateUsage(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"validate"}, exitUsage, "want exactly one SCENARIO"},
		{[]string{"validate", "pgbouncer-modes-live", "--target", "odyssey"}, exitUsage, `--target "odyssey"`},
		{[]string{"validate", "no-such-scenario"}, exitUsage, "no such scenario"},
		{[]string{"validate", "pgbouncer-modes-live", "--bogus"}, exitUsage, "unknown flag"},
		{[]string{"validate", "pgbouncer-modes-live", "--set", "workload.clients=0"}, exitUsage, "workload.clients"},
		// Checked before anything starts: no PostgreSQL needed.
		{[]string{"validate", "pgbouncer-modes-live", "--set", "app_pool.mode=queue"}, exitUsage, "application-side pool"},
		{[]string{"validate", "prepared-statements-live", "--set", "validate.sql=SELECT 1", "--set", "validate.statement=sql"}, exitUsage, "validate.statement sql"},
		// The validate: section's keys, decoded by the validator.
		{[]string{"validate", "pgbouncer-modes-live", "--set", "validate.statment=cpu"}, exitUsage, "unknown key `validate.statment`; did you mean `statement`?"},
		{[]string{"validate", "pgbouncer-modes-live", "--set", "validate.statement=nap"}, exitUsage, `--set validate.statement=nap: want sleep, cpu, sql or pgbench-select, got "nap"`},
		{[]string{"validate", "pgbouncer-modes-live", "--set", "validate.background=1"}, exitUsage, "set server.cores above 0"},
	}
	for _, tt := range tests {
		code, _, errOut := runCmd(tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.inStderr) {
			t.Errorf("poolsim %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, errOut, tt.code, tt.inStderr)
		}
	}
}

// TestValidatePreparedOldPgBouncer: a PgBouncer without
// max_prepared_statements (before 1.21) is refused for the cache rows,
// before anything starts.
func TestValidatePreparedOldPgBouncer(t *testing.T) {
	v, err := pgbouncer.InstalledVersion(context.Background())
	if err != nil {
		t.Skipf("pgbouncer: %v", err)
	}
	if pgbouncer.VersionAtLeast(v, 1, 21) {
		t.Skipf("pgbouncer %s has max_prepared_statements", v)
	}
	code, _, errOut := runCmd("validate", "prepared-statements-live", "--target", "pgbouncer")
	if code != exitUsage || !strings.Contains(errOut, "needs PgBouncer 1.21 or later") {
		t.Errorf("validate prepared-statements-live --target pgbouncer: exit %d, stderr %q; want a usage error naming 1.21", code, errOut)
	}
}

func TestValidateHelp(t *testing.T) {
	code, _, errOut := runCmd("validate", "--help")
	if code != exitOK || !strings.Contains(errOut, "--target") || !strings.Contains(errOut, "Exit status") {
		t.Errorf("validate --help: exit %d, %q", code, errOut)
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"poolsim", "validate", "x", "--set", "workload.query={dist: exp, mean: 1ms}"})
	want := `poolsim validate x --set 'workload.query={dist: exp, mean: 1ms}'`
	if got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}

// Progress of a live validation goes to stderr, phase by phase with the
// runs done and the time left, and never to stdout.
func TestValidateProgressOnStderr(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("PostgreSQL missing under CI=true: %v", err)
		}
		t.Skipf("PostgreSQL: %v", err)
	}
	p := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(p, []byte(`name: tiny-live
seed: 1
workload:
  clients: 4
  txns_per_session: 1
  stmts_per_txn: 2
  query: 2ms
  think: 1ms
pooler:
  mode: transaction
  hop: 50us
  default_pool_size: 2
  max_prepared_statements: 0
server:
  max_connections: 4
  superuser_reserved_connections: 0
validate:
  statement: sleep
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("validate", p, "--quick")
	if code != exitOK && code != exitFail { // a noisy machine may miss a tolerance; the progress is what is tested
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"poolsim: validate tiny-live: starting PostgreSQL", "poolsim: validate tiny-live: calibrating the statement", "run 1 of 1 (0/1)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out, "poolsim: validate") {
		t.Errorf("progress on stdout:\n%s", out)
	}
}
