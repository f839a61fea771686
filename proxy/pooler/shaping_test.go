//go:build linux

package pooler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poolsim/poolsim/models/poolmode"
)

// waitServers waits until SHOW SERVERS lists n servers of db on tg.
func (tg srvTarget) waitServers(ctx context.Context, t *testing.T, db string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := 0
	if !waitFor(ctx, func() bool { got = len(tg.servers(ctx, t, db)); return got == n }) {
		t.Fatalf("%s: %s has %d servers, want %d", tg.name, db, got, n)
	}
}

// holdClient connects one client to db and keeps it until the test ends.
func (tg srvTarget) holdClient(ctx context.Context, t *testing.T, db string) *pgx.Conn {
	t.Helper()
	conn := connect(ctx, t, tg.dsn(db))
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "select 1"); err != nil {
		t.Fatalf("%s: %s: select 1: %v", tg.name, db, err)
	}
	return conn
}

// countLines counts the lines of log that hold every one of parts.
func countLines(log string, parts ...string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestMinPoolSize: with a client connected, the janitor opens servers up
// to min_pool_size (a [databases] entry's min_pool_size=), one at a
// time, on PgBouncer 1.18 and the proxy alike; max_db_connections bounds
// it, and no other pool's server is evicted for it.
func TestMinPoolSize(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	p := cluster.Port()
	dbs := []string{
		fmt.Sprintf("minp = host=127.0.0.1 port=%d dbname=poolsim min_pool_size=3", p),
		fmt.Sprintf("mindb = host=127.0.0.1 port=%d dbname=poolsim min_pool_size=5 max_db_connections=2", p),
	}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 5, nil) {
		tg.holdClient(ctx, t, "minp")
		tg.waitServers(ctx, t, "minp", 3)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if !waitFor(wctx, func() bool { return countLines(tg.log(), "minp/poolsim@", "new connection to server") == 3 }) {
			t.Errorf("%s: %d lines \"new connection to server\" for minp, want 3", tg.name, countLines(tg.log(), "minp/poolsim@", "new connection to server"))
		}
		cancel()

		tg.holdClient(ctx, t, "mindb")
		tg.waitServers(ctx, t, "mindb", 2)
		// Three janitor rounds: no third server, nothing evicted.
		time.Sleep(time.Second)
		if n := len(tg.servers(ctx, t, "mindb")); n != 2 {
			t.Errorf("%s: mindb has %d servers, want 2 (max_db_connections)", tg.name, n)
		}
		if strings.Contains(tg.log(), "closing because: evicted") {
			t.Errorf("%s: a server was evicted for min_pool_size", tg.name)
		}
	}
}

// TestReservePool: a full pool whose oldest waiting client has waited
// reserve_pool_timeout opens up to reserve_pool (the database's) more
// servers, logging "taking connection from reserve_pool", on PgBouncer
// 1.18 and the proxy alike.
func TestReservePool(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	dbs := []string{fmt.Sprintf("resv = host=127.0.0.1 port=%d dbname=poolsim pool_size=2 reserve_pool=1", cluster.Port())}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 5, map[string]string{"reserve_pool_timeout": "0.5"}) {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := tg.queryOne(ctx, "resv", "select pg_sleep(2)::text", 30*time.Second); err != nil {
					errs <- err
				}
			}()
		}
		tg.waitLog(ctx, t, "taking connection from reserve_pool", 1)
		tg.waitServers(ctx, t, "resv", 3)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", tg.name, err)
		}
		if n := len(tg.servers(ctx, t, "resv")); n != 3 {
			t.Errorf("%s: resv has %d servers, want pool_size 2 + reserve_pool 1", tg.name, n)
		}
	}
}

// TestConnectQuery: a [databases] entry's connect_query runs on each new
// server; application_name_add_host appends the client's address to its
// application_name; server_check_query (with server_check_delay 0) runs
// before a server is reused - on PgBouncer 1.18 and the proxy alike.
func TestConnectQuery(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	p := cluster.Port()
	dbs := []string{
		fmt.Sprintf("cq = host=127.0.0.1 port=%d dbname=poolsim connect_query='set enable_seqscan=off; set enable_nestloop=off'", p),
		fmt.Sprintf("chk = host=127.0.0.1 port=%d dbname=poolsim", p),
	}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{
		"application_name_add_host": "1", "server_check_delay": "0",
		"server_check_query": "select set_config('work_mem', '1234kB', false)"}) {
		for _, q := range []string{"show enable_seqscan", "show enable_nestloop"} {
			if got, err := tg.queryOne(ctx, "cq", q, 15*time.Second); err != nil || got != "off" {
				t.Errorf("%s: %s = %q, %v; want off (connect_query)", tg.name, q, got, err)
			}
		}
		conn := connect(ctx, t, tg.dsn("chk")+"&application_name=myapp")
		var app, wm string
		if err := conn.QueryRow(ctx, "show application_name").Scan(&app); err != nil || !strings.HasPrefix(app, "myapp - 127.0.0.1:") {
			t.Errorf("%s: application_name = %q, %v; want myapp - 127.0.0.1:PORT", tg.name, app, err)
		}
		if err := conn.QueryRow(ctx, "show work_mem").Scan(&wm); err != nil || wm != "1234kB" {
			t.Errorf("%s: work_mem = %q, %v; want 1234kB set by server_check_query", tg.name, wm, err)
		}
		conn.Close(ctx)
	}
}

// TestServerLifetimeJanitor: an idle server past server_lifetime is
// closed by the janitor, not only when next released ("server lifetime
// over"), on PgBouncer 1.18 and the proxy alike.
func TestServerLifetimeJanitor(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dbs := []string{fmt.Sprintf("life = host=127.0.0.1 port=%d dbname=poolsim", cluster.Port())}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{"server_lifetime": "1"}) {
		if _, err := tg.queryOne(ctx, "life", "select 1::text", 15*time.Second); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		tg.waitServers(ctx, t, "life", 0)
		tg.waitLog(ctx, t, "closing because: server lifetime over", 1)
	}
}

// TestServerFastClose: with server_fast_close, RECONNECT closes a
// session client's server (and the client) at the end of its
// transaction, on PgBouncer 1.18 and the proxy alike.
func TestServerFastClose(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dbs := []string{fmt.Sprintf("fc = host=127.0.0.1 port=%d dbname=poolsim pool_mode=session", cluster.Port())}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, nil) {
		conn := tg.holdClient(ctx, t, "fc")
		tg.exec(ctx, t, "SET server_fast_close = 1")
		tg.exec(ctx, t, "RECONNECT fc")
		tg.waitLog(ctx, t, "closing because: database configuration changed", 1)
		if _, err := conn.Exec(ctx, "select 1"); err == nil {
			t.Errorf("%s: the session client's query went through after its server closed", tg.name)
		}
	}
}

// TestServerRoundRobin: with two idle servers, one client's queries go
// to the same backend in turn LIFO (the default), and to both with
// server_round_robin = 1 - on PgBouncer 1.18 and the proxy alike.
func TestServerRoundRobin(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dbs := []string{fmt.Sprintf("rr = host=127.0.0.1 port=%d dbname=poolsim", cluster.Port())}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, nil) {
		// Two servers: two transactions open at once.
		a, b := tg.holdClient(ctx, t, "rr"), tg.holdClient(ctx, t, "rr")
		ta, err := a.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := b.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range []pgx.Tx{ta, tb} {
			if _, err := tx.Exec(ctx, "select 1"); err != nil {
				t.Fatalf("%s: %v", tg.name, err)
			}
		}
		_ = ta.Commit(ctx)
		_ = tb.Commit(ctx)
		pids := func() int {
			seen := map[int]bool{}
			for range 4 {
				pid, err := backendPID(ctx, a)
				if err != nil {
					t.Fatalf("%s: %v", tg.name, err)
				}
				seen[pid] = true
			}
			return len(seen)
		}
		if n := pids(); n != 1 {
			t.Errorf("%s: LIFO: 4 queries on %d backends, want 1", tg.name, n)
		}
		tg.exec(ctx, t, "SET server_round_robin = 1")
		if n := pids(); n != 2 {
			t.Errorf("%s: server_round_robin: 4 queries on %d backends, want 2", tg.name, n)
		}
	}
}

// TestServerCheckQueryFails: a server whose server_check_query fails is
// closed ("server check query failed") and the client waiting for it gets
// another server: its queries all succeed. (The proxy only: PgBouncer 1.18
// keeps such a server.)
func TestServerCheckQueryFails(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	lb := &logLines{t: t}
	tp := startProxy(t, func(c *Config) {
		c.ServerCheckQuery, c.ServerCheckDelay = "select 1/0", 0
		c.DefaultPoolSize = 1
		c.Logf = lb.logf
	})
	conn := connect(ctx, t, tp.dsn)
	defer conn.Close(ctx)
	for i := range 3 {
		var n int
		if err := conn.QueryRow(ctx, "select 7").Scan(&n); err != nil || n != 7 {
			t.Fatalf("query %d: %d, %v", i, n, err)
		}
	}
	if n := strings.Count(lb.text(), "closing because: server check query failed"); n < 2 {
		t.Errorf("%d servers closed for their failed check, want 2 or more (every reuse is checked)", n)
	}
}
