//go:build linux

package pooler

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// srvTarget is a pooler under test for the server-side tests (server TLS,
// pool shaping): PgBouncer 1.18 or the proxy, both made from the same
// [databases] lines and [pgbouncer] settings.
type srvTarget struct {
	name  string
	dsn   func(db string) string // the poolsim user's URL for db
	admin string                 // the console's URL
	log   func() string          // everything logged so far
}

// srvTargetsFor starts a PgBouncer and a proxy with the same [databases]
// lines and [pgbouncer] settings (pool_mode, default_pool_size and
// anything in extra); the proxy reads them as a pgbouncer.ini, through
// poolconf and FromSettings.
func srvTargetsFor(ctx context.Context, t *testing.T, dbs []string, mode poolmode.Mode, size int, extra map[string]string) []srvTarget {
	t.Helper()
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(mode, size),
		AdminUsers: []string{"poolsim"}, Extra: extra, Databases: dbs})
	ini := "[databases]\n" + strings.Join(dbs, "\n") + "\n[pgbouncer]\n" +
		fmt.Sprintf("pool_mode = %s\ndefault_pool_size = %d\nauth_type = trust\nadmin_users = poolsim\n", mode, size)
	for k, v := range extra {
		ini += k + " = " + v + "\n"
	}
	s, err := poolconf.Parse("test.ini", []byte(ini))
	if err != nil {
		t.Fatalf("proxy ini: %v", err)
	}
	cfg, _ := FromSettings(s)
	cfg.Listen = "127.0.0.1:0"
	// An ini's unix_socket_dir defaults to /tmp with listen_port 6432:
	// the tests' proxies listen on a free TCP port only, so that neither
	// another test nor a pooler on this machine holds their socket.
	cfg.UnixSocketDir = ""
	cfg.ShutdownTimeout = 2 * time.Second
	lb := &logLines{t: t}
	cfg.Logf = lb.logf
	cfg.PlainIO = plainIOFor(t)
	tp := serveProxy(t, cfg)
	bdsn := func(db string) string { return b.DSN(db, "poolsim") }
	return []srvTarget{
		{name: "pgbouncer", dsn: bdsn, admin: b.AdminDSN(), log: func() string {
			out, _ := os.ReadFile(b.LogPath())
			return string(out)
		}},
		{name: "proxy", dsn: func(db string) string { return strings.Replace(tp.dsn, "/poolsim?", "/"+db+"?", 1) },
			admin: tp.adminDSN(), log: lb.text},
	}
}

// exec runs sql through the target's console.
func (tg srvTarget) exec(ctx context.Context, t *testing.T, sql string) {
	t.Helper()
	admin := connect(ctx, t, tg.admin)
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("%s: %s: %v", tg.name, sql, err)
	}
}

// servers is the target's SHOW SERVERS rows of database db.
func (tg srvTarget) servers(ctx context.Context, t *testing.T, db string) []map[string]string {
	t.Helper()
	admin := connect(ctx, t, tg.admin)
	defer admin.Close(context.Background())
	_, rows := show(ctx, t, admin, "SHOW SERVERS")
	var out []map[string]string
	for _, r := range rows {
		if r["database"] == db {
			out = append(out, r)
		}
	}
	return out
}

// waitLog waits until the target's log holds want n times or more.
func (tg srvTarget) waitLog(ctx context.Context, t *testing.T, want string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if !waitFor(ctx, func() bool { return strings.Count(tg.log(), want) >= n }) {
		log := tg.log()
		if len(log) > 3000 {
			log = log[len(log)-3000:]
		}
		t.Fatalf("%s: the log never had %q %d times; it has %d:\n%s", tg.name, want, n, strings.Count(log, want), log)
	}
}

// queryOne runs one query as a new client of db through tg, bounded by
// d, and returns its one value as text.
func (tg srvTarget) queryOne(ctx context.Context, db, sql string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cfg, err := pgx.ParseConfig(tg.dsn(db))
	if err != nil {
		return "", err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v any
	if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// mustKey is a [pgbouncer] key poolsim knows.
func mustKey(t *testing.T, name string) poolconf.Key {
	t.Helper()
	k, ok := poolconf.LookupKey(name)
	if !ok {
		t.Fatalf("no key %s", name)
	}
	return k
}
