package pooler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/models/poolmode"
)

func TestQueryProtocols(t *testing.T) {
	for _, mode := range []poolmode.Mode{poolmode.Session, poolmode.Transaction, poolmode.Statement} {
		for _, qem := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
			t.Run(mode.String()+"/"+qem.String(), func(t *testing.T) {
				tp := startProxy(t, func(c *Config) { c.PoolMode = mode; c.DefaultPoolSize = 1 })
				ctx := testCtx(t, 20*time.Second)
				cfg, err := pgx.ParseConfig(tp.dsn)
				if err != nil {
					t.Fatal(err)
				}
				cfg.DefaultQueryExecMode = qem
				conn, err := pgx.ConnectConfig(ctx, cfg)
				if err != nil {
					t.Fatalf("connect through proxy: %v", err)
				}
				defer conn.Close(ctx)
				for i := range 20 {
					var got int
					var s string
					if err := conn.QueryRow(ctx, "select $1::int + 1, repeat('x', $2::int)", i, 40000).Scan(&got, &s); err != nil {
						t.Fatalf("query %d: %v", i, err)
					}
					if got != i+1 || len(s) != 40000 {
						t.Fatalf("query %d = %d, len %d; want %d, 40000", i, got, len(s), i+1)
					}
				}
				// A server error is forwarded and the session goes on.
				_, err = conn.Exec(ctx, "select 1/0")
				var pe *pgconn.PgError
				if !asPgError(err, &pe) || pe.Code != "22012" {
					t.Fatalf("select 1/0: err = %v, want SQLSTATE 22012", err)
				}
				var one int
				if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
					t.Fatalf("select 1 after error = %d, %v", one, err)
				}
			})
		}
	}
}

func TestPipeline(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 20*time.Second)
	conn, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pl := conn.StartPipeline(ctx)
	for i := range 10 {
		pl.SendQueryParams("select $1::int", [][]byte{[]byte{byte('0' + i)}}, nil, nil, nil)
		if i%3 == 0 {
			if err := pl.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pl.Sync(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		res, err := pl.GetResults()
		if err != nil {
			t.Fatalf("pipeline results: %v", err)
		}
		if res == nil {
			break
		}
		if rr, ok := res.(*pgconn.ResultReader); ok {
			r := rr.Read()
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if string(r.Rows[0][0]) != string(rune('0'+got)) {
				t.Errorf("pipeline row %d = %q", got, r.Rows[0][0])
			}
			got++
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if got != 10 {
		t.Fatalf("pipeline returned %d results, want 10", got)
	}
}

func TestCopy(t *testing.T) {
	tp := startProxy(t, nil)
	ctx := testCtx(t, 20*time.Second)
	conn, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create temp table if not exists t_copy (a int, b text) on commit preserve rows"); err != nil {
		t.Fatal(err)
	}
	// COPY in and out in one transaction: transaction mode keeps the server.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "create temp table t_copy2 (a int, b text) on commit drop"); err != nil {
		t.Fatal(err)
	}
	rows := make([][]any, 5000)
	for i := range rows {
		rows[i] = []any{i, "row"}
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"t_copy2"}, []string{"a", "b"}, pgx.CopyFromRows(rows))
	if err != nil || n != 5000 {
		t.Fatalf("CopyFrom = %d, %v", n, err)
	}
	var out countWriter
	tag, err := tx.Conn().PgConn().CopyTo(ctx, &out, "copy t_copy2 to stdout")
	if err != nil || tag.RowsAffected() != 5000 {
		t.Fatalf("CopyTo = %v, %v", tag, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

type countWriter struct{ n int }

func (w *countWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// TestLargeMessages sends messages larger than the proxy's buffers both
// ways: a 3 MB query string and a 5 MB value back.
func TestLargeMessages(t *testing.T) {
	tp := startProxy(t, nil)
	ctx := testCtx(t, 20*time.Second)
	conn, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lit := strings.Repeat("y", 3<<20)
	var n int
	if err := conn.QueryRow(ctx, "select length('"+lit+"')", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != len(lit) {
		t.Fatalf("length of a 3 MB literal = %d, %v; want %d", n, err, len(lit))
	}
	var s string
	if err := conn.QueryRow(ctx, "select repeat('x', 5000000)").Scan(&s); err != nil || len(s) != 5000000 || strings.Trim(s, "x") != "" {
		t.Fatalf("5 MB value: %d bytes, %v", len(s), err)
	}
}

// TestSlowReader stops reading a 50 MB result part-way, so the proxy's
// writes to that client fill the socket and its server is no longer read
// (stalled). While it is stalled another client is served: one slow
// client does not hold up the proxy. No clock is read: the test waits for
// the stall itself, and a proxy that blocked would fail by the context's
// deadline.
func TestSlowReader(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 2 })
	ctx := testCtx(t, 60*time.Second)
	slow, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close(ctx)
	fast, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close(ctx)

	const nrows, width = 50000, 1000
	readCtx, stopReading := context.WithCancel(ctx)
	resume := make(chan struct{})
	done := make(chan error, 1)
	go func() { // owner: this test; it waits for done before slow closes
		done <- readRows(readCtx, slow, nrows, width, resume)
	}()
	resumed, finished := false, false
	defer func() { // on every path: the reader ends before slow is closed
		stopReading()
		if !resumed {
			close(resume)
		}
		if !finished {
			<-done
		}
	}()

	if !waitFor(ctx, tp.serverStalled) {
		t.Fatal("the slow client's server never stalled: the test did not fill the client's socket")
	}
	for i := range 20 {
		var one int
		if err := fast.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("select 1 (#%d) while another client's server is stalled: %d, %v", i, one, err)
		}
	}
	if !tp.serverStalled() {
		t.Fatal("the slow client's server was not stalled any more after the fast queries: nothing was shown")
	}
	close(resume)
	resumed = true
	err = <-done
	finished = true
	if err != nil {
		t.Fatalf("slow reader: %v", err)
	}
}

// readRows reads generate_series(1, nrows) rows of width bytes from conn,
// checking each; after the first row it stops reading until resume is
// closed.
func readRows(ctx context.Context, conn *pgx.Conn, nrows, width int, resume <-chan struct{}) error {
	rows, err := conn.Query(ctx, "select i, repeat('z', $1) from generate_series(1, $2) i", width, nrows)
	if err != nil {
		return err
	}
	defer rows.Close()
	k := 0
	for rows.Next() {
		var i int
		var s string
		if err := rows.Scan(&i, &s); err != nil {
			return err
		}
		k++
		if i != k || len(s) != width {
			return fmt.Errorf("row %d: i=%d, %d bytes", k, i, len(s))
		}
		if k == 1 {
			select {
			case <-resume:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if k != nrows {
		return fmt.Errorf("%d rows, want %d", k, nrows)
	}
	return nil
}

// serverStalled reports whether any server of the proxy is stalled: its
// client's output is full, so the proxy has stopped reading it.
func (tp *testProxy) serverStalled() bool {
	stalled := false
	tp.loop.call(func() {
		for _, pl := range tp.loopPools {
			for _, s := range pl.allServers() {
				stalled = stalled || s.stalled
			}
		}
	})
	return stalled
}

// waitFor polls cond until it holds (true) or ctx ends (false).
func waitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}
