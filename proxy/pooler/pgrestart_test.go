package pooler

import (
	"context"
	"errors"
	"fmt"
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
