//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// TestMain lets a test run this package's binary as the poolsim command
// (POOLSIM_TEST_MAIN=1), so signals can be sent to a real proxy process.
func TestMain(m *testing.M) {
	if os.Getenv("POOLSIM_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// proxyProcess is `poolsim proxy` running as a child process.
type proxyProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
	port int
}

func startProxyProcess(t *testing.T, args ...string) *proxyProcess {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(os.Args[0], append([]string{"proxy", "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, args...)...)
	cmd.Env = append(os.Environ(), "POOLSIM_TEST_MAIN=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pp := &proxyProcess{cmd: cmd, out: out, done: make(chan error, 1), port: port}
	go func() { pp.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-pp.done
		if t.Failed() {
			t.Logf("proxy output:\n%s", out.String())
		}
	})
	pp.waitOutput(t, "listening on", 20*time.Second)
	return pp
}

// waitOutput waits until the proxy's output contains s.
func (pp *proxyProcess) waitOutput(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(pp.out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("proxy output lacks %q after %v:\n%s", s, d, pp.out.String())
		}
		select {
		case err := <-pp.done:
			pp.done <- err
			t.Fatalf("proxy exited (%v) before printing %q:\n%s", err, s, pp.out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// exit waits for the proxy process to end and returns its exit code.
func (pp *proxyProcess) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-pp.done:
		pp.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("proxy still running %v later:\n%s", d, pp.out.String())
		return -1
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := childproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// iniFixture is one pgbouncer.ini serving two databases of a throwaway
// PostgreSQL, in a folder the pgbouncer account can read.
type iniFixture struct {
	dir, ini string
	pg       *pgcluster.Cluster
	bouncer  int // PgBouncer's listen_port in the file
}

func newINIFixture(t *testing.T, poolSize1 int) *iniFixture {
	t.Helper()
	pg := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 40})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	su, err := pgx.Connect(ctx, pg.SuperuserDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE second OWNER poolsim"); err != nil {
		t.Fatal(err)
	}
	su.Close(ctx)
	dir, err := os.MkdirTemp("", "poolsim-ini-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &iniFixture{dir: dir, ini: filepath.Join(dir, "pgbouncer.ini"), pg: pg, bouncer: freePort(t)}
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(`"poolsim" "poolsim"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.write(t, poolSize1)
	return f
}

// write writes the ini file with app1's pool_size.
func (f *iniFixture) write(t *testing.T, poolSize1 int) {
	t.Helper()
	text := fmt.Sprintf(`; one file for PgBouncer and poolsim proxy
[databases]
app1 = host=127.0.0.1 port=%[1]d dbname=poolsim pool_size=%[2]d
app2 = host=127.0.0.1 port=%[1]d dbname=second pool_mode=session pool_size=3

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[3]d
unix_socket_dir =
auth_type = md5
auth_file = %[4]s
admin_users = poolsim
pool_mode = transaction
default_pool_size = 5
ignore_startup_parameters = extra_float_digits
%%include %[5]s
`, f.pg.Port(), poolSize1, f.bouncer, filepath.Join(f.dir, "users.txt"), filepath.Join(f.dir, "extra.ini"))
	if err := os.WriteFile(f.ini+".tmp", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "extra.ini"), []byte("query_wait_timeout = 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.ini+".tmp", f.ini); err != nil {
		t.Fatal(err)
	}
}

func dsnAt(port int, db string) string {
	return fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/%s?sslmode=disable", port, db)
}

// consoleRows runs a console SHOW and returns its rows as column maps.
func consoleRows(ctx context.Context, t *testing.T, port int, cmd string) []map[string]string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsnAt(port, "pgbouncer"))
	if err != nil {
		t.Fatalf("console on %d: %v", port, err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, cmd, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s on %d: %v", cmd, port, err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		m := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			m[f.Name] = string(rows.RawValues()[i])
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s on %d: %v", cmd, port, err)
	}
	return out
}

// poolModes lists "database/user/pool_mode" of SHOW POOLS, the console's
// own pool left out.
func poolModes(ctx context.Context, t *testing.T, port int) map[string]bool {
	out := map[string]bool{}
	for _, r := range consoleRows(ctx, t, port, "SHOW POOLS") {
		if r["database"] != "pgbouncer" {
			out[r["database"]+"/"+r["user"]+"/"+r["pool_mode"]] = true
		}
	}
	return out
}

// consoleCell is column col of the row of a console SHOW whose column
// keyCol is key, or "".
func consoleCell(ctx context.Context, t *testing.T, port int, cmd, keyCol, key, col string) string {
	for _, r := range consoleRows(ctx, t, port, cmd) {
		if r[keyCol] == key {
			return r[col]
		}
	}
	return ""
}

// dbPoolSize is SHOW DATABASES' pool_size of db.
func dbPoolSize(ctx context.Context, t *testing.T, port int, db string) string {
	return consoleCell(ctx, t, port, "SHOW DATABASES", "name", db, "pool_size")
}

// waiting is SHOW POOLS' cl_waiting of db.
func waiting(ctx context.Context, t *testing.T, port int, db string) string {
	return consoleCell(ctx, t, port, "SHOW POOLS", "database", db, "cl_waiting")
}

// TestProxyINIBesidePgBouncer writes one pgbouncer.ini with two databases
// and starts a real PgBouncer and `poolsim proxy --config` from it (the
// proxy on another port, a flag overriding the file); then on both: each
// database is its own pool with its own mode, SIGHUP during an open
// transaction lets it commit and puts the new pool_size in force, and
// SIGUSR1 makes a new query wait until SIGUSR2.
func TestProxyINIBesidePgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, PgBouncer and a proxy process")
	}
	f := newINIFixture(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := pgbouncer.StartINI(ctx, f.ini, f.bouncer, "poolsim", map[string]string{"poolsim": "poolsim"})
	if err != nil {
		if pgclustertest.InCI() || !errors.Is(err, pgbouncer.ErrNoPgBouncer) {
			t.Fatalf("pgbouncer: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	pp := startProxyProcess(t, "--config", f.ini)
	// admin_users applies (the console below is used as poolsim, listed
	// there), and so does unix_socket_dir (empty: no Unix socket).
	for _, n := range []string{"not applied: unix_socket_dir", "not applied: admin_users"} {
		if strings.Contains(pp.out.String(), n) {
			t.Errorf("proxy start-up output has %q:\n%s", n, pp.out.String())
		}
	}
	bouncerLog := func() string {
		b, _ := os.ReadFile(b.LogPath())
		return string(b)
	}
	targets := []*iniTarget{
		{name: "pgbouncer", port: f.bouncer, signal: b.Signal, log: bouncerLog},
		{name: "proxy", port: pp.port, signal: func(s syscall.Signal) error { return pp.cmd.Process.Signal(s) }, log: pp.out.String},
	}
	for _, tg := range targets {
		openINITarget(ctx, t, tg)
	}
	// SIGHUP with a transaction open on each: the new pool_size applies
	// and the transaction commits.
	f.write(t, 4)
	for _, tg := range targets {
		if err := tg.signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, tg := range targets {
		deadline := time.Now().Add(10 * time.Second)
		for dbPoolSize(ctx, t, tg.port, "app1") != "4" {
			if time.Now().After(deadline) {
				t.Fatalf("%s: SHOW DATABASES app1 pool_size is not 4 10s after SIGHUP", tg.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := tg.tx.Commit(ctx); err != nil {
			t.Errorf("%s: commit after SIGHUP: %v", tg.name, err)
		}
		var n int
		if err := tg.app1.QueryRow(ctx, "select count(*) from hup_"+tg.name).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s: rows after the commit = %d, %v; want 1", tg.name, n, err)
		}
	}
	// SIGUSR1 pauses: a new query waits (cl_waiting 1) until SIGUSR2.
	for _, tg := range targets {
		pauseAndResume(ctx, t, tg)
	}
	safeShutdown(ctx, t, pp, targets[1])
}

// iniTarget is PgBouncer or the proxy process, run from the same
// pgbouncer.ini: how to signal it and read its log, and a connection to
// app1 with a transaction open on it.
type iniTarget struct {
	name   string
	port   int
	signal func(syscall.Signal) error
	log    func() string // the process's log so far
	app1   *pgx.Conn
	tx     pgx.Tx
}

// openINITarget checks that tg serves both databases of the config with
// their pool modes and app1's pool size, and leaves a transaction open on
// app1 that has written a row to a table of its own.
func openINITarget(ctx context.Context, t *testing.T, tg *iniTarget) {
	t.Helper()
	for db, want := range map[string]string{"app1": "poolsim", "app2": "second"} {
		conn, err := pgx.Connect(ctx, dsnAt(tg.port, db))
		if err != nil {
			t.Fatalf("%s: connect %s: %v", tg.name, db, err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		var got string
		if err := conn.QueryRow(ctx, "select current_database()").Scan(&got); err != nil || got != want {
			t.Errorf("%s: database %s leads to %q, %v; want %q", tg.name, db, got, err, want)
		}
		if db == "app1" {
			tg.app1 = conn
		}
	}
	modes := poolModes(ctx, t, tg.port)
	for _, want := range []string{"app1/poolsim/transaction", "app2/poolsim/session"} {
		if !modes[want] {
			t.Errorf("%s: SHOW POOLS = %v, want a pool %s", tg.name, modes, want)
		}
	}
	if got := dbPoolSize(ctx, t, tg.port, "app1"); got != "2" {
		t.Errorf("%s: SHOW DATABASES app1 pool_size = %q, want 2", tg.name, got)
	}
	table := "hup_" + tg.name
	if _, err := tg.app1.Exec(ctx, "CREATE TABLE "+table+" (v int)"); err != nil {
		t.Fatal(err)
	}
	var err error
	if tg.tx, err = tg.app1.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
}

// pauseAndResume checks SIGUSR1 and SIGUSR2 on tg: once the pause is in
// force (PgBouncer's log line) a new query waits until SIGUSR2.
func pauseAndResume(ctx context.Context, t *testing.T, tg *iniTarget) {
	t.Helper()
	if err := tg.signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// Both log PgBouncer's line once the pause is in force.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tg.log(), "got SIGUSR1, pausing all activity") {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no \"got SIGUSR1, pausing all activity\" in the log 10s after SIGUSR1:\n%s", tg.name, tg.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tg.app1.Exec(ctx, "select 1")
		done <- err
	}()
	deadline = time.Now().Add(10 * time.Second)
	for waiting(ctx, t, tg.port, "app1") != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no client waiting in app1 10s after SIGUSR1", tg.name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Errorf("%s: query finished while paused: %v", tg.name, err)
	default:
	}
	if err := tg.signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: query after SIGUSR2: %v", tg.name, err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s: query still waiting 10s after SIGUSR2", tg.name)
	}
}

// safeShutdown checks SIGINT on the proxy process: a safe shutdown lets
// the open transaction commit, refuses new clients, then the proxy exits 0.
func safeShutdown(ctx context.Context, t *testing.T, pp *proxyProcess, tg *iniTarget) {
	t.Helper()
	tx, err := tg.app1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO hup_proxy VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if err := pp.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	pp.waitOutput(t, "got SIGINT, shutting down", 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := pgx.Connect(ctx, dsnAt(pp.port, "app1"))
		if err != nil {
			break // refused: shutting down
		}
		c.Close(ctx)
		if time.Now().After(deadline) {
			t.Fatal("new clients still accepted 10s after SIGINT")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("commit during the safe shutdown: %v", err)
	}
	if code := pp.exit(t, 15*time.Second); code != 0 {
		t.Errorf("proxy exit status after SIGINT = %d, want 0", code)
	}
}

// TestProxySIGTERM: SIGTERM is PgBouncer 1.18's immediate shutdown - an
// open transaction is cut and the proxy exits 0 at once, well before the
// safe shutdown's 30s limit.
func TestProxySIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and a proxy process")
	}
	f := newINIFixture(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pp := startProxyProcess(t, "--config", f.ini, "--shutdown-timeout", "30s")
	conn, err := pgx.Connect(ctx, dsnAt(pp.port, "app1"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := pp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := pp.exit(t, 20*time.Second); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("SIGTERM took %v: an immediate shutdown must not wait for the 30s limit", d)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Errorf("commit after SIGTERM succeeded; the immediate shutdown should have cut the transaction")
	}
}
