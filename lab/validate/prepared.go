package validate

import (
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/lab/probe"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/proxy/pooler"
	"github.com/poolsim/poolsim/sim"
)

// Prepared statements live (workload.statements, workload.parse,
// workload.prepare_threshold; seeds 004 and 000): the load driver runs K
// fixed texts with the extended protocol as the model's driver does (see
// package load), the statement's execution is the scenario's live
// statement (cpu or sleep) with its time as a bind parameter, and its parse
// and plan cost is PostgreSQL's own, measured before each run as the
// difference between an unnamed and a prepared execution of the same text.
//
// PostgreSQL plans a named statement with parameters afresh ("custom
// plans") for its first five executions unless plan_cache_mode says
// otherwise; the model's prepared statement is parsed and planned once. The
// run therefore sets plan_cache_mode = force_generic_plan as a startup
// parameter of every connection to PostgreSQL (the calibration's, the
// proxy's server connections, direct clients), so that a prepared
// execution is what the model says: no parse, no plan.

// TolHitRate is the absolute tolerance of the prepared hit rate, and
// TolPrepared the relative one of server parses per second and TPS in
// prepared-statement rows.
const (
	TolHitRate  = 0.05
	TolPrepared = 0.15
)

// preparedScenario reports whether c runs prepared statements.
func preparedScenario(c system.Config) bool { return load.PreparedWorkload(c.Workload) }

// withParam adds a startup parameter to a pgconn connection string (URL or
// keyword/value).
func withParam(dsn, key, value string) string {
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + key + "=" + value
	}
	return dsn + " " + key + "=" + value
}

// genericPlans is the startup parameter of every PostgreSQL connection of a
// prepared-statement run.
func genericPlans(dsn string) string { return withParam(dsn, "plan_cache_mode", "force_generic_plan") }

// calibratePrepared measures, on one connection straight to PostgreSQL and
// with nothing else running: the round trip of a prepared trivial statement
// (RTT), a prepared execution of the scenario's statement at its mean time
// (Exec), and the parse and plan cost: the median of the differences
// between an unnamed and a prepared execution of the same text, timed
// alternately.
func calibratePrepared(ctx context.Context, dsn string, cfg system.Config, st load.Statement, samples int, backendGone func(context.Context, uint32) error) (_ Calibration, err error) {
	w := cfg.Workload
	nominal := w.Query.MeanValue().Duration() + w.CPU.MeanValue().Duration()
	samples = min(samples, 200)
	cal := Calibration{Samples: samples, QueryNominal: nominal, ThinkNominal: w.Think.MeanValue().Duration(),
		Prepared: true, Kind: st.Kind, ParseNominal: w.Parse.MeanValue().Duration(), Concurrency: 1}
	if cal.Connect, err = measureConnect(ctx, dsn, 11, backendGone); err != nil {
		return cal, err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(cctx, dsn)
	if err != nil {
		return cal, fmt.Errorf("calibrate prepared: %w", err)
	}
	pid := conn.PID()
	defer func() {
		closeConn(conn)
		if gerr := backendGone(ctx, pid); gerr != nil && err == nil {
			err = gerr
		}
	}()
	param := st.Param(nominal)
	run := func(name, sql string, parse bool, params ...string) (time.Duration, error) {
		return timeExec(cctx, conn, name, sql, parse, params...)
	}
	k := max(1, w.Statements)
	// Warm the backend and prepare the trivial and the timed statements.
	if _, err = run("poolsim_cal_rtt", "SELECT 1", true); err != nil {
		return cal, err
	}
	for i := range min(k, 8) {
		if _, err = run("poolsim_cal_"+strconv.Itoa(i), st.PreparedText(i), true, param); err != nil {
			return cal, err
		}
		if _, err = run("", st.PreparedText(i), true, param); err != nil {
			return cal, err
		}
	}
	var rtts, execs, unnamed, diffs []time.Duration
	for n := range samples {
		i := n % min(k, 8)
		text := st.PreparedText(i)
		a, err := run("poolsim_cal_rtt", "", false)
		if err != nil {
			return cal, err
		}
		b, err := run("poolsim_cal_"+strconv.Itoa(i), text, false, param)
		if err != nil {
			return cal, err
		}
		c, err := run("", text, true, param)
		if err != nil {
			return cal, err
		}
		rtts, execs, unnamed, diffs = append(rtts, a), append(execs, b), append(unnamed, c), append(diffs, c-b)
	}
	for _, s := range [][]time.Duration{rtts, execs, unnamed, diffs} {
		slices.Sort(s)
	}
	cal.RTT = load.Median(rtts)
	cal.QueryMean = load.Median(execs)
	cal.QueryP99 = execs[max(0, len(execs)*99/100-1)]
	cal.Unnamed = load.Median(unnamed)
	cal.Parse = max(0, load.Median(diffs))
	cal.Query = sim.ConstDist(sim.FromDuration(cal.QueryMean))
	if w.Query.Random() {
		cal.Query = scaleDist(w.Query, float64(cal.QueryMean)/float64(max(1, w.Query.MeanValue().Duration())))
	}
	// The driver's think timer, on as many goroutines as a pool's servers.
	cal.Think, cal.ThinkMean, err = measureThink(ctx, cfg, min(cfg.Pooler.DefaultPoolSize, 20), samples)
	return cal, err
}

// bracket is a prepared-statement calibration from the measurements right
// before (b) and right after (a) a run: the means of the statement's
// times; connect and think from before.
func bracket(b, a Calibration) Calibration {
	mean := func(x, y time.Duration) time.Duration { return (x + y) / 2 }
	c := b
	c.QueryMean, c.QueryP99 = mean(b.QueryMean, a.QueryMean), max(b.QueryP99, a.QueryP99)
	c.RTT, c.Unnamed, c.Parse = mean(b.RTT, a.RTT), mean(b.Unnamed, a.Unnamed), mean(b.Parse, a.Parse)
	c.Samples = b.Samples + a.Samples
	c.Query = scaleDist(b.Query, float64(c.QueryMean)/float64(max(1, b.QueryMean)))
	return c
}

// bracketTimes is a statement-and-think calibration taken before (b) and
// after (a) a run: the mean of the two for the statement and the think,
// their distributions scaled to it, the rest as before.
func bracketTimes(b, a Calibration) Calibration {
	c := b
	c.QueryMean, c.QueryP99 = (b.QueryMean+a.QueryMean)/2, max(b.QueryP99, a.QueryP99)
	c.ThinkMean = (b.ThinkMean + a.ThinkMean) / 2
	c.Samples = b.Samples + a.Samples
	c.Query = scaleDist(b.Query, float64(c.QueryMean)/float64(max(1, b.QueryMean)))
	if b.ThinkMean > 0 {
		c.Think = scaleDist(b.Think, float64(c.ThinkMean)/float64(b.ThinkMean))
	}
	return c
}

// measureThink times the driver's think timer: conc goroutines sleep the
// scenario's think times until n have run.
func measureThink(ctx context.Context, cfg system.Config, conc, n int) (sim.Dist, time.Duration, error) {
	conc = max(1, conc)
	per := max(1, n/conc)
	outs := make([][]time.Duration, conc)
	errs := make([]error, conc)
	done := make(chan struct{}, conc)
	for i := range conc {
		go func() { // owner: measureThink; ends after per sleeps or ctx
			defer func() { done <- struct{}{} }()
			r := sim.NewRand(cfg.Seed, fmt.Sprintf("validate calibrate think %d", i))
			for range per {
				d := cfg.Workload.Think.Sample(r).Duration()
				t := time.Now()
				if d > 0 {
					if err := probe.Sleep(ctx, d); err != nil {
						errs[i] = err
						return
					}
				}
				outs[i] = append(outs[i], time.Since(t))
			}
		}()
	}
	for range conc {
		<-done
	}
	if err := errors.Join(errs...); err != nil {
		return sim.Dist{}, 0, err
	}
	var all []time.Duration
	for _, o := range outs {
		all = append(all, o...)
	}
	d, mean, _ := distFrom(all)
	if cfg.Workload.Think.Random() {
		d = scaleDist(cfg.Workload.Think, float64(mean)/float64(max(1, cfg.Workload.Think.MeanValue())))
	}
	return d, mean, nil
}

// calibratedPrepared puts a prepared-statement calibration into cc: the
// statement's time at the server (its prepared round trip less the trivial
// one) as the scenario's CPU or query time, scaled to the measured mean;
// the trivial round trip as a fixed non-CPU time; the measured parse cost.
func calibratedPrepared(cc *system.Config, w system.Workload, cal Calibration) {
	server := max(cal.QueryMean-cal.RTT, time.Microsecond)
	if cal.Kind == load.KindCPU {
		// A cpu live statement: all of it is CPU at the server.
		shape := w.CPU
		if shape.MeanValue() == 0 {
			shape = w.Query
		}
		cc.Workload.CPU = scaleDist(shape, float64(server)/float64(max(1, shape.MeanValue().Duration())))
		cc.Workload.Query = sim.ConstDist(sim.FromDuration(cal.RTT))
	} else {
		// A sleep: the measured round trip is server time that is not CPU.
		cc.Workload.Query = cal.Query
		cc.Workload.CPU = sim.ConstDist(0)
	}
	cc.Workload.Parse = sim.ConstDist(sim.FromDuration(cal.Parse))
}

// proxyStats reads the in-process proxy's parse and bind totals of
// database db (Proxy.Stats: PgBouncer 1.18's SHOW STATS has no such
// columns).
func proxyStats(_ context.Context, px *pooler.Proxy, db string) (serverParses, binds, clientParses int64, err error) {
	for _, ps := range px.Stats() {
		if ps.Database == db {
			serverParses += ps.Counters.ServerParses
			binds += ps.Counters.Binds
			clientParses += ps.Counters.ClientParses
		}
	}
	return serverParses, binds, clientParses, nil
}

// settledStats reads proxyStats until two reads 50 ms apart agree, so that
// clients still leaving the proxy are counted once.
func settledStats(ctx context.Context, px *pooler.Proxy, db string) (serverParses, binds, clientParses int64, err error) {
	a, b, c, err := proxyStats(ctx, px, db)
	for range 40 {
		if err != nil {
			return 0, 0, 0, err
		}
		if err := probe.Sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, 0, 0, err
		}
		x, y, z, err2 := proxyStats(ctx, px, db)
		if err2 == nil && x == a && y == b && z == c {
			return a, b, c, nil
		}
		a, b, c, err = x, y, z, err2
	}
	return a, b, c, err
}

// PreparedMeasured is what a prepared-statement run measured.
type PreparedMeasured struct {
	// Counts is what the drivers did.
	Counts load.PreparedCounts
	// FromProxy: the named-statement server parses and binds are the
	// proxy's counters (Proxy.Stats) (it tracks prepared statements: transaction
	// or statement mode, max_prepared_statements > 0); else the driver's own
	// count (each named Parse it sends reaches a server).
	FromProxy                bool
	ProxyServerParses        int64 // the proxy's server parses over the run
	ProxyBinds               int64 // the proxy's binds
	ProxyClientParses        int64 // the proxy's client parses
	ServerParses             int64 // every Parse a server did: named + the driver's unnamed
	HitRate                  float64
	ServerParsesPerS         float64
	StmtExecs                int64
	PreparedFailedStatements int64
}

// preparedMeasure fills the live prepared metrics of one run.
func preparedMeasure(res *load.Result, tracked bool, sp, binds, cp int64) PreparedMeasured {
	n := res.Prepared
	pm := PreparedMeasured{Counts: n, FromProxy: tracked, ProxyServerParses: sp, ProxyBinds: binds, ProxyClientParses: cp,
		StmtExecs: n.Unnamed + n.Binds, PreparedFailedStatements: n.Failed}
	named := n.NamedParses
	if tracked {
		named = sp
		// hits: binds of named statements that needed no Parse at the
		// server (the proxy's count of Parses it forwarded or injected).
		if binds > 0 {
			pm.HitRate = 1 - float64(sp)/float64(binds)
		}
	} else if d := n.Hits + n.NamedParses; d > 0 {
		// hits: executions of named statements without a Parse that
		// succeeded; misses: the named Parses; failures are neither, as in
		// the model.
		pm.HitRate = float64(n.Hits) / float64(d)
	}
	pm.ServerParses = named + n.Unnamed
	if w := res.Wall(); w > 0 {
		pm.ServerParsesPerS = float64(pm.ServerParses) / w.Seconds()
	}
	return pm
}

// preparedCells are a prepared-statement row's cells: ok_txns exactly
// where the rules fix it (no statement can go missing), the transactions
// that failed on a missing statement — exactly 0 where the rules say so,
// else both positive (which server a transaction lands on is a race, in
// the model a seeded draw) with ok + failed exactly every transaction —,
// the hit rate within TolHitRate absolute, server parses per second and
// TPS within TolPrepared; p50 and p99 shown, not judged.
func preparedCells(r *Row) []Cell {
	m, c, x := r.Model, r.Calibrated, r.Measured
	px := x.Prepared
	fixed := m.PreparedErrorTxns == 0
	okTol, errCheck := 0.0, checkDefault
	if !fixed {
		okTol, errCheck = -1, checkBothPositive
	}
	cells := []Cell{
		{Metric: "ok_txns", Model: float64(m.OKTxns), Calibrated: float64(c.OKTxns), Measured: float64(x.OKTxns), Known: true, Tol: okTol},
		{Metric: "prepared_error_txns", Model: float64(m.PreparedErrorTxns), Calibrated: float64(c.PreparedErrorTxns), Measured: float64(px.Counts.FailedTxns), Known: true, Check: errCheck},
		{Metric: "txns_ended", Model: float64(m.OKTxns + m.PreparedErrorTxns), Calibrated: float64(c.OKTxns + c.PreparedErrorTxns), Measured: float64(x.OKTxns + px.Counts.FailedTxns), Known: true, Tol: 0},
		{Metric: "conn_refused", Model: float64(m.ConnRefused), Calibrated: float64(c.ConnRefused), Measured: float64(x.ConnRefused), Known: true, Tol: 0},
		{Metric: "prepared_hit_rate", Model: m.PreparedHitRate, Calibrated: c.PreparedHitRate, Measured: px.HitRate, Known: true, Tol: TolHitRate, Check: checkAbs},
		{Metric: "server_parses_per_s", Model: m.ServerParsesPerS, Calibrated: c.ServerParsesPerS, Measured: px.ServerParsesPerS, Known: true, Tol: TolPrepared},
		{Metric: "tps", Model: m.TPS, Calibrated: c.TPS, Measured: x.TPS, Known: true, Tol: TolPrepared},
		{Metric: "p50_ms", Model: m.P50Ms, Calibrated: c.P50Ms, Measured: x.P50Ms, Known: true, Tol: -1},
		{Metric: "p99_ms", Model: m.P99Ms, Calibrated: c.P99Ms, Measured: x.P99Ms, Known: true, Tol: -1},
		{Metric: "server_parses", Model: float64(m.ServerParses), Calibrated: float64(c.ServerParses), Measured: float64(px.ServerParses), Known: true, Tol: -1},
		{Metric: "stmt_execs", Model: float64(m.StmtExecs), Calibrated: float64(c.StmtExecs), Measured: float64(px.StmtExecs), Known: true, Tol: -1},
	}
	return cells
}

// preparedMode reports whether the pooler tracks prepared statements in
// mode with max (transaction and statement pooling, max > 0).
func preparedTracked(mode poolmode.Mode, max int) bool {
	return max > 0 && (mode == poolmode.Transaction || mode == poolmode.Statement)
}

// timeExec runs one extended-protocol execution on conn and times it.
func timeExec(ctx context.Context, conn *pgconn.PgConn, name, sql string, parse bool, params ...string) (time.Duration, error) {
	t := time.Now()
	load.QueueExec(conn, name, sql, parse, params...)
	_, pgErr, err := load.RoundTrip(ctx, conn)
	d := time.Since(t)
	if err == nil {
		err = pgErr
	}
	if err != nil {
		return 0, fmt.Errorf("calibrate prepared %q: %w", sql, err)
	}
	return d, nil
}

// measureParse is PostgreSQL's parse and plan of st's first statement: the
// median of n differences between an unnamed and a prepared execution
// timed alternately, and the prepared execution's median.
func measureParse(ctx context.Context, conn *pgconn.PgConn, name string, st load.Statement, param string, n int) (parse, exec time.Duration, err error) {
	text := st.PreparedText(0)
	if _, err := timeExec(ctx, conn, name, text, true, param); err != nil {
		return 0, 0, err
	}
	var diffs, execs []time.Duration
	for range n {
		b, err := timeExec(ctx, conn, name, text, false, param)
		if err != nil {
			return 0, 0, err
		}
		c, err := timeExec(ctx, conn, "", text, true, param)
		if err != nil {
			return 0, 0, err
		}
		diffs, execs = append(diffs, c-b), append(execs, b)
	}
	slices.Sort(diffs)
	slices.Sort(execs)
	return load.Median(diffs), load.Median(execs), nil
}

// maxJoins bounds the one-row joins tunePrepared tries: planning grows
// about 2-3x per join, and from 8 relations (join_collapse_limit) on it
// stops being an exhaustive search.
const maxJoins = 7

// tunePrepared gives a cpu statement of a prepared-statement scenario a
// parse and plan cost near workload.parse — the number of one-row joins
// (Statement.Joins) whose measured cost is closest to it in ratio — and
// corrects RowNs once so that a prepared execution (no planning) takes
// workload.query + workload.cpu at the server. What it cannot hit exactly
// the calibration measures before every run.
func tunePrepared(ctx context.Context, conn *pgconn.PgConn, st load.Statement, w system.Workload) (load.Statement, error) {
	target := w.Query.MeanValue().Duration() + w.CPU.MeanValue().Duration()
	want := w.Parse.MeanValue().Duration()
	if _, err := timeExec(ctx, conn, "poolsim_tune_rtt", "SELECT 1", true); err != nil {
		return st, err
	}
	var rtts []time.Duration
	for range 21 {
		d, err := timeExec(ctx, conn, "poolsim_tune_rtt", "", false)
		if err != nil {
			return st, err
		}
		rtts = append(rtts, d)
	}
	slices.Sort(rtts)
	rtt := load.Median(rtts)
	if want > 0 {
		best, bestErr := 0, math.Inf(1)
		for j := 0; j <= maxJoins; j++ {
			st.Joins = j
			p, _, err := measureParse(ctx, conn, "poolsim_tune_"+strconv.Itoa(j), st, st.Param(target), 15)
			if err != nil {
				return st, err
			}
			e := math.Abs(math.Log(float64(max(p, time.Microsecond)) / float64(want)))
			if e < bestErr {
				best, bestErr = j, e
			}
			if p >= want {
				break
			}
		}
		st.Joins = best
	}
	for i := range 2 {
		_, exec, err := measureParse(ctx, conn, "poolsim_tune_exec_"+strconv.Itoa(i), st, st.Param(target), 15)
		if err != nil {
			return st, err
		}
		if server := exec - rtt; server > 0 && target > 0 {
			st.RowNs *= float64(server) / float64(target)
		}
	}
	return st, nil
}
