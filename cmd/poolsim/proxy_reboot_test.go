//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestProxyReboot: poolsim proxy -R, as pgbouncer -R, takes over a running
// proxy process on the same pgbouncer.ini: the old process exits 0, a
// client keeps its connection, session setting and backend, the pidfile
// names the new process, and the new one serves newcomers and removes the
// Unix socket and the pidfile when it stops.
func TestProxyReboot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two proxy processes")
	}
	f := newINIFixture(t, 2)
	if err := os.Chmod(f.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pini := opsINI(t, f.dir, "proxy", f.pg.Port(), 0)
	old := startProxyProcess(t, "--config", pini)
	pidFile := filepath.Join(f.dir, "proxy.pid")
	socket := filepath.Join(f.dir, fmt.Sprintf(".s.PGSQL.%d", old.port))
	waitFile(t, pidFile, "the old pid", func(s string) bool { return s == strconv.Itoa(old.cmd.Process.Pid)+"\n" })

	dsn := fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/poolsim?sslmode=disable", old.port)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "set work_mem = '3MB'"); err != nil {
		t.Fatal(err)
	}
	var before, after int
	if err := conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&before); err != nil {
		t.Fatal(err)
	}

	// The same command line with -R, as a pgbouncer wrapper would run it.
	cmd := exec.Command(os.Args[0], "proxy", "--listen", fmt.Sprintf("127.0.0.1:%d", old.port), "-R", "--config", pini)
	cmd.Env = append(os.Environ(), "POOLSIM_TEST_MAIN=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	neu := &proxyProcess{cmd: cmd, out: out, done: make(chan error, 1), port: old.port}
	go func() { neu.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-neu.done
		if t.Failed() {
			t.Logf("new proxy output:\n%s", out.String())
		}
	})
	if code := old.exit(t, 30*time.Second); code != 0 {
		t.Errorf("old proxy exit code %d after the takeover, want 0", code)
	}
	neu.waitOutput(t, "old process killed, resuming work", 20*time.Second)
	waitFile(t, pidFile, "the new pid", func(s string) bool { return s == strconv.Itoa(cmd.Process.Pid)+"\n" })
	if _, err := os.Stat(socket); err != nil {
		t.Errorf("the Unix socket after the takeover: %v", err)
	}

	var workMem string
	if err := conn.QueryRow(ctx, "show work_mem").Scan(&workMem); err != nil || workMem != "3MB" {
		t.Errorf("client after the takeover: work_mem %q, %v; want 3MB", workMem, err)
	}
	if err := conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&after); err != nil || after != before {
		t.Errorf("client after the takeover: backend %d, %v; want %d", after, err, before)
	}
	fresh, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=poolsim dbname=poolsim sslmode=disable", f.dir, old.port))
	if err != nil {
		t.Fatalf("newcomer over the Unix socket: %v", err)
	}
	fresh.Close(ctx)

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx) // the safe shutdown waits for the session
	if code := neu.exit(t, 20*time.Second); code != 0 {
		t.Errorf("new proxy exit code %d after SIGINT", code)
	}
	for _, p := range []string{pidFile, socket} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the new proxy stopped: %v, want it removed", p, err)
		}
	}
}
