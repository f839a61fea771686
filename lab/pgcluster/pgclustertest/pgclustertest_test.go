package pgclustertest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// TestMissingPostgres checks the skip/fail rule in a child test process that
// points BinDir at an empty folder: skip locally, fail with CI=true.
func TestMissingPostgres(t *testing.T) {
	if os.Getenv("PGCLUSTERTEST_CHILD") == "1" {
		pgclustertest.Start(t, pgcluster.Options{BinDir: t.TempDir()})
		t.Log("not reached")
		return
	}
	for _, ci := range []string{"", "true"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMissingPostgres$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "PGCLUSTERTEST_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		cancel()
		switch ci {
		case "":
			if err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "apt-get install postgresql") {
				t.Errorf("CI unset: want a skip naming apt-get install postgresql; err %v, output:\n%s", err, out)
			}
		case "true":
			if err == nil || !strings.Contains(string(out), "--- FAIL") {
				t.Errorf("CI=true: want a failure; err %v, output:\n%s", err, out)
			}
		}
	}
}

func TestNeedNil(t *testing.T) {
	if pgclustertest.InCI() {
		t.Skip("Need(nil) fails in CI by design")
	}
	ran := false
	t.Run("nil", func(t *testing.T) {
		defer func() { ran = true }()
		pgclustertest.Need(t, nil)
		t.Error("Need(nil) returned")
	})
	if !ran {
		t.Error("subtest did not run")
	}
}
