package pooler

import (
	"context"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestShowPoolsCounts: pool size 1; one client inside a transaction holds
// the server, one waits, one is idle; SHOW POOLS must say so, and the
// Observer is told of each assignment with its wait.
func TestShowPoolsCounts(t *testing.T) {
	obs := &testObserver{}
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1; c.Observer = obs })
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
		states[c["database"]+" "+c["state"]]++
	}
	// PgBouncer's states: a client not waiting is active, linked or not;
	// the console's own connection is listed under pgbouncer.
	if want := map[string]int{"poolsim waiting": 1, "poolsim active": 2, "pgbouncer active": 1}; !maps.Equal(states, want) {
		t.Errorf("SHOW CLIENTS states = %v, want %v", states, want)
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
	waits := obs.assigned()
	var longest time.Duration
	for _, w := range waits {
		longest = max(longest, w.Wait)
		if w.Database != "poolsim" || w.User != "poolsim" || w.At.IsZero() {
			t.Errorf("Observer.Assigned(%+v): want database and user poolsim and a time", w)
		}
	}
	if len(waits) < 2 || longest < minWait {
		t.Errorf("Observer.Assigned told %d times, longest wait %v; want at least 2, one as long as the test saw the waiter wait (%v)", len(waits), longest, minWait)
	}
}
