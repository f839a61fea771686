package validate

import (
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/proxy/pooler"
)

// Targets.
const (
	TargetProxy     = "proxy"
	TargetPgBouncer = "pgbouncer"
	TargetDirect    = "direct"
)

// server is the PostgreSQL the run uses: where to connect, as whom.
type server struct {
	dsn      string // the load's role and database
	host     string
	port     int
	user     string
	password string
	database string
}

func parseServer(dsn string) (server, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return server{}, fmt.Errorf("dsn: %w", err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return server{}, fmt.Errorf("dsn: host %s is a Unix socket folder: validate needs a TCP host (PgBouncer and the proxy connect over TCP)", cfg.Host)
	}
	return server{dsn: dsn, host: cfg.Host, port: int(cfg.Port), user: cfg.User, password: cfg.Password, database: cfg.Database}, nil
}

// dsnAt is a URL for the server's user and database at addr.
func (s server) dsnAt(host string, port int) string {
	u := url.User(s.user)
	if s.password != "" {
		u = url.UserPassword(s.user, s.password)
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", u.String(), net.JoinHostPort(host, strconv.Itoa(port)), url.PathEscape(s.database))
}

// poolSettings are the pooler settings of one target start: the
// scenario's pooler.Pooling, handed whole to the proxy and to PgBouncer.
type poolSettings struct {
	pooling        poolconf.Pooling
	bouncerVersion string // the installed pgbouncer's version, for its settings
}

// running is a started target.
type running struct {
	// prepared is the max_prepared_statements in force: the scenario's when
	// the target supports the setting, else 0 (noted in preparedNote).
	prepared     int
	preparedNote string
	dsn          string // where clients connect
	px           *pooler.Proxy
	watch        *proxyWatch // px's Observer
	port         int         // the proxy's port
	bouncer      *pgbouncer.PgBouncer
	stop         func() error
	closed       bool // close has run
	// loopTID is the proxy's event loop's thread while it is pinned to
	// it (pinLoop; 0 otherwise), unpin ends that.
	loopTID int
	unpin   func()
}

// pinLoop keeps the in-process proxy's event loop on a thread of its own
// until the target closes, and returns the thread's id (0 if there is no
// proxy or it could not be pinned): with pgbench as the load driver the
// pooler's CPU per statement is that thread's, not this whole process's -
// Go's runtime and the validator's own work run on other threads, beside
// the loop, and are the calibrated model's other work, not CPU in the
// pooler's one thread.
func (t *running) pinLoop() int {
	if t.px == nil || t.loopTID > 0 {
		return t.loopTID
	}
	tid := t.watch.pin()
	if tid == 0 {
		return 0
	}
	t.loopTID, t.unpin = tid, t.watch.unpin
	return tid
}

// close stops the target once: a row stops it as soon as its run ends, and
// a deferred close on every other path.
func (t *running) close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	if t.unpin != nil {
		t.unpin()
	}
	return t.stop()
}

// waits drains the proxy's assignment log (nil for other targets).
func (r *running) waits() []pooler.Wait {
	if r.px == nil {
		return nil
	}
	return r.watch.waits.drain()
}

// startTarget starts the pooler for one row. Direct mode needs none: the
// clients connect to PostgreSQL.
func startTarget(ctx context.Context, target string, srv server, ps poolSettings, logf func(string, ...any)) (*running, error) {
	if ps.pooling.PoolMode == poolmode.Direct || target == TargetDirect {
		return &running{dsn: srv.dsn, prepared: ps.pooling.MaxPreparedStatements, stop: func() error { return nil }}, nil
	}
	switch target {
	case TargetProxy:
		return startProxy(ctx, srv, ps)
	case TargetPgBouncer:
		return startBouncer(ctx, srv, ps, logf)
	}
	return nil, fmt.Errorf("target %q: want proxy, pgbouncer or direct", target)
}

func startProxy(ctx context.Context, srv server, ps poolSettings) (*running, error) {
	cfg := pooler.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream = srv.dsn
	cfg.Pooling = ps.pooling
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.StatsUsers = []string{srv.user} // the validator reads SHOW STATS as the load's role
	t, err := serveProxy(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t.dsn, t.prepared = srv.dsnAt("127.0.0.1", t.port), ps.pooling.MaxPreparedStatements
	return t, nil
}

// serveProxy starts the in-process proxy of cfg on a free loopback port,
// watched by a proxyWatch.
func serveProxy(ctx context.Context, cfg pooler.Config) (*running, error) {
	watch := newProxyWatch()
	cfg.Observer = watch
	px, err := pooler.New(cfg)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- px.Serve(sctx, ln) }() // owner: running.stop; ends when sctx is cancelled
	addr := px.Addr().(*net.TCPAddr)
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("proxy: did not stop within 30s")
		}
	}
	return &running{px: px, watch: watch, stop: stop, port: addr.Port}, nil
}

func startBouncer(ctx context.Context, srv server, ps poolSettings, logf func(string, ...any)) (*running, error) {
	extra := map[string]string{"stats_period": "1"} // SHOW STATS totals are refreshed every stats_period
	pooling, note := ps.pooling, ""
	if !pgbouncer.VersionAtLeast(ps.bouncerVersion, 1, 21) && pooling.MaxPreparedStatements > 0 {
		note = fmt.Sprintf("PgBouncer %s has no max_prepared_statements (1.21+): protocol-level prepared statements are compared with compat at 0", ps.bouncerVersion)
		pooling.MaxPreparedStatements = 0
	}
	users := map[string]string{srv.user: srv.password}
	if _, ok := users["postgres"]; !ok {
		users["postgres"] = "" // the admin console's user
	}
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{
		UpstreamHost: srv.host,
		UpstreamPort: srv.port,
		Users:        users,
		Pooling:      &pooling,
		Extra:        extra,
		Logf:         logf,
	})
	if err != nil {
		return nil, err
	}
	return &running{dsn: b.DSN(srv.database, srv.user), bouncer: b, stop: b.Stop, prepared: pooling.MaxPreparedStatements, preparedNote: note}, nil
}

// bouncerStats reads SHOW STATS totals for database db: total_wait_time in
// microseconds and total_xact_count.
func bouncerStats(ctx context.Context, b *pgbouncer.PgBouncer, db string) (waitUs, xacts int64, err error) {
	v, err := bouncerTotals(ctx, b, db, "total_wait_time", "total_xact_count")
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// bouncerTotals reads SHOW STATS columns cols for database db, summed
// over its rows.
func bouncerTotals(ctx context.Context, b *pgbouncer.PgBouncer, db string, cols ...string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, b.AdminDSN())
	if err != nil {
		return nil, fmt.Errorf("pgbouncer admin: %w", err)
	}
	defer closeConn(conn)
	rs, err := conn.Exec(ctx, "SHOW STATS").ReadAll()
	if err != nil {
		return nil, fmt.Errorf("pgbouncer SHOW STATS: %w", err)
	}
	if len(rs) != 1 {
		return nil, errors.New("pgbouncer SHOW STATS: no result")
	}
	col := map[string]int{}
	for i, f := range rs[0].FieldDescriptions {
		col[f.Name] = i
	}
	di, ok := col["database"]
	if !ok {
		return nil, errors.New("pgbouncer SHOW STATS: no database column")
	}
	idx := make([]int, len(cols))
	for i, c := range cols {
		if idx[i], ok = col[c]; !ok {
			return nil, fmt.Errorf("pgbouncer SHOW STATS: no %s column", c)
		}
	}
	out := make([]int64, len(cols))
	for _, row := range rs[0].Rows {
		if string(row[di]) != db {
			continue
		}
		for i, j := range idx {
			v, _ := strconv.ParseInt(string(row[j]), 10, 64)
			out[i] += v
		}
	}
	return out, nil
}

// serverTimes is the target's SHOW STATS account of database db's
// statements: the time from each request's first message to its
// ReadyForQuery (total_query_time, waits for a server included), the
// waits (total_wait_time) and the requests (total_query_count).
type serverTimes struct {
	query, wait time.Duration
	queries     int64
}

// times reads the target's serverTimes for database db.
func (t *running) times(ctx context.Context, db string) (serverTimes, error) {
	if t.px != nil {
		var st serverTimes
		for _, ps := range t.px.Stats() {
			if ps.Database == db {
				// The proxy's query time starts at the assignment: its
				// wait is added back, as PgBouncer counts it.
				st.query += ps.Counters.QueryTime + ps.Counters.WaitTime
				st.wait += ps.Counters.WaitTime
				st.queries += ps.Counters.Queries
			}
		}
		return st, nil
	}
	v, err := bouncerTotals(ctx, t.bouncer, db, "total_query_time", "total_wait_time", "total_query_count")
	if err != nil {
		return serverTimes{}, err
	}
	return serverTimes{query: time.Duration(v[0]) * time.Microsecond, wait: time.Duration(v[1]) * time.Microsecond, queries: v[2]}, nil
}

// holdMs is the mean time a request held its server between two reads
// (query time less the wait, per request), in ms; 0 without requests.
func holdMs(before, after serverTimes) float64 {
	n := after.queries - before.queries
	if n <= 0 {
		return 0
	}
	return float64((after.query-before.query)-(after.wait-before.wait)) / 1e6 / float64(n)
}

// closeConn closes a connection politely (Terminate), within a second.
func closeConn(c *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
