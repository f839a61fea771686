//go:build unix

package pgcluster_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// ctxT bounds a test's work once its cluster is up (a cluster's start has
// its own bound, and on a busy machine initdb alone can take half a minute).
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// scalar runs sql on a new connection and returns its one value; the
// connection's slot is free again when it returns.
func scalar(t *testing.T, ctx context.Context, c *pgcluster.Cluster, dsn, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	var s string
	err = conn.QueryRow(ctx, sql).Scan(&s)
	pid := conn.PgConn().PID()
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := c.WaitBackendsExit(ctx, pid); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStartConnectStop(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 17})
	ctx := ctxT(t)

	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SHOW max_connections"); got != "17" {
		t.Errorf("max_connections = %s, want 17", got)
	}
	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SHOW superuser_reserved_connections"); got != "3" {
		t.Errorf("superuser_reserved_connections = %s, want the default 3", got)
	}
	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SHOW fsync"); got != "off" {
		t.Errorf("fsync = %s, want off", got)
	}
	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SELECT current_setting('is_superuser')"); got != "on" {
		t.Errorf("postgres is_superuser = %s, want on", got)
	}
	if got := scalar(t, ctx, c, c.UserDSN(), "SELECT current_user || '@' || current_database() || ' ' || current_setting('is_superuser')"); got != "poolsim@poolsim off" {
		t.Errorf("poolsim session = %q, want poolsim@poolsim off", got)
	}
	if c.Version() == "" || c.VersionNum() < 90000 {
		t.Errorf("Version() = %q, VersionNum() = %d", c.Version(), c.VersionNum())
	}
	if c.Host() != "127.0.0.1" || c.Port() <= 0 {
		t.Errorf("Host/Port = %s/%d", c.Host(), c.Port())
	}
	if _, err := os.Stat(filepath.Join(c.SocketDir(), ".s.PGSQL."+strconv.Itoa(c.Port()))); err != nil {
		t.Errorf("unix socket: %v", err)
	}
	t.Logf("PostgreSQL %s (%d) at %s", c.Version(), c.VersionNum(), c.Dir())

	dir, pid, addr := c.Dir(), c.Pid(), net.JoinHostPort(c.Host(), strconv.Itoa(c.Port()))
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("folder %s still there after Stop: %v", dir, err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster %d still exists after Stop: kill 0 = %v", pid, err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
}

func TestTooManyClients(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 5, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx := ctxT(t)
	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SHOW superuser_reserved_connections"); got != "0" {
		t.Fatalf("superuser_reserved_connections = %s, want 0", got)
	}
	var conns []*pgconn.PgConn
	defer func() {
		for _, cn := range conns {
			cn.Close(context.Background())
		}
	}()
	for i := 1; i <= 5; i++ {
		cn, err := pgconn.Connect(ctx, c.UserDSN())
		if err != nil {
			t.Fatalf("connection %d of 5: %v", i, err)
		}
		conns = append(conns, cn)
	}
	cn, err := pgconn.Connect(ctx, c.UserDSN())
	if err == nil {
		cn.Close(ctx)
		t.Fatal("6th connection accepted with max_connections 5")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53300" || pgErr.Message != "sorry, too many clients already" {
		t.Fatalf("6th connection: %v; want SQLSTATE 53300 \"sorry, too many clients already\"", err)
	}
	// A slot freed is a slot available again, once its backend has exited.
	pid := conns[0].PID()
	conns[0].Close(ctx)
	conns = conns[1:]
	if err := c.WaitBackendsExit(ctx, pid); err != nil {
		t.Fatal(err)
	}
	cn, err = pgconn.Connect(ctx, c.UserDSN())
	if err != nil {
		t.Fatalf("connection after one closed: %v", err)
	}
	conns = append(conns, cn)
}

// TestClientBackendsExit: with every slot taken, WaitClientBackendsExit
// waits while a connection is open (its ctx ends it), not for the
// auxiliary processes, and returns once every closed connection's backend
// is gone: all the slots take connections again at once.
func TestClientBackendsExit(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 4, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx := ctxT(t)
	if err := c.WaitClientBackendsExit(ctx); err != nil {
		t.Fatalf("an idle cluster: %v", err)
	}
	fill := func() []*pgconn.PgConn {
		var conns []*pgconn.PgConn
		for i := 1; i <= 4; i++ {
			cn, err := pgconn.Connect(ctx, c.UserDSN())
			if err != nil {
				t.Fatalf("connection %d of 4: %v", i, err)
			}
			conns = append(conns, cn)
		}
		return conns
	}
	conns := fill()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := c.WaitClientBackendsExit(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("4 connections open: %v, want the wait to run out", err)
	}
	if err := c.WaitClientBackendsExit(ctx, conns[0].PID(), conns[1].PID(), conns[2].PID(), conns[3].PID()); err != nil {
		t.Fatalf("every open one excepted: %v", err)
	}
	for _, cn := range conns {
		cn.Close(ctx)
	}
	if err := c.WaitClientBackendsExit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cn := range fill() {
		cn.Close(ctx)
	}
}

func TestReservedSlotsDoNotHelpPoolsim(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 4, SuperuserReservedConnections: 2})
	ctx := ctxT(t)
	var conns []*pgconn.PgConn
	defer func() {
		for _, cn := range conns {
			cn.Close(context.Background())
		}
	}()
	for i := 1; i <= 2; i++ {
		cn, err := pgconn.Connect(ctx, c.UserDSN())
		if err != nil {
			t.Fatalf("poolsim connection %d of 2: %v", i, err)
		}
		conns = append(conns, cn)
	}
	_, err := pgconn.Connect(ctx, c.UserDSN())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53300" {
		t.Fatalf("3rd poolsim connection: %v; want SQLSTATE 53300", err)
	}
	cn, err := pgconn.Connect(ctx, c.SuperuserDSN("postgres"))
	if err != nil {
		t.Fatalf("superuser in a reserved slot: %v", err)
	}
	conns = append(conns, cn)
}

func TestAuthMethods(t *testing.T) {
	for _, auth := range []string{pgcluster.AuthSCRAM, pgcluster.AuthMD5, pgcluster.AuthPassword} {
		t.Run(auth, func(t *testing.T) {
			t.Parallel()
			c := pgclustertest.Start(t, pgcluster.Options{Auth: auth, MaxConnections: 10})
			ctx := ctxT(t)
			if got := scalar(t, ctx, c, c.UserDSN(), "SELECT current_user"); got != "poolsim" {
				t.Errorf("current_user = %q", got)
			}
			method := scalar(t, ctx, c, c.SuperuserDSN("postgres"),
				"SELECT auth_method FROM pg_hba_file_rules WHERE 'poolsim' = ANY(user_name) OR user_name = '{all}' AND type = 'host'")
			if method != auth {
				t.Errorf("pg_hba method = %q, want %q", method, auth)
			}
			stored := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SELECT left(rolpassword, 3) FROM pg_authid WHERE rolname = 'poolsim'")
			wantPrefix := map[string]string{pgcluster.AuthSCRAM: "SCR", pgcluster.AuthMD5: "md5", pgcluster.AuthPassword: "SCR"}[auth]
			if stored != wantPrefix {
				t.Errorf("stored password starts %q, want %q", stored, wantPrefix)
			}
			bad := "postgres://poolsim:wrong@127.0.0.1:" + strconv.Itoa(c.Port()) + "/poolsim?sslmode=disable"
			_, err := pgconn.Connect(ctx, bad)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				t.Errorf("wrong password: %v; want SQLSTATE 28P01", err)
			}
			// The superuser stays trust.
			if got := scalar(t, ctx, c, c.SuperuserDSN("poolsim"), "SELECT current_database()"); got != "poolsim" {
				t.Errorf("superuser current_database = %q", got)
			}
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	ctx := context.Background()
	for _, o := range []pgcluster.Options{
		{MaxConnections: -1},
		{MaxConnections: 3, SuperuserReservedConnections: 3},
		{MaxConnections: 2}, // default reserve 3 >= 2
		{SuperuserReservedConnections: -2},
		{Auth: "ident"},
		{ExtraConf: map[string]string{"bad key": "1"}},
	} {
		if c, err := pgcluster.Start(ctx, o); err == nil {
			c.Stop()
			t.Errorf("Start(%+v) accepted", o)
		}
	}
}

func TestExtraConf(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{ExtraConf: map[string]string{
		"work_mem":         "7MB",
		"application_name": "it's quoted",
	}})
	ctx := ctxT(t)
	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SHOW work_mem"); got != "7MB" {
		t.Errorf("work_mem = %s", got)
	}
	if got := scalar(t, ctx, c, c.SuperuserDSN("postgres"), "SELECT setting FROM pg_settings WHERE name = 'application_name'"); got == "" {
		t.Errorf("application_name empty")
	}
}

func TestFindBinDir(t *testing.T) {
	dir, err := pgcluster.FindBinDir()
	if errors.Is(err, pgcluster.ErrNoPostgres) {
		if pgclustertest.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"postgres", "initdb"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := pgcluster.FindBinDir(); err != nil && !errors.Is(err, pgcluster.ErrNoPostgres) {
		t.Errorf("without PATH: %v", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartRemovesAbandonedFolders(t *testing.T) {
	parent := t.TempDir()
	// t.TempDir folders are private; the postgres account must reach ours.
	for d := parent; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	mk := func(name, pidFile string) string {
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if pidFile != "" {
			if err := os.WriteFile(filepath.Join(d, "data", "postmaster.pid"), []byte(pidFile), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	abandoned := mk("poolsim-pg-abandoned", "")
	deadPid := mk("poolsim-pg-deadpid", "999999999\n/x\n")
	live := mk("poolsim-pg-live", strconv.Itoa(os.Getpid())+"\n/x\n")
	fresh := mk("poolsim-pg-fresh", "")
	if err := os.Chtimes(fresh, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	other := mk("not-ours", "")
	c := pgclustertest.Start(t, pgcluster.Options{TempDir: parent, MaxConnections: 5})
	for d, want := range map[string]bool{abandoned: false, deadPid: false, live: true, fresh: true, other: true, c.Dir(): true} {
		_, err := os.Stat(d)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(d), got, want)
		}
	}
}

// TestRestart: a fast restart ends the open sessions with PostgreSQL's
// "terminating connection due to administrator command", keeps the port
// and the data (the poolsim role and database), and leaves the cluster
// accepting connections and stoppable.
func TestRestart(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{})
	ctx := ctxT(t)
	port := c.Port()
	conn, err := pgconn.Connect(ctx, c.UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	_, err = conn.Exec(ctx, "select 1").ReadAll()
	var pe *pgconn.PgError
	if err == nil || (errors.As(err, &pe) && pe.Code != "57P01") {
		t.Errorf("a session open across the restart: %v, want it ended (57P01 admin_shutdown)", err)
	}
	if c.Port() != port {
		t.Errorf("port %d after the restart, want %d", c.Port(), port)
	}
	if got := scalar(t, ctx, c, c.UserDSN(), "select current_user"); got != pgcluster.UserName {
		t.Errorf("after the restart current_user = %q, want %q", got, pgcluster.UserName)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop after Restart: %v", err)
	}
}

// TestDownUp: Down shuts PostgreSQL down and keeps its port and data: a
// connection meanwhile is refused; Up starts it again on the same port
// with the data kept; a second Up does nothing; the cluster still stops.
func TestDownUp(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{})
	ctx := ctxT(t)
	port := c.Port()
	if err := c.Down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	if conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(c.Host(), strconv.Itoa(port))); err == nil {
		conn.Close()
		t.Error("a connection to a cluster that is down was accepted, want it refused")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a connection to a cluster that is down: %v, want connection refused", err)
	}
	if err := c.Up(ctx); err != nil {
		t.Fatalf("Up: %v", err)
	}
	if err := c.Up(ctx); err != nil {
		t.Fatalf("Up while up: %v", err)
	}
	if c.Port() != port {
		t.Errorf("port %d after Up, want %d", c.Port(), port)
	}
	if got := scalar(t, ctx, c, c.UserDSN(), "select current_user"); got != pgcluster.UserName {
		t.Errorf("after Up current_user = %q, want %q", got, pgcluster.UserName)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop after Up: %v", err)
	}
}
