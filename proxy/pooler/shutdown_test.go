//go:build linux

package pooler

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolmode"
)

// TestSafeShutdownLetsTransactionCommit: SIGINT (SafeShutdown) with a
// transaction open; once the pooler is shutting down the transaction
// still commits, its row is in the database, and then the pooler stops -
// on both targets. The proxy's default is to wait (ShutdownTimeout 0), as
// PgBouncer does.
func TestSafeShutdownLetsTransactionCommit(t *testing.T) {
	if DefaultConfig().ShutdownTimeout != 0 {
		t.Fatalf("DefaultConfig().ShutdownTimeout = %v, want 0 (wait, as PgBouncer)", DefaultConfig().ShutdownTimeout)
	}
	ctx := testCtx(t, 60*time.Second)
	direct := connect(ctx, t, cluster.UserDSN())
	if _, err := direct.Exec(ctx, "create table if not exists shutdown_commits (who text)"); err != nil {
		t.Fatal(err)
	}
	type target struct {
		dsn       string
		interrupt func() // SIGINT
		shutting  func() bool
		stopped   func() bool
	}
	targets := map[string]func(t *testing.T) target{
		"proxy": func(t *testing.T) target {
			tp := startProxy(t, func(c *Config) { c.ShutdownTimeout = 0 })
			return target{dsn: tp.dsn, interrupt: func() { tp.Shutdown(SafeShutdown) }, shutting: tp.stoppingNow,
				stopped: func() bool { _, err := connectErr(ctx, tp.dsn); return err != nil }}
		},
		"pgbouncer": func(t *testing.T) target {
			b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20)})
			if err != nil {
				t.Skipf("pgbouncer: %v", err)
			}
			t.Cleanup(func() { _ = b.Stop() })
			dsn := b.DSN("poolsim", "poolsim")
			return target{dsn: dsn, interrupt: func() { _ = b.Signal(syscall.SIGINT) },
				shutting: func() bool { log, _ := os.ReadFile(b.LogPath()); return strings.Contains(string(log), "got SIGINT") },
				stopped:  func() bool { _, err := connectErr(ctx, dsn); return err != nil }}
		},
	}
	for _, name := range []string{"proxy", "pgbouncer"} {
		t.Run(name, func(t *testing.T) {
			tg := targets[name](t)
			conn := connect(ctx, t, tg.dsn)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "insert into shutdown_commits values ($1)", name); err != nil {
				t.Fatal(err)
			}
			tg.interrupt()
			waitUntil(t, "the pooler to start shutting down", tg.shutting)
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit after SIGINT: %v", err)
			}
			var n int
			if err := direct.QueryRow(ctx, "select count(*) from shutdown_commits where who = $1", name).Scan(&n); err != nil || n != 1 {
				t.Fatalf("rows committed: %d, %v; want 1", n, err)
			}
			conn.Close(ctx)
			waitUntil(t, "the pooler to stop once the transaction ended", tg.stopped)
		})
	}
}

// TestSafeShutdownBound: with ShutdownTimeout set, a transaction still
// open when it runs out is cut and Serve returns.
func TestSafeShutdownBound(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.ShutdownTimeout = 200 * time.Millisecond })
	ctx := testCtx(t, 20*time.Second)
	conn := connect(ctx, t, tp.dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	tp.Shutdown(SafeShutdown)
	_, err = conn.Exec(ctx, "select 1")
	for err == nil { // answered until the bound runs out, then cut
		_, err = conn.Exec(ctx, "select 1")
	}
	if ctx.Err() != nil {
		t.Fatal("the transaction was never cut")
	}
}

// waitUntil polls cond (every 10 ms, for up to 20 s).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
