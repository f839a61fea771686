package pooler

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/poolsim/poolsim/proxy/pgbouncer"
)

// show runs a console command and returns its columns and rows as text.
func show(ctx context.Context, t *testing.T, admin *pgx.Conn, cmd string) ([]string, []map[string]string) {
	t.Helper()
	rows, err := admin.Query(ctx, cmd, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	defer rows.Close()
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	var out []map[string]string
	for rows.Next() {
		raw := rows.RawValues()
		m := map[string]string{}
		for i, c := range cols {
			m[c] = string(raw[i])
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return cols, out
}

func TestShowColumns(t *testing.T) {
	tp := startProxy(t, nil)
	ctx := testCtx(t, 20*time.Second)
	conn := connect(ctx, t, tp.dsn)
	if _, err := conn.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	admin := connect(ctx, t, tp.adminDSN())
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"SHOW POOLS", poolsColumns},
		{"show stats;", statsColumns},
		{"SHOW CLIENTS", connColumns},
		{"SHOW SERVERS", connColumns},
	} {
		cols, rows := show(ctx, t, admin, tc.cmd)
		if !slices.Equal(cols, tc.want) {
			t.Errorf("%s columns = %v, want %v", tc.cmd, cols, tc.want)
		}
		if len(rows) != 1 {
			t.Errorf("%s: %d rows, want 1", tc.cmd, len(rows))
		}
	}
	// PgBouncer's exact names, spelled out once more so a change to the
	// variables above cannot pass unnoticed.
	wantPools := []string{"database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
		"sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used", "sv_tested", "sv_login",
		"maxwait", "maxwait_us", "pool_mode", "load_balance_hosts"}
	if !slices.Equal(poolsColumns, wantPools) {
		t.Errorf("SHOW POOLS columns = %v, want %v", poolsColumns, wantPools)
	}
	if _, err := admin.Exec(ctx, "SHOW NONSENSE", pgx.QueryExecModeSimpleProtocol); err == nil {
		t.Errorf("SHOW NONSENSE: no error")
	}
	// The console survives an unknown command and answers SHOW VERSION and HELP.
	if cols, rows := show(ctx, t, admin, "SHOW VERSION"); len(rows) != 1 || cols[0] != "version" {
		t.Errorf("SHOW VERSION = %v %v", cols, rows)
	}
	if _, err := admin.Exec(ctx, "SHOW HELP", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Errorf("SHOW HELP: %v", err)
	}
}

// TestShowPoolsCounts: pool size 1; one client inside a transaction holds
// the server, one waits, one is idle; SHOW POOLS must say so.
func TestShowPoolsCounts(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.PoolSize = 1 })
	ctx := testCtx(t, 20*time.Second)
	holder := connect(ctx, t, tp.dsn)
	waiter := connect(ctx, t, tp.dsn)
	connect(ctx, t, tp.dsn) // idle, never linked
	admin := connect(ctx, t, tp.adminDSN())

	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, "select 1")
		done <- err
	}()
	pool := func() map[string]string {
		_, rows := show(ctx, t, admin, "SHOW POOLS")
		for _, r := range rows {
			if r["database"] == "poolsim" && r["user"] == "poolsim" {
				return r
			}
		}
		t.Fatalf("SHOW POOLS has no poolsim/poolsim row: %v", rows)
		return nil
	}
	var r map[string]string
	waitFor(ctx, func() bool { r = pool(); return r["cl_waiting"] == "1" })
	sawWaiting := time.Now() // the waiter waits from before this until the commit
	want := map[string]string{"cl_active": "2", "cl_waiting": "1", "sv_active": "1", "sv_idle": "0", "sv_login": "0", "pool_mode": "transaction"}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("while one waits: SHOW POOLS %s = %q, want %q (row %v)", k, r[k], v, r)
		}
	}
	if !waitFor(ctx, func() bool { r = pool(); return r["maxwait"] != "0" || r["maxwait_us"] != "0" }) {
		t.Errorf("maxwait/maxwait_us stay 0 while a client waits")
	}
	_, clients := show(ctx, t, admin, "SHOW CLIENTS")
	states := map[string]int{}
	for _, c := range clients {
		states[c["state"]]++
	}
	if states["waiting"] != 1 || states["active"] != 1 {
		t.Errorf("SHOW CLIENTS states = %v, want 1 waiting and 1 active", states)
	}

	minWait := time.Since(sawWaiting)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	r = pool()
	want = map[string]string{"cl_active": "3", "cl_waiting": "0", "sv_active": "0", "sv_idle": "1"}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("after the transaction: SHOW POOLS %s = %q, want %q (row %v)", k, r[k], v, r)
		}
	}
	_, stats := show(ctx, t, admin, "SHOW STATS")
	if n, _ := strconv.Atoi(stats[0]["total_xact_count"]); n < 2 {
		t.Errorf("SHOW STATS total_xact_count = %d, want at least 2", n)
	}
	waits := tp.Waits()
	var longest time.Duration
	for _, w := range waits {
		longest = max(longest, w.Wait)
		if w.Database != "poolsim" || w.User != "poolsim" || w.At.IsZero() {
			t.Errorf("Waits() record %+v: want database and user poolsim and a time", w)
		}
	}
	if len(waits) < 2 || longest < minWait {
		t.Errorf("Waits() = %d records, longest %v; want at least 2, one as long as the test saw the waiter wait (%v)", len(waits), longest, minWait)
	}
	if again := tp.Waits(); len(again) != 0 {
		t.Errorf("Waits() after a drain = %d records, want 0", len(again))
	}
}

// TestConsoleMatchesPgBouncer asks a real PgBouncer and the proxy the same
// console commands, after one query through each, and compares: every
// column of the installed PgBouncer's tables, in its order (the proxy adds
// the columns later PgBouncers added, such as the prepared-statement
// counts of 1.21), the same SHOW LISTS entries,
// and for every setting both have, the proxy's default is PgBouncer's
// (so DefaultConfig really is PgBouncer's defaults). Exporters such as
// pgbouncer_exporter read these tables.
func TestConsoleMatchesPgBouncer(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: cluster.Port(), PoolMode: "transaction"})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgbouncer: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	tp := startProxy(t, nil)
	for _, dsn := range []string{b.DSN("poolsim", "poolsim"), tp.dsn} {
		conn := connect(ctx, t, dsn)
		if _, err := conn.Exec(ctx, "select 1", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	theirs := connect(ctx, t, b.AdminDSN())
	ours := connect(ctx, t, tp.adminDSN())
	for _, cmd := range []string{"SHOW POOLS", "SHOW STATS", "SHOW CLIENTS", "SHOW SERVERS", "SHOW DATABASES", "SHOW LISTS", "SHOW CONFIG"} {
		wantCols, wantRows := show(ctx, t, theirs, cmd)
		cols, rows := show(ctx, t, ours, cmd)
		if !inOrder(wantCols, cols) {
			t.Errorf("%s columns:\n got %v\nwant %v (PgBouncer), in that order", cmd, cols, wantCols)
		}
		switch cmd {
		case "SHOW LISTS":
			var got, want []string
			for _, r := range rows {
				got = append(got, r["list"])
			}
			for _, r := range wantRows {
				want = append(want, r["list"])
			}
			if !slices.Equal(got, want) {
				t.Errorf("SHOW LISTS entries = %v, want %v", got, want)
			}
		case "SHOW CONFIG":
			defaults := map[string]string{}
			for _, r := range wantRows {
				defaults[r["key"]] = r["default"]
			}
			for _, r := range rows {
				k := r["key"]
				want, ok := defaults[k]
				switch {
				case k == "max_prepared_statements" || k == "auth_type" || k == "auth_file" || k == "listen_addr":
					// Not in 1.18; trust is the proxy's default (no md5);
					// no default file or address.
				case !ok:
					t.Errorf("SHOW CONFIG: PgBouncer has no setting %q", k)
				case r["default"] != want:
					t.Errorf("SHOW CONFIG %s: default %q, PgBouncer's is %q", k, r["default"], want)
				}
			}
		}
	}
}

// inOrder reports whether want is a subsequence of got: all of want's
// names, in want's order, with others possibly between.
func inOrder(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
