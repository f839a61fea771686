package main

import (
	"strings"
	"testing"
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
	}
	for _, tt := range tests {
		code, _, errOut := runCmd(tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.inStderr) {
			t.Errorf("poolsim %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, errOut, tt.code, tt.inStderr)
		}
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
