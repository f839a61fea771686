//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poolsim/poolsim/lab/pgbouncer"
)

// cliTarget runs a pooler's command line: PgBouncer 1.18 as the postgres
// account (it refuses root), the proxy as this test's binary.
type cliTarget struct {
	name string
	cmd  func(ctx context.Context, args ...string) *exec.Cmd
}

// cliTargets are the proxy and, where installed, PgBouncer.
func cliTargets(t *testing.T) []cliTarget {
	t.Helper()
	targets := []cliTarget{{name: "proxy", cmd: func(ctx context.Context, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, os.Args[0], append([]string{"proxy"}, args...)...)
		c.Env = append(os.Environ(), "POOLSIM_TEST_MAIN=1")
		return c
	}}}
	bin, err := pgbouncer.Find()
	if err != nil {
		t.Logf("pgbouncer: %v (the proxy alone)", err)
		return targets
	}
	return append([]cliTarget{{name: "pgbouncer", cmd: func(ctx context.Context, args ...string) *exec.Cmd {
		if os.Getuid() != 0 {
			return exec.CommandContext(ctx, bin, args...)
		}
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}}}, targets...)
}

// pidOf waits for a pidfile and returns the pid in it.
func pidOf(t *testing.T, path string) int {
	t.Helper()
	s := waitFile(t, path, "a pid", func(s string) bool { return strings.HasSuffix(s, "\n") })
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("pidfile %s: %q", path, s)
	}
	return pid
}

// TestDaemonAndVersion: -d returns at once with status 0 and leaves a
// serving process whose pid is in the pidfile and whose log is in
// logfile; SIGINT stops it and the pidfile goes; -d without a pidfile is
// refused; -V prints SHOW VERSION's text first. On both targets.
func TestDaemonAndVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, PgBouncer and the proxy")
	}
	f := newINIFixture(t, 2)
	if err := os.Chmod(f.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, tg := range cliTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			port := freePort(t)
			ini := opsINI(t, f.dir, "d-"+tg.name, f.pg.Port(), port)
			out, err := tg.cmd(ctx, "-d", ini).CombinedOutput()
			if err != nil {
				t.Fatalf("-d: %v\n%s", err, out)
			}
			pidFile := filepath.Join(f.dir, "d-"+tg.name+".pid")
			pid := pidOf(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			waitFile(t, filepath.Join(f.dir, "d-"+tg.name+".log"), "listening", func(s string) bool {
				return strings.Contains(s, fmt.Sprintf("LOG listening on 127.0.0.1:%d", port))
			})
			conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/pgbouncer?sslmode=disable", port))
			if err != nil {
				t.Fatalf("console of the daemon: %v", err)
			}
			var version string
			err = conn.QueryRow(ctx, "SHOW VERSION", pgx.QueryExecModeSimpleProtocol).Scan(&version)
			conn.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out, err = tg.cmd(ctx, "-V").Output()
			if first, _, _ := strings.Cut(string(out), "\n"); err != nil || first != version {
				t.Errorf("-V: %q (%v), want first line %q (SHOW VERSION)", out, err, version)
			}
			if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			waitFile(t, pidFile, "removed", func(s string) bool { return s == "" })

			// No pidfile: refused, as PgBouncer's "daemon needs pidfile configured".
			b, _ := os.ReadFile(ini)
			nopid := filepath.Join(f.dir, "nopid-"+tg.name+".ini")
			if err := os.WriteFile(nopid, []byte(strings.Replace(string(b), "pidfile = ", "; pidfile = ", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err = tg.cmd(ctx, "-d", nopid).CombinedOutput()
			log, _ := os.ReadFile(filepath.Join(f.dir, "d-"+tg.name+".log"))
			if err == nil || !strings.Contains(string(out)+string(log), "daemon needs pidfile configured") {
				t.Errorf("-d without pidfile: %v\n%s", err, out)
			}
		})
	}
}

// procUID is a process's real uid (/proc/PID/status).
func procUID(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}

// TestSwitchUser: started as root with -u postgres, the pooler runs as
// postgres and its Unix socket file is postgres's; on both targets.
func TestSwitchUser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, PgBouncer and the proxy")
	}
	if os.Getuid() != 0 {
		t.Skip("-u needs root")
	}
	pg, err := osuser.Lookup("postgres")
	if err != nil {
		t.Skip(err)
	}
	f := newINIFixture(t, 2)
	if err := os.Chmod(f.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin, berr := pgbouncer.Find()
	targets := map[string][]string{"proxy": {os.Args[0], "proxy"}}
	if berr == nil {
		targets["pgbouncer"] = []string{bin}
	}
	for name, argv := range targets {
		t.Run(name, func(t *testing.T) {
			port := freePort(t)
			ini := opsINI(t, f.dir, "u-"+name, f.pg.Port(), port)
			cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-q", "-u", "postgres", ini)...)
			cmd.Env = append(os.Environ(), "POOLSIM_TEST_MAIN=1")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-done
				}
			})
			pid := pidOf(t, filepath.Join(f.dir, "u-"+name+".pid"))
			if got := procUID(t, pid); got != pg.Uid {
				t.Errorf("uid of the pooler: %s, want postgres's %s", got, pg.Uid)
			}
			st, err := os.Stat(filepath.Join(f.dir, fmt.Sprintf(".s.PGSQL.%d", port)))
			if err != nil {
				t.Fatal(err)
			}
			if uid := st.Sys().(*syscall.Stat_t).Uid; strconv.Itoa(int(uid)) != pg.Uid {
				t.Errorf("socket owner %d, want postgres's %s", uid, pg.Uid)
			}
		})
	}
}

// TestPgBouncerCommandLine: the positional pgbouncer.ini is --config (not
// both), -R reads its file like any start (a missing one is an error
// naming it), -V needs no file.
func TestPgBouncerCommandLine(t *testing.T) {
	ctx := context.Background()
	var out, errOut strings.Builder
	if err := runProxy(ctx, []string{"-R", "-q", "x.ini"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "x.ini") {
		t.Errorf("-R: %v", err)
	}
	if err := runProxy(ctx, []string{"--config", "a.ini", "b.ini"}, &out, &errOut); err == nil || exitCode(err) != exitUsage {
		t.Errorf("--config and a file: %v", err)
	}
	if err := runProxy(ctx, []string{"a.ini", "b.ini"}, &out, &errOut); err == nil || exitCode(err) != exitUsage {
		t.Errorf("two files: %v", err)
	}
	out.Reset()
	if err := runProxy(ctx, []string{"-V"}, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "PgBouncer ") {
		t.Errorf("-V: %v %q", err, out.String())
	}
	err := runProxy(ctx, []string{"-q", filepath.Join(t.TempDir(), "missing.ini")}, &out, &errOut)
	if err == nil || errOut.Len() != 0 {
		t.Errorf("-q with a missing file: %v, stderr %q (want an error and nothing on stderr)", err, errOut.String())
	}
}
