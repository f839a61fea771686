//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// opsTarget is a pooler started from an ini with logfile and pidfile.
type opsTarget struct {
	name    string
	log     string // logfile
	pidFile string
	pid     int
	port    int
	signal  func(syscall.Signal) error
}

// opsINI writes a pgbouncer.ini for one target in dir (readable and
// writable by every account: PgBouncer runs as postgres).
func opsINI(t *testing.T, dir, name string, pgPort, port int) string {
	t.Helper()
	text := fmt.Sprintf(`[databases]
poolsim = host=127.0.0.1 port=%d dbname=poolsim
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir = %s
logfile = %s
pidfile = %s
auth_type = trust
auth_file = %s
admin_users = poolsim
`, pgPort, port, dir, filepath.Join(dir, name+".log"), filepath.Join(dir, name+".pid"), filepath.Join(dir, "users.txt"))
	ini := filepath.Join(dir, name+".ini")
	if err := os.WriteFile(ini, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return ini
}

// waitFile waits until cond holds for the file's content ("" when it is
// missing).
func waitFile(t *testing.T, path string, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if cond(string(b)) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not %s after 15s:\n%s", path, what, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLogfileAndPidfile starts PgBouncer 1.18 and the proxy from the same
// kind of pgbouncer.ini, with logfile and pidfile: each writes its pid to
// the pidfile, its log in PgBouncer's line format ("... UTC [PID] LOG
// listening on ..."), opens a new log file on SIGHUP after logrotate moved
// the old one away and writes at the start of a truncated one
// (copytruncate), and removes the pidfile when SIGINT stops it. A second
// proxy on the same pidfile is refused while the first runs.
func TestLogfileAndPidfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, PgBouncer and a proxy process")
	}
	f := newINIFixture(t, 2)
	if err := os.Chmod(f.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var targets []*opsTarget
	bport := freePort(t)
	bini := opsINI(t, f.dir, "bouncer", f.pg.Port(), bport)
	b, err := pgbouncer.StartINI(ctx, bini, bport, "poolsim", map[string]string{"poolsim": "poolsim"})
	if err != nil {
		if pgclustertest.InCI() || !errors.Is(err, pgbouncer.ErrNoPgBouncer) {
			t.Fatalf("pgbouncer: %v", err)
		}
		t.Logf("pgbouncer: %v (the proxy alone)", err)
	} else {
		t.Cleanup(func() { _ = b.Stop() })
		targets = append(targets, &opsTarget{name: "pgbouncer", log: filepath.Join(f.dir, "bouncer.log"),
			pidFile: filepath.Join(f.dir, "bouncer.pid"), pid: b.Pid(), port: bport, signal: b.Signal})
	}
	pini := opsINI(t, f.dir, "proxy", f.pg.Port(), 0)
	pp := startProxyProcess(t, "--config", pini)
	targets = append(targets, &opsTarget{name: "proxy", log: filepath.Join(f.dir, "proxy.log"),
		pidFile: filepath.Join(f.dir, "proxy.pid"), pid: pp.cmd.Process.Pid, port: pp.port,
		signal: func(s syscall.Signal) error { return pp.cmd.Process.Signal(s) }})

	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			pid := strconv.Itoa(tg.pid)
			waitFile(t, tg.pidFile, "the pid "+pid, func(s string) bool { return s == pid+"\n" })
			line := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC \[` + pid + `\] LOG listening on 127\.0\.0\.1:` + strconv.Itoa(tg.port) + `$`)
			waitFile(t, tg.log, "a PgBouncer line 'listening on'", line.MatchString)
			sighup := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC \[` + pid + `\] LOG got SIGHUP, re-reading config$`)

			// logrotate's create: the file is moved away, SIGHUP; the
			// next lines go to a new file.
			if err := os.Rename(tg.log, tg.log+".1"); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the first SIGHUP reopens the file; the second's line lands in the new one
				if err := tg.signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				waitFile(t, tg.log+".1", "the SIGHUP line", sighup.MatchString)
			}
			waitFile(t, tg.log, "a new file with the SIGHUP line", sighup.MatchString)
			// copytruncate: cut to zero; the next line starts the file.
			if err := os.Truncate(tg.log, 0); err != nil {
				t.Fatal(err)
			}
			if err := tg.signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			got := waitFile(t, tg.log, "written after the truncation", func(s string) bool { return s != "" })
			if !strings.HasPrefix(got, "20") {
				t.Errorf("after copytruncate the log starts %q, want a line at offset 0", got[:min(len(got), 40)])
			}

			if tg.name == "proxy" {
				// A second proxy on the same pidfile: refused, the pidfile kept.
				second := exec.CommandContext(ctx, os.Args[0], "proxy", "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
					"--unix-socket-dir", "", "--config", pini)
				second.Env = append(os.Environ(), "POOLSIM_TEST_MAIN=1")
				out, err := second.CombinedOutput()
				if err == nil || !strings.Contains(string(out), "pidfile") || !strings.Contains(string(out), "another instance running?") {
					t.Errorf("second proxy on the pidfile: %v\n%s", err, out)
				}
				waitFile(t, tg.pidFile, "kept", func(s string) bool { return s == pid+"\n" })
			}

			if err := tg.signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			waitFile(t, tg.pidFile, "removed at exit", func(s string) bool { return s == "" })
		})
	}
	if code := pp.exit(t, 10*time.Second); code != 0 {
		t.Errorf("proxy exit code %d after SIGINT", code)
	}
}

// TestPidfileStale: a pidfile whose process is gone is removed ("stale
// pidfile, removing") and the proxy starts.
func TestPidfileStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.pid")
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(cmd.ProcessState.Pid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged []string
	if err := checkPidFile(path, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }); err != nil {
		t.Fatalf("stale pidfile: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) || len(logged) != 1 || logged[0] != "stale pidfile, removing" {
		t.Fatalf("stale pidfile: %v, logged %q", err, logged)
	}
	if err := os.WriteFile(path, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkPidFile(path, t.Logf); err == nil || !strings.Contains(err.Error(), "another instance running?") {
		t.Fatalf("pidfile with junk: %v", err)
	}
}
