package validate

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/models/system"
)

// holdPerConn is how many statements each connection of the loop through
// the target runs (calibrateHold).
const holdPerConn = 20

// calibrateHold runs the row's statement and think loop through a fresh
// start of the target, as many connections at once as the direct loop
// had (at most the pool's size), and puts into cal what the pooler saw:
//
//   - Hold, the mean time a statement held its server, from the target's
//     SHOW STATS (total_query_time less total_wait_time, per request).
//     The direct loop's round trip is the load driver's: it holds the
//     driver's own wake-ups and scheduling, which a pooled statement
//     pays outside its server's time (docs/validate.md).
//   - ConnectLoaded, the median gap between the backend starts of the
//     servers the pool opened one after another for the loop: a login
//     with the machine busy, as the pool's logins are during a run,
//     slower than one alone.
//
// The target is stopped afterwards, so that the run starts on a pool of
// its own.
func (l *lab) calibrateHold(ctx context.Context, c system.Config, stmt load.Statement, cal *Calibration) error {
	t, err := startTarget(ctx, l.o.Target, l.srv, poolSettings{pooling: c.Pooler.Pooling, bouncerVersion: l.bouncerVersion}, l.logf)
	if err != nil {
		return err
	}
	defer t.close()
	// A first login waits for the pool's first server (PgBouncer caches
	// its welcome), and that wait is counted in total_wait_time, not in
	// total_query_time: one connection first, so that the loop's logins
	// wait for nothing, as the run's do.
	if err := touch(ctx, t.dsn); err != nil {
		return err
	}
	conc := max(1, min(cal.Concurrency, c.Pooler.DefaultPoolSize, c.Server.MaxConnections-2))
	since := time.Now()
	// Through the pooler a connection's PID is the pooler's key, not a
	// backend's: nothing to wait for.
	gone := func(context.Context, uint32) error { return nil }
	if _, _, err := loop(ctx, t.dsn, c, stmt, conc, conc*holdPerConn, gone); err != nil {
		return err
	}
	// The touch's query, then each connection's untimed first statement
	// and its timed ones.
	want := int64(1 + conc*(1+holdPerConn))
	st, err := t.times(ctx, l.srv.database)
	// PgBouncer's SHOW STATS totals move once per stats_period (1 s here).
	for deadline := time.Now().Add(2 * time.Second); err == nil && t.bouncer != nil && st.queries < want && time.Now().Before(deadline); {
		if err = probe.Sleep(ctx, 50*time.Millisecond); err == nil {
			st, err = t.times(ctx, l.srv.database)
		}
	}
	if err != nil {
		return err
	}
	if st.queries > 0 {
		cal.Hold = (st.query - st.wait) / time.Duration(st.queries)
	}
	n, gap, err := serverStarts(ctx, t.dsn, l.srv.user, l.srv.database, since)
	if err != nil {
		return err
	}
	cal.HoldConns, cal.HoldQueries, cal.HoldLogins = conc, st.queries, n
	if n >= 2 {
		cal.ConnectLoaded = gap
	}
	l.logf("validate: through the target: %d connections, %d requests held their servers %v on average (straight to PostgreSQL %v); %d logins, one every %v (alone %v)",
		conc, st.queries, cal.Hold, cal.QueryMean, n, cal.ConnectLoaded, cal.Connect)
	return t.close()
}

// touch logs in at dsn and runs an empty query.
func touch(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("calibrate through the target: %w", err)
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, ";").ReadAll(); err != nil {
		return fmt.Errorf("calibrate through the target: %w", err)
	}
	return nil
}
