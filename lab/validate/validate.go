package validate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// Options is one validation.
type Options struct {
	Scenario *scenarios.Scenario
	// DSN is an existing PostgreSQL to use ("" = a throwaway cluster). Its
	// max_connections is what it is; the report notes a difference from the
	// scenario's.
	DSN string
	// Target is TargetProxy (default), TargetPgBouncer or TargetDirect.
	Target string
	// Quick takes fewer calibration samples and skips the feature probes.
	Quick bool
	// Probes forces the feature probes on in quick mode.
	Probes bool
	// Repeats is how many times each row runs, each run with its own
	// calibrated model (the verdict holds the runs' mean of each run's
	// error to the tolerances: spread.go); 0 means 5, or 1 with Quick.
	Repeats int
	// Command is recorded in the report as the command that made it.
	Command string
	// Logf receives progress lines; nil = none.
	Logf func(format string, args ...any)
	// Progress, when set, is told the phase and how many of the live runs
	// and probes are done out of how many (starting PostgreSQL and the
	// statement's calibration count as phases of their own, with done 0).
	Progress func(phase string, done, total int)
	// KeepAutogroup leaves the kernel's autogroup as it is for a
	// CPU-bound (testbed) run; by default such a run turns it off, as
	// root, and back on at its end (package lab/autogroup).
	KeepAutogroup bool
}

// settle is the pause between the clients' logins and time zero.
const settle = 200 * time.Millisecond

// ErrUnsupported marks a scenario the live validator cannot run.
var ErrUnsupported = errors.New("validate: unsupported scenario")

// lab is one validation run's live lab: the server under test, the
// PostgreSQL cluster behind it and what was learned of their versions.
type lab struct {
	o           Options
	logf        func(string, ...any)
	srv         server
	watchDSN    string // where to count other backends
	cluster     *pgcluster.Cluster
	backendGone func(context.Context, uint32) error
	// clientsGone waits until no backend serves a client but except's
	// (pgcluster.Cluster.WaitClientBackendsExit); nil with a server of the
	// user's (Options.DSN), whose other clients are not ours to wait for.
	clientsGone func(ctx context.Context, except uint32) error
	// bouncerVersion is the installed pgbouncer's version ("" if none).
	bouncerVersion string
	// pgbenchBin is the pgbench pgbenchInit found; pgbenchNeeded says a
	// row runs it as its driver (validate.driver pgbench).
	pgbenchBin    string
	pgbenchNeeded bool
	// wakeCurve is an idle core's wake-up by its idle time, measured
	// before anything starts when a row pins the arrangements (wake.go).
	wakeCurve []testbed.WakePoint
	// live is the scenario's validate: section's say of how to run it
	// live (Decode).
	live Live
	// done and total count live runs and probes for Options.Progress;
	// at is the phase under way.
	done, total int
	at          string
}

// phase reports a new phase to Options.Progress.
func (l *lab) phase(what string) {
	l.at = what
	if l.o.Progress != nil {
		l.o.Progress(what, l.done, l.total)
	}
}

// step counts a finished live run or probe.
func (l *lab) step() {
	l.done++
	if l.o.Progress != nil {
		l.o.Progress(l.at, l.done, l.total)
	}
}

// Run validates o.Scenario and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	if o.Target == "" {
		o.Target = TargetProxy
	}
	switch o.Target {
	case TargetProxy, TargetPgBouncer, TargetDirect:
	default:
		return nil, fmt.Errorf("%w: target %q: want proxy, pgbouncer or direct", ErrUnsupported, o.Target)
	}
	sc := o.Scenario
	points, err := sc.Points()
	if err != nil {
		return nil, err
	}
	set, err := Decode(sc)
	if err != nil {
		return nil, err
	}
	live := set.Live
	for i := range points { // the models of every point run on the section's machine, if it gives one
		points[i].Config.Machine = set.Machine
	}
	maxConn := points[0].Config.Server.MaxConnections
	multi := points[0].Config.Multi()
	for _, p := range points {
		if err := checkPoint(ctx, o, live, p.Config, multi, maxConn); err != nil {
			return nil, err
		}
	}
	prepared := preparedScenario(points[0].Config)
	l := newLab(o, live, points)
	var sched string
	if slices.ContainsFunc(points, func(p scenarios.Point) bool { return testbedKind(live, p.Config) }) {
		var restore func()
		sched, restore = l.threadByThread()
		defer restore()
	}
	if err := l.measureWake(ctx, points); err != nil {
		return nil, err
	}
	l.phase("starting PostgreSQL")
	rep := &Report{Scenario: sc.Name, Description: sc.Description, Source: sc.Source, Seed: sc.Base.Seed, Target: o.Target, Command: o.Command}
	stop, err := l.startServer(ctx, maxConn, points[0].Config.Server.SuperuserReserved, prepared)
	defer stop()
	if err != nil {
		return nil, err
	}
	if err := l.versions(ctx, rep, maxConn); err != nil {
		return nil, err
	}
	rep.Versions.Sched = sched
	if multi {
		if err := l.setupPools(ctx, points[0].Config); err != nil {
			return nil, err
		}
	}

	samples := 540
	if o.Quick {
		samples = 60
	}
	l.phase("calibrating the statement")
	stmt, err := statement(ctx, l.srv.dsn, l.live, sc.Base, l.backendGone)
	if err != nil {
		return nil, err
	}
	rep.RowNs, rep.Joins = stmt.RowNs, stmt.Joins
	if stmt.Kind == load.KindPgbenchSelect {
		if stmt.Accounts, err = l.pgbenchInit(ctx, max(1, l.live.Scale)); err != nil {
			return nil, err
		}
	}
	if err := l.runRows(ctx, points, multi, stmt, samples, rep); err != nil {
		return nil, err
	}
	if err := l.runProbes(ctx, points, rep); err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, notes(o.Target, l.live, points)...)
	rep.Notes = append(rep.Notes, workersNotes(points)...)
	if multi {
		rep.Notes = append(rep.Notes, classNotes(l.live, points[0].Config)...)
	}
	rep.Versions.LoadEnd = loadAvg()
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// checkPoint refuses what validate cannot run live at a point of the
// sweep (c): a sweep of classes (multi) or one without them, on one
// PostgreSQL of maxConn connections unless o.DSN is given.
func checkPoint(ctx context.Context, o Options, live Live, c system.Config, multi bool, maxConn int) error {
	if c.Multi() != multi {
		return fmt.Errorf("%w: classes in some points of the sweep and not in others", ErrUnsupported)
	}
	if multi {
		if c.Server.MaxConnections != maxConn {
			return fmt.Errorf("%w: server.max_connections varies across the sweep; validate starts one PostgreSQL per run", ErrUnsupported)
		}
		return checkMulti(o, live, c)
	}
	if c.Server.MaxConnections != maxConn && o.DSN == "" {
		return fmt.Errorf("%w: server.max_connections varies across the sweep; validate starts one PostgreSQL per run", ErrUnsupported)
	}
	if c.AppPool.Mode != system.NoAppPool {
		return fmt.Errorf("%w: app_pool.mode %v: the load driver has no application-side pool yet", ErrUnsupported, c.AppPool.Mode)
	}
	if preparedScenario(c) {
		if k := live.Statement; k != load.KindCPU && k != load.KindSleep {
			return fmt.Errorf("%w: validate.statement %s: prepared statements (workload.statements, workload.parse, workload.prepare_threshold) run live as sleep or cpu statements", ErrUnsupported, k)
		}
		if o.Target == TargetPgBouncer && preparedTracked(c.Pooler.PoolMode, c.Pooler.MaxPreparedStatements) {
			if v := bouncerVersion(ctx); !pgbouncer.VersionAtLeast(v, 1, 21) {
				return fmt.Errorf("%w: pooler.max_prepared_statements %d in %s mode needs PgBouncer 1.21 or later; the installed pgbouncer is %s, which does not track protocol-level prepared statements (run --target proxy, or only the variants with max_prepared_statements 0)", ErrUnsupported, c.Pooler.MaxPreparedStatements, c.Pooler.PoolMode, v)
			}
		}
		return nil
	}
	if testbedKind(live, c) {
		if c.Workload.StmtsPerTxn != 1 || c.Workload.RequestLevel() {
			return fmt.Errorf("%w: validate.statement %s on server.cores is calibrated as CPU per statement, a one-statement transaction each (as pgbench -S's): workload.stmts_per_txn must be 1 and there are no requests", ErrUnsupported, live.Statement)
		}
		if live.Driver == "pgbench" && (c.Workload.Open() || c.Workload.Think.MeanValue() > 0) {
			return fmt.Errorf("%w: validate.driver pgbench runs closed clients back to back (pgbench -c N -t workload.txns_per_session): the workload must be closed with no think time", ErrUnsupported)
		}
		return nil
	}
	if c.Workload.CPU.MeanValue() > 0 || c.Server.Cores > 0 {
		return fmt.Errorf("%w: workload.cpu and server.cores model CPU sharing; run it live with validate.statement: sql (your statement, its CPU measured on the cores) or pgbench-select, or with validate.statement: cpu and workload.query and no server.cores", ErrUnsupported)
	}
	return nil
}

// newLab is the lab of a validation of points: its progress counts
// every live run and, unless quick without probes, a probe per pool mode.
func newLab(o Options, live Live, points []scenarios.Point) *lab {
	l := &lab{o: o, logf: o.Logf, live: live, pgbenchNeeded: live.Driver == "pgbench"}
	if l.logf == nil {
		l.logf = func(string, ...any) {}
	}
	l.total = len(points) * l.repeats()
	if !o.Quick || o.Probes {
		modes := map[poolmode.Mode]bool{}
		for _, p := range points {
			for _, m := range p.Config.PoolModes() {
				if !(o.Target == TargetDirect && m.Pooled()) {
					modes[m] = true
				}
			}
		}
		l.total += len(modes)
	}
	return l
}

// startServer starts the throwaway PostgreSQL (or takes o.DSN's) and
// sets where the load, the counts of other backends and the waits for a
// backend's exit go; stop, never nil, stops the cluster started, on
// error too.
func (l *lab) startServer(ctx context.Context, maxConn, reserved int, prepared bool) (stop func(), err error) {
	o := l.o
	stop = func() {}
	if reserved == 0 { // the scenario's, as the model counts it
		reserved = pgcluster.ReserveNone
	}
	if o.DSN == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{
			MaxConnections:               maxConn,
			SuperuserReservedConnections: reserved,
			Logf:                         l.logf,
		})
		if err != nil {
			return stop, err
		}
		stop = func() { _ = c.Stop() }
		l.cluster = c
		l.watchDSN = c.SuperuserDSN("postgres")
		l.backendGone = func(ctx context.Context, pid uint32) error { return c.WaitBackendsExit(ctx, pid) }
		l.clientsGone = func(ctx context.Context, except uint32) error {
			err := c.WaitClientBackendsExit(ctx, except)
			if errors.Is(err, errors.ErrUnsupported) {
				return nil // no /proc: pg_stat_activity's count alone
			}
			return err
		}
		dsn := c.UserDSN()
		if prepared {
			dsn = genericPlans(dsn)
		}
		if l.srv, err = parseServer(dsn); err != nil {
			return stop, err
		}
	} else {
		dsn := o.DSN
		if prepared {
			dsn = genericPlans(dsn)
		}
		if l.srv, err = parseServer(dsn); err != nil {
			return stop, err
		}
		l.watchDSN = o.DSN
		l.backendGone = func(ctx context.Context, _ uint32) error { return probe.Sleep(ctx, 50*time.Millisecond) }
	}
	return stop, nil
}

// runRows runs every point's live rows (a row per class in a sweep of
// classes) beside the model's runs of the points.
func (l *lab) runRows(ctx context.Context, points []scenarios.Point, multi bool, stmt load.Statement, samples int, rep *Report) error {
	models := scenarios.Run(points, 0)
	for i, p := range points {
		if multi {
			rows, err := l.multiRow(ctx, p, models[i], stmt, samples)
			if err != nil {
				return err
			}
			rep.Rows = append(rep.Rows, rows...)
			continue
		}
		row, err := l.row(ctx, p, models[i].Metrics, stmt, samples)
		if err != nil {
			return err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return nil
}

// runProbes probes each pool mode of the points once (not in direct
// validations' pooled modes), unless quick without probes.
func (l *lab) runProbes(ctx context.Context, points []scenarios.Point, rep *Report) error {
	o := l.o
	if !o.Quick || o.Probes {
		seen := map[poolmode.Mode]bool{}
		for _, pm := range probeModes(points) {
			m := pm.mode
			if seen[m] || (o.Target == TargetDirect && m.Pooled()) {
				continue
			}
			seen[m] = true
			l.phase(fmt.Sprintf("probing session features in %s mode", m))
			pr, err := l.probe(ctx, m, pm.maxPrepared)
			if err != nil {
				return err
			}
			rep.Probes = append(rep.Probes, pr)
			l.step()
		}
	}
	return nil
}

// probeMode is a pool mode to probe, with the max_prepared_statements of
// the first point that uses it.
type probeMode struct {
	mode        poolmode.Mode
	maxPrepared int
}

// probeModes lists the points' pool modes (every pool's, with classes) in
// order of first use.
func probeModes(points []scenarios.Point) []probeMode {
	var out []probeMode
	for _, p := range points {
		for _, m := range p.Config.PoolModes() {
			out = append(out, probeMode{m, p.Config.Pooler.MaxPreparedStatements})
		}
	}
	return out
}

// quiesce waits until no other client backend is connected, so that every
// max_connections slot is free for the next row or calibration.
func (l *lab) quiesce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, l.watchDSN)
	if err != nil {
		return fmt.Errorf("validate: wait for idle server: %w", err)
	}
	pid := conn.PID()
	filter := ""
	if l.cluster == nil {
		filter = " AND usename = current_user"
	}
	for {
		n, err := countBackends(ctx, conn, filter)
		if err != nil {
			closeConn(conn)
			return fmt.Errorf("validate: wait for idle server: %w", err)
		}
		if n == 0 {
			break
		}
		if err := probe.Sleep(ctx, 20*time.Millisecond); err != nil {
			closeConn(conn)
			return fmt.Errorf("validate: other connections did not end: %w", err)
		}
	}
	// A backend leaves pg_stat_activity before it frees its slot.
	if l.clientsGone != nil {
		if err := l.clientsGone(ctx, pid); err != nil {
			closeConn(conn)
			return fmt.Errorf("validate: wait for idle server: %w", err)
		}
	}
	_ = conn.Close(ctx)
	return l.backendGone(ctx, pid)
}

// serversOpen counts the client backends of user on database at
// PostgreSQL: right before a pooled run, the servers the target's pool
// holds (quiesce left no other; the watch connection is not counted).
func (l *lab) serversOpen(ctx context.Context, user, database string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, l.watchDSN)
	if err != nil {
		return 0, fmt.Errorf("validate: count the pool's servers: %w", err)
	}
	pid := conn.PID()
	n, err := countBackends(ctx, conn, " AND usename = $1 AND datname = $2", user, database)
	closeConn(conn)
	if err != nil {
		return 0, fmt.Errorf("validate: count the pool's servers: %w", err)
	}
	// The watch connection's max_connections slot must be free before
	// the load starts.
	return n, l.backendGone(ctx, pid)
}

// countBackends counts the client backends other than conn's own that
// match filter (SQL appended to the WHERE clause, $1... bound to args).
func countBackends(ctx context.Context, conn *pgconn.PgConn, filter string, args ...string) (int, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	rs := conn.ExecParams(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"+filter,
		params, nil, nil, nil).Read()
	if rs.Err != nil {
		return 0, rs.Err
	}
	if len(rs.Rows) != 1 {
		return 0, fmt.Errorf("unexpected answer %q", rs.Rows)
	}
	n, err := strconv.Atoi(string(rs.Rows[0][0]))
	if err != nil {
		return 0, fmt.Errorf("unexpected answer %q: %w", rs.Rows[0][0], err)
	}
	return n, nil
}

// serverStarts reads when the servers of user on database that started
// after since started (pg_stat_activity's backend_start) and returns
// their number and the median gap between one start and the next. It
// asks through the target (dsn): the pool may hold every
// max_connections slot, and a role sees its own sessions' starts.
func serverStarts(ctx context.Context, dsn, user, database string, since time.Time) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("validate: read the servers' starts: %w", err)
	}
	defer closeConn(conn)
	rs := conn.ExecParams(ctx, "SELECT (extract(epoch FROM backend_start) * 1e6)::int8 FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename = $1 AND datname = $2 ORDER BY 1",
		[][]byte{[]byte(user), []byte(database)}, nil, nil, nil).Read()
	if rs.Err != nil {
		return 0, 0, fmt.Errorf("validate: read the servers' starts: %w", rs.Err)
	}
	var starts []time.Time
	for _, row := range rs.Rows {
		us, err := strconv.ParseInt(string(row[0]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("validate: read the servers' starts: %w", err)
		}
		if at := time.UnixMicro(us); !at.Before(since) {
			starts = append(starts, at)
		}
	}
	if len(starts) < 2 {
		return len(starts), 0, nil
	}
	gaps := make([]time.Duration, 0, len(starts)-1)
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]))
	}
	slices.Sort(gaps)
	return len(starts), load.Median(gaps), nil
}

// row runs one point.
func (l *lab) row(ctx context.Context, p scenarios.Point, model system.Metrics, stmt load.Statement, samples int) (Row, error) {
	c := p.Config
	mode := c.Pooler.PoolMode
	row := Row{Params: p.Params, Mode: mode, Clients: max(c.Workload.Clients, c.Workload.Workers), Model: model, Prepared: preparedScenario(c), reqLevel: c.Workload.RequestLevel(),
		maxPrepared: c.Pooler.MaxPreparedStatements, threshold: c.Workload.PrepareThreshold,
		cores: c.Server.Cores, poolSize: c.Pooler.DefaultPoolSize, testbed: testbedKind(l.live, c)}
	if l.o.Target == TargetDirect && mode.Pooled() {
		row.Skipped = "--target direct runs no pooler; this row needs one"
		return row, nil
	}
	l.logf("validate: row %s", row.Title())
	loadStart := loadAvg()
	var runs []attempt
	for r := range l.repeats() {
		l.phase(fmt.Sprintf("row %s, run %d of %d", row.Title(), r+1, l.repeats()))
		a, err := l.once(ctx, c, stmt, samples)
		if err != nil {
			return row, err
		}
		runs = append(runs, a)
		l.step()
	}
	var xs []Measured
	var cals []Calibration
	var models, before []ModelRun
	for _, a := range runs {
		xs, cals = append(xs, a.x), append(cals, a.cal)
		models = append(models, calibratedRun(c, a))
		_, held := heldInRun(a)
		if tb := a.cal.Testbed; held || tb != nil && tb.Run.OK {
			before = append(before, beforeRun(c, a))
		}
	}
	row.Repeats, row.RepeatModels = xs, models
	row.Measured = combineMeasured(xs, model)
	row.Calibrated = combineModels(models, model)
	if len(before) == len(runs) {
		b := combineModels(before, model)
		row.Before = &b
	}
	row.Cal = combineCal(cals)
	row.Load = loadStart + " → " + loadAvg()
	row.calStmt = float64(row.Cal.QueryMean+2*row.Cal.Hop) / 1e6
	row.calThinkMs = float64(row.Cal.ThinkMean) / 1e6
	judge(&row)
	l.logf("validate: row %s: %s", row.Title(), row.verdict())
	return row, nil
}

// attempt is one live run of a row.
type attempt struct {
	x   Measured
	cal Calibration
}

// repeats is how many times each row runs.
func (l *lab) repeats() int {
	if l.o.Repeats > 0 {
		return l.o.Repeats
	}
	if l.o.Quick {
		return 1
	}
	return 5
}

// runKind is what kind of run a row's is, which decides how it is
// calibrated and what is measured.
type runKind struct {
	prepared bool // prepared statements (prepared.go)
	testbed  bool // a CPU-bound statement, calibrated as a testbed (testbed.go)
	held     bool // a pooled row of a plain statement: what the pooler sees of it (calibrateHold)
	tracked  bool // prepared statements the in-process proxy tracks: its counters are read
}

// runBase is what the target's counters said before the run.
type runBase struct {
	waitBefore    int64 // PgBouncer's SHOW STATS total_wait_time, µs
	sp, binds, cp int64 // the proxy's server parses, binds and client parses
	times         serverTimes
}

// once starts the row's target, measures the hop through it, runs the load,
// collects the metrics and stops the target.
func (l *lab) once(ctx context.Context, c system.Config, stmt load.Statement, samples int) (attempt, error) {
	var a attempt
	if err := l.quiesce(ctx); err != nil {
		return a, err
	}
	k := runKind{prepared: preparedScenario(c), testbed: testbedKind(l.live, c)}
	k.held = c.Pooler.PoolMode.Pooled() && !k.testbed && !k.prepared
	var err error
	if a.cal, err = l.calibrateBefore(ctx, c, stmt, samples, k); err != nil {
		return a, err
	}
	t, err := startTarget(ctx, l.o.Target, l.srv, poolSettings{pooling: c.Pooler.Pooling, bouncerVersion: l.bouncerVersion}, l.logf)
	if err != nil {
		return a, err
	}
	defer t.close()
	if err := l.calibrateAtTarget(ctx, t, c, stmt, samples, k, &a.cal); err != nil {
		return a, err
	}
	k.tracked = k.prepared && t.px != nil && preparedTracked(c.Pooler.PoolMode, c.Pooler.MaxPreparedStatements)
	base, err := l.beforeRun(ctx, t, c, samples, k, &a.cal)
	if err != nil {
		return a, err
	}
	res, x, err := l.runLoad(ctx, t, c, stmt, k, a.cal)
	if err != nil {
		return a, err
	}
	if err := l.measureAtTarget(ctx, t, c, res, base, k, a.cal, &x); err != nil {
		return a, err
	}
	if err := t.close(); err != nil {
		return a, err
	}
	if err := l.calibrateAfter(ctx, c, stmt, samples, k, &a.cal); err != nil {
		return a, err
	}
	a.x = x
	return a, nil
}

// calibrateBefore measures, before the target starts, what the row's
// model takes: a CPU-bound row's testbed, prepared executions, or the
// statement and think times; and a pooled row of a plain statement's hold
// of a server at the target.
func (l *lab) calibrateBefore(ctx context.Context, c system.Config, stmt load.Statement, samples int, k runKind) (Calibration, error) {
	var cal Calibration
	var err error
	switch {
	case k.testbed:
		cal, err = l.calibrateCPUBound(ctx, c, stmt)
	case k.prepared:
		cal, err = calibratePrepared(ctx, l.srv.dsn, c, stmt, samples, l.backendGone)
	default:
		cal, err = calibrate(ctx, l.srv.dsn, appAsThink(c), stmt, samples, l.backendGone)
		cal.App = appCalibrated(c)
	}
	if err != nil {
		return cal, err
	}
	if k.prepared {
		l.logf("validate: calibrated: connect %v, prepared execution %v (trivial %v), unnamed %v, parse %v, think %v", cal.Connect, cal.QueryMean, cal.RTT, cal.Unnamed, cal.Parse, cal.ThinkMean)
	}
	if k.held {
		if err := l.calibrateHold(ctx, c, stmt, &cal); err != nil {
			return cal, err
		}
	}
	return cal, nil
}

// calibrateAtTarget measures the hop through the started target t and,
// for a CPU-bound row, each process's CPU per statement through it and
// the pinned arrangements; then it fits the testbed.
func (l *lab) calibrateAtTarget(ctx context.Context, t *running, c system.Config, stmt load.Statement, samples int, k runKind, cal *Calibration) error {
	if c.Pooler.PoolMode.Pooled() {
		var err error
		if cal.Hop, cal.HopRTT, err = measureHop(ctx, t.dsn, l.srv.dsn, samples, l.backendGone); err != nil {
			return err
		}
		if k.testbed {
			tb := cal.Testbed
			if err := l.calibrateThrough(ctx, t, c, stmt, tb); err != nil {
				return err
			}
			l.logf("validate: calibrated through the target: %d clients, %.0f/s; CPU per statement: driver %v, pooler %v, server %v; hop %v", tb.ThroughClients, tb.ThroughTPS, tb.Driver, tb.Pooler, tb.Server, cal.Hop)
			if err := l.calibrateArrangements(ctx, t, c, stmt, tb); err != nil {
				return err
			}
		}
	}
	if k.testbed {
		fitTestbed(cal.Testbed, c)
		fitBalance(c, *cal)
		modelArrangements(c, *cal)
		tb := cal.Testbed
		l.logf("validate: testbed fit: latency %v, σ %.4f, κ %.5f; direct model %s%s", tb.Latency, tb.Contention, tb.Coherency, tb.pointsText(), tb.balanceLog())
	}
	return nil
}

// beforeRun reads the target's counters the run is measured against,
// and the servers its pool holds as the load starts (cal.ServersOpen).
func (l *lab) beforeRun(ctx context.Context, t *running, c system.Config, samples int, k runKind, cal *Calibration) (runBase, error) {
	var b runBase
	var err error
	if t.bouncer != nil {
		if b.waitBefore, _, err = bouncerStats(ctx, t.bouncer, l.srv.database); err != nil {
			return b, err
		}
	}
	if k.tracked {
		if b.sp, b.binds, b.cp, err = proxyStats(ctx, t.px, l.srv.database); err != nil {
			return b, err
		}
	}
	if c.Pooler.PoolMode.Pooled() {
		if cal.ServersOpen, err = l.serversOpen(ctx, l.srv.user, l.srv.database); err != nil {
			return b, err
		}
	}
	switch {
	case !k.held:
	case t.bouncer != nil:
		// PgBouncer's SHOW STATS totals move once a second, and this
		// start of it has run only the hop's empty queries: those, each
		// held for about the empty round trip less its two hops, are the
		// run's baseline.
		b.times = serverTimes{queries: int64(samples), query: time.Duration(samples) * max(0, cal.HopRTT-2*cal.Hop)}
	default:
		if b.times, err = t.times(ctx, l.srv.database); err != nil {
			return b, err
		}
	}
	return b, nil
}

// runLoad runs the row's load through the target (pgbench, or the load
// driver) with the instruments the row needs - where PgBouncer and the
// servers ran, a pooled CPU-bound row's CPU per statement and waits for
// a core over the run - and returns the driver's result and what was
// measured of the run and the machine.
func (l *lab) runLoad(ctx context.Context, t *running, c system.Config, stmt load.Statement, k runKind, cal Calibration) (*load.Result, Measured, error) {
	mode := c.Pooler.PoolMode
	placed := func() *Placement { return nil }
	if k.testbed {
		placed = l.watchPooler(ctx, t)
	}
	var rw *runWatch
	var err error
	if k.testbed && mode.Pooled() {
		if rw, err = l.watchRun(ctx, t); err != nil {
			return nil, Measured{}, err
		}
	}
	cpu0 := sampleCPU()
	var res *load.Result
	var pgUse pgbenchUse
	var ended cpuSample // the run's end, before pgbench's log is read
	pg := l.pgbench()
	if pg != nil {
		t.waits()
		res, pgUse, err = runPgbenchLoad(ctx, pg.bin, t.dsn, c.Workload.Clients, c.Workload.TxnsPerSession, c.Seed, func() { ended = sampleCPU() })
	} else {
		res, err = load.Run(ctx, load.Spec{
			Prepared:  k.prepared,
			DSN:       t.dsn,
			Workload:  c.Workload,
			Seed:      c.Seed,
			Blocks:    mode != poolmode.Statement,
			Statement: stmt,
			Settle:    settle,
			Started:   func() { t.waits() },
			Warm:      warmText(mode, stmt),
			KeepConns: mode == poolmode.Direct,

			ArrivalStream: arrivalStream(c), // an open workload's arrivals are the model's
		})
	}
	cpu1 := sampleCPU()
	if ended.at.IsZero() {
		ended = cpu1
	}
	place := placed()
	if err != nil {
		return nil, Measured{}, err
	}
	var rd RunDelay
	if rw != nil {
		tb := cal.Testbed
		tb.Run = rw.finish(ctx, res.Stmts, ended.self-cpu0.self-(ended.instr-cpu0.instr), pgUse.CPU, pg != nil, tb, busyCores(cpu0, ended), ended.at.Sub(cpu0.at))
		rd = rw.delays(res.Stmts, pgUse, pg != nil)
		if tb.Run.OK {
			l.logf("validate: CPU per statement in the run: driver %v, pooler %v, server %v, other work %.3f cores (this process %.3f, its instruments %.3f; through loop: %v, %v, %v, %.3f cores)", tb.Run.Driver, tb.Run.Pooler, tb.Run.Server, tb.Run.Other, (ended.self-cpu0.self).Seconds()/ended.at.Sub(cpu0.at).Seconds(), (ended.instr-cpu0.instr).Seconds()/ended.at.Sub(cpu0.at).Seconds(), tb.Driver, tb.Pooler, tb.Server, tb.ThroughOther)
		}
	}
	x := measured(res)
	x.Placement = place
	x.RunDelay = rd
	x.DriverSpread = pgUse.Spread
	x.CPUBusy, x.CPUSelf = cpuUse(cpu0, cpu1, runtime.NumCPU())
	x.CPUSteal = stealUse(cpu0, cpu1)
	return res, x, nil
}

// measureAtTarget adds to x what the target counted over the run: the
// prepared statements' parses and binds, the waits for a server (each
// assignment through the proxy, PgBouncer's mean), and for a pooled row
// of a plain statement how long a statement held its server and how the
// pool opened its servers.
func (l *lab) measureAtTarget(ctx context.Context, t *running, c system.Config, res *load.Result, base runBase, k runKind, cal Calibration, x *Measured) error {
	mode := c.Pooler.PoolMode
	var err error
	if k.prepared {
		var sp, b, cp int64
		if k.tracked {
			if sp, b, cp, err = settledStats(ctx, t.px, l.srv.database); err != nil {
				return err
			}
		}
		x.Prepared = preparedMeasure(res, k.tracked, sp-base.sp, b-base.binds, cp-base.cp)
	}
	if t.px != nil {
		var ws sim.Samples
		for _, w := range t.waits() {
			if !w.At.Before(res.Start) {
				ws.Add(sim.FromDuration(w.Wait))
			}
		}
		x.WaitKnown = ws.Count() > 0
		x.Assignments = int64(ws.Count())
		x.WaitMeanMs, x.WaitP50Ms, x.WaitP99Ms = ws.Mean().Milliseconds(), ws.Percentile(50).Milliseconds(), ws.Percentile(99).Milliseconds()
	}
	if t.bouncer != nil {
		// SHOW STATS totals move every stats_period (1 s here).
		if err := probe.Sleep(ctx, 1100*time.Millisecond); err != nil {
			return err
		}
		waitAfter, _, err := bouncerStats(ctx, t.bouncer, l.srv.database)
		if err != nil {
			return err
		}
		x.Assignments = assignments(mode, res)
		if x.Assignments > 0 {
			x.WaitMeanOnly = true
			x.WaitMeanMs = float64(waitAfter-base.waitBefore) / 1e3 / float64(x.Assignments)
		}
	}
	if k.held {
		times1, err := t.times(ctx, l.srv.database)
		if err != nil {
			return err
		}
		x.HoldMs, x.HoldQueries = holdMs(base.times, times1), times1.queries-base.times.queries
		var gap time.Duration
		if x.StartsInRun, gap, err = serverStarts(ctx, t.dsn, l.srv.user, l.srv.database, res.Start); err != nil {
			return err
		}
		x.StartGapMs = float64(gap) / 1e6
		l.logf("validate: in the run: a statement held its server %.3f ms (%d requests; calibrated %v), %d servers opened, one every %.3f ms (calibrated %v)", x.HoldMs, x.HoldQueries, cal.Hold, x.StartsInRun, x.StartGapMs, cal.ConnectLoaded)
	}
	return nil
}

// calibrateAfter measures the statement's times again after the run and
// gives the model the mean of before and after: they move with the
// machine's other work. A CPU-bound row's are read over the run itself.
func (l *lab) calibrateAfter(ctx context.Context, c system.Config, stmt load.Statement, samples int, k runKind, cal *Calibration) error {
	if k.prepared || !k.testbed {
		// The run's connections are closed; their slots free once their
		// backends are gone.
		if err := l.quiesce(ctx); err != nil {
			return err
		}
	}
	if k.prepared {
		// The statement's cost moves with the machine's other work (load
		// average, CPU steal on a shared host): measure it again right
		// after the run and give the model the mean of both.
		after, err := calibratePrepared(ctx, l.srv.dsn, c, stmt, samples, l.backendGone)
		if err != nil {
			return err
		}
		*cal = bracket(*cal, after)
		l.logf("validate: calibrated after the run: prepared execution %v (trivial %v), unnamed %v, parse %v; used: %v, %v, %v, %v", after.QueryMean, after.RTT, after.Unnamed, after.Parse, cal.QueryMean, cal.RTT, cal.Unnamed, cal.Parse)
	} else if !k.testbed {
		// The same for the statement and think times: pg_sleep and the
		// timers overshoot more when the machine is busier, and its other
		// work changes while a row runs.
		after, err := calibrate(ctx, l.srv.dsn, appAsThink(c), stmt, samples, l.backendGone)
		if err != nil {
			return err
		}
		before := *cal
		*cal = bracketTimes(*cal, after)
		l.logf("validate: calibrated after the run: query %v, think %v (before %v, %v); used: %v, %v", after.QueryMean, after.ThinkMean, before.QueryMean, before.ThinkMean, cal.QueryMean, cal.ThinkMean)
	}
	return nil
}

// assignments is how many server assignments the driver's run made in
// mode: a session's in session mode, a transaction's in transaction mode, a
// statement's in statement mode.
func assignments(mode poolmode.Mode, r *load.Result) int64 {
	switch mode {
	case poolmode.Session:
		return r.Sessions
	case poolmode.Transaction:
		return r.OKTxns
	case poolmode.Statement:
		return r.Stmts
	}
	return 0
}

func measured(r *load.Result) Measured {
	return Measured{
		OKTxns:       r.OKTxns,
		ConnRefused:  r.Refused,
		WaitTimeouts: r.WaitTimeouts,
		Failed:       r.Failed,
		WallMs:       float64(r.Wall()) / 1e6,
		TPS:          r.TPS(),
		TPSSteady:    r.SteadyTPS(),
		MeanMs:       r.Latency.Mean().Milliseconds(),
		P50Ms:        r.Latency.Percentile(50).Milliseconds(),
		P95Ms:        r.Latency.Percentile(95).Milliseconds(),
		P99Ms:        r.Latency.Percentile(99).Milliseconds(),
		StmtMeanMs:   r.StmtRT.Mean().Milliseconds(),
		StmtP99Ms:    r.StmtRT.Percentile(99).Milliseconds(),
		ThinkMeanMs:  r.Think.Mean().Milliseconds(),
		AppMeanMs:    r.App.Mean().Milliseconds(),
		OKReqs:       r.OKReqs,
		ReqTPS:       reqTPS(r),
		ReqP50Ms:     r.ReqLatency.Percentile(50).Milliseconds(),
		ReqP99Ms:     r.ReqLatency.Percentile(99).Milliseconds(),
		Errors:       r.Errors,
	}
}

// reqTPS is completed requests per second of the run's wall.
func reqTPS(r *load.Result) float64 {
	w := r.Wall()
	if w <= 0 {
		return 0
	}
	return float64(r.OKReqs) / w.Seconds()
}

// probe runs the feature probes of one mode through the target, with a
// pool of two servers.
func (l *lab) probe(ctx context.Context, mode poolmode.Mode, maxPrepared int) (ProbeRow, error) {
	l.logf("validate: probing %s", mode)
	pr := ProbeRow{Mode: mode, MaxPrepared: maxPrepared}
	if err := l.quiesce(ctx); err != nil {
		return pr, err
	}
	pooling := poolconf.DefaultPooling()
	pooling.PoolMode, pooling.DefaultPoolSize, pooling.QueryWaitTimeout, pooling.MaxPreparedStatements = mode, 2, 30*time.Second, maxPrepared
	t, err := startTarget(ctx, l.o.Target, l.srv, poolSettings{pooling: pooling, bouncerVersion: l.bouncerVersion}, l.logf)
	if err != nil {
		return pr, err
	}
	pr.Effective, pr.Note = t.prepared, t.preparedNote
	pr.Expected = compat.For(mode, t.prepared)
	res, err := probe.Run(ctx, probe.Spec{DSN: t.dsn, NotifyDSN: l.srv.dsn, Mode: mode})
	serr := t.stop()
	if ctx.Err() != nil {
		return pr, ctx.Err()
	}
	pr.Result = res
	if err != nil {
		pr.Err = err.Error()
	}
	if serr != nil {
		return pr, serr
	}
	return pr, nil
}

// versions fills the report's versions.
func (l *lab) versions(ctx context.Context, rep *Report, maxConn int) error {
	vs := Versions{Go: runtime.Version(), CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), LoadStart: loadAvg()}
	if l.cluster != nil {
		vs.PostgreSQL = l.cluster.Version()
	} else {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, err := pgconn.Connect(cctx, l.srv.dsn)
		if err != nil {
			return fmt.Errorf("validate: %w", err)
		}
		vs.PostgreSQL = conn.ParameterStatus("server_version")
		rs, err := conn.Exec(cctx, "SHOW max_connections").ReadAll()
		if err == nil && len(rs) == 1 && len(rs[0].Rows) == 1 {
			if got := string(rs[0].Rows[0][0]); got != fmt.Sprint(maxConn) {
				rep.Notes = append(rep.Notes, fmt.Sprintf("the server's max_connections is %s, the scenario's %d: direct refusals follow the server's", got, maxConn))
			}
		}
		_ = conn.Close(cctx)
	}
	vs.PgBouncer = bouncerVersion(ctx)
	l.bouncerVersion = vs.PgBouncer
	vs.Commit = gitCommit(ctx)
	rep.Versions = vs
	return nil
}

// loadAvg is the machine's 1, 5 and 15 minute load averages (Linux), so the
// report shows how busy the machine was with other work.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// bouncerVersion is the installed pgbouncer's version for reports:
// "not installed" or "unknown (...)" when it cannot be had.
func bouncerVersion(ctx context.Context) string {
	v, err := pgbouncer.InstalledVersion(ctx)
	switch {
	case errors.Is(err, pgbouncer.ErrNoPgBouncer):
		return "not installed"
	case err != nil:
		return "unknown (" + err.Error() + ")"
	}
	return v
}

// gitCommit is the commit poolsim was built from, for reports: the
// binary's own VCS stamp (go build in a checkout records it), else the
// checkout in the working directory (go run and go test stamp none).
func gitCommit(ctx context.Context) string {
	if c, ok := stampedCommit(); ok {
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

// stampedCommit is the binary's vcs.revision (12 digits) and whether its
// tree had changes (vcs.modified).
func stampedCommit() (string, bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	var rev string
	var modified bool
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	if rev == "" {
		return "", false
	}
	rev = rev[:min(12, len(rev))]
	if modified {
		rev += " (with uncommitted changes)"
	}
	return rev, true
}

// notes explain how the live run differs from the model by construction.
func notes(target string, live Live, points []scenarios.Point) []string {
	n := []string{
		"Time zero is 200 ms after every client of a closed workload has tried to connect (a barrier, then a pause so that refused backends have exited): the clients' own logins are outside the measurement, so the calibrated model gives direct rows server.connect = 0 and pooled rows the measured connect for the pooler's server logins. In the direct rows each connection also runs the statement once at no cost (SELECT pg_sleep(0), or the row's own) before time zero: a new backend loads its catalog caches on its first statement, part of the connection, not of the run.",
		"In the pooled rows the pooler opens its first server connection before time zero (to answer the first login, and for the hop measurement): the validator counts the servers the pool holds right before the load starts (the calibration's open column) and the calibrated model's pool starts with them (validate.servers_open); the scenario's model starts empty.",
		"hop_ms_per_txn is not measurable from outside the pooler and is left out; the hop enters the calibrated model as measured above.",
		"Transaction blocks travel inside the first and last statements' Query messages (BEGIN; ... and ...; COMMIT), so a transaction costs stmts_per_txn round trips, as in the model; statement mode runs the statements as autocommit statements, as the model does.",
	}
	switch target {
	case TargetPgBouncer:
		n = append(n, "PgBouncer reports no wait percentiles: wait_p99_ms is left blank and wait_mean_ms is SHOW STATS total_wait_time divided by the assignments the driver made (sessions, transactions or statements by mode).")
	case TargetProxy:
		n = append(n, "wait_p99_ms and wait_mean_ms come from the proxy's own record of every server assignment (request reached the proxy → server linked).")
	}
	if live.Driver == "pgbench" {
		n[0] = "The load driver is pgbench (validate.driver: pgbench): pgbench -S -n -c clients -j (one thread per core) -t txns_per_session, every transaction logged (-l). Time zero is the first logged transaction's start: pgbench opens its connections before its first transaction, so the clients' own logins are outside the measurement, as with poolsim's driver; the latencies are pgbench's own."
	}
	if len(points) > 0 && preparedScenario(points[0].Config) {
		n[3] = "Each statement is one of workload.statements fixed texts (the live statement with its time as the bind parameter $1 and its number in a comment), chosen with the workload's Zipf popularity, and runs with the extended protocol as the model's driver does: an unnamed Parse/Bind/Execute/Sync until the text has run prepare_threshold times on the connection (0: always), then a named Parse once, in the same round trip as its first Bind/Execute, and Bind/Execute/Sync after that. Names are unique per client (poolsim_<client>_<k>), as the model's (connection, statement) pairs are. BEGIN and COMMIT travel unnamed in the same round trip as a transaction's first and last statements, so a transaction costs stmts_per_txn round trips, as in the model."
		n = append(n,
			"Every PostgreSQL connection of the run (calibration, the proxy's servers, direct clients) starts with plan_cache_mode = force_generic_plan: without it PostgreSQL plans a named statement with parameters afresh for its first five executions, where the model's prepared statement is parsed and planned once. The measured parse is PostgreSQL's parse and plan of the statement.",
			"Prepared hit rate, as in the model: the share of executions of named statements that needed no Parse at their server, among those that did not fail. With the proxy tracking prepared statements (transaction mode, max_prepared_statements > 0) it is 1 − the proxy's server parses / binds over the run (Proxy.Stats) (each Bind of a named statement, and the proxy's count of named Parses it forwarded or injected); otherwise every named Parse the driver sends reaches a server, and the driver counts it and the executions that succeeded without one. Server parses = named Parses at the servers + the driver's unnamed executions (each is a Parse), per second of the run's wall.",
			"A Bind of a statement missing on its server fails (SQLSTATE 26000): the live client then sends ROLLBACK, one round trip the model does not have, and goes on with its next transaction still believing the statement prepared, as the model's driver does.",
			"The model gives the driver and the in-process proxy no CPU time; on this machine they share the cores with PostgreSQL. The live statement is scaled so that its CPU time dwarfs theirs (see the scenario).",
		)
	}
	return n
}

// WriteDir writes report.md, rows.csv, command.txt and versions.txt into
// dir, creating it.
func (rep *Report) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	write := func(name string, fill func(*os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("validate: %w", err)
		}
		if err := fill(f); err != nil {
			f.Close()
			return fmt.Errorf("validate: write %s: %w", name, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("validate: write %s: %w", name, err)
		}
		return nil
	}
	v := rep.Versions
	return errors.Join(
		write("report.md", func(f *os.File) error { return rep.WriteMarkdown(f) }),
		write("rows.csv", func(f *os.File) error { return rep.WriteCSV(f) }),
		write("command.txt", func(f *os.File) error { _, err := fmt.Fprintln(f, rep.Command); return err }),
		write("versions.txt", func(f *os.File) error {
			_, err := fmt.Fprintf(f, "postgresql: %s\npgbouncer: %s\ngo: %s\npoolsim: %s\ncpus: %d\nos: %s\ndate: %s\nload average at start: %s\nload average at end: %s\n",
				v.PostgreSQL, v.PgBouncer, v.Go, v.Commit, v.CPUs, v.OS, v.Date, v.LoadStart, v.LoadEnd)
			if err == nil && v.Sched != "" {
				_, err = fmt.Fprintf(f, "scheduling: %s\n", v.Sched)
			}
			return err
		}),
	)
}

// warmText is what a direct row's connections run before time zero (the
// statement at no cost: SELECT pg_sleep(0), or the row's own): a new
// backend loads its catalog caches on its first statement, part of the
// connection, which the model's direct clients open before time zero.
// Pooled rows' servers are the pooler's to open, during the run, as in
// the model.
func warmText(mode poolmode.Mode, st load.Statement) string {
	if mode != poolmode.Direct {
		return ""
	}
	return st.Text(0)
}
