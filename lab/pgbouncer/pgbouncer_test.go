package pgbouncer_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

var cluster *pgcluster.Cluster

func TestMain(m *testing.M) {
	code := pgclustertest.RunMain(m, pgcluster.Options{MaxConnections: 30}, &cluster)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// start starts a PgBouncer in front of the shared cluster; it skips when
// PgBouncer is missing (fails with CI=true).
func start(t *testing.T, cfg pgbouncer.Config) *pgbouncer.PgBouncer {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	needPgBouncer(t)
	cfg.UpstreamPort = c.Port()
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgbouncer.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// needPgBouncer skips t when PgBouncer is missing, or fails it with CI=true.
func needPgBouncer(t *testing.T) {
	t.Helper()
	if _, err := pgbouncer.Find(); errors.Is(err, pgbouncer.ErrNoPgBouncer) {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and PgBouncer is required: %v", err)
		}
		t.Skip(err)
	}
}

func connect(t *testing.T, ctx context.Context, dsn string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// showRows runs an admin SHOW command and returns its rows as column maps.
func showRows(t *testing.T, ctx context.Context, conn *pgx.Conn, cmd string) []map[string]string {
	t.Helper()
	rows, err := conn.Query(ctx, cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		m := map[string]string{}
		for i, fd := range rows.FieldDescriptions() {
			m[fd.Name] = string(rows.RawValues()[i])
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out
}

func TestTransactionModeSelect1AndShowPools(t *testing.T) {
	p := start(t, pgbouncer.Config{
		Pooling: pgbouncer.Pool(poolmode.Transaction, 2, func(p *poolconf.Pooling) {
			p.MaxClientConn = 50
			// A fraction, to see it written and read back; long enough that a
			// server login on a busy machine never runs into it.
			p.QueryWaitTimeout = 90500 * time.Millisecond
			p.ServerResetQuery = ""
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if !strings.HasPrefix(p.Version(), "1.") {
		t.Errorf("Version() = %q", p.Version())
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		conn := connect(t, ctx, p.DSN("poolsim", "poolsim"), mode)
		for i := 0; i < 3; i++ {
			var one int
			if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("%v: select 1 = %d, %v", mode, one, err)
			}
		}
		var user string
		if err := conn.QueryRow(ctx, "select current_user").Scan(&user); err != nil || user != "poolsim" {
			t.Fatalf("current_user = %q, %v", user, err)
		}
	}

	// Eight clients, transaction pooling, pool size 2: at most two backends.
	var mu sync.Mutex
	pids := map[uint32]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		conn := connect(t, ctx, p.DSN("poolsim", "poolsim"), pgx.QueryExecModeSimpleProtocol)
		wg.Add(1)
		go func() { // owner: this test; ends after five queries
			defer wg.Done()
			for j := 0; j < 5; j++ {
				var pid uint32
				if err := conn.QueryRow(ctx, "select pg_backend_pid()::int8").Scan(&pid); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				pids[pid] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(pids) == 0 || len(pids) > 2 {
		t.Errorf("saw %d backends through a pool of 2", len(pids))
	}

	admin := connect(t, ctx, p.AdminDSN(), pgx.QueryExecModeSimpleProtocol)
	found := false
	for _, r := range showRows(t, ctx, admin, "SHOW POOLS") {
		if r["database"] == "poolsim" && r["user"] == "poolsim" {
			found = true
			if r["pool_mode"] != "transaction" {
				t.Errorf("SHOW POOLS pool_mode = %q", r["pool_mode"])
			}
			if n, _ := strconv.Atoi(r["sv_idle"]); n > 2 {
				t.Errorf("SHOW POOLS sv_idle = %d > pool size 2", n)
			}
		}
	}
	if !found {
		t.Error("SHOW POOLS has no poolsim/poolsim pool")
	}
	conf := map[string]string{}
	for _, r := range showRows(t, ctx, admin, "SHOW CONFIG") {
		conf[r["key"]] = r["value"]
	}
	for k, want := range map[string]string{
		"pool_mode": "transaction", "default_pool_size": "2", "max_client_conn": "50",
		"query_wait_timeout": "90.5", "server_reset_query": "",
	} {
		if got, ok := conf[k]; !ok || got != want {
			t.Errorf("SHOW CONFIG %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
}

func TestStopIsIdempotentAndCleans(t *testing.T) {
	p := start(t, pgbouncer.Config{})
	dir, addr := p.Dir(), net.JoinHostPort(p.Host(), strconv.Itoa(p.Port()))
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", dir, err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts", addr)
	}
}

func TestSCRAMUpstream(t *testing.T) {
	// PgBouncer logs into a scram-sha-256 upstream with the auth file's
	// password, and authenticates its own clients with md5 from the same file.
	needPgBouncer(t)
	c := pgclustertest.Start(t, pgcluster.Options{Auth: pgcluster.AuthSCRAM, MaxConnections: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: c.Port(), AuthType: "md5", Pooling: pgbouncer.Pool(poolmode.Transaction, 20)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	conn := connect(t, ctx, p.DSN("poolsim", "poolsim"), pgx.QueryExecModeSimpleProtocol)
	var user string
	if err := conn.QueryRow(ctx, "select current_user").Scan(&user); err != nil || user != "poolsim" {
		t.Fatalf("current_user = %q, %v", user, err)
	}
	cfg, _ := pgx.ParseConfig(strings.Replace(p.DSN("poolsim", "poolsim"), "poolsim:poolsim@", "poolsim:wrong@", 1))
	if bad, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		bad.Close(ctx)
		t.Error("wrong password accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []pgbouncer.Config{
		{}, // no upstream port
		{UpstreamPort: 5432, Pooling: pgbouncer.Pool(poolmode.Direct, 2)}, // not a pool_mode
		{UpstreamPort: 5432, Pooling: pgbouncer.Pool(poolmode.Transaction, -1)},
		{UpstreamPort: 5432, Extra: map[string]string{"Bad Key": "1"}},
		{UpstreamPort: 5432, Extra: map[string]string{"logfile": "a\nb"}},
		{UpstreamPort: 5432, Databases: []string{"web = dbname=app\n[pgbouncer]"}}, // a second line
		{UpstreamPort: 5432, Databases: []string{"web"}},                           // no settings
	} {
		if p, err := pgbouncer.Start(ctx, cfg); err == nil {
			p.Stop()
			t.Errorf("Start(%+v) accepted", cfg)
		}
	}
}
