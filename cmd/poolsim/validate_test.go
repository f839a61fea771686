package main

import (
	"context"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/proxy/pgbouncer"
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
		{[]string{"validate", "prepared-statements-live", "--set", "live.sql=SELECT 1", "--set", "live.statement=sql"}, exitUsage, "live.statement sql"},
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
