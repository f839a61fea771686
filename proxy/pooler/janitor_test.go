package pooler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// logLines collects a proxy's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
	t     testing.TB
}

func (l *logLines) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	l.t.Log(line)
}

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// guardTarget is a pooler under test with a way to read its log.
type guardTarget struct {
	target
	log func() string
}

// guardTargets starts a PgBouncer 1.18 and a proxy with the same settings
// (mode pooling, pool size 2, databases as extra [databases] lines for
// PgBouncer and entries for the proxy), each with its log readable.
func guardTargets(ctx context.Context, t *testing.T, mode poolmode.Mode, dbLines []string, users []string, edit func(*Config)) []guardTarget {
	t.Helper()
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(mode, 2),
		Databases: dbLines, UserLines: users})
	lg := &logLines{t: t}
	tp := startProxy(t, func(c *Config) {
		c.DefaultPoolSize, c.PoolMode, c.Logf = 2, mode, lg.logf
		if edit != nil {
			edit(c)
		}
	})
	bouncerLog := func() string {
		data, _ := os.ReadFile(b.LogPath())
		return string(data)
	}
	return []guardTarget{
		{target{name: "pgbouncer", dsn: b.DSN("poolsim", "poolsim"), admin: b.AdminDSN()}, bouncerLog},
		{target{name: "proxy", dsn: tp.dsn, admin: tp.adminDSN(), proxy: tp}, lg.text},
	}
}

// waitLog waits until the target's log holds want.
func waitLog(ctx context.Context, t *testing.T, tg guardTarget, want string) {
	t.Helper()
	for !strings.Contains(tg.log(), want) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: the log never said %q; it says:\n%s", tg.name, want, tg.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// consoleSet runs SET commands on the target's console.
func consoleSet(ctx context.Context, t *testing.T, tg guardTarget, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		if err := runConsole(ctx, tg.admin, cmd); err != nil {
			t.Fatalf("%s: %s: %v", tg.name, cmd, err)
		}
	}
}

// wantFatal checks that err is the pooler's FATAL with text msg.
func wantFatal(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != poolmode.SQLStatePooler || pe.Message != msg {
		t.Errorf("%s: %v, want FATAL %s %q", what, err, poolmode.SQLStatePooler, msg)
	}
}

func pgConnect(ctx context.Context, t *testing.T, dsn string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func run1(ctx context.Context, c *pgconn.PgConn, sql string) error {
	_, err := c.Exec(ctx, sql).ReadAll()
	return err
}

// TestQueryTimeout, on PgBouncer 1.18 and the proxy: SET query_timeout=1
// closes a client whose query runs longer, with FATAL "query timeout" and
// the log line "closing because: query timeout"; a query under the limit
// is untouched.
func TestQueryTimeout(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range guardTargets(ctx, t, poolmode.Transaction, nil, nil, nil) {
		t.Run(tg.name, func(t *testing.T) {
			consoleSet(ctx, t, tg, "set query_timeout=1")
			quick := pgConnect(ctx, t, tg.dsn)
			if err := run1(ctx, quick, "select pg_sleep(0.2)"); err != nil {
				t.Fatalf("a query under query_timeout: %v", err)
			}
			slow := pgConnect(ctx, t, tg.dsn)
			start := time.Now()
			err := run1(ctx, slow, "select pg_sleep(10)")
			wantFatal(t, "a query past query_timeout", err, "query timeout")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("closed after %v, want about 1 s", d)
			}
			waitLog(ctx, t, tg, "closing because: query timeout (age=")
			if err := run1(ctx, quick, "select 1"); err != nil {
				t.Errorf("the other client after the close: %v", err)
			}
		})
	}
}

// TestIdleTransactionTimeout, on PgBouncer 1.18 and the proxy: a client
// that leaves a transaction open longer than idle_transaction_timeout is
// closed with FATAL "idle transaction timeout" and the log line; a
// transaction whose query runs longer than the limit is not idle (GH #125
// of PgBouncer).
func TestIdleTransactionTimeout(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range guardTargets(ctx, t, poolmode.Transaction, nil, nil, nil) {
		t.Run(tg.name, func(t *testing.T) {
			consoleSet(ctx, t, tg, "set idle_transaction_timeout=1")
			busy := pgConnect(ctx, t, tg.dsn)
			if err := run1(ctx, busy, "begin; select pg_sleep(1.5)"); err != nil {
				t.Fatalf("a query in a transaction, longer than the limit: %v", err)
			}
			if err := run1(ctx, busy, "select 1; commit"); err != nil {
				t.Fatalf("the transaction after its long query: %v", err)
			}
			leaked := pgConnect(ctx, t, tg.dsn)
			if err := run1(ctx, leaked, "begin; select 1"); err != nil {
				t.Fatal(err)
			}
			waitLog(ctx, t, tg, "closing because: idle transaction timeout (age=")
			wantFatal(t, "the leaked transaction's next query", run1(ctx, leaked, "select 1"), "idle transaction timeout")
		})
	}
}

// TestIdleTransactionTimeoutEveryLeak: the proxy's guard closes every
// transaction left open - in session mode, and an aborted one (E) - and a
// client between transactions is left alone.
func TestIdleTransactionTimeoutEveryLeak(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	lg := &logLines{t: t}
	tp := startProxy(t, func(c *Config) {
		c.PoolMode, c.Logf = poolmode.Session, lg.logf
		c.IdleTransactionTimeout = 500 * time.Millisecond
	})
	idle := pgConnect(ctx, t, tp.dsn)
	if err := run1(ctx, idle, "select 1"); err != nil {
		t.Fatal(err)
	}
	open := pgConnect(ctx, t, tp.dsn)
	if err := run1(ctx, open, "begin"); err != nil {
		t.Fatal(err)
	}
	aborted := pgConnect(ctx, t, tp.dsn)
	if err := run1(ctx, aborted, "begin; select 1/0"); err == nil {
		t.Fatal("1/0: no error")
	}
	for _, c := range []*pgconn.PgConn{open, aborted} {
		wantFatal(t, "a leaked transaction", run1(ctx, waitClosed(ctx, t, tp, c), "select 1"), "idle transaction timeout")
	}
	if err := run1(ctx, idle, "select 1"); err != nil {
		t.Errorf("a session-mode client between transactions: %v", err)
	}
}

// waitClosed waits until the proxy no longer lists c's connection among its
// clients (SHOW CLIENTS), and returns c.
func waitClosed(ctx context.Context, t *testing.T, tp *testProxy, c *pgconn.PgConn) *pgconn.PgConn {
	t.Helper()
	port := c.Conn().LocalAddr().(*net.TCPAddr).Port
	for {
		found := false
		for _, cl := range tp.clientList() {
			if cl.remote.Port() == uint16(port) {
				found = true
			}
		}
		if !found {
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("client on port %d never closed", port)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestClientIdleTimeout, on PgBouncer 1.18 and the proxy: a client with no
// server that sends nothing for longer than client_idle_timeout is closed
// with FATAL "client_idle_timeout" and the log line; a client that keeps
// sending is not.
func TestClientIdleTimeout(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range guardTargets(ctx, t, poolmode.Transaction, nil, nil, nil) {
		t.Run(tg.name, func(t *testing.T) {
			consoleSet(ctx, t, tg, "set client_idle_timeout=1")
			idle := pgConnect(ctx, t, tg.dsn)
			if err := run1(ctx, idle, "select 1"); err != nil {
				t.Fatal(err)
			}
			active := pgConnect(ctx, t, tg.dsn)
			for !strings.Contains(tg.log(), "closing because: client_idle_timeout (age=") {
				if err := run1(ctx, active, "select 1"); err != nil {
					t.Fatalf("a client sending every 200 ms: %v", err)
				}
				select {
				case <-ctx.Done():
					t.Fatal("the idle client was never closed")
				case <-time.After(200 * time.Millisecond):
				}
			}
			wantFatal(t, "the idle client's next query", run1(ctx, idle, "select 1"), "client_idle_timeout")
			if err := run1(ctx, active, "select 1"); err != nil {
				t.Errorf("the active client: %v", err)
			}
		})
	}
}

// TestQueryTimeoutAtLogin, on PgBouncer 1.18 and the proxy: a client
// logging in to a database whose server accepts connections but never
// answers waits at most query_timeout, then gets FATAL "query_timeout";
// the proxy logs the server login "closing because: connect timeout" once
// server_connect_timeout fires; a refused one is logged "closing because:
// connect failed" by both, PgBouncer's words.
func TestQueryTimeoutAtLogin(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	logCtx := testCtx(t, 15*time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	held.Add(1)
	go func() { // accepts and says nothing, as a server in pre_auth_delay
		defer held.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		held.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	_ = closed.Close() // nothing listens there now: connections are refused
	port := ln.Addr().(*net.TCPAddr).Port
	t.Logf("silent server on port %d, nothing on port %d", port, closedPort)
	lines := []string{fmt.Sprintf("mute = host=127.0.0.1 port=%d dbname=poolsim", port),
		fmt.Sprintf("refused = host=127.0.0.1 port=%d dbname=poolsim", closedPort)}
	for _, tg := range guardTargets(ctx, t, poolmode.Transaction, lines, nil, func(c *Config) {
		c.Databases = append(c.Databases, muteEntry("mute", port), muteEntry("refused", closedPort))
	}) {
		t.Run(tg.name, func(t *testing.T) {
			consoleSet(ctx, t, tg, "set query_timeout=1", "set server_connect_timeout='0.5'")
			start := time.Now()
			_, err := pgconn.Connect(ctx, strings.Replace(tg.dsn, "/poolsim?", "/mute?", 1))
			wantFatal(t, "login to a database whose server does not answer", err, "query_timeout")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v, want about 1 s", d)
			}
			if tg.proxy != nil {
				// PgBouncer 1.18 logs this test's silent server "connect
				// failed" at once (a server in PostgreSQL's pre_auth_delay
				// gets "connect timeout", as in its own test suite).
				waitLog(logCtx, t, tg, "closing because: connect timeout (age=")
			}
			_, err = pgconn.Connect(ctx, strings.Replace(tg.dsn, "/poolsim?", "/refused?", 1))
			if err == nil {
				t.Error("login to a database whose server refuses connections: no error")
			}
			waitLog(ctx, t, tg, "closing because: connect failed (age=")
		})
	}
}

// TestForcedUserPoolMode: a database with a forced user takes its pool
// mode from that user's [users] entry, not from the user who logs in - as
// PgBouncer does from 1.23 (its user management refactor, #1052). PgBouncer
// 1.18, run beside, applies neither user's entry (its forced user is an
// entry of its own, with no pool_mode): its pool takes the global mode; the
// logging-in user's entry does not apply there either.
func TestForcedUserPoolMode(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	line := fmt.Sprintf("forced = host=127.0.0.1 port=%d dbname=poolsim user=poolsim password=poolsim", cluster.Port())
	users := []string{"poolsim = pool_mode=session", "postgres = pool_mode=statement"}
	for _, tg := range guardTargets(ctx, t, poolmode.Transaction, []string{line}, users, func(c *Config) {
		c.Databases = append(c.Databases, forcedEntry())
		c.Users = append(c.Users, poolconfUser("poolsim", poolmode.Session), poolconfUser("postgres", poolmode.Statement))
	}) {
		t.Run(tg.name, func(t *testing.T) {
			want := "session"
			if tg.proxy == nil {
				want = "transaction" // 1.18: the global pool_mode
			}
			dsn := strings.Replace(strings.Replace(tg.dsn, "/poolsim?", "/forced?", 1), "poolsim:poolsim@", "postgres@", 1)
			c := pgConnect(ctx, t, dsn)
			if err := run1(ctx, c, "select 1"); err != nil {
				t.Fatal(err)
			}
			admin := connect(ctx, t, tg.admin)
			_, rows := show(ctx, t, admin, "SHOW POOLS")
			found := false
			for _, r := range rows {
				if r["database"] == "forced" {
					found = true
					if r["user"] != "poolsim" || r["pool_mode"] != want {
						t.Errorf("pool of the forced user: %v, want user poolsim, pool_mode %s", r, want)
					}
				}
			}
			if !found {
				t.Errorf("SHOW POOLS has no pool of database forced: %v", rows)
			}
		})
	}
}

// muteEntry is a [databases] entry name whose server is at port.
func muteEntry(name string, port int) poolconf.Database {
	e := poolconf.NewDatabase(name)
	e.Host, e.Port, e.DBName = "127.0.0.1", port, "poolsim"
	return e
}

// forcedEntry is the [databases] entry "forced": the shared cluster's
// poolsim database with the forced user poolsim.
func forcedEntry() poolconf.Database {
	e := poolconf.NewDatabase("forced")
	e.Host, e.Port, e.DBName = "127.0.0.1", cluster.Port(), "poolsim"
	e.User, e.Password = "poolsim", "poolsim"
	return e
}

func poolconfUser(name string, mode poolmode.Mode) poolconf.User {
	u := poolconf.NewUser(name)
	u.PoolMode = mode
	return u
}
