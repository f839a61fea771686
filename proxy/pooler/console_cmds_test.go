package pooler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolmode"
)

// target is a pooler under test: a real PgBouncer or the proxy.
type target struct {
	name       string
	dsn, admin string
	proxy      *testProxy // nil for PgBouncer
}

// bothTargets starts a PgBouncer and a proxy with the same settings:
// transaction pooling, poolSize servers per pool.
func bothTargets(ctx context.Context, t *testing.T, poolSize int) []target {
	t.Helper()
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, poolSize)})
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = poolSize; c.PoolMode = poolmode.Transaction })
	return []target{
		{name: "pgbouncer", dsn: b.DSN("poolsim", "poolsim"), admin: b.AdminDSN()},
		{name: "proxy", dsn: tp.dsn, admin: tp.adminDSN(), proxy: tp},
	}
}

// done is when something finished, and how.
type done struct {
	at  time.Time
	err error
}

// async runs f on its own goroutine and reports when it returned.
func async(f func() error) <-chan done {
	ch := make(chan done, 1)
	go func() {
		err := f()
		ch <- done{time.Now(), err}
	}()
	return ch
}

// await waits for an async result.
func await(ctx context.Context, t *testing.T, what string, ch <-chan done) done {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-ctx.Done():
		t.Fatalf("%s: not done: %v", what, ctx.Err())
		return done{}
	}
}

// runConsole runs a console command on a fresh console connection.
func runConsole(ctx context.Context, adminDSN, cmd string) error {
	c, err := pgconn.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, cmd).ReadAll()
	return err
}

// heldUntil checks that ch (a query, a login) is held until release: not
// done within a moment, then done without error after release returned.
func heldUntil(ctx context.Context, t *testing.T, what string, ch <-chan done, release func() error) {
	t.Helper()
	select {
	case d := <-ch:
		t.Fatalf("%s got through before its release: %v", what, d.err)
	case <-time.After(300 * time.Millisecond):
	}
	released := time.Now()
	if err := release(); err != nil {
		t.Fatalf("%s: release: %v", what, err)
	}
	if d := await(ctx, t, what, ch); d.err != nil || d.at.Before(released) {
		t.Fatalf("%s: %v, done %v before its release", what, d.err, released.Sub(d.at))
	}
}

// answersAfterCommit runs console command cmd while tx holds a server and
// checks that its answer comes only after tx has committed.
func answersAfterCommit(ctx context.Context, t *testing.T, tg target, tx pgx.Tx, cmd string) {
	t.Helper()
	answered := async(func() error { return runConsole(ctx, tg.admin, cmd) })
	waitPool(ctx, t, tg.admin, "the transaction's server active", func(r map[string]string) bool { return r["sv_active"] == "1" })
	committed := time.Now()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if d := await(ctx, t, cmd, answered); d.err != nil || d.at.Before(committed) {
		t.Fatalf("%s: %v, answered %v before the commit", cmd, d.err, committed.Sub(d.at))
	}
}

// waitPool polls SHOW POOLS until the poolsim pool's row satisfies ok.
func waitPool(ctx context.Context, t *testing.T, adminDSN string, what string, ok func(r map[string]string) bool) {
	t.Helper()
	admin := connect(ctx, t, adminDSN)
	defer admin.Close(context.Background())
	for {
		_, rows := show(ctx, t, admin, "SHOW POOLS")
		for _, r := range rows {
			if r["database"] == "poolsim" && ok(r) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: SHOW POOLS never showed it: %v", what, rows)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func backendPID(ctx context.Context, conn *pgx.Conn) (int, error) {
	var pid int
	err := conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid)
	return pid, err
}

// TestConsolePauseResume, on PgBouncer and the proxy: PAUSE answers only
// once the transaction holding a server has ended; while paused a new
// query waits for a server; RESUME lets it run.
func TestConsolePauseResume(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range bothTargets(ctx, t, 2) {
		t.Run(tg.name, func(t *testing.T) {
			holder, waiter := connect(ctx, t, tg.dsn), connect(ctx, t, tg.dsn)
			tx, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "select 1"); err != nil {
				t.Fatal(err)
			}
			answersAfterCommit(ctx, t, tg, tx, "PAUSE")
			query := async(func() error { _, err := waiter.Exec(ctx, "select 1"); return err })
			waitPool(ctx, t, tg.admin, "a client waiting while paused", func(r map[string]string) bool { return r["cl_waiting"] == "1" })
			resumed := time.Now()
			if err := runConsole(ctx, tg.admin, "RESUME"); err != nil {
				t.Fatal(err)
			}
			if d := await(ctx, t, "query during the pause", query); d.err != nil || d.at.Before(resumed) {
				t.Fatalf("query during the pause: %v, done %v before RESUME", d.err, resumed.Sub(d.at))
			}
		})
	}
}

// TestConsoleReconnectWaitClose, on PgBouncer and the proxy: after
// RECONNECT the server a transaction holds is not reused once released,
// and WAIT_CLOSE answers only after that transaction has ended.
func TestConsoleReconnectWaitClose(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range bothTargets(ctx, t, 1) {
		t.Run(tg.name, func(t *testing.T) {
			conn := connect(ctx, t, tg.dsn)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var before int
			if err := tx.QueryRow(ctx, "select pg_backend_pid()").Scan(&before); err != nil {
				t.Fatal(err)
			}
			if err := runConsole(ctx, tg.admin, "RECONNECT poolsim"); err != nil {
				t.Fatalf("RECONNECT: %v", err)
			}
			answersAfterCommit(ctx, t, tg, tx, "WAIT_CLOSE poolsim")
			after, err := backendPID(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			if after == before {
				t.Errorf("after RECONNECT the next transaction ran on the same backend %d", before)
			}
		})
	}
}

// TestConsoleKill, on PgBouncer and the proxy: KILL closes a client in the
// middle of its transaction with FATAL "database removed"; the database
// stays paused, so a new client's query waits until RESUME db.
func TestConsoleKill(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range bothTargets(ctx, t, 2) {
		t.Run(tg.name, func(t *testing.T) {
			victim := connect(ctx, t, tg.dsn)
			tx, err := victim.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "select 1"); err != nil {
				t.Fatal(err)
			}
			if err := runConsole(ctx, tg.admin, "KILL poolsim"); err != nil {
				t.Fatalf("KILL: %v", err)
			}
			_, err = tx.Exec(ctx, "select 1")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Message != "database removed" {
				t.Errorf("query of a killed client: %v, want FATAL database removed", err)
			}
			query := async(func() error {
				c, err := pgx.Connect(ctx, tg.dsn)
				if err != nil {
					return err
				}
				defer c.Close(context.Background())
				_, err = c.Exec(ctx, "select 1", pgx.QueryExecModeSimpleProtocol)
				return err
			})
			// Kept waiting (at login or at its query) while killed.
			heldUntil(ctx, t, "a client of the killed database", query,
				func() error { return runConsole(ctx, tg.admin, "RESUME poolsim") })
		})
	}
}

// TestConsoleSuspend, on PgBouncer and the proxy: SUSPEND answers; a query
// sent while suspended is not read until RESUME.
func TestConsoleSuspend(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range bothTargets(ctx, t, 2) {
		t.Run(tg.name, func(t *testing.T) {
			conn := connect(ctx, t, tg.dsn)
			if _, err := conn.Exec(ctx, "select 1"); err != nil {
				t.Fatal(err)
			}
			admin := openConsole(ctx, t, tg.admin) // held: the last console leaving resumes
			if r := admin.run(ctx, t, "SUSPEND"); r.err != nil || r.tag != "SUSPEND" {
				t.Fatalf("SUSPEND: %v", r)
			}
			query := async(func() error { _, err := conn.Exec(ctx, "select 1"); return err })
			heldUntil(ctx, t, "a query while suspended", query, func() error {
				if r := admin.run(ctx, t, "RESUME"); r.err != nil || r.tag != "RESUME" {
					return fmt.Errorf("RESUME: %v", r)
				}
				return nil
			})
		})
	}
}

// TestConsoleShutdown, on PgBouncer and the proxy: SHUTDOWN closes the
// console connection without an answer and the pooler stops: clients are
// cut, new connections refused.
func TestConsoleShutdown(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	for _, tg := range bothTargets(ctx, t, 2) {
		t.Run(tg.name, func(t *testing.T) {
			conn := connect(ctx, t, tg.dsn)
			if _, err := conn.Exec(ctx, "select 1"); err != nil {
				t.Fatal(err)
			}
			admin := openConsole(ctx, t, tg.admin)
			_, err := admin.conn.Exec(ctx, "SHUTDOWN").ReadAll()
			if err == nil {
				t.Fatal("SHUTDOWN answered; want the connection closed")
			}
			// Both happen, in either order: a connection that arrives while
			// the clients are being cut is accepted and closed at its login.
			refused, cut := false, false
			for !refused || !cut {
				if ctx.Err() != nil {
					t.Fatalf("after SHUTDOWN: new connections refused %v, the connected client cut %v", refused, cut)
				}
				if !refused {
					if c, err := pgconn.Connect(ctx, tg.dsn); err != nil {
						refused = ctx.Err() == nil
					} else {
						_ = c.Close(ctx)
					}
				}
				if !cut {
					_, err := conn.Exec(ctx, "select 1")
					cut = err != nil && ctx.Err() == nil
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestConsoleSetReloadDisable (the proxy): SET changes a setting as a
// reload does (SHOW CONFIG and SHOW DATABASES show it, the pool grows);
// RELOAD reads Config.Source again; DISABLE refuses new clients but not
// the ones connected; ENABLE lets them in again.
func TestConsoleSetReloadDisable(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	sourced := 0
	var tp *testProxy
	tp = startProxy(t, func(c *Config) {
		c.DefaultPoolSize = 1
		c.Source = func() (Config, error) {
			sourced++
			cfg := *tp.conf()
			cfg.DefaultPoolSize = 4
			return cfg, nil
		}
	})
	admin := openConsole(ctx, t, tp.adminDSN())
	if r := admin.run(ctx, t, "SET default_pool_size = 2"); r.err != nil || r.tag != "SET default_pool_size=2" {
		t.Fatalf("SET: %v", r)
	}
	cfgRow := admin.run(ctx, t, "SHOW CONFIG")
	if v := cfgRow.cell(cfgRow.find("key", "default_pool_size"), "value"); v != "2" {
		t.Errorf("SHOW CONFIG default_pool_size after SET = %q, want 2", v)
	}
	// Two transactions at once get two servers.
	a, b := connect(ctx, t, tp.dsn), connect(ctx, t, tp.dsn)
	txa, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txa.Rollback(ctx)
	if _, err := txa.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	c2, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = b.Exec(c2, "select 1")
	cancel()
	if err != nil {
		t.Fatalf("second client with default_pool_size 2: %v", err)
	}
	r := admin.run(ctx, t, "SET log_connections = 0")
	if r.err != nil || len(r.notices) != 1 || !strings.Contains(r.notices[0].Message, "no effect") {
		t.Errorf("SET of a setting the proxy does not apply: %v, want a NOTICE that says so", r)
	}
	if r := admin.run(ctx, t, "RELOAD"); r.err != nil || r.tag != "RELOAD" || sourced != 1 {
		t.Fatalf("RELOAD: %v, Source called %d times", r, sourced)
	}
	dbs := admin.run(ctx, t, "SHOW DATABASES")
	if v := dbs.cell(dbs.find("name", "poolsim"), "pool_size"); v != "4" {
		t.Errorf("pool_size after RELOAD = %q, want 4 from Source", v)
	}
	if r := admin.run(ctx, t, "DISABLE poolsim"); r.err != nil {
		t.Fatal(r)
	}
	if _, err := b.Exec(ctx, "select 1"); err != nil {
		t.Errorf("a connected client after DISABLE: %v", err)
	}
	if _, err := pgconn.Connect(ctx, tp.dsn); err == nil || !strings.Contains(err.Error(), `database "poolsim" is disabled`) {
		t.Errorf("login after DISABLE: %v", err)
	}
	if r := admin.run(ctx, t, "ENABLE poolsim"); r.err != nil {
		t.Fatal(r)
	}
	connect(ctx, t, tp.dsn)
}

// TestConsoleStats (the proxy): SHOW STATS' totals count every query and
// transaction, STATS_TOTALS and TOTALS agree with it, and the averages
// move once a stats_period has passed.
func TestConsoleStats(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	tp := startProxy(t, func(c *Config) { c.StatsPeriod = 100 * time.Millisecond })
	conn := connect(ctx, t, tp.dsn)
	for range 50 {
		if _, err := conn.Exec(ctx, "select 1"); err != nil {
			t.Fatal(err)
		}
	}
	admin := openConsole(ctx, t, tp.adminDSN())
	num := func(r consoleResult, i int, col string) int64 {
		n, err := strconv.ParseInt(r.cell(i, col), 10, 64)
		if err != nil {
			t.Fatalf("%s = %q", col, r.cell(i, col))
		}
		return n
	}
	for {
		st := admin.run(ctx, t, "SHOW STATS")
		i := st.find("database", "poolsim")
		if i < 0 {
			t.Fatalf("SHOW STATS has no poolsim row")
		}
		if q := num(st, i, "total_query_count"); q != 50 || num(st, i, "total_xact_count") != 50 {
			t.Fatalf("total_query_count %d, total_xact_count %d: want 50 each", q, num(st, i, "total_xact_count"))
		}
		tot := admin.run(ctx, t, "SHOW STATS_TOTALS")
		if j := tot.find("database", "poolsim"); num(tot, j, "query_count") != 50 || num(tot, j, "bytes_received") != num(st, i, "total_received") {
			t.Errorf("SHOW STATS_TOTALS disagrees with SHOW STATS")
		}
		if num(st, i, "avg_query_count") > 0 {
			avg := admin.run(ctx, t, "SHOW STATS_AVERAGES")
			if j := avg.find("database", "poolsim"); num(avg, j, "query_count") == 0 {
				t.Errorf("SHOW STATS_AVERAGES query_count 0 while SHOW STATS has an average")
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("avg_query_count stayed 0 past stats_period")
		}
		time.Sleep(20 * time.Millisecond)
	}
	totals := admin.run(ctx, t, "SHOW TOTALS")
	if v := totals.cell(totals.find("name", "total_query_count"), "value"); v == "" || v == "0" {
		t.Errorf("SHOW TOTALS total_query_count = %q", v)
	}
}
