package pooler

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolmode"
)

// TestStartupCheckedAtLogin, on PgBouncer 1.18 and the proxy: a client
// whose options PostgreSQL would refuse is refused at login, not at its
// first statement - by PgBouncer 1.18 because it takes no options, by the
// proxy with PostgreSQL's own error (unknown name, bad value), after
// trying them on a server of the pool.
func TestStartupCheckedAtLogin(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 2)})
	tp := startProxy(t, nil)
	for _, tc := range []struct {
		options, code, msg string // the proxy's answer: PostgreSQL's
	}{
		{"-c nosuch=1", "42704", `unrecognized configuration parameter "nosuch"`},
		{"-c work_mem=abc", "22023", `invalid value for parameter "work_mem": "abc"`},
		{"-c DateStyle=nosuch", "22023", `invalid value for parameter "DateStyle": "nosuch"`},
	} {
		params := map[string]string{"options": tc.options}
		_, err := connectWith(ctx, t, b.DSN("poolsim", "poolsim"), params)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Message != "unsupported startup parameter: options" {
			t.Errorf("PgBouncer, login with options %q: %v, want FATAL unsupported startup parameter: options", tc.options, err)
		}
		for range 2 { // the second time from the pool's memory of the answer
			_, err = connectWith(ctx, t, tp.dsn, params)
			if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != tc.code || pe.Message != tc.msg {
				t.Errorf("proxy, login with options %q: %v, want FATAL %s %q", tc.options, err, tc.code, tc.msg)
			}
		}
	}
	conn, err := connectWith(ctx, t, tp.dsn, map[string]string{"options": "-c work_mem=64kB"})
	if err != nil {
		t.Fatalf("proxy, login with good options: %v", err)
	}
	var v string
	if err := conn.QueryRow(ctx, "show work_mem").Scan(&v); err != nil || v != "64kB" {
		t.Errorf("work_mem of a client that asked for 64kB: %q, %v", v, err)
	}
}

// TestStartupCheckRemembered: settings a pool has checked are not tried
// again - a client asking for them logs in while every server of the pool
// is busy, as does one asking only for what the servers have (a
// client_encoding of UTF8) - and a client waiting for a server to check
// new ones logs in once one is free.
func TestStartupCheckRemembered(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	good := map[string]string{"options": "-c work_mem=64kB"}
	if _, err := connectWith(ctx, t, tp.dsn, good); err != nil {
		t.Fatal(err)
	}
	holder := connect(ctx, t, tp.dsn)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := connectWith(ctx, t, tp.dsn, good); err != nil {
		t.Fatalf("login with checked settings while the only server is busy: %v", err)
	}
	if _, err := connectWith(ctx, t, tp.dsn, map[string]string{"client_encoding": "UTF8"}); err != nil {
		t.Fatalf("login asking for the servers' own client_encoding while the only server is busy: %v", err)
	}
	other := async(func() error {
		_, err := connectWith(ctx, t, tp.dsn, map[string]string{"options": "-c work_mem=128kB"})
		return err
	})
	heldUntil(ctx, t, "login with settings to check while the only server is busy", other, func() error { return tx.Commit(ctx) })
}
