package pooler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolmode"
)

func connect(ctx context.Context, t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Simple protocol: no prepared statements, which transaction pooling
	// does not keep (that is another test's subject).
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func showSetting(ctx context.Context, t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(ctx, "select coalesce(current_setting('poolsim.tag', true), '')").Scan(&v); err != nil {
		t.Fatalf("current_setting: %v", err)
	}
	return v
}

// TestSetAcrossTransactions: with pool size 1 and two clients, a SET made by
// one client survives across its transactions in session mode, and in
// transaction mode it stays on the shared server, where the other client
// sees it (the state leaks, as PgBouncer's feature table says "SET: Never").
// The setting is a custom one: the five PgBouncer tracks (application_name,
// TimeZone, ...) follow their client instead (TestStartupParameters).
func TestSetAcrossTransactions(t *testing.T) {
	t.Run("session", func(t *testing.T) {
		tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Session; c.DefaultPoolSize = 2 })
		ctx := testCtx(t, 20*time.Second)
		a := connect(ctx, t, tp.dsn)
		b := connect(ctx, t, tp.dsn)
		if _, err := a.Exec(ctx, "set poolsim.tag = 'client_a'"); err != nil {
			t.Fatal(err)
		}
		showSetting(ctx, t, b) // b links its own server
		for range 3 {
			if got := showSetting(ctx, t, a); got != "client_a" {
				t.Errorf("session mode: a sees poolsim.tag %q, want client_a", got)
			}
			if got := showSetting(ctx, t, b); got == "client_a" {
				t.Errorf("session mode: b sees a's SET")
			}
		}
		// When a leaves, DISCARD ALL resets its server before reuse.
		a.Close(ctx)
		c := connect(ctx, t, tp.dsn)
		b.Close(ctx)
		for range 2 {
			if got := showSetting(ctx, t, c); got == "client_a" {
				t.Errorf("session mode: a's SET survived DISCARD ALL")
			}
		}
	})
	t.Run("transaction", func(t *testing.T) {
		tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Transaction; c.DefaultPoolSize = 1 })
		ctx := testCtx(t, 20*time.Second)
		a := connect(ctx, t, tp.dsn)
		b := connect(ctx, t, tp.dsn)
		if _, err := a.Exec(ctx, "set poolsim.tag = 'client_a'"); err != nil {
			t.Fatal(err)
		}
		// One server: b runs on the server a changed and sees a's setting.
		if got := showSetting(ctx, t, b); got != "client_a" {
			t.Errorf("transaction mode, pool 1: b sees poolsim.tag %q, want a's leaked client_a", got)
		}
		if _, err := b.Exec(ctx, "reset poolsim.tag"); err != nil {
			t.Fatal(err)
		}
		if got := showSetting(ctx, t, a); got == "client_a" {
			t.Errorf("transaction mode: a's SET survived b's RESET; it should be lost")
		}
	})
}

// TestStatementModeRefusesBEGIN: BEGIN gets PgBouncer's FATAL and the
// server is closed.
func TestStatementModeRefusesBEGIN(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Statement; c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 20*time.Second)
	conn := connect(ctx, t, tp.dsn)
	if _, err := conn.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(ctx, "begin")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		// The FATAL may arrive with the next request when BEGIN's reply was read first.
		_, err = conn.Exec(ctx, "select 1")
	}
	if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "08P01" || pe.Message != poolmode.ErrTxBlockNotAllowed {
		t.Fatalf("begin in statement mode: err = %v, want FATAL 08P01 %q", err, poolmode.ErrTxBlockNotAllowed)
	}
	// The pool works for the next client: the refused server was closed, not reused.
	other := connect(ctx, t, tp.dsn)
	var inTx bool
	if err := other.QueryRow(ctx, "select now() <> statement_timestamp()").Scan(&inTx); err != nil {
		t.Fatalf("next client: %v", err)
	}
	if inTx {
		t.Errorf("next client runs inside the refused client's transaction block")
	}
}

// TestMaxClientConn: the client beyond max_client_conn gets PgBouncer's text.
func TestMaxClientConn(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.MaxClientConn = 2 })
	ctx := testCtx(t, 20*time.Second)
	connect(ctx, t, tp.dsn)
	connect(ctx, t, tp.dsn)
	_, err := pgx.Connect(ctx, tp.dsn)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "08P01" || pe.Message != poolmode.ErrMaxClientConn || pe.Severity != "FATAL" {
		t.Fatalf("third client: err = %v, want FATAL 08P01 %q", err, poolmode.ErrMaxClientConn)
	}
	// The console is exempt.
	admin, err := pgx.Connect(ctx, tp.adminDSN())
	if err != nil {
		t.Fatalf("console beyond max_client_conn: %v", err)
	}
	admin.Close(ctx)
}

// TestQueryWaitTimeout: a client that waits for a server longer than
// query_wait_timeout gets PgBouncer's FATAL, not before.
func TestQueryWaitTimeout(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.QueryWaitTimeout = 300 * time.Millisecond })
	ctx := testCtx(t, 20*time.Second)
	holder := connect(ctx, t, tp.dsn)
	tx, err := holder.Begin(ctx) // holds the only server
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	waiter := connect(ctx, t, tp.dsn)
	start := time.Now()
	_, err = waiter.Exec(ctx, "select 1")
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "08P01" || pe.Message != poolmode.ErrQueryWaitTimeout || pe.Severity != "FATAL" {
		t.Fatalf("waiting client: err = %v, want FATAL 08P01 %q", err, poolmode.ErrQueryWaitTimeout)
	}
	// Never early (the janitor may round down by a few milliseconds); the
	// upper bound only tells "fired" from "never fired" (the holder keeps
	// the server until the test ends), with room for a busy machine.
	if took < 250*time.Millisecond || took > 10*time.Second {
		t.Errorf("query_wait_timeout 300ms fired after %v", took)
	}
}

// TestCancel: a cancel through the proxy stops pg_sleep(10).
func TestCancel(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 20*time.Second)
	conn := connect(ctx, t, tp.dsn)
	// pgx sends a CancelRequest over a new connection with the key the
	// proxy gave it at login.
	timer := time.AfterFunc(300*time.Millisecond, func() { _ = conn.PgConn().CancelRequest(ctx) })
	defer timer.Stop()
	start := time.Now()
	_, err := conn.Exec(ctx, "select pg_sleep(10)")
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("cancelled pg_sleep: err = %v, want SQLSTATE 57014 (query_canceled)", err)
	}
	// The error code says the cancel ended it; half the sleep bounds how
	// long a cancel may take on a busy machine.
	if took > 5*time.Second {
		t.Errorf("cancel took %v, want well under the 10 s the statement sleeps", took)
	}
	// The server is reusable after the cancel settled.
	other := connect(ctx, t, tp.dsn)
	if _, err := other.Exec(ctx, "select 1"); err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

// TestClientKilledMidTransaction: a client whose connection drops after
// BEGIN and a lock leaves no open transaction or lock for the next client.
func TestClientKilledMidTransaction(t *testing.T) {
	for _, mode := range []poolmode.Mode{poolmode.Session, poolmode.Transaction} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := startProxy(t, func(c *Config) { c.PoolMode = mode; c.DefaultPoolSize = 1 })
			ctx := testCtx(t, 20*time.Second)
			cfg, err := pgconn.ParseConfig(tp.dsn)
			if err != nil {
				t.Fatal(err)
			}
			var raw net.Conn
			dial := cfg.DialFunc
			cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				raw = c
				return c, err
			}
			victim, err := pgconn.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := victim.Exec(ctx, "begin; select pg_advisory_xact_lock(42); create temp table killed_tx (a int);").ReadAll(); err != nil {
				t.Fatal(err)
			}
			raw.Close() // killed: no Terminate, inside a transaction

			next := connect(ctx, t, tp.dsn)
			var locks, inTx int
			q := "select (select count(*) from pg_locks where locktype = 'advisory'), " +
				"(select count(*) from pg_stat_activity where state like 'idle in transaction%')"
			waitFor(ctx, func() bool {
				if err := next.QueryRow(ctx, q).Scan(&locks, &inTx); err != nil {
					t.Fatal(err)
				}
				return locks == 0 && inTx == 0
			})
			if locks != 0 || inTx != 0 {
				t.Errorf("after a client died mid-transaction: %d advisory locks, %d idle-in-transaction backends; want 0, 0", locks, inTx)
			}
			var exists bool
			if err := next.QueryRow(ctx, "select to_regclass('pg_temp.killed_tx') is not null").Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if exists {
				t.Errorf("the dead client's temp table is visible to the next client: its server was reused")
			}
		})
	}
}

// TestStatementModeFatalOnly, on PgBouncer 1.18 and the proxy in statement
// mode: after BEGIN the client reads exactly what PgBouncer sends - the
// FATAL "transaction blocks not allowed in statement pooling mode" and
// nothing of the server's reply to BEGIN (no CommandComplete, no
// ReadyForQuery) - and then the connection closes.
func TestStatementModeFatalOnly(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Statement, 1)})
	tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Statement; c.DefaultPoolSize = 1 })
	var seqs []string
	for _, dsn := range []string{b.DSN("poolsim", "poolsim"), tp.dsn} {
		conn, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
		hj, err := conn.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		raw := hj.Conn
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		fe := pgproto3.NewFrontend(raw, raw)
		fe.Send(&pgproto3.Query{String: "begin"})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var seq []string
		for {
			msg, err := fe.Receive()
			if err != nil {
				seq = append(seq, "EOF")
				break
			}
			switch m := msg.(type) {
			case *pgproto3.ErrorResponse:
				seq = append(seq, fmt.Sprintf("E %s %s %s", m.Severity, m.Code, m.Message))
			default:
				seq = append(seq, fmt.Sprintf("%T", msg))
			}
		}
		_ = raw.Close()
		seqs = append(seqs, strings.Join(seq, ", "))
	}
	want := "E FATAL 08P01 " + poolmode.ErrTxBlockNotAllowed + ", EOF"
	if seqs[0] != want {
		t.Errorf("PgBouncer after BEGIN: %s; this test expects %s", seqs[0], want)
	}
	if seqs[1] != seqs[0] {
		t.Errorf("proxy after BEGIN: %s; PgBouncer: %s", seqs[1], seqs[0])
	}
}
