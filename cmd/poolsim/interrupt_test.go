package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// poolsimProcess starts this test binary as the poolsim command with args,
// stdout to a file, stderr to a buffer.
func poolsimProcess(t *testing.T, stdout string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	f, err := os.Create(stdout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "POOLSIM_TEST_MAIN=1")
	errBuf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = f, errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, errBuf
}

// runsDone is the run counts of the last progress line in stderr
// ("21/600 runs"), 0 and 0 before the first.
func runsDone(stderr string) (done, total int) {
	m := progressRuns.FindAllStringSubmatch(stderr, -1)
	if m == nil {
		return 0, 0
	}
	done, _ = strconv.Atoi(m[len(m)-1][1])
	total, _ = strconv.Atoi(m[len(m)-1][2])
	return done, total
}

var progressRuns = regexp.MustCompile(`(\d+)/(\d+) runs`)

// stopLimit bounds how long the command may take to stop or refuse: a
// second, ten under the race detector (which slows it five- to tenfold).
func stopLimit() time.Duration {
	if raceEnabled {
		return 10 * time.Second
	}
	return time.Second
}

// SIGINT to a long sweep whose output goes to a file: it stops within a
// second, the file holds the finished points marked incomplete, and the
// status is 130.
func TestSweepInterruptWritesFinishedPoints(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("on Windows os.Process.Signal sends no SIGINT (only Kill)")
	}
	out := filepath.Join(t.TempDir(), "sweep.csv")
	cmd, stderr := poolsimProcess(t, out, "sweep", "web-app", "--vary", "pooler.default_pool_size=1..60",
		"--replications", "5", "--format", "csv", "--workers", "1")
	// Wait for progress on stderr that counts a finished point. With one
	// worker the points' runs (warm-up pilots and 5 replications, a 60th of
	// the total each) come nearly in order: the next point's first pilot
	// may run before this point's replications, so two points' worth of
	// runs is surely the first point whole. The first line comes after two
	// seconds, and on a busy machine it may count fewer runs than that.
	deadline := time.Now().Add(2 * time.Minute)
	for done, total := runsDone(stderr.String()); total == 0 || done*30 < total; done, total = runsDone(stderr.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no finished point on stderr after 2 minutes: %q", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want status %d; stderr %q", err, exitInterrupted, stderr.String())
	}
	if limit := stopLimit(); took > limit {
		t.Errorf("stopped %v after SIGINT, want within %v", took, limit)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	body, tail, _ := strings.Cut(string(data), "\n# ")
	if !strings.HasPrefix(tail, "INCOMPLETE: interrupted; ") {
		t.Fatalf("output not marked incomplete: %q (stderr %q)", tail, stderr.String())
	}
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) < 2 || len(recs) > 60 {
		t.Fatalf("%d CSV records (%v): want the header and some of the 60 points", len(recs), err)
	}
	// The finished points are the first ones, complete: pool sizes 1, 2, ...
	for i, r := range recs[1:] {
		if r[0] != strconv.Itoa(i+1) {
			t.Errorf("record %d: pool size %q, want %d", i+1, r[0], i+1)
		}
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say it was interrupted: %q", stderr.String())
	}
	if bytes.Contains(data, []byte("runs  ")) {
		t.Error("progress went to stdout")
	}
}

// A run estimated far above the limits (10 million clients) is refused
// before anything is built: within a second, in under 100 MB, with the
// estimate and the flag that allows it.
func TestHugeRunRefusedAtOnce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	cmd, stderr := poolsimProcess(t, out, "run", "pgbouncer-modes", "--set", "workload.clients=10000000", "--set", "pooler.max_client_conn=10000000")
	err := cmd.Wait()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("exit %v, want %d; stderr %q", err, exitUsage, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "give --yes to run it anyway") || !strings.Contains(msg, "GB of memory") {
		t.Errorf("refusal %q: want the estimate and --yes", msg)
	}
	// The race detector's shadow memory alone is more than the bound.
	if kb, ok := peakRSS(cmd.ProcessState); ok && kb > 100<<10 && !raceEnabled {
		t.Errorf("refusing took %d MB of memory, want under 100", kb>>10)
	}
	if limit := stopLimit(); took > limit {
		t.Errorf("refusing took %v, want under %v", took, limit)
	}
}

// The memory estimate behind the refusal holds a large run: the process's
// peak resident memory is within the estimate, and the estimate is not
// loose by more than three times (a 300,000-client closed run).
func TestMemoryEstimateHolds(t *testing.T) {
	skipUnderRace(t)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "pgbouncer-modes", "--set", "workload.clients=300000", "--set", "pooler.max_client_conn=300000", "--set", "pooler.mode=transaction", "--yes", "-q"}
	cmd, stderr := poolsimProcess(t, out, args...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	sc, err := loadScenario("pgbouncer-modes", nil, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Base
	c.Workload.Clients = 300000
	est := c.Estimate().Bytes
	kb, ok := peakRSS(cmd.ProcessState)
	if !ok {
		t.Skip("no peak resident memory read on this system")
	}
	rss := float64(kb) * 1024
	t.Logf("peak RSS %.0f MB, estimate %.0f MB", rss/(1<<20), est/(1<<20))
	if rss > est || est > 3*rss {
		t.Errorf("peak RSS %.0f MB, estimate %.0f MB: want the estimate above the peak and within three times it", rss/(1<<20), est/(1<<20))
	}
}

// Above the (here lowered) limits a run is refused; --yes runs it.
func TestCostLimitAndYes(t *testing.T) {
	saved := costBytes
	costBytes = 20 << 20
	defer func() { costBytes = saved }()
	args := []string{"run", "pgbouncer-modes", "--set", "workload.clients=50000", "--set", "pooler.max_client_conn=100000", "--set", "workload.txns_per_session=1", "--format", "csv"}
	code, out, errOut := runCmd(args...)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "give --yes") {
		t.Fatalf("exit %d, stdout %d bytes, stderr %q: want a refusal", code, len(out), errOut)
	}
	code, out, errOut = runCmd(append(args, "--yes")...)
	if code != 0 || strings.Count(out, "\n") != 5 { // the header and the four modes
		t.Fatalf("--yes: exit %d, %d lines, stderr %q", code, strings.Count(out, "\n"), errOut)
	}
}
