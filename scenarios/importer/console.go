package importer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// ConsoleSample is one look at PgBouncer's console: SHOW STATS and SHOW
// POOLS as sent, and SHOW CLIENTS' identifying columns (user, database,
// port, connect_time, ptr). At is the middle of the SHOW STATS round trip.
type ConsoleSample struct {
	At      time.Time `json:"at"`
	Stats   Table     `json:"stats"`
	Pools   Table     `json:"pools"`
	Clients Table     `json:"clients"`
}

// ConsoleRecord is what --pgbouncer read: the settings once (SHOW VERSION,
// SHOW CONFIG, SHOW DATABASES) and a sample every interval.
type ConsoleRecord struct {
	Version   string          `json:"version"`
	Config    Table           `json:"config"`
	Databases Table           `json:"databases"`
	Samples   []ConsoleSample `json:"samples"`
}

// SampleConsole reads PgBouncer's admin console at dsn (its database must
// be pgbouncer): the settings, then a sample every interval until duration
// has passed (duration/interval + 1 samples, the first at once). It stops
// with ctx's error when ctx is done.
func SampleConsole(ctx context.Context, dsn string, interval, duration time.Duration) (*ConsoleRecord, error) {
	const flag = "--pgbouncer"
	if interval <= 0 || duration < interval {
		return nil, fmt.Errorf("%w: --interval (%v) must be above 0 and at most --duration (%v)", ErrBadInput, interval, duration)
	}
	cfg, err := parseDSN(flag, dsn)
	if err != nil {
		return nil, err
	}
	if cfg.Database != "pgbouncer" {
		return nil, fmt.Errorf("%w: %s: the DSN's database is %q; PgBouncer's console is the database pgbouncer (e.g. postgres://%s@%s:%d/pgbouncer)",
			ErrNotConsole, flag, cfg.Database, cfg.User, cfg.Host, cfg.Port)
	}
	c, err := dial(ctx, flag, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	show := func(what string) (Table, error) {
		t, err := query(ctx, c, "SHOW "+what)
		if err != nil {
			if strings.Contains(err.Error(), "unrecognized configuration parameter") {
				return t, fmt.Errorf("%w: %s: %s answered SHOW %s as PostgreSQL does (%v); point --pgbouncer at PgBouncer's port and the database pgbouncer",
					ErrNotConsole, flag, where(cfg), what, err)
			}
			return t, statementError(flag, "SHOW "+what, cfg, err)
		}
		return t, nil
	}
	rec := &ConsoleRecord{}
	v, err := show("VERSION")
	if err != nil {
		return nil, err
	}
	if len(v.Rows) > 0 && len(v.Rows[0]) > 0 {
		rec.Version = v.Rows[0][0]
	}
	if rec.Config, err = show("CONFIG"); err != nil {
		return nil, err
	}
	if rec.Databases, err = show("DATABASES"); err != nil {
		return nil, err
	}
	start := time.Now()
	n := int(duration / interval)
	for k := 0; k <= n; k++ {
		if k > 0 {
			t := time.NewTimer(time.Until(start.Add(time.Duration(k) * interval)))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("%s: sampling: %w", flag, ctx.Err())
			case <-t.C:
			}
		}
		var s ConsoleSample
		t0 := time.Now()
		if s.Stats, err = show("STATS"); err != nil {
			return nil, err
		}
		s.At = t0.Add(time.Since(t0) / 2)
		if s.Pools, err = show("POOLS"); err != nil {
			return nil, err
		}
		clients, err := show("CLIENTS")
		if err != nil {
			return nil, err
		}
		// One row per client, every second: keep only what turnover needs.
		s.Clients = clients.project("user", "database", "port", "connect_time", "ptr")
		rec.Samples = append(rec.Samples, s)
	}
	return rec, nil
}

// ConsoleFacts is what PgBouncer's console says about one database's pool
// over the window between its first and last sample. Times are per
// transaction or per query as named; PgBouncer counts a transaction's
// query and transaction time from the moment the client's request
// arrives, so both include the wait for a server, which the derived
// figures below take out.
type ConsoleFacts struct {
	Version  string
	Database string
	Users    []string // the pools' users for this database
	Window   Window

	Xacts, Queries                   int64         // completed in the window
	XactTime, QueryTime, WaitTime    time.Duration // totals in the window (wait included in the first two)
	Assignments                      int64         // server assignments (PgBouncer 1.23+), -1 when not reported
	ClActive, ClWaiting, SvActive    float64       // means over the samples
	SvIdle, SvUsed, SvLogin          float64
	Clients                          float64 // mean client connections (cl_active + cl_waiting)
	MaxWait                          time.Duration
	ClientArrivals, ClientDepartures int // clients that connected or left between samples (lower bounds)

	Mode             poolmode.Mode
	PoolSize         int // the database's effective pool_size
	ReservePool      int
	MinPoolSize      int
	MaxDBConnections int // 0 = unlimited
	Settings         poolconf.Settings
	HasPrepared      bool     // SHOW CONFIG has max_prepared_statements (PgBouncer 1.21+)
	OtherDatabases   []string // databases with traffic in the window that were not imported
}

// XactsPerSec is the completion rate over the window.
func (f *ConsoleFacts) XactsPerSec() float64 { return float64(f.Xacts) / f.Window.Span().Seconds() }

// QueriesPerXact is queries (client round trips) per transaction.
func (f *ConsoleFacts) QueriesPerXact() float64 { return float64(f.Queries) / float64(f.Xacts) }

// WaitPerXact is the mean wait for a server per transaction.
func (f *ConsoleFacts) WaitPerXact() time.Duration { return f.WaitTime / time.Duration(f.Xacts) }

// HoldPerXact is the mean time a transaction held its server: PgBouncer's
// transaction time without the wait.
func (f *ConsoleFacts) HoldPerXact() time.Duration {
	return (f.XactTime - f.WaitTime) / time.Duration(f.Xacts)
}

// ServerPerQuery is the mean time a query spent at the server side of the
// pooler: PgBouncer's query time without the wait.
func (f *ConsoleFacts) ServerPerQuery() time.Duration {
	return (f.QueryTime - f.WaitTime) / time.Duration(f.Queries)
}

// WaitL is the mean number of clients waiting over the window from
// PgBouncer's own wait total (Little's L = total wait / window).
func (f *ConsoleFacts) WaitL() float64 { return f.WaitTime.Seconds() / f.Window.Span().Seconds() }

// AnalyzeConsole works out the facts of database (the busiest one when
// "") from a recording. It needs two samples at least, and transactions
// between the first and the last.
func AnalyzeConsole(rec *ConsoleRecord, database string) (*ConsoleFacts, error) {
	const flag = "--pgbouncer"
	if rec == nil || len(rec.Samples) < 2 {
		return nil, fmt.Errorf("%w: %s: two console samples at least are needed (got %d): make --duration longer than --interval", ErrNoData, flag, len(rec.Samples))
	}
	first, last := rec.Samples[0], rec.Samples[len(rec.Samples)-1]
	for _, s := range rec.Samples {
		for _, c := range []string{"database", "total_xact_count", "total_query_count", "total_xact_time", "total_query_time", "total_wait_time"} {
			if !s.Stats.Has(c) {
				return nil, fmt.Errorf("%w: %s: SHOW STATS has no column %s (columns: %s)", ErrNotConsole, flag, c, strings.Join(s.Stats.Columns, ", "))
			}
		}
	}
	busy, err := busiest(first.Stats, last.Stats)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, flag, err)
	}
	f := &ConsoleFacts{Version: rec.Version, Database: database, Assignments: -1}
	if f.Database == "" {
		if len(busy) == 0 {
			return nil, fmt.Errorf("%w: %s: no database completed a transaction in the %v window; is the application running through this PgBouncer?", ErrNoData, flag, roundDur(last.At.Sub(first.At)))
		}
		f.Database = busy[0]
	}
	for _, b := range busy {
		if b != f.Database {
			f.OtherDatabases = append(f.OtherDatabases, b)
		}
	}
	// The window starts at the first sample that knows the database (an
	// autodb entry appears with its first client).
	i0 := slices.IndexFunc(rec.Samples, func(s ConsoleSample) bool { _, ok := s.Stats.find("database", f.Database); return ok })
	if i0 < 0 || i0 == len(rec.Samples)-1 {
		return nil, fmt.Errorf("%w: %s: PgBouncer has no database %q in SHOW STATS (it has %s)", ErrNoData, flag, f.Database, strings.Join(names(last.Stats), ", "))
	}
	a, _ := rec.Samples[i0].Stats.find("database", f.Database)
	b, ok := last.Stats.find("database", f.Database)
	if !ok {
		return nil, fmt.Errorf("%w: %s: database %q left SHOW STATS during the window", ErrNoData, flag, f.Database)
	}
	f.Window = Window{From: rec.Samples[i0].At, To: last.At, Samples: len(rec.Samples) - i0}
	if f.Window.Span() <= 0 {
		return nil, fmt.Errorf("%w: %s: the samples' times do not increase", ErrFormat, flag)
	}
	delta := func(col string) (int64, error) {
		x, err := a.int(col)
		if err != nil {
			return 0, err
		}
		y, err := b.int(col)
		if err != nil {
			return 0, err
		}
		if y < x {
			return 0, fmt.Errorf("%s went down from %d to %d during the window: PgBouncer restarted, or the counters were reset", col, x, y)
		}
		return y - x, nil
	}
	var us [3]int64
	for i, c := range []string{"total_xact_time", "total_query_time", "total_wait_time"} {
		if us[i], err = delta(c); err != nil {
			return nil, fmt.Errorf("%w: %s: SHOW STATS: %v", ErrFormat, flag, err)
		}
	}
	f.XactTime, f.QueryTime, f.WaitTime = time.Duration(us[0])*time.Microsecond, time.Duration(us[1])*time.Microsecond, time.Duration(us[2])*time.Microsecond
	if f.Xacts, err = delta("total_xact_count"); err == nil {
		f.Queries, err = delta("total_query_count")
	}
	if err == nil && a.has("total_server_assignment_count") {
		f.Assignments, err = delta("total_server_assignment_count")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: SHOW STATS: %v", ErrFormat, flag, err)
	}
	if f.Xacts == 0 || f.Queries == 0 {
		return nil, fmt.Errorf("%w: %s: database %s completed no transaction in the %v window", ErrNoData, flag, f.Database, roundDur(f.Window.Span()))
	}
	if err := f.samplePools(rec.Samples[i0:]); err != nil {
		return nil, fmt.Errorf("%w: %s: SHOW POOLS: %v", ErrFormat, flag, err)
	}
	f.clientTurnover(rec.Samples[i0:])
	if err := f.settings(rec); err != nil {
		return nil, err
	}
	return f, nil
}

// busiest lists the databases (not the console) with transactions between
// two SHOW STATS, most first.
func busiest(a, b Table) ([]string, error) {
	type db struct {
		name string
		n    int64
	}
	var dbs []db
	for _, r := range b.Rows {
		rb := row{&b, r}
		name := rb.str("database")
		if name == "pgbouncer" {
			continue
		}
		y, err := rb.int("total_xact_count")
		if err != nil {
			return nil, fmt.Errorf("SHOW STATS, database %s: %v", name, err)
		}
		var x int64
		if ra, ok := a.find("database", name); ok {
			if x, err = ra.int("total_xact_count"); err != nil {
				return nil, fmt.Errorf("SHOW STATS, database %s: %v", name, err)
			}
		}
		if y > x {
			dbs = append(dbs, db{name, y - x})
		}
	}
	sort.SliceStable(dbs, func(i, j int) bool { return dbs[i].n > dbs[j].n })
	out := make([]string, len(dbs))
	for i, d := range dbs {
		out[i] = d.name
	}
	return out, nil
}

func names(t Table) []string {
	var out []string
	for _, r := range t.Rows {
		out = append(out, row{&t, r}.str("database"))
	}
	return out
}

// samplePools averages SHOW POOLS over the samples, summed over the
// database's pools (one per user).
func (f *ConsoleFacts) samplePools(samples []ConsoleSample) error {
	users := map[string]bool{}
	n := 0
	for _, s := range samples {
		seen := false
		err := s.Pools.each("database", f.Database, func(r row) error {
			seen = true
			users[r.str("user")] = true
			for _, c := range []struct {
				col string
				dst *float64
			}{{"cl_active", &f.ClActive}, {"cl_waiting", &f.ClWaiting}, {"sv_active", &f.SvActive},
				{"sv_idle", &f.SvIdle}, {"sv_used", &f.SvUsed}, {"sv_login", &f.SvLogin}} {
				v, err := r.int(c.col)
				if err != nil {
					return err
				}
				*c.dst += float64(v)
			}
			wait := time.Duration(0)
			if sec, err := r.int("maxwait"); err == nil {
				wait = time.Duration(sec) * time.Second
			}
			if r.has("maxwait_us") {
				us, err := r.int("maxwait_us")
				if err != nil {
					return err
				}
				wait += time.Duration(us) * time.Microsecond
			}
			f.MaxWait = max(f.MaxWait, wait)
			if m, err := poolmode.Parse(r.str("pool_mode")); err == nil && m.Pooled() {
				f.Mode = m
			}
			return nil
		})
		if err != nil {
			return err
		}
		if seen {
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("no pool of database %s in any sample", f.Database)
	}
	for _, p := range []*float64{&f.ClActive, &f.ClWaiting, &f.SvActive, &f.SvIdle, &f.SvUsed, &f.SvLogin} {
		*p /= float64(n)
	}
	f.Clients = f.ClActive + f.ClWaiting
	for u := range users {
		f.Users = append(f.Users, u)
	}
	sort.Strings(f.Users)
	return nil
}

// clientTurnover counts the database's client connections that appear or
// disappear between consecutive SHOW CLIENTS (a client that comes and goes
// between two samples is not seen: these are lower bounds).
func (f *ConsoleFacts) clientTurnover(samples []ConsoleSample) {
	var prev map[string]bool
	for _, s := range samples {
		if !s.Clients.Has("ptr") {
			return
		}
		cur := map[string]bool{}
		_ = s.Clients.each("database", f.Database, func(r row) error {
			cur[r.str("ptr")+"|"+r.str("connect_time")+"|"+r.str("port")] = true
			return nil
		})
		if prev != nil {
			for k := range cur {
				if !prev[k] {
					f.ClientArrivals++
				}
			}
			for k := range prev {
				if !cur[k] {
					f.ClientDepartures++
				}
			}
		}
		prev = cur
	}
}

// configKeys are the SHOW CONFIG keys import reads, through poolconf so
// they mean what pgbouncer.ini means.
var configKeys = []string{"pool_mode", "default_pool_size", "min_pool_size", "reserve_pool_size", "reserve_pool_timeout",
	"max_client_conn", "max_db_connections", "max_user_connections", "query_wait_timeout", "query_timeout",
	"server_reset_query", "server_reset_query_always", "server_lifetime", "server_idle_timeout",
	"idle_transaction_timeout", "client_idle_timeout", "max_prepared_statements", "stats_period"}

// settings reads SHOW CONFIG and the database's SHOW DATABASES row.
func (f *ConsoleFacts) settings(rec *ConsoleRecord) error {
	const flag = "--pgbouncer"
	var ini strings.Builder
	ini.WriteString("[pgbouncer]\n")
	for _, k := range configKeys {
		r, ok := rec.Config.find("key", k)
		if !ok {
			continue
		}
		v := r.str("value")
		if v == "" || strings.ContainsAny(v, "\r\n") {
			continue
		}
		fmt.Fprintf(&ini, "%s = %s\n", k, v)
	}
	s, err := poolconf.Parse("SHOW CONFIG", []byte(ini.String()))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrFormat, flag, err)
	}
	f.Settings = s
	_, f.HasPrepared = rec.Config.find("key", "max_prepared_statements")
	f.PoolSize, f.ReservePool, f.MinPoolSize, f.MaxDBConnections = s.DefaultPoolSize, s.ReservePoolSize, s.MinPoolSize, s.MaxDBConnections
	if f.Mode == poolmode.Direct {
		f.Mode = s.PoolMode
	}
	if r, ok := rec.Databases.find("name", f.Database); ok {
		global := f.MaxDBConnections
		defer func() {
			if f.MaxDBConnections == 0 { // not set for the database: the [pgbouncer] one applies
				f.MaxDBConnections = global
			}
		}()
		for _, c := range []struct {
			col string
			dst *int
		}{{"pool_size", &f.PoolSize}, {"reserve_pool", &f.ReservePool}, {"min_pool_size", &f.MinPoolSize}, {"max_connections", &f.MaxDBConnections}} {
			if !r.has(c.col) {
				continue
			}
			v, err := r.int(c.col)
			if err != nil {
				return fmt.Errorf("%w: %s: SHOW DATABASES, %s: %v", ErrFormat, flag, f.Database, err)
			}
			if v < 0 || v > math.MaxInt32 {
				return fmt.Errorf("%w: %s: SHOW DATABASES, %s: %s %d out of range", ErrFormat, flag, f.Database, c.col, v)
			}
			*c.dst = int(v)
		}
	}
	if f.PoolSize < 1 {
		return fmt.Errorf("%w: %s: database %s has pool_size %d; poolsim models a bounded pool (1 or more)", ErrNoData, flag, f.Database, f.PoolSize)
	}
	return nil
}
