package pooler

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// makeSchemas creates schemas s1 and s2 (fresh), each with a table t whose
// one row names its schema, and public.t saying "public".
func makeSchemas(ctx context.Context, t *testing.T, prefix string) {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	conn, err := pgx.Connect(ctx, c.UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{prefix + "1", prefix + "2"} {
		for _, q := range []string{
			"DROP SCHEMA IF EXISTS " + s + " CASCADE",
			"CREATE SCHEMA " + s,
			"CREATE TABLE " + s + ".t (v text)",
			"INSERT INTO " + s + ".t VALUES ('" + s + "')",
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	for _, q := range []string{"CREATE TABLE IF NOT EXISTS public.t (v text)", "DELETE FROM public.t", "INSERT INTO public.t VALUES ('public')"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// connectWith connects through dsn with extra startup parameters.
func connectWith(ctx context.Context, t *testing.T, dsn string, params map[string]string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

// TestStartupSearchPath is issue 14's first test: clients with
// options=-c search_path=s1 and s2, an asyncpg-style search_path
// parameter, and one with none alternate on a one-server
// transaction-mode pool; every query sees its own client's schema, and a
// statement_timeout from the startup packet is enforced for its client
// only.
func TestStartupSearchPath(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 30*time.Second)
	makeSchemas(ctx, t, "sp")
	clients := []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"options": "-c search_path=sp1"}, "sp1"},
		{map[string]string{"options": `-csearch_path=sp2,public --statement-timeout=150ms`}, "sp2"},
		{map[string]string{"search_path": "sp1"}, "sp1"}, // asyncpg's server_settings, pgjdbc's currentSchema
		{nil, "public"},
	}
	conns := make([]*pgx.Conn, len(clients))
	for i, c := range clients {
		var err error
		if conns[i], err = connectWith(ctx, t, tp.dsn, c.params); err != nil {
			t.Fatalf("connect %v: %v", c.params, err)
		}
	}
	for round := range 4 {
		for i, c := range clients {
			var v string
			if err := conns[i].QueryRow(ctx, "select v from t").Scan(&v); err != nil || v != c.want {
				t.Errorf("round %d, client %v: select v from t = %q, %v; want %q", round, c.params, v, err, c.want)
			}
		}
	}
	// statement_timeout=150ms came with client 1 only.
	_, err := conns[1].Exec(ctx, "select pg_sleep(1)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Errorf("client with statement_timeout=150ms: pg_sleep(1) = %v, want 57014 canceling statement due to statement timeout", err)
	}
	if _, err := conns[0].Exec(ctx, "select pg_sleep(0.3)"); err != nil {
		t.Errorf("client without statement_timeout on the same server: %v", err)
	}
	var st string
	if err := conns[3].QueryRow(ctx, "show statement_timeout").Scan(&st); err != nil || st != "0" {
		t.Errorf("client with no options: statement_timeout %q, %v; want 0 (reset after client 1)", st, err)
	}
}

// TestStartupSessionMode: in session mode the settings go with the
// server for the session, and server_reset_query (DISCARD ALL) resets
// them before the next client.
func TestStartupSessionMode(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.PoolMode = poolmode.Session })
	ctx := testCtx(t, 30*time.Second)
	makeSchemas(ctx, t, "ss")
	for _, c := range []struct {
		params map[string]string
		want   string
	}{{map[string]string{"options": "-c search_path=ss1"}, "ss1"}, {nil, "public"}, {map[string]string{"options": "-c search_path=ss2"}, "ss2"}, {nil, "public"}} {
		conn, err := connectWith(ctx, t, tp.dsn, c.params)
		if err != nil {
			t.Fatal(err)
		}
		var v string
		if err := conn.QueryRow(ctx, "select v from t").Scan(&v); err != nil || v != c.want {
			t.Errorf("client %v: %q, %v; want %q", c.params, v, err, c.want)
		}
		conn.Close(ctx)
	}
}

// TestStartupRefused: what cannot be applied is refused with a FATAL at
// login: replication, other command-line switches, bad names, and a
// setting PostgreSQL rejects, with PostgreSQL's own error (tried on a
// server before the login completes, startup_check.go);
// ignore_startup_parameters drops what it names.
func TestStartupRefused(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.IgnoreStartupParameters = []string{"Extra_Float_Digits"} })
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"replication": "database"}, "unsupported startup parameter: replication"},
		{map[string]string{"options": "-B 100"}, "unsupported startup parameter: options (-B)"},
		{map[string]string{"options": "-c"}, "unsupported startup parameter: options (-c)"},
		{map[string]string{"bad name": "1"}, "unsupported startup parameter: bad name"},
	} {
		_, err := connectWith(ctx, t, tp.dsn, tc.params)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Severity != "FATAL" || !strings.HasPrefix(pe.Message, tc.want) {
			t.Errorf("login with %v: %v, want FATAL %q", tc.params, err, tc.want)
		}
	}
	_, err := connectWith(ctx, t, tp.dsn, map[string]string{"options": "-c no_such_setting=1"})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "42704" || !strings.Contains(pe.Message, `unrecognized configuration parameter "no_such_setting"`) {
		t.Errorf("login with no_such_setting=1: %v, want PostgreSQL's FATAL unrecognized configuration parameter", err)
	}
	conn, err := connectWith(ctx, t, tp.dsn, map[string]string{"extra_float_digits": "3", "options": "-c extra_float_digits=2"})
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := conn.QueryRow(ctx, "show extra_float_digits").Scan(&v); err != nil || v != "1" {
		t.Errorf("ignored extra_float_digits: server has %q, %v; want the default 1", v, err)
	}
}

// TestStartupPgBouncer118 records the behaviour the proxy replaces: the
// PgBouncer 1.18 CI installs refuses options, and drops search_path
// only when ignore_startup_parameters lists it, so the client silently
// reads public.
func TestStartupPgBouncer118(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	c := pgclustertest.Need(t, cluster)
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20),
		Extra: map[string]string{"ignore_startup_parameters": "extra_float_digits,search_path"}})
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("pgbouncer: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	if !strings.HasPrefix(b.Version(), "1.18") {
		t.Skipf("PgBouncer %s: this test records 1.18's behaviour", b.Version())
	}
	makeSchemas(ctx, t, "pb")
	_, err = connectWith(ctx, t, b.DSN("poolsim", "poolsim"), map[string]string{"options": "-c search_path=pb1"})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Message != "unsupported startup parameter: options" {
		t.Errorf("PgBouncer 1.18 with options: %v, want FATAL unsupported startup parameter: options", err)
	}
	conn, err := connectWith(ctx, t, b.DSN("poolsim", "poolsim"), map[string]string{"search_path": "pb1"})
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := conn.QueryRow(ctx, "select v from t").Scan(&v); err != nil || v != "public" {
		t.Errorf("PgBouncer 1.18 with an ignored search_path: %q, %v; want public (silently)", v, err)
	}
}

// TestStartupPsql: psql with PGOPTIONS, through the proxy.
func TestStartupPsql(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		c := pgclustertest.Need(t, cluster)
		psql = c.BinDir() + "/psql"
		if _, err := os.Stat(psql); err != nil {
			t.Fatalf("no psql: %v", err)
		}
	}
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 30*time.Second)
	makeSchemas(ctx, t, "ps")
	for _, schema := range []string{"ps1", "ps2"} {
		cmd := exec.CommandContext(ctx, psql, "-X", "-A", "-t", "-c", "select v from t", tp.dsn)
		cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path="+schema)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != schema {
			t.Errorf("psql with PGOPTIONS search_path=%s: %q, %v", schema, out, err)
		}
	}
}

func TestSplitOptions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []setting
		bad  string
	}{
		{"", nil, ""},
		{"-c a=1", []setting{{"a", "1"}}, ""},
		{"  -ca=1   --b-c=x\\ y -c d=", []setting{{"a", "1"}, {"b_c", "x y"}, {"d", ""}}, ""},
		{`-c search_path=a\,b`, []setting{{"search_path", "a,b"}}, ""},
		{"-c a", nil, "a"},
		{"-d 5", nil, "-d"},
		{"--", nil, "--"},
	} {
		got, bad := splitOptions(tc.in)
		if !slices.Equal(got, tc.want) || bad != tc.bad {
			t.Errorf("splitOptions(%q) = %v, %q; want %v, %q", tc.in, got, bad, tc.want, tc.bad)
		}
	}
}

func TestApplySettings(t *testing.T) {
	var b strings.Builder
	applySettings(&b, settings{{"search_path", "a,b"}, {"x.y", `it's \`}}, settings{{"search_path", "c"}, {"work_mem", "1MB"}})
	want := `RESET work_mem;SELECT pg_catalog.set_config('search_path', 'a,b', false), pg_catalog.set_config('x.y', E'it''s \\', false);`
	if b.String() != want {
		t.Errorf("applySettings = %s\nwant %s", b.String(), want)
	}
}
