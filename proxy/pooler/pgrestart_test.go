package pooler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolmode"
)

// TestPostgresRestart, on PgBouncer 1.18 and the proxy side by side (the
// case of PgBouncer's own test_database_restart): PostgreSQL restarts
// (pg_ctl restart -m fast) while a pool of two servers runs two long
// queries and three more clients wait for a server. The two whose servers
// PostgreSQL ends get an error; the three waiting carry on - while
// PostgreSQL shuts down and starts up, the server logins it refuses ("the
// database system is shutting down", connection refused) fail no one, the
// next login comes server_login_retry later, and the waiting clients'
// queries run on the new servers. A client arriving afterwards is served.
func TestPostgresRestart(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	const poolSize, waiting = 2, 3
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, poolSize),
		Extra: map[string]string{"server_login_retry": "1"}})
	tp := startProxy(t, func(c *Config) {
		c.DefaultPoolSize, c.PoolMode, c.ServerLoginRetry = poolSize, poolmode.Transaction, time.Second
	})
	targets := []target{
		{name: "pgbouncer", dsn: b.DSN("poolsim", "poolsim"), admin: b.AdminDSN()},
		{name: "proxy", dsn: tp.dsn, admin: tp.adminDSN(), proxy: tp},
	}
	type runs struct{ active, waiting []<-chan done }
	got := make([]runs, len(targets))
	for i, tg := range targets {
		// The pool has had a server (PgBouncer's welcome_msg_ready), as
		// in the suite's test, whose first query runs before the restart.
		if err := query(ctx, tg.dsn, "select 1"); err != nil {
			t.Fatalf("%s: first query: %v", tg.name, err)
		}
		for range poolSize {
			got[i].active = append(got[i].active, async(func() error { return query(ctx, tg.dsn, "select pg_sleep(60)") }))
		}
		waitPool(ctx, t, tg.admin, tg.name+": both servers running a long query", func(r map[string]string) bool { return r["sv_active"] == fmt.Sprint(poolSize) })
		for range waiting {
			got[i].waiting = append(got[i].waiting, async(func() error { return query(ctx, tg.dsn, "select 42") }))
		}
		waitPool(ctx, t, tg.admin, tg.name+": clients waiting for a server", func(r map[string]string) bool { return r["cl_waiting"] == fmt.Sprint(waiting) })
	}
	if err := cluster.Restart(ctx); err != nil {
		t.Fatalf("restart PostgreSQL: %v", err)
	}
	for i, tg := range targets {
		for j, ch := range got[i].active {
			// PostgreSQL's own FATAL, forwarded.
			d := await(ctx, t, tg.name+": a query PostgreSQL's shutdown ended", ch)
			if pe := (*pgconn.PgError)(nil); !errors.As(d.err, &pe) || pe.Code != "57P01" {
				t.Errorf("%s: active client %d: %v, want PostgreSQL's 57P01 terminating connection due to administrator command", tg.name, j, d.err)
			}
		}
		for j, ch := range got[i].waiting {
			if d := await(ctx, t, tg.name+": a client waiting across the restart", ch); d.err != nil {
				t.Errorf("%s: waiting client %d: %v, want its query run once PostgreSQL is back", tg.name, j, d.err)
			}
		}
		if err := query(ctx, tg.dsn, "select 1"); err != nil {
			t.Errorf("%s: a new client after the restart: %v", tg.name, err)
		}
	}
}

// query runs sql on a new connection to dsn.
func query(ctx context.Context, dsn, sql string) error {
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql).ReadAll()
	return err
}

// TestServerLoginRefusedAfterWelcome: once the pool has had a server
// (PgBouncer's welcome_msg_ready), a server login PostgreSQL refuses with
// an error fails no one, as in PgBouncer 1.18 (kill_pool_logins only
// reaches clients waiting for their welcome): the client waiting for a
// server stays queued; while the pool has no server, a client that needs
// one is refused at once (check_fast_fail); once PostgreSQL accepts again
// the next login, server_login_retry later, serves the waiting client. The
// log has PgBouncer's lines for the refused login.
func TestServerLoginRefusedAfterWelcome(t *testing.T) {
	fake := startFakePG(t)
	var mu sync.Mutex
	var lines []string
	logged := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, s) })
	}
	tp := fakeProxy(t, fake, func(c *Config) {
		c.DefaultPoolSize, c.ServerLoginRetry = 1, 300*time.Millisecond
		c.Logf = func(format string, args ...any) {
			mu.Lock()
			lines = append(lines, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
	})
	ctx := testCtx(t, 10*time.Second)
	waiting := func(n int) func() bool {
		return func() bool {
			var w int
			tp.loop.call(func() {
				for _, pl := range tp.loopPools {
					w += pl.queue.Waiting()
				}
			})
			return w == n
		}
	}
	a, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if _, err := a.Exec(ctx, "BEGIN").ReadAll(); err != nil { // holds the pool's one server
		t.Fatal(err)
	}
	b, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	bDone := async(func() error { _, err := b.Exec(ctx, "select 1").ReadAll(); return err })
	if !waitFor(ctx, waiting(1)) {
		t.Fatal("the second client never waited for the server")
	}

	// PostgreSQL restarts: the server goes, the next login is refused.
	const starting = "the database system is starting up"
	fake.refuse.Store(fatal("57P03", starting))
	fake.dropAll()
	if !waitFor(ctx, func() bool { return logged("S: login failed: FATAL: " + starting) }) {
		t.Fatalf("the refused login was never logged as PgBouncer does (S: login failed: FATAL: %s)", starting)
	}
	if !logged("closing because: login failed (age=") {
		t.Error("no 'closing because: login failed' line for the refused login")
	}
	if !waiting(1)() {
		t.Fatal("the waiting client left the queue when the login was refused; want it kept waiting")
	}
	select {
	case d := <-bDone:
		t.Fatalf("the waiting client was answered while PostgreSQL refused logins: %v", d.err)
	default:
	}

	// Meanwhile a client logs in (the pool's welcome is known) and its
	// first query, which needs a server, is refused at once.
	c, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatalf("a new client while logins fail: login: %v, want it logged in", err)
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "select 1").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Message != poolmode.ErrServerLoginFailing {
		t.Errorf("a new client while logins fail: %v, want %q", err, poolmode.ErrServerLoginFailing)
	}

	// PostgreSQL is back: the next login serves the waiting client.
	fake.refuse.Store(nil)
	if d := await(ctx, t, "the waiting client", bDone); d.err != nil {
		t.Errorf("the waiting client: %v, want its query run once PostgreSQL accepts again", d.err)
	}
}

// dropAll closes every open connection of the fake, as a PostgreSQL
// shutting down ends its sessions.
func (f *fakePG) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.cs {
		_ = c.Close()
	}
}
