package pooler

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStartupParameters has two clients with different TimeZone and
// application_name share one server in transaction mode: each sees its own
// settings in the login's ParameterStatus and on the server, query after
// query, and a SET by one follows that client, not the server.
func TestStartupParameters(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 20*time.Second)
	connect := func(tz, app string) *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(tp.dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // named statements need max_prepared_statements
		cfg.RuntimeParams["TimeZone"] = tz
		cfg.RuntimeParams["application_name"] = app
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	a := connect("UTC", "alpha")
	b := connect("Asia/Seoul", "beta")
	for conn, want := range map[*pgx.Conn][2]string{a: {"UTC", "alpha"}, b: {"Asia/Seoul", "beta"}} {
		pc := conn.PgConn()
		if tz, app := pc.ParameterStatus("TimeZone"), pc.ParameterStatus("application_name"); tz != want[0] || app != want[1] {
			t.Errorf("login ParameterStatus TimeZone=%q application_name=%q, want %q %q", tz, app, want[0], want[1])
		}
	}
	check := func(conn *pgx.Conn, tz, app, dateStyle string) {
		t.Helper()
		var gotTZ, gotApp, gotDS string
		err := conn.QueryRow(ctx, "select current_setting('TimeZone'), current_setting('application_name'), current_setting('DateStyle')").
			Scan(&gotTZ, &gotApp, &gotDS)
		if err != nil {
			t.Fatal(err)
		}
		if gotTZ != tz || gotApp != app || gotDS != dateStyle {
			t.Errorf("server has TimeZone=%q application_name=%q DateStyle=%q, want %q %q %q", gotTZ, gotApp, gotDS, tz, app, dateStyle)
		}
	}
	for range 3 { // one server: every query switches it between the clients
		check(a, "UTC", "alpha", "ISO, MDY")
		check(b, "Asia/Seoul", "beta", "ISO, MDY")
	}
	if _, err := b.Exec(ctx, "set DateStyle = 'German'"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		check(a, "UTC", "alpha", "ISO, MDY")
		check(b, "Asia/Seoul", "beta", "German, DMY")
	}
}
