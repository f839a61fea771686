package pooler

import (
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolmode"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
)

// consoleResult is everything a console command sent back, as the side by
// side tests compare it.
type consoleResult struct {
	cols    []string // name:type oid
	rows    [][]*string
	tag     string
	err     *pgconn.PgError
	notices []*pgconn.Notice
}

func (r consoleResult) String() string {
	if r.err != nil {
		return fmt.Sprintf("ERROR severity=%q V=%q code=%s %q", r.err.Severity, r.err.SeverityUnlocalized, r.err.Code, r.err.Message)
	}
	var ns []string
	for _, n := range r.notices {
		ns = append(ns, fmt.Sprintf("%s %s %q %q", n.Severity, n.Code, n.Message, n.Detail))
	}
	return fmt.Sprintf("tag %q notices %v columns %v", r.tag, ns, r.cols)
}

// cell is row i's value in column name, "NULL" for NULL.
func (r consoleResult) cell(i int, name string) string {
	for j, c := range r.cols {
		if strings.HasPrefix(c, name+":") {
			if v := r.rows[i][j]; v != nil {
				return *v
			}
			return "NULL"
		}
	}
	return "<no column " + name + ">"
}

// find is the index of the first row whose column col is v, or -1.
func (r consoleResult) find(col, v string) int {
	for i := range r.rows {
		if r.cell(i, col) == v {
			return i
		}
	}
	return -1
}

// console is a raw console connection that records notices.
type console struct {
	conn    *pgconn.PgConn
	notices []*pgconn.Notice
}

func openConsole(ctx context.Context, t *testing.T, dsn string) *console {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c := &console{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { c.notices = append(c.notices, n) }
	if c.conn, err = pgconn.ConnectConfig(ctx, cfg); err != nil {
		t.Fatalf("console %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = c.conn.Close(context.Background()) })
	return c
}

// run sends q as a simple query and collects the reply.
func (c *console) run(ctx context.Context, t *testing.T, q string) consoleResult {
	t.Helper()
	c.notices = nil
	rs, err := c.conn.Exec(ctx, q).ReadAll()
	var r consoleResult
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		r.err = pe
	} else if err != nil {
		t.Fatalf("console %q: %v", q, err)
	}
	if len(rs) > 0 {
		res := rs[len(rs)-1]
		for _, f := range res.FieldDescriptions {
			r.cols = append(r.cols, fmt.Sprintf("%s:%d", f.Name, f.DataTypeOID))
		}
		for _, row := range res.Rows {
			cells := make([]*string, len(row))
			for i, v := range row {
				if v != nil {
					s := string(v)
					cells[i] = &s
				}
			}
			r.rows = append(r.rows, cells)
		}
		r.tag = res.CommandTag.String()
	}
	r.notices = c.notices
	return r
}

// showViews18 are PgBouncer 1.18's SHOW views (its SHOW HELP).
var showViews18 = []string{"HELP", "CONFIG", "DATABASES", "POOLS", "CLIENTS", "SERVERS", "USERS", "VERSION",
	"FDS", "SOCKETS", "ACTIVE_SOCKETS", "LISTS", "MEM", "DNS_HOSTS", "DNS_ZONES", "STATS", "STATS_TOTALS",
	"STATS_AVERAGES", "TOTALS"}

// TestConsoleMatchesPgBouncer runs one console script against a real
// PgBouncer 1.18 and the proxy, each with one client that has run a
// query, and compares every answer: each SHOW view's column names, types
// and order; every error's severity, code and text; every command tag and
// notice; and the rows whose content does not depend on the process (SHOW
// CONFIG's keys, defaults and NULLs, SHOW LISTS' entries, the console's own
// rows of SHOW DATABASES, POOLS and USERS).
func TestConsoleMatchesPgBouncer(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20)})
	tp := startProxy(t, nil)
	for _, dsn := range []string{b.DSN("poolsim", "poolsim"), tp.dsn} {
		conn := connect(ctx, t, dsn)
		if _, err := conn.Exec(ctx, "select 1"); err != nil {
			t.Fatal(err)
		}
	}
	theirs := openConsole(ctx, t, b.AdminDSN())
	ours := openConsole(ctx, t, tp.adminDSN())

	script := []string{"show version"}
	for _, v := range showViews18 {
		script = append(script, "SHOW "+v)
	}
	script = append(script,
		// Parsing: case, quotes, the semicolon, SELECT, the fake settings.
		`show "pools"`, "show pools ;", "select lists", "show client_encoding", "SHOW TimeZone",
		"SHOW POOLS;;", "show", "show nosuch", "foo", "", "SHOW pools extra", "reload x", "shutdown now",
		"suspend x", "set default_pool_size = -5", "pause averyveryverylongdatabasenamethatdoesnotfitinsixtyfourbytesofpgbouncer",
		// Errors of the commands.
		"RESUME", "RESUME neverseen", "ENABLE neverseen", "DISABLE", "KILL", "ENABLE",
		"PAUSE pgbouncer", "KILL pgbouncer", "RECONNECT pgbouncer", "WAIT_CLOSE pgbouncer",
		"DISABLE pgbouncer", "ENABLE pgbouncer",
		// PAUSE and RESUME of the whole pooler and of one database.
		"PAUSE", "PAUSE", "PAUSE poolsim", "KILL poolsim", "SUSPEND", "RESUME", "RESUME",
		"PAUSE poolsim", "PAUSE poolsim", "SUSPEND", "RESUME poolsim", "RESUME poolsim",
		"PAUSE autodb1", "RESUME autodb1",
		// The others.
		"RECONNECT", "RECONNECT poolsim", "WAIT_CLOSE", "WAIT_CLOSE poolsim",
		"DISABLE autodb2", "ENABLE autodb2", "KILL autodb3", "RESUME autodb3",
		"SUSPEND", "RESUME", "RELOAD",
		// SET.
		"set default_pool_size = 21", "SET max_client_conn TO '101'", "set query_wait_timeout = '1.5'",
		"set default_pool_size = 'abc'", "set nosuch = 1", "set client_encoding = 'x'", "SET DateStyle TO iso",
		"show databases",
	)
	for _, q := range script {
		want, got := theirs.run(ctx, t, q), ours.run(ctx, t, q)
		compareConsole(t, q, want, got)
	}
	// Logins to a disabled database are refused with PgBouncer's text.
	for _, c := range []*console{theirs, ours} {
		c.run(ctx, t, "DISABLE autodb4")
	}
	_, errTheirs := pgconn.Connect(ctx, strings.Replace(b.DSN("poolsim", "poolsim"), "/poolsim?", "/autodb4?", 1))
	_, errOurs := pgconn.Connect(ctx, strings.Replace(tp.dsn, "/poolsim?", "/autodb4?", 1))
	var pt, po *pgconn.PgError
	if !errors.As(errTheirs, &pt) || !errors.As(errOurs, &po) || pt.Message != po.Message || pt.Code != po.Code || pt.Severity != po.Severity {
		t.Errorf("login to a disabled database: PgBouncer %v, proxy %v", errTheirs, errOurs)
	}
}

// compareConsole compares one command's answers.
func compareConsole(t *testing.T, q string, want, got consoleResult) {
	t.Helper()
	if want.err != nil || got.err != nil {
		if want.err == nil || got.err == nil || want.err.Severity != got.err.Severity ||
			want.err.SeverityUnlocalized != got.err.SeverityUnlocalized || want.err.Code != got.err.Code ||
			want.err.Message != got.err.Message {
			t.Errorf("%q:\n PgBouncer %v\n proxy     %v", q, want, got)
		}
		return
	}
	if want.tag != got.tag || !slices.Equal(want.cols, got.cols) || len(want.notices) != len(got.notices) {
		t.Errorf("%q:\n PgBouncer %v\n proxy     %v", q, want, got)
		return
	}
	for i, n := range want.notices {
		g := got.notices[i]
		if n.Severity != g.Severity || n.Code != g.Code || n.Message != g.Message || n.Detail != g.Detail {
			t.Errorf("%q notice %d:\n PgBouncer %+v\n proxy     %+v", q, i, *n, *g)
		}
	}
	view := strings.ToUpper(strings.TrimPrefix(strings.TrimPrefix(q, "SHOW "), "show "))
	switch view {
	case "CONFIG":
		var keys, gotKeys []string
		for i := range want.rows {
			k := want.cell(i, "key")
			keys = append(keys, k)
			j := got.find("key", k)
			if j < 0 {
				continue
			}
			for _, col := range []string{"default", "changeable"} {
				if w, g := want.cell(i, col), got.cell(j, col); w != g {
					t.Errorf("SHOW CONFIG %s %s: proxy %q, PgBouncer %q", k, col, g, w)
				}
			}
			// A setting neither side was given is NULL on both or neither
			// (conffile and auth_file: PgBouncer was started from files, the
			// proxy was not).
			if w, g := want.cell(i, "value"), got.cell(j, "value"); (w == "NULL") != (g == "NULL") && k != "conffile" && k != "auth_file" {
				t.Errorf("SHOW CONFIG %s value: proxy %q, PgBouncer %q", k, g, w)
			}
		}
		for i := range got.rows {
			if k := got.cell(i, "key"); k != "max_prepared_statements" && k != "peer_id" { // 1.21's, 1.19's
				gotKeys = append(gotKeys, k)
			}
		}
		if !slices.Equal(keys, gotKeys) {
			t.Errorf("SHOW CONFIG keys:\n proxy     %v\n PgBouncer %v", gotKeys, keys)
		}
	case "LISTS":
		var w, g []string
		for i := range want.rows {
			w = append(w, want.cell(i, "list"))
		}
		for i := range got.rows {
			g = append(g, got.cell(i, "list"))
		}
		if !slices.Equal(w, g) {
			t.Errorf("SHOW LISTS entries: proxy %v, PgBouncer %v", g, w)
		}
	case "DATABASES", "POOLS", "USERS":
		col := map[string]string{"DATABASES": "name", "POOLS": "database", "USERS": "name"}[view]
		i, j := want.find(col, "pgbouncer"), got.find(col, "pgbouncer")
		if i < 0 || j < 0 {
			t.Errorf("%s: no pgbouncer row (PgBouncer %d, proxy %d)", q, i, j)
			return
		}
		for _, c := range want.cols {
			name := c[:strings.IndexByte(c, ':')]
			if name == "port" { // each listens on its own
				continue
			}
			if w, g := want.cell(i, name), got.cell(j, name); w != g {
				t.Errorf("%s pgbouncer row %s: proxy %q, PgBouncer %q", q, name, g, w)
			}
		}
	case "CLIENTS", "SOCKETS", "FDS":
		// The console's own connection (the listening socket in SHOW FDS):
		// NULL in the same cells.
		col, v := "database", "pgbouncer"
		if view == "FDS" {
			col, v = "task", "pooler"
		}
		i, j := want.find(col, v), got.find(col, v)
		if i < 0 || j < 0 {
			t.Errorf("%s: no %s %s row (PgBouncer %d, proxy %d)", q, col, v, i, j)
			return
		}
		for k := range want.cols {
			if (want.rows[i][k] == nil) != (got.rows[j][k] == nil) {
				t.Errorf("%s %s row, %s: proxy %v, PgBouncer %v", q, v, want.cols[k], got.rows[j][k] == nil, want.rows[i][k] == nil)
			}
		}
	case "VERSION":
		if v := got.cell(0, "version"); !strings.Contains(v, "PgBouncer 1.18.0") {
			t.Errorf("SHOW VERSION = %q, want it to name PgBouncer 1.18.0", v)
		}
	}
}

// TestConsoleExtendedProtocol: a Parse (and, separately, a Sync) on the
// console gets the same messages from the proxy as from PgBouncer 1.18: a
// non-fatal ERROR, ReadyForQuery, FATAL "bad packet", and the end of the
// connection.
func TestConsoleExtendedProtocol(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20)})
	tp := startProxy(t, nil)
	exchange := func(dsn string, msgs ...pgproto3.FrontendMessage) []string {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		hj, err := c.Hijack()
		if err != nil {
			t.Fatal(err)
		}
		conn := hj.Conn
		defer conn.Close()
		var out []byte
		for _, m := range msgs {
			if out, err = m.Encode(out); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Write(out); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fe := pgproto3.NewFrontend(conn, conn)
		var got []string
		for {
			m, err := fe.Receive()
			if err != nil {
				return append(got, "end: "+fmt.Sprint(errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)))
			}
			switch m := m.(type) {
			case *pgproto3.ErrorResponse:
				got = append(got, fmt.Sprintf("E %s/%q %s %q", m.Severity, m.SeverityUnlocalized, m.Code, m.Message))
			default:
				got = append(got, fmt.Sprintf("%T %+v", m, m))
			}
		}
	}
	for _, msgs := range [][]pgproto3.FrontendMessage{
		{&pgproto3.Parse{Query: "SHOW POOLS"}, &pgproto3.Sync{}},
		{&pgproto3.Sync{}},
	} {
		want := exchange(b.AdminDSN(), msgs...)
		got := exchange(tp.adminDSN(), msgs...)
		if !slices.Equal(want, got) {
			t.Errorf("%T...:\n proxy     %q\n PgBouncer %q", msgs[0], got, want)
		}
		if len(want) < 3 {
			t.Errorf("PgBouncer answered only %q", want)
		}
	}
}
