//go:build linux

package pooler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// takeoverConfig is a proxy on TCP and a Unix socket in a fresh folder:
// database "sess" in session mode (a forced user), every other name in
// transaction mode through the upstream.
func takeoverConfig(t *testing.T) Config {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.UnixSocketDir = dir
	cfg.ListenPort = 40000 + os.Getpid()%20000
	cfg.Upstream = c.UserDSN()
	cfg.PoolMode = poolmode.Transaction
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.Logf = t.Logf
	cfg.Verbose = true
	cfg.AdminUsers = []string{"poolsim"}
	cfg.PlainIO = plainIOFor(t)
	sess := poolconf.NewDatabase("sess")
	sess.Host, sess.Port, sess.DBName, sess.User, sess.Password = "127.0.0.1", c.Port(), "poolsim", "poolsim", "poolsim"
	sess.PoolMode = poolmode.Session
	cfg.Databases = []poolconf.Database{sess}
	return cfg
}

// servedProxy is a proxy serving on its own goroutine; done gives Serve's
// result once.
type servedProxy struct {
	*Proxy
	cancel context.CancelFunc
	done   chan error
}

func serveForTakeover(t *testing.T, cfg Config, takeover *Takeover) *servedProxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sp := &servedProxy{Proxy: p, cancel: cancel, done: make(chan error, 1)}
	if takeover != nil {
		go func() { sp.done <- p.ServeTakeover(ctx, takeover) }()
	} else {
		lns, err := Listen(&cfg)
		if err != nil {
			cancel()
			t.Fatalf("listen: %v", err)
		}
		go func() { sp.done <- p.Serve(ctx, lns[0], lns[1:]...) }()
	}
	t.Cleanup(func() { sp.stop(t) })
	return sp
}

// stop ends the proxy (if it still serves) and waits for Serve.
func (sp *servedProxy) stop(t *testing.T) {
	sp.cancel()
	if sp.done == nil {
		return
	}
	select {
	case err := <-sp.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("Serve did not return")
	}
	sp.done = nil
}

// waitGone waits for Serve to return by itself (the old process exiting).
func (sp *servedProxy) waitGone(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case err := <-sp.done:
		sp.done = nil
		if err != nil {
			t.Errorf("old proxy's Serve: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("the old proxy still serves %v after the takeover", d)
	}
}

func connectTo(ctx context.Context, t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The simple protocol: transaction pooling without prepared statements.
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryString(ctx context.Context, t *testing.T, conn *pgx.Conn, what, q string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(ctx, q).Scan(&s); err != nil {
		t.Fatalf("%s: %s: %v", what, q, err)
	}
	return s
}

// restartTarget is a pooler to restart online: its client URLs, its
// console and how it restarts.
type restartTarget struct {
	name     string
	tcp      func(db string) string
	unixDSN  string
	adminDSN string
	// reboot takes the pooler over by a new process (pgbouncer -R) and
	// returns once the old one has gone.
	reboot func(ctx context.Context, t *testing.T)
	// cancelMayFail: a cancel of a query running across the takeover may
	// not reach PostgreSQL. Right after a takeover PgBouncer 1.18 at times
	// logs "closing because: failed cancel request" and the query runs to
	// its end; the proxy always cancels it.
	cancelMayFail bool
}

// TestOnlineRestart: a new process takes over a running pooler as
// pgbouncer -R does, on the proxy and on PgBouncer 1.18. Every client
// keeps its connection and its session: a session client its SET values,
// temp table and backend, another its open transaction; transaction
// clients their tracked settings and open transaction; a query in flight
// across the takeover gets its answer; a cancel key still cancels; the old
// process is gone and the new one accepts on the same TCP address and Unix
// socket.
func TestOnlineRestart(t *testing.T) {
	t.Run("proxy", func(t *testing.T) {
		cfg := takeoverConfig(t)
		old := serveForTakeover(t, cfg, nil)
		addr := old.Addr().String()
		runOnlineRestart(t, restartTarget{
			name: "proxy",
			tcp: func(db string) string {
				return fmt.Sprintf("postgres://poolsim:poolsim@%s/%s?sslmode=disable", addr, db)
			},
			unixDSN:  fmt.Sprintf("host=%s port=%d user=poolsim dbname=poolsim password=poolsim sslmode=disable", cfg.UnixSocketDir, cfg.ListenPort),
			adminDSN: fmt.Sprintf("postgres://poolsim:poolsim@%s/pgbouncer?sslmode=disable", addr),
			reboot: func(ctx context.Context, t *testing.T) {
				cfg2 := cfg
				cfg2.Listen = addr
				t2, err := StartTakeover(ctx, &cfg2)
				if err != nil {
					t.Fatalf("StartTakeover: %v", err)
				}
				if n := len(t2.Listeners()); n != 2 {
					t.Errorf("took over %d listening sockets, want 2 (TCP and Unix)", n)
				}
				neu := serveForTakeover(t, cfg2, t2)
				old.waitGone(t, 20*time.Second)
				if got := neu.Addr().String(); got != addr {
					t.Errorf("new proxy listens on %s, want the old address %s", got, addr)
				}
			},
		})
	})
	t.Run("pgbouncer", func(t *testing.T) {
		c := pgclustertest.Need(t, cluster)
		ctx := testCtx(t, 30*time.Second)
		b, err := pgbouncer.Start(ctx, pgbouncer.Config{
			UpstreamPort: c.Port(),
			Pooling:      pgbouncer.Pool(poolmode.Transaction, 20),
			Databases:    []string{fmt.Sprintf("sess = host=127.0.0.1 port=%d dbname=poolsim user=poolsim password=poolsim pool_mode=session", c.Port())},
			AdminUsers:   []string{"poolsim"},
		})
		if err != nil {
			t.Skipf("pgbouncer: %v", err)
		}
		t.Cleanup(func() { _ = b.Stop() })
		runOnlineRestart(t, restartTarget{
			name:          "pgbouncer",
			tcp:           func(db string) string { return b.DSN(db, "poolsim") },
			unixDSN:       fmt.Sprintf("host=%s port=%d user=poolsim dbname=poolsim password=poolsim sslmode=disable", b.Dir(), b.Port()),
			adminDSN:      b.AdminDSN(),
			cancelMayFail: true,
			reboot: func(ctx context.Context, t *testing.T) {
				pid := b.Pid()
				if err := b.Reboot(ctx); err != nil {
					t.Fatal(err)
				}
				if b.Pid() == pid {
					t.Errorf("pgbouncer -R: still pid %d", pid)
				}
			},
		})
	})
}

func runOnlineRestart(t *testing.T, tg restartTarget) {
	ctx := testCtx(t, 90*time.Second)
	tcp := tg.tcp
	unixDSN := tg.unixDSN
	sessA := connectTo(ctx, t, tcp("sess"))
	for _, q := range []string{"set timezone = 'Asia/Tokyo'", "set work_mem = '7MB'", "create temp table kept(x int)", "insert into kept values (1)"} {
		if _, err := sessA.Exec(ctx, q); err != nil {
			t.Fatalf("session client: %s: %v", q, err)
		}
	}
	sessAPid := queryString(ctx, t, sessA, "session client", "select pg_backend_pid()::text")
	sessB := connectTo(ctx, t, tcp("sess"))
	sessTx, err := sessB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessTx.Exec(ctx, "create temp table intx(x int)"); err != nil {
		t.Fatal(err)
	}
	txA := connectTo(ctx, t, tcp("poolsim"))
	if _, err := txA.Exec(ctx, "set datestyle = 'SQL, DMY'"); err != nil {
		t.Fatal(err)
	}
	txB := connectTo(ctx, t, tcp("poolsim"))
	openTx, err := txB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txBPid := queryString(ctx, t, txB, "transaction client", "select pg_backend_pid()::text")
	unixC := connectTo(ctx, t, unixDSN)
	queryString(ctx, t, unixC, "unix client", "select 'before'")

	// A query in flight across the takeover, and one to cancel after it.
	flying := connectTo(ctx, t, tcp("poolsim"))
	cancelled := connectTo(ctx, t, tcp("poolsim"))
	var wg sync.WaitGroup
	var flyErr, cancelErr error
	var flyGot string
	wg.Add(2)
	go func() {
		defer wg.Done()
		flyErr = flying.QueryRow(ctx, "select pg_sleep(1.5)::text || 'slept'").Scan(&flyGot)
	}()
	go func() {
		defer wg.Done()
		_, cancelErr = cancelled.Exec(ctx, "select pg_sleep(6)")
	}()
	pg := connectTo(ctx, t, cluster.UserDSN())
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	running := waitFor(wctx, func() bool {
		var n int
		err := pg.QueryRow(ctx, "select count(*) from pg_stat_activity where state = 'active' and query like '%pg_sleep(%' and pid <> pg_backend_pid()").Scan(&n)
		return err == nil && n == 2
	})
	if !running {
		wg.Wait()
		t.Fatalf("the two queries did not start: %v, %v", flyErr, cancelErr)
	}

	tg.reboot(ctx, t)

	if got := queryString(ctx, t, sessA, "session client", "show timezone"); got != "Asia/Tokyo" {
		t.Errorf("session client's timezone after takeover = %q, want Asia/Tokyo", got)
	}
	if got := queryString(ctx, t, sessA, "session client", "show work_mem"); got != "7MB" {
		t.Errorf("session client's work_mem after takeover = %q, want 7MB", got)
	}
	if got := queryString(ctx, t, sessA, "session client", "select count(*)::text from kept"); got != "1" {
		t.Errorf("session client's temp table has %s rows, want 1", got)
	}
	if got := queryString(ctx, t, sessA, "session client", "select pg_backend_pid()::text"); got != sessAPid {
		t.Errorf("session client's backend after takeover = %s, want %s", got, sessAPid)
	}
	if _, err := sessTx.Exec(ctx, "insert into intx values (1)"); err != nil {
		t.Errorf("session transaction after takeover: %v", err)
	}
	if err := sessTx.Commit(ctx); err != nil {
		t.Errorf("session commit after takeover: %v", err)
	}
	if got := queryString(ctx, t, txA, "transaction client", "show datestyle"); got != "SQL, DMY" {
		t.Errorf("transaction client's DateStyle after takeover = %q, want SQL, DMY", got)
	}
	if got := queryString(ctx, t, txB, "transaction client", "select pg_backend_pid()::text"); got != txBPid {
		t.Errorf("open transaction's backend after takeover = %s, want %s", got, txBPid)
	}
	if err := openTx.Commit(ctx); err != nil {
		t.Errorf("commit after takeover: %v", err)
	}
	if got := queryString(ctx, t, unixC, "unix client", "select 'after'"); got != "after" {
		t.Errorf("unix client after takeover: %q", got)
	}

	// The CancelRequest carries the key the old proxy gave; the new one
	// has it.
	if err := cancelled.PgConn().CancelRequest(ctx); err != nil {
		t.Errorf("cancel request: %v", err)
	}
	wg.Wait()
	if flyErr != nil || flyGot != "slept" {
		t.Errorf("query in flight across the takeover: %q, %v; want its answer", flyGot, flyErr)
	}
	var pe *pgconn.PgError
	switch canceled := errors.As(cancelErr, &pe) && pe.Code == "57014"; {
	case canceled:
	case tg.cancelMayFail && cancelErr == nil:
		t.Logf("%s: the cancel after the takeover was lost; the query ran to its end", tg.name)
	default:
		t.Errorf("%s: cancelled query after takeover: %v; want 57014 (query_canceled)", tg.name, cancelErr)
	}

	// Newcomers are the new proxy's, over TCP and the Unix socket.
	fresh := connectTo(ctx, t, tcp("poolsim"))
	queryString(ctx, t, fresh, "new client", "select 'new'")
	freshUnix := connectTo(ctx, t, unixDSN)
	queryString(ctx, t, freshUnix, "new unix client", "select 'new over unix'")
	admin := connectTo(ctx, t, tg.adminDSN)
	rows, err := admin.Query(ctx, "show clients", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if n < 9 {
		t.Errorf("%s: SHOW CLIENTS has %d rows after the takeover, want the 7 taken over, 2 new and the console", tg.name, n)
	}
}

// TestOnlineRestartAbort: a takeover given up before SHUTDOWN (Abort, or
// ServeTakeover with its context already done) resumes the old proxy,
// whose clients go on as if nothing happened; the Unix socket stays.
func TestOnlineRestartAbort(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	cfg := takeoverConfig(t)
	old := serveForTakeover(t, cfg, nil)
	addr := old.Addr().String()
	c := connectTo(ctx, t, fmt.Sprintf("postgres://poolsim:poolsim@%s/sess?sslmode=disable", addr))
	if _, err := c.Exec(ctx, "set work_mem = '9MB'"); err != nil {
		t.Fatal(err)
	}
	unixDSN := fmt.Sprintf("host=%s port=%d user=poolsim dbname=poolsim password=poolsim sslmode=disable", cfg.UnixSocketDir, cfg.ListenPort)

	tk, err := StartTakeover(ctx, &cfg)
	if err != nil {
		t.Fatalf("StartTakeover: %v", err)
	}
	if err := tk.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if got := queryString(ctx, t, c, "client after an aborted takeover", "show work_mem"); got != "9MB" {
		t.Errorf("work_mem = %q, want 9MB", got)
	}

	tk, err = StartTakeover(ctx, &cfg)
	if err != nil {
		t.Fatalf("second StartTakeover: %v", err)
	}
	p2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := p2.ServeTakeover(done, tk); err == nil || !strings.Contains(err.Error(), "takeover") {
		t.Errorf("ServeTakeover with a done context: %v, want a takeover error", err)
	}
	if got := queryString(ctx, t, c, "client after a failed takeover", "show work_mem"); got != "9MB" {
		t.Errorf("work_mem = %q, want 9MB", got)
	}
	u := connectTo(ctx, t, unixDSN)
	queryString(ctx, t, u, "unix client after a failed takeover", "select 'still'")
	select {
	case err := <-old.done:
		old.done = nil
		t.Fatalf("the old proxy stopped: %v", err)
	default:
	}
}

// TestShowFDSOverTCP: over TCP SHOW FDS lists the descriptors (PgBouncer's
// columns) and passes none on; the old proxy is not suspended by it.
func TestShowFDSOverTCP(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	tp := startProxy(t, nil)
	c := connectTo(ctx, t, tp.dsn)
	queryString(ctx, t, c, "client", "select 'x'")
	admin := connectTo(ctx, t, tp.adminDSN())
	rows, err := admin.Query(ctx, "show fds", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[string]int{}
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		tasks[fmt.Sprint(v[1])]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := "fd task user database addr port cancel link client_encoding std_strings datestyle timezone password scram_client_key scram_server_key"
	if got := strings.Join(cols, " "); got != want {
		t.Errorf("columns %q, want %q", got, want)
	}
	if tasks["pooler"] != 1 || tasks["client"] != 1 || tasks["server"] != 1 {
		t.Errorf("rows by task %v, want one pooler, one client, one server", tasks)
	}
	queryString(ctx, t, c, "client after SHOW FDS", "select 'y'")
}

// TestOnlineRestartTLSClient: a TLS client cannot be handed over (PgBouncer
// 1.18 leaves TLS sockets out of SHOW FDS): it is disconnected with the old
// process, while a plain client beside it carries on through the new one,
// on the proxy and on PgBouncer 1.18.
func TestOnlineRestartTLSClient(t *testing.T) {
	f := writeTLSFiles(t)
	t.Run("proxy", func(t *testing.T) {
		cfg := takeoverConfig(t)
		cfg.ClientTLSSSLMode, cfg.ClientTLSCertFile, cfg.ClientTLSKeyFile = "allow", f.cert, f.key
		old := serveForTakeover(t, cfg, nil)
		addr := old.Addr().String()
		runTLSRestart(t, func(ssl string) string {
			return fmt.Sprintf("postgres://poolsim:poolsim@%s/sess?sslmode=%s", addr, ssl)
		}, func(ctx context.Context, t *testing.T) {
			cfg2 := cfg
			cfg2.Listen = addr
			tk, err := StartTakeover(ctx, &cfg2)
			if err != nil {
				t.Fatalf("StartTakeover: %v", err)
			}
			serveForTakeover(t, cfg2, tk)
			old.waitGone(t, 20*time.Second)
		})
	})
	t.Run("pgbouncer", func(t *testing.T) {
		c := pgclustertest.Need(t, cluster)
		ctx := testCtx(t, 30*time.Second)
		b, err := pgbouncer.Start(ctx, pgbouncer.Config{
			UpstreamPort: c.Port(),
			Pooling:      pgbouncer.Pool(poolmode.Transaction, 20),
			Databases:    []string{fmt.Sprintf("sess = host=127.0.0.1 port=%d dbname=poolsim user=poolsim password=poolsim pool_mode=session", c.Port())},
			Extra:        map[string]string{"client_tls_sslmode": "allow", "client_tls_cert_file": f.cert, "client_tls_key_file": f.key},
		})
		if err != nil {
			t.Skipf("pgbouncer: %v", err)
		}
		t.Cleanup(func() { _ = b.Stop() })
		runTLSRestart(t, func(ssl string) string {
			return fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/sess?sslmode=%s", b.Port(), ssl)
		}, func(ctx context.Context, t *testing.T) {
			if err := b.Reboot(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func runTLSRestart(t *testing.T, dsn func(sslmode string) string, reboot func(context.Context, *testing.T)) {
	ctx := testCtx(t, 60*time.Second)
	secure := connectTo(ctx, t, dsn("require"))
	plain := connectTo(ctx, t, dsn("disable"))
	for _, c := range []*pgx.Conn{secure, plain} {
		if _, err := c.Exec(ctx, "set work_mem = '5MB'"); err != nil {
			t.Fatal(err)
		}
	}
	reboot(ctx, t)
	if got := queryString(ctx, t, plain, "plain client", "show work_mem"); got != "5MB" {
		t.Errorf("plain client's work_mem after takeover = %q, want 5MB", got)
	}
	var s string
	if err := secure.QueryRow(ctx, "show work_mem").Scan(&s); err == nil {
		t.Errorf("TLS client still served after the takeover (work_mem %s); it cannot be handed over", s)
	}
}
