package pooler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// statsRow is the proxy's counters of database poolsim (Proxy.Stats), by
// the names of PgBouncer 1.21's SHOW STATS columns: SHOW STATS has 1.18's
// columns, which lack the prepared-statement counts.
func statsRow(ctx context.Context, t *testing.T, tp *testProxy) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	found := false
	for _, ps := range tp.Stats() {
		if ps.Database != "poolsim" {
			continue
		}
		found = true
		c := ps.Counters
		out["total_client_parse_count"] += c.ClientParses
		out["total_server_parse_count"] += c.ServerParses
		out["total_bind_count"] += c.Binds
		out["total_xact_count"] += c.Xacts
		out["total_query_count"] += c.Queries
	}
	if !found {
		t.Fatalf("Stats has no poolsim pool: %+v", tp.Stats())
	}
	return out
}

// preparedCounts is the number of prepared statements each server holds
// (by server) and the clients' statement names (summed), read from the
// loop's state.
func preparedCounts(ctx context.Context, t *testing.T, tp *testProxy) (servers []int, clients int) {
	t.Helper()
	tp.loop.call(func() {
		for _, pl := range tp.poolList() {
			for _, s := range pl.allServers() {
				servers = append(servers, s.ps.count())
			}
		}
		for _, c := range tp.clientList() {
			clients += len(c.stmts)
		}
	})
	return servers, clients
}

// runToolResult runs a client program and returns its output and error.
func runToolResult(ctx context.Context, t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, needTool(t, name), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPreparedPgbench: pgbench -M prepared through transaction pooling with
// 8 clients on 2 servers runs without a failed transaction once
// max_prepared_statements is set, and SHOW STATS counts the parses: every
// client prepares each statement once, each server parses it at most once.
// With the setting at 0 the run fails exactly as through PgBouncer 1.18.
//
// pgbench runs one thread per client (-j 8): it prepares each statement
// just before its first use with a synchronous PQprepare, which blocks the
// whole thread. With fewer threads than clients and fewer servers than
// clients, a thread blocked in one client's Parse (waiting for a server)
// stops its other clients, which may hold both servers inside a
// transaction: a deadlock through any transaction pooler whose Parse needs
// a server, PgBouncer's included (seen here with -j 2; not a proxy bug).
func TestPreparedPgbench(t *testing.T) {
	tp := startProxy(t, func(c *Config) {
		c.PoolMode = poolmode.Transaction
		c.DefaultPoolSize = 2
		c.MaxPreparedStatements = 200
		c.Verbose = false
	})
	ctx := testCtx(t, 90*time.Second)
	env := tp.pgEnv()
	runTool(ctx, t, env, "pgbench", "-i", "-q", "-s", "1", "--partitions=0")
	out := runTool(ctx, t, env, "pgbench", "-M", "prepared", "-c", "8", "-j", "8", "-t", "200", "-n")
	if f := failedRe.FindStringSubmatch(out); f != nil && f[1] != "0" {
		t.Errorf("pgbench -M prepared: %s failed transactions\n%s", f[1], out)
	}
	if p := processedRe.FindStringSubmatch(out); p == nil || p[1] != "1600" {
		t.Errorf("pgbench -M prepared: processed %v, want 1600\n%s", p, out)
	}
	st := statsRow(ctx, t, tp)
	clientParses, serverParses, binds := st["total_client_parse_count"], st["total_server_parse_count"], st["total_bind_count"]
	// pgbench's TPC-B-like script has 7 SQL commands, each prepared once
	// per connection.
	const stmts = 7
	if clientParses != 8*stmts {
		t.Errorf("total_client_parse_count = %d, want %d (8 clients x %d statements)", clientParses, 8*stmts, stmts)
	}
	if serverParses < stmts || serverParses > 2*stmts {
		t.Errorf("total_server_parse_count = %d, want %d..%d (each statement once per server)", serverParses, stmts, 2*stmts)
	}
	if binds != 1600*stmts {
		t.Errorf("total_bind_count = %d, want %d", binds, 1600*stmts)
	}
	servers, _ := preparedCounts(ctx, t, tp)
	if len(servers) != 2 || servers[0]+servers[1] != int(serverParses) {
		t.Errorf("SHOW SERVERS prepared_statements = %v, want 2 servers holding the %d statements parsed", servers, serverParses)
	}
	t.Logf("pgbench -M prepared: client parses %d, server parses %d, binds %d", clientParses, serverParses, binds)

	// With the setting at 0 named statements pass through untouched, so a
	// client's statement is prepared on whichever server its PQprepare ran
	// on. Through the proxy and through PgBouncer 1.18 alike (both seen):
	// with 8 clients on 2 servers at most 2 of the PQprepare("P_0") calls
	// succeed, the others get `ERROR: prepared statement "P_0" already
	// exists` (pgbench logs it and goes on), then each client's first
	// execution lands on a server without its statement: `client N script 0
	// aborted in command 4 query 0: ERROR: prepared statement "P_0" does
	// not exist` (or "current transaction is aborted" after a failed
	// prepare inside the transaction). Every client aborts, pgbench reports
	// 0 failed transactions but only a few of the 400 processed, prints
	// "Run was aborted" and exits with status 2.
	for _, target := range []string{"proxy", "pgbouncer-1.18"} {
		t.Run("setting-0/"+target, func(t *testing.T) {
			var env []string
			if target == "proxy" {
				env = startProxy(t, func(c *Config) { c.PoolMode = poolmode.Transaction; c.DefaultPoolSize = 2; c.Verbose = false }).pgEnv()
			} else {
				env = startBouncer2(ctx, t)
			}
			out, err := runToolResult(ctx, t, env, "pgbench", "-M", "prepared", "-c", "8", "-j", "8", "-t", "50", "-n")
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Errorf("pgbench -M prepared with the setting at 0: err %v, want exit status 2\n%s", err, out)
			}
			for _, want := range []string{`prepared statement "P_`, "aborted in command", "Run was aborted"} {
				if !strings.Contains(out, want) {
					t.Errorf("pgbench -M prepared with the setting at 0: output lacks %q\n%s", want, out)
				}
			}
			if !strings.Contains(out, "already exists") && !strings.Contains(out, "does not exist") {
				t.Errorf("pgbench -M prepared with the setting at 0: want PostgreSQL's \"already exists\" or \"does not exist\"\n%s", out)
			}
			if p := processedRe.FindStringSubmatch(out); p == nil || p[1] == "400" {
				t.Errorf("pgbench -M prepared with the setting at 0: processed %v, want fewer than 400\n%s", p, out)
			}
		})
	}
}

// startBouncer2 starts PgBouncer 1.18 in transaction mode with a pool of 2
// (no max_prepared_statements), skipping the test without it (failing under
// CI).
func startBouncer2(ctx context.Context, t *testing.T) []string {
	t.Helper()
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 2)})
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and pgbouncer is required: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return append(tp0Env(), "PGHOST="+b.Host(), "PGPORT="+strconv.Itoa(b.Port()))
}

// tp0Env is the libpq environment shared by the proxy's and PgBouncer's.
func tp0Env() []string {
	return append(os.Environ(), "PGUSER=poolsim", "PGPASSWORD=poolsim", "PGDATABASE=poolsim", "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
}

// TestPreparedPgx: pgx with its default statement cache
// (QueryExecModeCacheStatement) through transaction pooling, 6 clients on
// 2 servers: many transactions land on a server other than the one that
// prepared the statement, and all of them work.
func TestPreparedPgx(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 2; c.MaxPreparedStatements = 100; c.Verbose = false })
	ctx := testCtx(t, 30*time.Second)
	const clients, rounds, queries = 6, 40, 5
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	pids := make([]map[uint32]bool, clients)
	for i := range clients {
		conn, err := pgx.Connect(ctx, tp.dsn) // default: QueryExecModeCacheStatement
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		pids[i] = map[uint32]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for q := range queries {
					var got int
					var pid uint32
					sql := fmt.Sprintf("select $1::int + %d, pg_backend_pid()", q)
					if err := conn.QueryRow(ctx, sql, r).Scan(&got, &pid); err != nil {
						errs <- fmt.Errorf("client %d round %d query %d: %w", i, r, q, err)
						return
					}
					if got != r+q {
						errs <- fmt.Errorf("client %d: %s with %d = %d", i, sql, r, got)
						return
					}
					pids[i][pid] = true
				}
				// A transaction of prepared statements, too.
				tx, err := conn.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				var n int
				if err := tx.QueryRow(ctx, "select count(*) from generate_series(1, $1::int)", r+1).Scan(&n); err != nil || n != r+1 {
					errs <- fmt.Errorf("client %d in a transaction: %d, %v", i, n, err)
					return
				}
				if err := tx.Commit(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	moved := 0
	for _, p := range pids {
		if len(p) > 1 {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("no client's statements ran on more than one server; the test proves nothing")
	}
	st := statsRow(ctx, t, tp)
	// 6 distinct texts; each client parses each once, each server at most once.
	const distinct = queries + 1
	if st["total_client_parse_count"] != clients*distinct {
		t.Errorf("total_client_parse_count = %d, want %d", st["total_client_parse_count"], clients*distinct)
	}
	if n := st["total_server_parse_count"]; n < distinct || n > 2*distinct {
		t.Errorf("total_server_parse_count = %d, want %d..%d", n, distinct, 2*distinct)
	}
	if _, cl := preparedCounts(ctx, t, tp); cl != clients*distinct {
		t.Errorf("SHOW CLIENTS prepared_statements sum = %d, want %d", cl, clients*distinct)
	}
}

// TestPreparedLargeMessages: Parse and Bind larger than the read buffer,
// and a Bind beyond 1 MB, are read whole and rewritten.
func TestPreparedLargeMessages(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.MaxPreparedStatements = 10 })
	ctx := testCtx(t, 20*time.Second)
	conn, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	long := "select length($1::text) /* " + strings.Repeat("x", 40000) + " */"
	for _, size := range []int{10, 40000, 3 << 20} {
		for _, sql := range []string{"select length($1::text)", long} {
			var n int
			if err := conn.QueryRow(ctx, sql, strings.Repeat("y", size)).Scan(&n); err != nil || n != size {
				t.Errorf("length of %d bytes (query of %d bytes) = %d, %v", size, len(sql), n, err)
			}
		}
	}
}

// TestPreparedLRU: a cache of 2 statements per server with a client cycling
// through 5: every execution evicts and re-parses, and still works; SHOW
// STATS counts the server parses and the server never holds more than 2.
func TestPreparedLRU(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.MaxPreparedStatements = 2; c.Verbose = false })
	ctx := testCtx(t, 20*time.Second)
	conn, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const k, rounds = 5, 4
	for i := range k {
		if _, err := conn.Prepare(ctx, fmt.Sprintf("s%d", i), fmt.Sprintf("select %d + $1::int", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for r := range rounds {
		for i := range k {
			res := conn.ExecPrepared(ctx, fmt.Sprintf("s%d", i), [][]byte{[]byte(strconv.Itoa(r))}, nil, nil).Read()
			if res.Err != nil {
				t.Fatalf("round %d s%d: %v", r, i, res.Err)
			}
			if got := string(res.Rows[0][0]); got != strconv.Itoa(i+r) {
				t.Fatalf("round %d s%d = %s, want %d", r, i, got, i+r)
			}
		}
	}
	// The server holds at most 2 of them (PostgreSQL's own view).
	res := conn.ExecParams(ctx, "select count(*) from pg_prepared_statements where name like 'PGBOUNCER_%'", nil, nil, nil, nil).Read()
	if res.Err != nil || string(res.Rows[0][0]) != "2" {
		t.Errorf("pg_prepared_statements on the server: %v %v, want 2", res.Rows, res.Err)
	}
	st := statsRow(ctx, t, tp)
	// Prepare: 5 parses. Then each of the 20 executions misses (cycling 5
	// statements through 2 slots is LRU's worst case) and re-parses.
	if got, want := st["total_server_parse_count"], int64(k+k*rounds); got != want {
		t.Errorf("total_server_parse_count = %d, want %d (every execution evicts and re-parses)", got, want)
	}
	if got := st["total_client_parse_count"]; got != k {
		t.Errorf("total_client_parse_count = %d, want %d", got, k)
	}
	if got := st["total_bind_count"]; got != k*rounds {
		t.Errorf("total_bind_count = %d, want %d", got, k*rounds)
	}
	if servers, cl := preparedCounts(ctx, t, tp); len(servers) != 1 || servers[0] != 2 || cl != k {
		t.Errorf("prepared_statements: SHOW SERVERS %v, SHOW CLIENTS %d; want [2] and %d", servers, cl, k)
	}
	// Re-running two statements in a row hits the cache: no new parse.
	before := st["total_server_parse_count"]
	for range 3 {
		for _, name := range []string{"s3", "s4"} {
			if r := conn.ExecPrepared(ctx, name, [][]byte{[]byte("1")}, nil, nil).Read(); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	if got := statsRow(ctx, t, tp)["total_server_parse_count"]; got != before {
		t.Errorf("total_server_parse_count went from %d to %d re-running the 2 cached statements", before, got)
	}
}

// TestPreparedProtocol checks the message-level rules with pool size 1 (so
// every client shares the server): fake ParseComplete in its place in a
// pipeline, Close answered by the proxy, DEALLOCATE ALL, and PgBouncer's
// errors.
func TestPreparedProtocol(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.MaxPreparedStatements = 10 })
	ctx := testCtx(t, 20*time.Second)
	a, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := a.Prepare(ctx, "q", "select $1::int * 2", nil); err != nil {
		t.Fatal(err)
	}
	serverParses := func() int64 { return statsRow(ctx, t, tp)["total_server_parse_count"] }
	if n := serverParses(); n != 1 {
		t.Fatalf("total_server_parse_count = %d after one Parse, want 1", n)
	}

	// b prepares the same text under another name, in a pipeline between
	// other requests: the server has it, so the proxy answers the Parse
	// itself, after the responses to the requests before it.
	pl := b.StartPipeline(ctx)
	pl.SendQueryParams("select 'before'", nil, nil, nil, nil)
	pl.SendPrepare("mine", "select $1::int * 2", nil)
	pl.SendQueryPrepared("mine", [][]byte{[]byte("21")}, nil, nil)
	pl.SendDeallocate("mine") // Close: answered by the proxy, in its place too
	pl.SendQueryParams("select 'after'", nil, nil, nil, nil)
	if err := pl.Sync(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		res, err := pl.GetResults()
		if err != nil {
			t.Fatalf("pipeline: %v (so far %v)", err, got)
		}
		switch r := res.(type) {
		case nil:
		case *pgconn.ResultReader:
			rr := r.Read()
			if rr.Err != nil {
				t.Fatalf("pipeline: %v", rr.Err)
			}
			got = append(got, string(rr.Rows[0][0]))
			continue
		case *pgconn.StatementDescription:
			got = append(got, "described")
			continue
		case *pgconn.CloseComplete:
			got = append(got, "closed")
			continue
		case *pgconn.PipelineSync:
			got = append(got, "sync")
			continue
		default:
			got = append(got, fmt.Sprintf("%T", r))
			continue
		}
		break
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "before,described,42,closed,after,sync"; strings.Join(got, ",") != want {
		t.Errorf("pipeline results = %s, want %s", strings.Join(got, ","), want)
	}
	if n := serverParses(); n != 1 {
		t.Errorf("total_server_parse_count = %d after a second client prepared the same text, want still 1", n)
	}
	// The Close only dropped b's name: a's statement still works, and b can
	// reuse the name for another text.
	if r := a.ExecPrepared(ctx, "q", [][]byte{[]byte("5")}, nil, nil).Read(); r.Err != nil || string(r.Rows[0][0]) != "10" {
		t.Errorf("a's statement after b closed its name: %v %v", r.Rows, r.Err)
	}
	if _, err := b.Prepare(ctx, "mine", "select $1::text || '!'", nil); err != nil {
		t.Errorf("b re-preparing a closed name: %v", err)
	}

	// DEALLOCATE ALL forgets the client's names and the server's
	// statements: the next Parse of the same text goes to the server.
	if _, err := a.Exec(ctx, "DEALLOCATE ALL").ReadAll(); err != nil {
		t.Fatal(err)
	}
	before := serverParses()
	if _, err := a.Prepare(ctx, "q", "select $1::int * 2", nil); err != nil {
		t.Fatalf("re-preparing after DEALLOCATE ALL: %v", err)
	}
	if n := serverParses(); n != before+1 {
		t.Errorf("total_server_parse_count = %d after DEALLOCATE ALL and a Parse, want %d", n, before+1)
	}
	// b's name survived on the client side; its statement is re-parsed
	// on the server when b binds it.
	if r := b.ExecPrepared(ctx, "mine", [][]byte{[]byte("hi")}, nil, nil).Read(); r.Err != nil || string(r.Rows[0][0]) != "hi!" {
		t.Errorf("b's statement after a's DEALLOCATE ALL: %v %v", r.Rows, r.Err)
	}

	// PgBouncer's errors: FATAL 08P01 and the connection closed.
	wantFatal := func(what string, err error, msg string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "08P01" || pe.Message != msg {
			t.Errorf("%s: err = %v, want FATAL 08P01 %q", what, err, msg)
		}
	}
	_, err = b.Prepare(ctx, "mine", "select 1", nil)
	wantFatal("Parse of a name in use", err, errStmtNameInUse)
	c, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	err = c.ExecPrepared(ctx, "nosuch", nil, nil, nil).Read().Err
	wantFatal("Bind of an unknown name", err, errStmtNotExist)

	// As in PgBouncer (pgbouncer#1118), a Parse that fails on the server
	// keeps the client's name: parsing the name again disconnects.
	d, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	_, err = d.Prepare(ctx, "bad", "select from nosuchtable", nil)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42P01" {
		t.Fatalf("Parse of a bad query: %v, want 42P01", err)
	}
	_, err = d.Prepare(ctx, "bad", "select from nosuchtable", nil)
	wantFatal("Parse again after a failed Parse", err, errStmtNameInUse)

	// DISCARD ALL, too, forgets the client's names.
	f, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	if _, err := f.Prepare(ctx, "gone", "select 3", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Exec(ctx, "DISCARD ALL").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if servers, _ := preparedCounts(ctx, t, tp); len(servers) != 1 || servers[0] != 0 {
		t.Errorf("SHOW SERVERS prepared_statements after DISCARD ALL = %v, want [0]", servers)
	}
	err = f.ExecPrepared(ctx, "gone", nil, nil, nil).Read().Err
	wantFatal("Bind of a name after DISCARD ALL", err, errStmtNotExist)

	// The pool still works and no statement leaked into another client.
	e, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	if r := e.ExecParams(ctx, "select 1", nil, nil, nil, nil).Read(); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// TestPreparedStatementMode: tracking works in statement pooling too, where
// every statement may go to another server.
func TestPreparedStatementMode(t *testing.T) {
	tp := startProxy(t, func(c *Config) {
		c.PoolMode = poolmode.Statement
		c.DefaultPoolSize = 2
		c.MaxPreparedStatements = 5
		c.Verbose = false
	})
	runAdders(testCtx(t, 20*time.Second), t, tp.dsn, 4, 30)
}

// TestPreparedSessionModeOff: session pooling never tracks: statements keep
// the client's names on the server, and SHOW STATS counts nothing.
func TestPreparedSessionModeOff(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Session; c.DefaultPoolSize = 1; c.MaxPreparedStatements = 5 })
	ctx := testCtx(t, 20*time.Second)
	conn, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Prepare(ctx, "plain_name", "select 1", nil); err != nil {
		t.Fatal(err)
	}
	r := conn.ExecParams(ctx, "select name from pg_prepared_statements", nil, nil, nil, nil).Read()
	if r.Err != nil || len(r.Rows) != 1 || string(r.Rows[0][0]) != "plain_name" {
		t.Errorf("session mode: server statements %v %v, want the client's own name", r.Rows, r.Err)
	}
	if st := statsRow(ctx, t, tp); st["total_client_parse_count"] != 0 || st["total_server_parse_count"] != 0 {
		t.Errorf("session mode: parse counts %d/%d, want 0/0", st["total_client_parse_count"], st["total_server_parse_count"])
	}
}

// TestPreparedSkipThenFake: a fake ParseComplete queued right behind a
// swallowed CloseComplete is sent in its place, before the BindComplete
// that follows (PgBouncer sends fakes only after a forwarded response).
func TestPreparedSkipThenFake(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.MaxPreparedStatements = 1 })
	ctx := testCtx(t, 20*time.Second)
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", tp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "poolsim", "database": "poolsim"}})
	expect := func(step string, want string) {
		t.Helper()
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			m, err := fe.Receive()
			if err != nil {
				t.Fatalf("%s: %v after %v", step, err, got)
			}
			switch m := m.(type) {
			case *pgproto3.ParameterStatus, *pgproto3.BackendKeyData, *pgproto3.AuthenticationOk:
				continue
			case *pgproto3.ErrorResponse:
				t.Fatalf("%s: %s after %v", step, m.Message, got)
			}
			got = append(got, fmt.Sprintf("%T", m)[len("*pgproto3."):])
			if _, ok := m.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("%s: got %s, want %s", step, g, want)
		}
	}
	expect("login", "ReadyForQuery")
	fe.Send(&pgproto3.Parse{Name: "a", Query: "select 1"})
	fe.Send(&pgproto3.Sync{})
	expect("prepare a", "ParseComplete ReadyForQuery")
	// b goes to the server and evicts a (cache of 1); c is b's text, so
	// the server has it: its ParseComplete is the proxy's, due right after
	// b's, while the server's next message is the swallowed CloseComplete.
	fe.Send(&pgproto3.Parse{Name: "b", Query: "select 2"})
	fe.Send(&pgproto3.Parse{Name: "c", Query: "select 2"})
	fe.Send(&pgproto3.Bind{PreparedStatement: "c"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	expect("pipeline", "ParseComplete ParseComplete BindComplete DataRow CommandComplete ReadyForQuery")
	// a was evicted: binding it parses it again (ParseComplete swallowed).
	fe.Send(&pgproto3.Bind{PreparedStatement: "a"})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Close{ObjectType: 'S', Name: "a"})
	fe.Send(&pgproto3.Sync{})
	expect("re-parse", "BindComplete DataRow CommandComplete CloseComplete ReadyForQuery")
	if st := statsRow(ctx, t, tp); st["total_server_parse_count"] != 3 || st["total_client_parse_count"] != 3 {
		t.Errorf("parse counts: server %d, client %d; want 3 and 3", st["total_server_parse_count"], st["total_client_parse_count"])
	}
}

// TestPsQueue: the queue of expected responses keeps its order while it
// never drains, and compacts.
func TestPsQueue(t *testing.T) {
	var ps psServer
	var reg psRegistry
	next, want := 0, 0
	for range 1000 {
		for range 3 {
			ps.push(psReq{typ: 'S', act: psAction(next % 2)})
			next++
		}
		for range 2 {
			if popped, skip := ps.pop(&reg, msgSync); !popped || skip != (want%2 == 1) {
				t.Fatalf("pop %d: popped %v skip %v", want, popped, skip)
			}
			want++
		}
	}
	if ps.pending() != 1000 || cap(ps.queue) > 4*1000 {
		t.Errorf("pending %d (want 1000), capacity %d", ps.pending(), cap(ps.queue))
	}
}
