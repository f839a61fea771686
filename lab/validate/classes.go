package validate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/proxy/pooler"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// Client classes live (system.Config.Classes). Every pool of the scenario
// is one [databases] entry of the pooler named after the pool, pointing at
// the pool's real database, with the pool's pool_mode and pool_size:
// PgBouncer 1.18 has per-database pool_mode and pool_size but per-user
// pool_size only from 1.23, so an alias database per pool is how two users
// of one database get pools of different sizes there. The proxy gets the
// same entries (poolconf.Database), so both targets run the same
// configuration. A class's clients log in as its pool's user to its
// pool's entry; the throwaway cluster gets every pool's user and
// database. max_db_connections counts per [databases] entry in PgBouncer,
// so a scenario that sets it with two pools on one database is refused
// (the entries would not share it as the model's pools do);
// max_user_connections counts per user across entries, as in the model.
//
// The classes run together (load.RunGroups: one barrier, one time zero);
// the report has a row for all classes together and one per class, each
// judged as a single-class row is, with the request-level cells added
// for classes that run requests.

// livePool is one pool of a multi-class run.
type livePool struct {
	alias    string // the [databases] entry clients connect to (the pool's name)
	database string // the real database
	user     string
	mode     poolmode.Mode
	size     int
}

// livePassword is the password of every pool user the validator creates.
const livePassword = "poolsim"

func livePools(c system.Config) []livePool {
	var out []livePool
	for _, p := range c.PoolList() {
		out = append(out, livePool{alias: p.Name, database: p.Database, user: p.User, mode: p.Mode, size: p.Size})
	}
	return out
}

// poolIndex is the index in livePools of the pool class cl connects to.
func poolIndex(c system.Config, cl system.Class) int {
	for i, p := range c.Pools {
		if p.Name == cl.Pool {
			return i
		}
	}
	return 0
}

// checkMulti refuses what the multi-class live run cannot do.
func checkMulti(o Options, c system.Config) error {
	if o.DSN != "" {
		return fmt.Errorf("%w: a scenario with classes runs on the throwaway cluster only: validate creates each pool's user and database there (drop --dsn)", ErrUnsupported)
	}
	if o.Target == TargetDirect {
		return fmt.Errorf("%w: --target direct with classes: every class connects to its pool at the pooler (run --target proxy or pgbouncer)", ErrUnsupported)
	}
	seen := map[string]string{}
	for _, p := range livePools(c) {
		if !p.mode.Pooled() {
			return fmt.Errorf("%w: pools.%s.mode direct: with classes every pool is a pooler pool live", ErrUnsupported, p.alias)
		}
		if other, ok := seen[p.database]; ok && c.Pooler.MaxDBConnections > 0 {
			return fmt.Errorf("%w: pooler.max_db_connections %d with pools %s and %s on one database %s: live each pool is a [databases] entry of its own, and PgBouncer counts max_db_connections per entry, not per real database as the model does", ErrUnsupported, c.Pooler.MaxDBConnections, other, p.alias, p.database)
		}
		seen[p.database] = p.alias
		if strings.ContainsAny(p.alias+p.database+p.user, " '\"\\=") {
			return fmt.Errorf("%w: pool %s: names with spaces, quotes, backslashes or = cannot be written into pgbouncer.ini here", ErrUnsupported, p.alias)
		}
	}
	for _, cl := range c.ClassList() {
		w := cl.Workload
		if cl.AppPool.Mode != system.NoAppPool {
			return fmt.Errorf("%w: classes.%s.app_pool.mode %v: the load driver has no application-side pool yet", ErrUnsupported, cl.Name, cl.AppPool.Mode)
		}
		if load.PreparedWorkload(w) {
			return fmt.Errorf("%w: classes.%s: prepared statements are validated without classes", ErrUnsupported, cl.Name)
		}
		if w.CPU.MeanValue() > 0 {
			return fmt.Errorf("%w: classes.%s.workload.cpu models CPU sharing; run it live with live.statement: cpu and workload.query instead", ErrUnsupported, cl.Name)
		}
	}
	if c.Server.Cores > 0 {
		return fmt.Errorf("%w: server.cores models CPU sharing; run it live with live.statement: cpu and workload.query instead", ErrUnsupported)
	}
	for _, h := range c.Live.WithHold {
		if !slices.ContainsFunc(c.Classes, func(cl system.Class) bool { return cl.Name == h }) {
			return fmt.Errorf("validate: live.with_hold: no class %q", h)
		}
	}
	return nil
}

// as is the server as user on database, with the pool users' password.
func (s server) as(user, database string) server {
	s.user, s.database, s.password = user, database, livePassword
	s.dsn = s.dsnAt(s.host, s.port)
	return s
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// setupPools creates every pool's user and database in the cluster.
func (vv *lab) setupPools(ctx context.Context, c system.Config) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, vv.cluster.SuperuserDSN("postgres"))
	if err != nil {
		return fmt.Errorf("validate: create the pools' users: %w", err)
	}
	pid := conn.PID()
	users, dbs := map[string]bool{}, map[string]bool{}
	var stmts []string
	for _, p := range livePools(c) {
		if !users[p.user] {
			users[p.user] = true
			stmts = append(stmts, fmt.Sprintf("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN PASSWORD '%s'; END IF; END$$",
				strings.ReplaceAll(p.user, "'", "''"), quoteIdent(p.user), livePassword))
		}
	}
	for _, p := range livePools(c) {
		if !dbs[p.database] {
			dbs[p.database] = true
			rs, err := conn.Exec(ctx, fmt.Sprintf("SELECT 1 FROM pg_database WHERE datname = '%s'", strings.ReplaceAll(p.database, "'", "''"))).ReadAll()
			if err != nil {
				closeConn(conn)
				return fmt.Errorf("validate: create the pools' databases: %w", err)
			}
			if len(rs) == 1 && len(rs[0].Rows) == 0 {
				stmts = append(stmts, "CREATE DATABASE "+quoteIdent(p.database))
			}
		}
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s).ReadAll(); err != nil {
			closeConn(conn)
			return fmt.Errorf("validate: %s: %w", s, err)
		}
	}
	_ = conn.Close(ctx)
	return vv.backendGone(ctx, pid)
}

// startPools starts the target with one pool per livePool; dsns holds
// where each pool's clients connect, by alias.
func startPools(ctx context.Context, target string, srv server, pools []livePool, c system.Config, bouncerVer string, logf func(string, ...any)) (*running, map[string]string, error) {
	dsns := map[string]string{}
	// Every pool has its own pool_mode and pool_size ([databases]); the
	// rest is the scenario's, with prepared statements untracked (validate
	// refuses classes that run them).
	pooling := c.Pooler.Pooling
	pooling.PoolMode, pooling.MaxPreparedStatements = pools[0].mode, 0
	switch target {
	case TargetProxy:
		cfg := pooler.DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.Upstream = srv.dsn
		cfg.Pooling = pooling
		cfg.ShutdownTimeout = 2 * time.Second
		for _, p := range pools {
			cfg.Databases = append(cfg.Databases, poolconf.Database{Name: p.alias, Host: srv.host, Port: srv.port, DBName: p.database,
				PoolSize: p.size, MinPoolSize: poolconf.Unset, ReservePool: poolconf.Unset, MaxDBConnections: poolconf.Unset, PoolMode: p.mode})
			cfg.StatsUsers = append(cfg.StatsUsers, p.user)
		}
		t, err := serveProxy(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range pools {
			dsns[p.alias] = srv.as(p.user, p.alias).dsnAt("127.0.0.1", t.port)
		}
		t.dsn = dsns[pools[0].alias]
		return t, dsns, nil
	case TargetPgBouncer:
		users := map[string]string{"postgres": ""}
		var lines []string
		for _, p := range pools {
			users[p.user] = livePassword
			lines = append(lines, fmt.Sprintf("%s = host=%s port=%d dbname=%s pool_mode=%s pool_size=%d", p.alias, srv.host, srv.port, p.database, p.mode, p.size))
		}
		b, err := pgbouncer.Start(ctx, pgbouncer.Config{
			UpstreamHost: srv.host, UpstreamPort: srv.port, Users: users, Pooling: &pooling,
			Extra: map[string]string{"stats_period": "1"}, Databases: lines, Logf: logf,
		})
		if err != nil {
			return nil, nil, err
		}
		for _, p := range pools {
			dsns[p.alias] = b.DSN(p.alias, p.user)
		}
		return &running{dsn: dsns[pools[0].alias], bouncer: b, stop: b.Stop}, dsns, nil
	}
	return nil, nil, fmt.Errorf("%w: target %q with classes", ErrUnsupported, target)
}

// multiAttempt is one live run of a multi-class row.
type multiAttempt struct {
	total   Measured
	classes []Measured
	cals    []Calibration
}

// multiOnce calibrates each class, starts the target with every pool,
// runs every class at once and measures each and all together.
func (vv *lab) multiOnce(ctx context.Context, c system.Config, stmt load.Statement, samples int) (multiAttempt, error) {
	var a multiAttempt
	if err := vv.quiesce(ctx); err != nil {
		return a, err
	}
	pools := livePools(c)
	classes := c.ClassList()
	var err error
	if a.cals, err = vv.calibrateClasses(ctx, c, pools, stmt, samples); err != nil {
		return a, err
	}
	t, dsns, err := startPools(ctx, vv.o.Target, vv.srv, pools, c, vv.bouncerVersion, vv.logf)
	if err != nil {
		return a, err
	}
	defer t.close()
	hop, hopRTT, err := measureHop(ctx, dsns[pools[0].alias], vv.srv.as(pools[0].user, pools[0].database).dsn, samples, vv.backendGone)
	if err != nil {
		return a, err
	}
	for i := range a.cals {
		a.cals[i].Hop, a.cals[i].HopRTT = hop, hopRTT
	}
	waitBefore := map[string]int64{}
	if t.bouncer != nil {
		for _, p := range pools {
			if waitBefore[p.alias], _, err = bouncerStats(ctx, t.bouncer, p.alias); err != nil {
				return a, err
			}
		}
	}
	specs := classSpecs(c, pools, dsns, stmt)
	// Each pool's first login opened a server for its welcome: count
	// them at time zero, after every class has logged in.
	var openErr error
	specs[0].Started = func() {
		t.waits()
		for i, cl := range classes {
			p := pools[poolIndex(c, cl)]
			if p.mode.Pooled() && openErr == nil {
				a.cals[i].ServersOpen, openErr = vv.serversOpen(ctx, p.user, p.database)
			}
		}
	}
	cpu0 := sampleCPU()
	res, err := load.RunGroups(ctx, specs)
	if err == nil {
		err = openErr
	}
	if err != nil {
		return a, err
	}
	a.measure(res, cpu0, sampleCPU())
	if t.px != nil {
		a.proxyWaits(t.waits(), c, pools, res[0].Start)
	}
	if t.bouncer != nil {
		if err := a.bouncerWaits(ctx, t.bouncer, c, pools, res, waitBefore); err != nil {
			return a, err
		}
	}
	if err := t.close(); err != nil {
		return a, err
	}
	return a, nil
}

// calibrateClasses calibrates each class of c on its own, as its pool's
// user on its database.
func (vv *lab) calibrateClasses(ctx context.Context, c system.Config, pools []livePool, stmt load.Statement, samples int) ([]Calibration, error) {
	var cals []Calibration
	classes := c.ClassList()
	for _, cl := range classes {
		p := pools[poolIndex(c, cl)]
		cc := c.Clone()
		cc.Classes, cc.Pools = nil, nil
		cc.Workload = cl.Workload
		// The class's statements and pauses are measured on as many
		// connections at once as its pool has servers (calibrate runs
		// max_connections - 2 at most).
		cc.Server.MaxConnections = min(c.Server.MaxConnections, p.size+2)
		app := cl.Workload.RequestLevel() && cl.Workload.AppSet
		if app {
			// The timers of the app pauses are measured; think gets
			// the same overshoot (calibratedMulti).
			cc.Workload.Think = cl.Workload.App
		}
		cal, err := calibrate(ctx, vv.srv.as(p.user, p.database).dsn, cc, stmt, samples, vv.backendGone)
		if err != nil {
			return nil, err
		}
		cal.App = app
		cals = append(cals, cal)
	}
	return cals, nil
}

// classSpecs are the load driver's groups, a class each, through its
// pool; the classes of live.with_hold hold their cursors.
func classSpecs(c system.Config, pools []livePool, dsns map[string]string, stmt load.Statement) []load.Spec {
	hold := map[string]bool{}
	for _, h := range c.Live.WithHold {
		hold[h] = true
	}
	var specs []load.Spec
	for i, cl := range c.ClassList() {
		p := pools[poolIndex(c, cl)]
		specs = append(specs, load.Spec{DSN: dsns[p.alias], Workload: cl.Workload, Seed: c.Seed, Blocks: p.mode != poolmode.Statement,
			Statement: stmt, Settle: settle, SessionBase: uint64(i) << 40, Hold: hold[cl.Name], ArrivalStream: "arrivals/" + cl.Name})
	}
	return specs
}

// measure sets what the driver measured of each class's group (res, in
// class order) and of all of them, with the machine's CPUs between the
// samples.
func (a *multiAttempt) measure(res []*load.Result, cpu0, cpu1 cpuSample) {
	a.total = measured(mergeResults(res))
	for i := range res {
		x := measured(res[i])
		x.CPUBusy, x.CPUSelf = cpuUse(cpu0, cpu1, runtime.NumCPU())
		x.CPUSteal = stealUse(cpu0, cpu1)
		a.classes = append(a.classes, x)
	}
	a.total.CPUBusy, a.total.CPUSelf = cpuUse(cpu0, cpu1, runtime.NumCPU())
	a.total.CPUSteal = stealUse(cpu0, cpu1)
}

// poolUsers counts the classes on each pool, by alias: a class's own
// waits are known only on a pool it does not share.
func poolUsers(c system.Config, pools []livePool) map[string]int {
	users := map[string]int{}
	for _, cl := range c.ClassList() {
		users[pools[poolIndex(c, cl)].alias]++
	}
	return users
}

// proxyWaits sets the waits from the proxy's assignments (ws) after
// start: all of them, and each class's alone on its pool.
func (a *multiAttempt) proxyWaits(ws []pooler.Wait, c system.Config, pools []livePool, start time.Time) {
	users := poolUsers(c, pools)
	a.total.setWaits(ws, start, func(pooler.Wait) bool { return true })
	for i, cl := range c.ClassList() {
		p := pools[poolIndex(c, cl)]
		if users[p.alias] == 1 {
			a.classes[i].setWaits(ws, start, func(w pooler.Wait) bool { return w.Database == p.alias && w.User == p.user })
		}
	}
}

// bouncerWaits sets the mean waits from PgBouncer's SHOW STATS
// total_wait_time since before (by pool alias) over the driver's
// assignments: all of them, and each class's alone on its pool.
func (a *multiAttempt) bouncerWaits(ctx context.Context, b *pgbouncer.PgBouncer, c system.Config, pools []livePool, res []*load.Result, before map[string]int64) error {
	users := poolUsers(c, pools)
	classes := c.ClassList()
	// SHOW STATS totals move every stats_period (1 s here).
	if err := probe.Sleep(ctx, 1100*time.Millisecond); err != nil {
		return err
	}
	var sum, n int64
	for i, cl := range classes {
		p := pools[poolIndex(c, cl)]
		after, _, err := bouncerStats(ctx, b, p.alias)
		if err != nil {
			return err
		}
		k := assignments(p.mode, res[i])
		sum += after - before[p.alias]
		n += k
		if users[p.alias] == 1 && k > 0 {
			a.classes[i].Assignments, a.classes[i].WaitMeanOnly = k, true
			a.classes[i].WaitMeanMs = float64(after-before[p.alias]) / 1e3 / float64(k)
		}
	}
	if n > 0 {
		a.total.Assignments, a.total.WaitMeanOnly = n, true
		a.total.WaitMeanMs = float64(sum) / 1e3 / float64(n)
	}
	return nil
}

// setWaits fills x's waits from the proxy's assignments after start that
// keep accepts.
func (x *Measured) setWaits(ws []pooler.Wait, start time.Time, keep func(pooler.Wait) bool) {
	var s sim.Samples
	for _, w := range ws {
		if !w.At.Before(start) && keep(w) {
			s.Add(sim.FromDuration(w.Wait))
		}
	}
	x.WaitKnown = s.Count() > 0
	x.Assignments = int64(s.Count())
	x.WaitMeanMs, x.WaitP50Ms, x.WaitP99Ms = s.Mean().Milliseconds(), s.Percentile(50).Milliseconds(), s.Percentile(99).Milliseconds()
}

// mergeResults is the classes' results as one run's.
func mergeResults(rs []*load.Result) *load.Result {
	out := &load.Result{Start: rs[0].Start, End: rs[0].Start}
	for _, r := range rs {
		if r.Start.Before(out.Start) {
			out.Start = r.Start
		}
		if r.OKTxns > 0 && r.End.After(out.End) {
			out.End = r.End
		}
		out.Clients += r.Clients
		out.OKTxns += r.OKTxns
		out.Refused += r.Refused
		out.WaitTimeouts += r.WaitTimeouts
		out.Failed += r.Failed
		out.Sessions += r.Sessions
		out.Stmts += r.Stmts
		out.OKReqs += r.OKReqs
		out.FailedReqs += r.FailedReqs
		for _, p := range []struct{ dst, src *sim.Samples }{{&out.Latency, &r.Latency}, {&out.StmtRT, &r.StmtRT}, {&out.Think, &r.Think}, {&out.App, &r.App}, {&out.ReqLatency, &r.ReqLatency}} {
			p.dst.Merge(p.src)
		}
		out.Errors = append(out.Errors, r.Errors...)
	}
	return out
}

// calibratedMulti runs the model of cfg with one run's calibrations, one
// per class: each class's statement and pauses as measured, the hop and
// the server login as measured.
func calibratedMulti(cfg system.Config, cals []Calibration) system.Result {
	cc := cfg.Clone()
	for i := range cc.Classes {
		w, cal := &cc.Classes[i].Workload, cals[i]
		w.Query = cal.Query
		if cal.App {
			w.App = cal.Think
			if n := w.Think.MeanValue(); n > 0 {
				over := float64(cal.ThinkMean - cal.ThinkNominal)
				w.Think = scaleDist(w.Think, (float64(n.Duration())+over)/float64(n.Duration()))
			}
		} else {
			w.Think = cal.Think
		}
	}
	cc.Server.Connect = sim.ConstDist(sim.FromDuration(cals[0].Connect))
	cc.Pooler.Hop = sim.FromDuration(cals[0].Hop)
	cc.Testbed.ServersOpen = classesOpen(cals)
	return system.Run(cc)
}

// classesOpen is the servers every pool of the calibrated model starts
// with: the fewest any class's pool held at time zero (its first login's,
// in a run without a calibration through it; the model has one number
// for every pool).
func classesOpen(cals []Calibration) int {
	n := -1
	for _, c := range cals {
		if c.ServersOpen > 0 && (n < 0 || c.ServersOpen < n) {
			n = c.ServersOpen
		}
	}
	return max(n, 0)
}

// multiRow runs one point of a scenario with classes: a row for all the
// classes together, then one per class.
func (vv *lab) multiRow(ctx context.Context, p scenarios.Point, model scenarios.Row, stmt load.Statement, samples int) ([]Row, error) {
	c := p.Config
	pools := livePools(c)
	classes := c.ClassList()
	if len(model.Classes) != len(classes) {
		return nil, fmt.Errorf("validate: the model has %d classes' figures for %d classes", len(model.Classes), len(classes))
	}
	reqLevel := c.RequestLevel()
	total := Row{Params: p.Params, Mode: pools[0].mode, Clients: 0, Model: model.Metrics, Class: allClasses, Pool: "every pool", reqLevel: reqLevel}
	rows := []Row{}
	for i, cl := range classes {
		pl := pools[poolIndex(c, cl)]
		total.Clients += cl.Workload.Clients
		rows = append(rows, Row{Params: p.Params, Mode: pl.mode, Clients: cl.Workload.Clients, Model: model.Classes[i].Metrics,
			Class: cl.Name, Pool: fmt.Sprintf("%s (%s/%s, %s, %d)", pl.alias, pl.database, pl.user, pl.mode, pl.size),
			reqLevel: cl.Workload.RequestLevel(), poolSize: pl.size})
	}
	vv.logf("validate: row %s with %d classes", total.Title(), len(classes))
	loadStart := loadAvg()
	var runs []multiAttempt
	for r := range vv.repeats() {
		vv.phase(fmt.Sprintf("row %s, run %d of %d", total.Title(), r+1, vv.repeats()))
		a, err := vv.multiOnce(ctx, c, stmt, samples)
		if err != nil {
			return nil, err
		}
		runs = append(runs, a)
		vv.step()
	}
	var models []system.Result
	for _, a := range runs {
		models = append(models, calibratedMulti(c, a.cals))
	}
	fill := func(row *Row, xs []Measured, ms []system.Metrics, cals []Calibration) {
		row.Repeats, row.RepeatModels = xs, ms
		row.Measured = combineMeasured(xs, row.Model)
		row.Calibrated = combineModels(ms, row.Model)
		row.Cal = combineCal(cals)
		row.Load = loadStart + " → " + loadAvg()
		row.calStmt = float64(row.Cal.QueryMean+2*row.Cal.Hop) / 1e6
		row.calThinkMs = float64(row.Cal.ThinkMean) / 1e6
		judge(row)
	}
	var xs []Measured
	var ms []system.Metrics
	var cals []Calibration
	for k, a := range runs {
		xs, ms, cals = append(xs, a.total), append(ms, models[k].Metrics), append(cals, a.cals[0])
	}
	fill(&total, xs, ms, cals)
	total.calStmt, total.calThinkMs = 0, 0 // the classes' own are on their rows
	out := []Row{total}
	for i := range rows {
		xs, ms, cals = nil, nil, nil
		for k, a := range runs {
			xs, ms, cals = append(xs, a.classes[i]), append(ms, models[k].Classes[i].Metrics), append(cals, a.cals[i])
		}
		fill(&rows[i], xs, ms, cals)
		out = append(out, rows[i])
	}
	for _, r := range out {
		vv.logf("validate: row %s: %s", r.Title(), r.verdict())
	}
	return out, nil
}

// allClasses is the Class of a multi-class point's row for all classes.
const allClasses = "all classes"

// classNotes explain how a scenario with classes runs live.
func classNotes(c system.Config) []string {
	var ps []string
	for _, p := range livePools(c) {
		ps = append(ps, fmt.Sprintf("%s = dbname=%s pool_mode=%s pool_size=%d (clients log in as %s)", p.alias, p.database, p.mode, p.size, p.user))
	}
	n := []string{
		"Each pool is a [databases] entry of its own in the generated pgbouncer.ini and in the proxy's configuration: " + strings.Join(ps, "; ") + ". PgBouncer 1.18 has per-database pool_mode and pool_size; per-user pool_size came later (1.23), so an entry per pool is how two users of one database get pools of their own sizes. The throwaway cluster has every pool's user and database.",
		"The classes run at once: every client of every class connects, then all start at one time zero. Each class's transactions per request are drawn from the model's own stream (the class's sessions numbered as the model numbers them), so the live run and the model run the same transactions and requests. A request-level closed client waits one think before its first request, as in the model.",
		"The row for all classes adds up the classes' transactions and requests over the wall from time zero to the last completion of any class; its percentiles are over every class's transactions and requests together.",
	}
	if len(c.Live.WithHold) > 0 {
		n = append(n, fmt.Sprintf("live.with_hold (%s): each request of these classes declares a WITH HOLD cursor (DECLARE ... CURSOR WITH HOLD FOR a few generate_series rows) in the Query message of its first statement, FETCHes a row from it at the start of every later transaction of the request and CLOSEs it after the last one; the extra commands travel in the statements' own Query messages, so a transaction costs stmts_per_txn round trips as in the model. Outside session pooling the FETCH would land on a server without the cursor and fail the client.", strings.Join(c.Live.WithHold, ", ")))
	}
	return n
}
