package validate

import (
	"context"
	"fmt"
	"github.com/poolsim/poolsim/lab/probe"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Calibration is what was measured on this machine right before one live
// run of a row; the calibrated model runs with it.
type Calibration struct {
	// Connect is the median time to open one PostgreSQL connection (TCP,
	// authentication, backend start-up), one at a time.
	Connect time.Duration
	// Query is the measured duration of one statement of the scenario's
	// kind, straight to PostgreSQL (its round trip: the model's direct
	// statement), as a distribution for the model.
	Query        sim.Dist
	QueryMean    time.Duration
	QueryP99     time.Duration
	QueryNominal time.Duration // what the scenario asked for (mean)
	// Think is how long the driver's think time really lasts (timer
	// overshoot), as a distribution for the model.
	Think        sim.Dist
	ThinkMean    time.Duration
	ThinkNominal time.Duration
	// App is set for a class with requests and workload.app: Think,
	// ThinkMean and ThinkNominal are then its app pause's (the timers
	// measured), and its think between requests gets the same overshoot.
	App bool
	// Hop is half the extra round trip of an empty query through the target
	// over the direct one (0 for direct rows); HopRTT is that round trip.
	Hop, HopRTT time.Duration
	// ServersOpen is how many servers the target's pool had open right
	// before the load started (pooled rows; counted at PostgreSQL): the
	// one the hop's connection through it opened, and a CPU-bound row's
	// through loop's. The calibrated model's pool starts with them
	// (validate.servers_open).
	ServersOpen int
	// Pooled rows of a sleep, cpu or sql statement (calibrateHold): Hold
	// is how long a statement held its server, as the target saw it, in a
	// loop of HoldConns connections through it (HoldQueries requests);
	// ConnectLoaded the median gap between its HoldLogins servers'
	// starts in that loop (0 with fewer than two).
	Hold, ConnectLoaded   time.Duration
	HoldConns, HoldLogins int
	HoldQueries           int64
	// Concurrency is how many connections ran statements and think times at
	// once while Query and Think were measured, and Samples how many
	// statements they ran.
	Concurrency int
	Samples     int
	// Prepared-statement scenarios (calibratePrepared): QueryMean is a
	// prepared execution's round trip at the statement's mean time, RTT a
	// prepared trivial statement's, Unnamed an unnamed execution's (Parse,
	// Bind, Execute) of the same text, and Parse the median difference
	// between the two (PostgreSQL's parse and plan), against the scenario's
	// ParseNominal.
	Prepared            bool
	Kind                string // the live statement's kind (load.KindCPU or KindSleep)
	RTT, Unnamed, Parse time.Duration
	ParseNominal        time.Duration
	// Testbed is a CPU-bound row's calibration (testbed.go): what shares
	// the cores, measured; nil for other rows.
	Testbed *Testbed
}

// distFrom fits a distribution to measured durations: a lognormal with
// their mean and the standard deviation of their logarithms (robust to a
// few stalls, unlike a fit through the p99), or their mean as a constant
// when they hardly spread. It also returns the mean and the p99.
func distFrom(d []time.Duration) (sim.Dist, time.Duration, time.Duration) {
	if len(d) == 0 {
		return sim.ConstDist(0), 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	var logs []float64
	for _, v := range s {
		sum += v
		if v > 0 {
			logs = append(logs, math.Log(float64(v)))
		}
	}
	mean := sum / time.Duration(len(s))
	p99 := s[max(0, int(math.Ceil(0.99*float64(len(s))))-1)]
	sigma := 0.0
	if len(logs) == len(s) && len(logs) > 1 {
		var m, q float64
		for _, l := range logs {
			m += l
		}
		m /= float64(len(logs))
		for _, l := range logs {
			q += (l - m) * (l - m)
		}
		sigma = math.Sqrt(q / float64(len(logs)-1))
	}
	if sigma < 0.01 {
		return sim.ConstDist(sim.FromDuration(mean)), mean, p99
	}
	return sim.LognormalDist(sim.FromDuration(mean), sigma), mean, p99
}

// measureConnect opens n connections one at a time and returns the median
// time, waiting for each backend to exit before the next.
func measureConnect(ctx context.Context, dsn string, n int, backendGone func(context.Context, uint32) error) (time.Duration, error) {
	var ds []time.Duration
	for range n {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t := time.Now()
		c, err := pgconn.Connect(cctx, dsn)
		d := time.Since(t)
		if err != nil {
			cancel()
			return 0, fmt.Errorf("calibrate connect: %w", err)
		}
		pid := c.PID()
		_ = c.Close(cctx)
		cancel()
		if err := backendGone(ctx, pid); err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return load.Median(ds), nil
}

// statement prepares the scenario's statement kind; a cpu statement is
// calibrated on the spot against the server at dsn.
func statement(ctx context.Context, dsn string, live Live, base system.Config, backendGone func(context.Context, uint32) error) (load.Statement, error) {
	st := load.Statement{Kind: live.Statement, SQL: live.SQL}
	if st.Kind != load.KindCPU {
		return st, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(cctx, dsn)
	if err != nil {
		return st, fmt.Errorf("calibrate cpu statement: %w", err)
	}
	pid := conn.PID()
	target := base.Workload.Query.MeanValue().Duration()
	if load.PreparedWorkload(base.Workload) {
		// A prepared-statement statement spends workload.query and
		// workload.cpu as one CPU-bound statement.
		target += base.Workload.CPU.MeanValue().Duration()
	}
	st.RowNs, err = load.CalibrateCPU(cctx, conn, max(target, time.Microsecond))
	if err == nil && load.PreparedWorkload(base.Workload) {
		st, err = tunePrepared(cctx, conn, st, base.Workload)
	}
	closeConn(conn)
	if gerr := backendGone(ctx, pid); err == nil {
		err = gerr
	}
	return st, err
}

// calibrate measures, right before a run, the connection cost and the real
// duration of the scenario's statement and think time, with conc
// connections straight to PostgreSQL at once.
func calibrate(ctx context.Context, dsn string, cfg system.Config, st load.Statement, samples int, backendGone func(context.Context, uint32) error) (Calibration, error) {
	w := cfg.Workload
	cal := Calibration{Samples: samples, QueryNominal: w.Query.MeanValue().Duration(), ThinkNominal: w.Think.MeanValue().Duration()}
	var err error
	if cal.Connect, err = measureConnect(ctx, dsn, 11, backendGone); err != nil {
		return cal, err
	}
	conc := max(1, min(calibrationConcurrency, cfg.Server.MaxConnections-2))
	qs, ts, err := loop(ctx, dsn, cfg, st, conc, samples, backendGone)
	if err != nil {
		return cal, err
	}
	cal.Concurrency = conc
	cal.Query, cal.QueryMean, cal.QueryP99 = distFrom(qs)
	if w.Query.Random() && st.Kind != load.KindSQL {
		// Keep the scenario's shape; scale it to the measured mean.
		cal.Query = scaleDist(w.Query, float64(cal.QueryMean)/float64(max(1, cal.QueryNominal)))
	}
	cal.Think, cal.ThinkMean, _ = distFrom(ts)
	if w.Think.Random() {
		cal.Think = scaleDist(w.Think, float64(cal.ThinkMean)/float64(max(1, cal.ThinkNominal)))
	}
	return cal, nil
}

// scaleDist multiplies every time of d by f.
func scaleDist(d sim.Dist, f float64) sim.Dist {
	sc := func(t sim.Time) sim.Time { return sim.Time(math.Round(float64(t) * f)) }
	d.Mean, d.Min, d.Max = sc(d.Mean), sc(d.Min), sc(d.Max)
	return d
}

// measureHop is half the extra round trip of an empty query through the
// target over the direct one: the model's one-way hop. The two are timed
// alternately, so that the machine's load at the moment affects both.
func measureHop(ctx context.Context, dsn, directDSN string, n int, backendGone func(context.Context, uint32) error) (hop, rtt time.Duration, err error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	through, err := pgconn.Connect(cctx, dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("calibrate hop: %w", err)
	}
	defer closeConn(through)
	direct, err := pgconn.Connect(cctx, directDSN)
	if err != nil {
		return 0, 0, fmt.Errorf("calibrate hop: %w", err)
	}
	defer func() {
		pid := direct.PID()
		closeConn(direct)
		// Its max_connections slot must be free before the load starts.
		if gerr := backendGone(ctx, pid); gerr != nil && err == nil {
			err = gerr
		}
	}()
	var dt, dd []time.Duration
	for range n {
		a, err := load.Time(cctx, through, ";", 1)
		if err != nil {
			return 0, 0, err
		}
		b, err := load.Time(cctx, direct, ";", 1)
		if err != nil {
			return 0, 0, err
		}
		dt, dd = append(dt, a[0]), append(dd, b[0])
	}
	slices.Sort(dt)
	slices.Sort(dd)
	rtt = load.Median(dt)
	return max(0, (rtt-load.Median(dd))/2), rtt, nil
}

// calibrationConcurrency is how many direct connections run the statement
// and think loop at once while the statement and think times are measured:
// the busy servers of the seed experiment's pool, so that timers and
// pg_sleep are measured under the load they will see.
const calibrationConcurrency = 20

// loopOut is one connection's part of a calibration loop.
type loopOut struct {
	q, t []time.Duration
	pid  uint32
	err  error
}

// run is connection i's part of the loop: staggered over one think time,
// per statements, each followed by its think.
func (o *loopOut) run(ctx context.Context, conn *pgconn.PgConn, base system.Config, st load.Statement, i, conc, per int) error {
	// Stagger the connections over one think time, as the clients of
	// a run drift apart after their first statements.
	if err := probe.Sleep(ctx, time.Duration(i)*base.Workload.Think.MeanValue().Duration()/time.Duration(conc)); err != nil {
		return err
	}
	qr := sim.NewRand(base.Seed, fmt.Sprintf("validate calibrate query %d", i))
	tr := sim.NewRand(base.Seed, fmt.Sprintf("validate calibrate think %d", i))
	for range per {
		sql := st.Text(base.Workload.Query.Sample(qr).Duration())
		t := time.Now()
		if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
			return fmt.Errorf("calibrate statement %q: %w", sql, err)
		}
		o.q = append(o.q, time.Since(t))
		d := base.Workload.Think.Sample(tr).Duration()
		if d <= 0 {
			o.t = append(o.t, 0)
			continue
		}
		t = time.Now()
		if err := probe.Sleep(ctx, d); err != nil {
			return err
		}
		o.t = append(o.t, time.Since(t))
	}
	return nil
}

// connectWarm opens a connection and runs the statement once untimed (a
// new backend's first statement loads its caches). On an error after the
// login it returns the connection too, for the caller to close.
func connectWarm(ctx context.Context, dsn string, st load.Statement) (*pgconn.PgConn, error) {
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	if _, err := conn.Exec(ctx, st.Text(0)).ReadAll(); err != nil {
		return conn, fmt.Errorf("calibrate: %w", err)
	}
	return conn, nil
}

// loop runs conc connections straight to PostgreSQL, each alternating the
// scenario's statement and think time, until n statements have run, and
// returns every statement's round trip and every think's real length.
func loop(ctx context.Context, dsn string, base system.Config, st load.Statement, conc, n int, backendGone func(context.Context, uint32) error) (qs, ts []time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	per := max(1, n/conc)
	outs := make([]loopOut, conc)
	// Every connection logs in and warms up before any statement is timed,
	// and none closes before the last is done: a login (a backend's fork)
	// or a close (its exit) takes the cores from the statements of the
	// connections running at the time, which the run's clients do not
	// see (they connect before time zero and keep their connections to
	// the end: load.Spec.KeepConns).
	var wg, ready, finished sync.WaitGroup
	ready.Add(conc)
	finished.Add(conc)
	start, over := make(chan struct{}), make(chan struct{})
	for i := range conc {
		wg.Add(1)
		go func() { // owner: loop; ends after per statements and the others' end, or on error
			defer wg.Done()
			o := &outs[i]
			conn, err := connectWarm(ctx, dsn, st)
			if conn != nil {
				o.pid = conn.PID()
				defer closeConn(conn)
			}
			ready.Done()
			if err != nil {
				o.err = err
				finished.Done()
				return
			}
			select {
			case <-start:
				o.err = o.run(ctx, conn, base, st, i, conc, per)
			case <-ctx.Done():
				o.err = ctx.Err()
			}
			finished.Done()
			select {
			case <-over:
			case <-ctx.Done():
			}
		}()
	}
	ready.Wait()
	close(start)
	finished.Wait()
	close(over)
	wg.Wait()
	for _, o := range outs {
		if o.pid != 0 {
			if err := backendGone(ctx, o.pid); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, o := range outs {
		if o.err != nil {
			return nil, nil, o.err
		}
		qs, ts = append(qs, o.q...), append(ts, o.t...)
	}
	return qs, ts, nil
}
