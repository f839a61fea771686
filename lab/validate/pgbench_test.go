package validate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/lab/probe"
)

func TestParsePgbenchLine(t *testing.T) {
	got, err := parsePgbenchLine("3 17 506 0 1796124270 269482")
	if err != nil {
		t.Fatal(err)
	}
	want := pgbenchTxn{client: 3, lat: 506 * time.Microsecond, end: time.Unix(1796124270, 269482000)}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// PostgreSQL 15 adds the schedule lag and retries with some options.
	if _, err := parsePgbenchLine("0 1 87 0 1796124270 269677 0 0"); err != nil {
		t.Errorf("a line with lag and retries: %v", err)
	}
	if _, err := parsePgbenchLine("0 1 failed 0 1796124270 269677"); !errors.Is(err, errPgbenchFailed) {
		t.Errorf("a failed transaction: %v, want errPgbenchFailed", err)
	}
	for _, bad := range []string{"", "0 1 87 0 1796124270", "0 1 -5 0 1796124270 1", "0 1 87 0 1796124270 1000000", "a 1 87 0 1796124270 1"} {
		if _, err := parsePgbenchLine(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPgbenchResult(t *testing.T) {
	t0 := time.Unix(1796124270, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Two clients: 0 ends at 30 ms, 1 at 50 ms.
	txns := []pgbenchTxn{
		{0, at(10), 10 * time.Millisecond, 0},
		{1, at(12), 12 * time.Millisecond, 1},
		{0, at(20), 10 * time.Millisecond, 0},
		{0, at(30), 10 * time.Millisecond, 0},
		{1, at(40), 28 * time.Millisecond, 1},
		{1, at(50), 10 * time.Millisecond, 1},
	}
	r := pgbenchResult(txns, 2)
	if !r.Start.Equal(t0) || !r.End.Equal(at(50)) {
		t.Errorf("start %v, end %v: want time zero at the first start and the last end", r.Start.Sub(t0), r.End.Sub(t0))
	}
	if r.OKTxns != 6 || r.Stmts != 6 || r.Sessions != 2 || r.Clients != 2 {
		t.Errorf("counts %+v", r)
	}
	// The steady window: first completion (10 ms) to the first client's
	// last (30 ms), the transactions that end after its start and up to
	// its end.
	if !r.SteadyStart.Equal(at(10)) || !r.SteadyEnd.Equal(at(30)) || r.SteadyTxns != 3 {
		t.Errorf("steady %v to %v, %d transactions; want 10 ms to 30 ms, 3", r.SteadyStart.Sub(t0), r.SteadyEnd.Sub(t0), r.SteadyTxns)
	}
	if r.Latency.Count() != 6 {
		t.Errorf("%d latencies, want 6", r.Latency.Count())
	}
}

func TestThreadSpread(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Thread 0's transactions average 10 ms, thread 1's 15 ms.
	txns := []pgbenchTxn{{0, time.Time{}, ms(8), 0}, {0, time.Time{}, ms(12), 0}, {1, time.Time{}, ms(15), 1}}
	if got := threadSpread(txns); got != 1.5 {
		t.Errorf("spread %v, want 1.5", got)
	}
	if got := threadSpread(txns[:2]); got != 0 {
		t.Errorf("one thread: spread %v, want 0 (not measured)", got)
	}
	for name, want := range map[string]int{"txn.123": 0, "txn.123.1": 1, "txn.7.12": 12} {
		if got, err := pgbenchLogThread(filepath.Join("/x", name)); err != nil || got != want {
			t.Errorf("%s: thread %d, %v; want %d", name, got, err, want)
		}
	}
	if _, err := pgbenchLogThread("/x/txn.123.b"); err == nil {
		t.Error("txn.123.b: no error")
	}
}

func TestReadPgbenchLog(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "txn.1")
	if err := os.WriteFile(f, []byte("0 1 50 0 1796124270 100\n0 2 60 0 1796124270 200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readPgbenchLog(f)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v, %v", got, err)
	}
	if err := os.WriteFile(f, []byte("0 1 50 0 1796124270 100\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readPgbenchLog(f); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line: %v, want an error naming line 2", err)
	}
}

func TestSchedCPUSumsThreads(t *testing.T) {
	all, ok := schedCPU(os.Getpid())
	if !ok {
		t.Skip("no /proc/PID/task here")
	}
	main, ok := taskCPU("/proc/self/schedstat")
	if !ok {
		t.Skip("no /proc/self/schedstat here")
	}
	// This test process runs several threads; the main one is among them.
	if all < main {
		t.Errorf("all threads %v below the main thread's %v", all, main)
	}
}

func FuzzParsePgbenchLine(f *testing.F) {
	for _, s := range []string{"3 17 506 0 1796124270 269482", "0 1 failed 0 1 2", "0 1 87 0 1796124270 269677 0 0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		x, err := parsePgbenchLine(line)
		if err != nil {
			return
		}
		if x.client < 0 || x.lat < 0 || x.end.Nanosecond() >= 1e9 {
			t.Errorf("%q: parsed %+v", line, x)
		}
	})
}

// TestEnded: this process runs; a child that has exited is ended both as
// a zombie and once waited for.
func TestEnded(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no procfs")
	}
	if ended(os.Getpid()) {
		t.Fatal("this process reads as ended")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !ended(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited child never read as ended (zombie)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Wait()
	if !ended(cmd.Process.Pid) {
		t.Error("a reaped child reads as running")
	}
}

// TestPgbenchLoopRetriesWhenLate: when pgbench has ended before the
// measured window closes (here the pool's servers are slow to find, as on
// a loaded machine), the loop runs again with a longer -T instead of
// failing with unreadable backends.
func TestPgbenchLoopRetriesWhenLate(t *testing.T) {
	needPostgres(t)
	cl := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 20, SuperuserReservedConnections: pgcluster.ReserveNone})
	srv, err := parseServer(cl.UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{cluster: cl, srv: srv, logf: t.Logf, watchDSN: cl.SuperuserDSN(srv.database),
		backendGone: func(ctx context.Context, pid uint32) error { return cl.WaitBackendsExit(ctx, pid) }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l.pgbenchNeeded = pgclustertest.InCI()
	if _, err := l.pgbenchInit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if l.pgbenchBin == "" {
		t.Skip("no pgbench")
	}
	calls := 0
	d := &pgbenchDriver{bin: l.pgbenchBin, servers: func(ctx context.Context) ([]int, error) {
		calls++
		if calls == 1 {
			// pgbench -T 2 (500 ms warm-up, 400 ms window, 300 ms margin)
			// has ended 2 s after it began: 2.5 s more here and its
			// backends are gone before the window closes.
			if err := probe.Sleep(ctx, 2500*time.Millisecond); err != nil {
				return nil, err
			}
		}
		return l.serverPids(ctx)
	}}
	out, err := d.loop(ctx, cl.UserDSN(), 2, 2, 1, 400*time.Millisecond, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if !out.watchedOK || out.stmts == 0 || out.self <= 0 || out.watched <= 0 {
		t.Errorf("loop %+v: want pgbench's and its backends' CPU over a window of statements", out)
	}
	// The first try's servers() call (late), the second try's, and the
	// direct loop's wait for the backends to exit after each.
	if calls < 3 {
		t.Errorf("servers looked up %d times: want the loop run again", calls)
	}
}
