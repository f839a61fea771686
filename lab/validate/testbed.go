package validate

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/models/usl"
	"github.com/poolsim/poolsim/sim"
)

// A CPU-bound row (validate.statement: pgbench-select) is limited by the
// machine's cores, which PostgreSQL's backends, the pooler process and the
// load driver share. Its calibration measures each one's CPU per statement
// from /proc (not guessed), straight to PostgreSQL at a few concurrencies
// and through the row's target at the row's clients, and hands the calibrated
// model a testbed: the driver's and the pooler's CPU on the server's cores
// (testbed.Machine), the work of other processes as background, and the
// USL contention that makes the model's direct throughput match the
// measured one. The scenario's own model stays the production what-if,
// without the driver.

// TestbedPoint is one closed loop straight to PostgreSQL: N connections
// running the statement back to back for a while.
type TestbedPoint struct {
	N     int
	Stmts int64
	TPS   float64 // statements per second
	// CPU per statement: the load driver's (this process), the backends'
	// (their /proc/PID/schedstat), and the machine's busy cores outside
	// both (other processes), in cores.
	Driver, Server time.Duration
	Background     float64
	Model          float64 // the calibrated model's TPS at N
	// The statements' round trips: measured, and the calibrated model's
	// at N (ModelP50, ModelP99, set for the point the spread is fitted
	// to).
	P50, P99, ModelP50, ModelP99 time.Duration
}

// Testbed is what a CPU-bound row's calibration measured and fitted.
type Testbed struct {
	Cores  int
	Points []TestbedPoint
	// The model's parts per statement: the driver's CPU and the backend's
	// CPU (measured through the target), and the rest of one direct
	// connection's round trip, latency on the driver's side.
	Driver, Server, Latency time.Duration
	Background              float64 // cores busy with other work
	// Contention and Coherency are the backends' USL σ and κ that make the
	// testbed model's direct throughput match the measured points (a
	// pooled row's model runs without them: its servers' CPU per
	// statement, measured where it runs, has their contention); USL is
	// poolsim fit's curve through the measured points themselves (the
	// machine's, driver included), shown for reference.
	Contention, Coherency float64
	USL                   usl.Model
	// Spread is the lognormal σ of the driver's and the backend's CPU per
	// statement (0: constant), searched so that the model's direct p99
	// matches the measured at the spread point (spreadPoint): its mean is
	// the throughput's, which σ and κ match, so the spread is the tail's.
	Spread float64
	// Scan: the driver is pgbench, whose threads go through their clients
	// in order, a pass at a time (testbed.Machine.DriverScan).
	Scan bool
	// Pooler is the pooler's CPU per statement (request, response and
	// assignment) through the row's target: the proxy's event loop's or
	// pgbouncer's.
	Pooler time.Duration
	// AssignFirst: the target is poolsim's proxy, which hands a released
	// server to a waiting client before it relays the response
	// (system.Pooler.AssignFirst); PgBouncer relays first.
	AssignFirst bool
	// ThroughClients (the row's) ran through the target to measure the
	// CPU per statement of the driver, the pooler and the backends (0: a direct
	// row, whose CPU comes from the direct points), at ThroughTPS.
	ThroughClients int
	ThroughTPS     float64
	// ThroughBusy is how busy the machine's CPUs were during that loop, a
	// fraction of all of them (/proc/stat), to set beside the run's and
	// the calibrated model's cores (each row's Diagnostics).
	ThroughBusy float64
	// ThroughOther is the cores busy with other work during that loop
	// (otherCores, read where ThroughBusy was): the pooled row's model's
	// background, in place of the direct points' - this process's
	// instruments watch a pooled loop (placement.go), not a direct one.
	ThroughOther float64
	// Balance is the idle balancing fitBalance chose (-1: none, 0: at
	// every chance, else at most once per Balance), if balanceSet.
	Balance    sim.Time
	balanceSet bool
	// NoScan is fitBalance's other choice: a woken thread whose waker's
	// core and own last core are busy stays there, without a look for an
	// idle core (validate.idle_scan false).
	NoScan bool
	// ThroughPlacement is where PgBouncer's thread and the pool's servers
	// ran during the through loop (nil through the proxy): with one
	// server, one core or two, which sets the costs it measured.
	ThroughPlacement *Placement
	// Together and Apart are the through loop again with PgBouncer and its
	// one server pinned to one core and to two (arrangement.go): set at a
	// pool of one server through PgBouncer, nil otherwise.
	Together, Apart *Arrangement
	// WakeCurve is an idle core's wake-up by how long it idled, measured
	// once per validation (wake.go) for the pooled rows' models.
	WakeCurve []testbed.WakePoint
	// Migrations is how often the kernel moved the pooler or a pool's
	// server to another core during the through loop, per statement
	// (/proc/PID/task/TID/sched se.nr_migrations), if MigrationsOK: the
	// model's cores out of work take queued threads from each other no
	// more often than that (idleBalance).
	Migrations   float64
	MigrationsOK bool
	// Pgbench says pgbench drove the loops (validate.driver pgbench).
	Pgbench bool
	// Speed is the machine's speed step by step (speedStep), in time
	// order, as factors of its mean: the through loop's, or the most
	// concurrent direct point's for a direct row (speedTimeline).
	Speed []float64
	// Run is each process's CPU per statement over the run itself (a
	// pooled row): the calibrated model's in place of Driver, Pooler and
	// Server, the through loop's (inrun.go).
	Run RunCPU
}

// testbedKind says whether the scenario's live statement is calibrated as
// CPU-bound work on the shared cores: pgbench -S's statement, or the
// user's own SQL (validate.statement: sql) in a scenario whose server has
// cores (server.cores: the model runs its statements' CPU on them).
func testbedKind(live Live, c system.Config) bool {
	return live.Statement == load.KindPgbenchSelect || (live.Statement == load.KindSQL && c.Server.Cores > 0)
}

// schedCPU is a process's time on a CPU, all its threads' (pgbench -j
// runs several), from /proc/PID/task/TID/schedstat (ns); ok is false when
// it cannot be read (another machine's server, no procfs).
func schedCPU(pid int) (time.Duration, bool) {
	ts, err := tasks(pid)
	if err != nil {
		return 0, false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	var sum time.Duration
	for _, t := range ts {
		d, ok := taskCPU(dir + strconv.Itoa(t) + "/schedstat")
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// idleBalance sets how often the model's cores out of work may take a
// thread queued on another: the rate fitBalance chose, if it did; else
// as often as the kernel moved the pooler and
// the pool's servers between cores in the through loop (moves per
// statement × statements per second), never if it moved none; left at
// every chance where the kernel does not show its moves. Measured
// through PgBouncer with pgbench -S on this project's 2-vCPU machine,
// 0.0000-0.0042 moves per statement (up to about 80 a second), far
// fewer than the model made taking one at every chance.
func idleBalance(t *testbed.Machine, tb *Testbed) {
	if tb.balanceSet {
		t.NoIdleBalance, t.IdleBalanceEvery = tb.Balance < 0, max(0, tb.Balance)
		t.NoIdleScan = tb.NoScan
		return
	}
	if !tb.MigrationsOK || tb.ThroughTPS <= 0 {
		return
	}
	perSec := tb.Migrations * tb.ThroughTPS
	if perSec <= 0 {
		t.NoIdleBalance = true
		return
	}
	t.IdleBalanceEvery = max(1, sim.FromSeconds(1/perSec))
}

// migrations is the kernel's count of moves to another core of the
// processes' threads (se.nr_migrations in /proc/PID/task/TID/sched, a
// kernel with scheduler debugging), and whether every one was readable.
func migrations(pids []int) (int64, bool) {
	var sum int64
	for _, pid := range pids {
		ts, err := tasks(pid)
		if err != nil {
			return 0, false
		}
		for _, t := range ts {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(t) + "/sched")
			if err != nil {
				return 0, false
			}
			n, ok := schedField(string(b), "se.nr_migrations")
			if !ok {
				return 0, false
			}
			sum += n
		}
	}
	return sum, true
}

// schedField is the integer field name of a /proc/PID/sched text.
func schedField(text, name string) (int64, bool) {
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == name {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// taskCPU is one task's time on a CPU from its schedstat file.
func taskCPU(path string) (time.Duration, bool) { return schedstatField(path, 0) }

// schedstatField is field i of a task's schedstat file: 0 its time on a
// CPU, 1 its time waiting in a run queue (ns).
func schedstatField(path string, i int) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) <= i {
		return 0, false
	}
	v, err := strconv.ParseInt(f[i], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(v), true
}

// closedLoopWarm is how long a closed loop runs before it is measured.
const closedLoopWarm = 200 * time.Millisecond

// eachCPU is schedCPU of every pid; ok only if every one was read.
func eachCPU(pids []int) ([]time.Duration, bool) {
	out := make([]time.Duration, len(pids))
	for i, p := range pids {
		d, ok := schedCPU(p)
		if !ok {
			return nil, false
		}
		out[i] = d
	}
	return out, true
}

// closedLoop runs n connections to dsn, each running st back to back, for
// dur after closedLoopWarm untimed, and measures the statements and
// the CPU they cost: this process's, and that of the processes watched (a
// PostgreSQL backend per connection when backends is set, and those watch
// names after the warm-up).
type loopCPU struct {
	stmts         int64
	wall          time.Duration
	self, watched time.Duration
	each          []time.Duration // watched, process by process
	watchedOK     bool
	busy          float64       // machine busy cores
	speed         []float64     // the machine's speed per speedStep, in time order (speedTimeline)
	p50, p99      time.Duration // the statements' round trips measured
	proc          time.Duration // this process's CPU when the driver is pgbench (the in-process proxy's)
	instr         time.Duration // of this process's CPU (self or proc), its instruments' (instruments.go)
	migr          int64         // the watched processes' moves between cores (migrations), if migrOK
	migrOK        bool
}

func closedLoop(ctx context.Context, dsn string, st load.Statement, seed uint64, n int, dur time.Duration, backends bool, watch func(context.Context) ([]int, error), backendGone func(context.Context, uint32) error) (loopCPU, error) {
	var out loopCPU
	ctx, cancel := context.WithTimeout(ctx, dur+time.Minute)
	defer cancel()
	conns, pids, err := openLoop(ctx, dsn, st, n, backends)
	defer func() {
		for _, c := range conns {
			pid := c.PID()
			closeConn(c)
			if backends {
				_ = backendGone(ctx, pid)
			}
		}
	}()
	if err != nil {
		return out, err
	}
	lr := startLoop(ctx, conns, st, seed)
	defer lr.halt()
	// A warm-up first: through a pooler the pool opens its servers, and
	// every process settles into the loop's rhythm.
	if err := probe.Sleep(ctx, closedLoopWarm); err != nil {
		return out, fmt.Errorf("calibrate testbed: %w", err)
	}
	if watch != nil {
		more, err := watch(ctx)
		if err != nil {
			return out, err
		}
		pids = append(pids, more...)
	}
	m0, c0 := sampleCPU(), lr.count.Load()
	e0, ok0 := eachCPU(pids)
	g0, gok0 := migrations(pids)
	if err := probe.Sleep(ctx, dur); err != nil {
		return out, fmt.Errorf("calibrate testbed: %w", err)
	}
	m1, c1 := sampleCPU(), lr.count.Load()
	e1, ok1 := eachCPU(pids)
	g1, gok1 := migrations(pids)
	out.migr, out.migrOK = g1-g0, gok0 && gok1 && len(pids) > 0
	total := c1 - c0
	lr.halt()
	for _, err := range lr.errs {
		if err != nil {
			return out, err
		}
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("calibrate testbed: %w", err)
	}
	out.stmts, out.wall = total, m1.at.Sub(m0.at)
	out.speed, out.p50, out.p99 = lr.timing(m0.at, m1.at)
	out.self, out.watchedOK = m1.self-m0.self, ok0 && ok1
	out.instr = m1.instr - m0.instr
	if out.watchedOK {
		out.addWatched(e0, e1)
	}
	out.busy = busyCores(m0, m1)
	return out, nil
}

// openLoop opens closedLoop's n connections to dsn, each running st once
// (a backend loads its caches on its first statement), and returns them
// - those it opened, on an error too - with their backends' pids when
// backends is set.
func openLoop(ctx context.Context, dsn string, st load.Statement, n int, backends bool) ([]*pgconn.PgConn, []int, error) {
	conns := make([]*pgconn.PgConn, 0, n)
	var pids []int
	for range n {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			return conns, pids, fmt.Errorf("calibrate testbed: %w", err)
		}
		conns = append(conns, c)
		if backends {
			pids = append(pids, int(c.PID()))
		}
		if _, err := c.Exec(ctx, st.Text(0)).ReadAll(); err != nil {
			return conns, pids, fmt.Errorf("calibrate testbed: %w", err)
		}
	}
	return conns, pids, nil
}

// loopRun is closedLoop's connections running the statement back to
// back, a goroutine each: its owner ends them with halt (they end on an
// error too). Each connection's statements' ends and round trips are
// kept, from base: the windows' counts of the machine's speed.
type loopRun struct {
	stop       chan struct{}
	stopped    bool
	wg         sync.WaitGroup
	count      atomic.Int64
	errs       []error
	base       time.Time
	ends, rtts [][]time.Duration
}

// startLoop starts the statement loop on every connection.
func startLoop(ctx context.Context, conns []*pgconn.PgConn, st load.Statement, seed uint64) *loopRun {
	n := len(conns)
	lr := &loopRun{stop: make(chan struct{}), errs: make([]error, n), base: time.Now(),
		ends: make([][]time.Duration, n), rtts: make([][]time.Duration, n)}
	for i, c := range conns {
		lr.wg.Add(1)
		go func() { // owner: lr's (closedLoop); ends when stop closes or on error
			defer lr.wg.Done()
			r := sim.NewRand(seed, fmt.Sprintf("validate testbed %d %d", n, i))
			for {
				select {
				case <-lr.stop:
					return
				default:
				}
				t0 := time.Since(lr.base)
				if _, err := c.Exec(ctx, st.Next(0, r)).ReadAll(); err != nil {
					lr.errs[i] = fmt.Errorf("calibrate testbed: %w", err)
					return
				}
				lr.count.Add(1)
				t1 := time.Since(lr.base)
				lr.ends[i], lr.rtts[i] = append(lr.ends[i], t1), append(lr.rtts[i], t1-t0)
			}
		}()
	}
	return lr
}

// halt stops the loop and waits for its goroutines (once).
func (lr *loopRun) halt() {
	if !lr.stopped {
		lr.stopped = true
		close(lr.stop)
		lr.wg.Wait()
	}
}

// timing is the machine's speed step by step and the statements' round
// trips' p50 and p99 between from and to (after halt).
func (lr *loopRun) timing(from, to time.Time) (speed []float64, p50, p99 time.Duration) {
	f, t := from.Sub(lr.base), to.Sub(lr.base)
	speed = speedTimeline(slices.Concat(lr.ends...), f, t)
	var rt []time.Duration
	for i := range lr.ends {
		for j, e := range lr.ends[i] {
			if e >= f && e < t {
				rt = append(rt, lr.rtts[i][j])
			}
		}
	}
	p50, p99 = medianP99(rt)
	return speed, p50, p99
}

// addWatched sets each and watched from the watched processes' CPU
// before (e0) and after (e1) the measured stretch.
func (out *loopCPU) addWatched(e0, e1 []time.Duration) {
	for i := range e0 {
		d := e1[i] - e0[i]
		out.each = append(out.each, d)
		out.watched += d
	}
}

// busyCores is the machine's busy cores between two samples.
func busyCores(m0, m1 cpuSample) float64 {
	busy, _ := cpuUse(m0, m1, runtime.NumCPU())
	return busy * float64(runtime.NumCPU())
}

// calibrateTestbed measures the direct closed loop at 1, 2, 4 and 8
// connections and on up to the pool's size (fewer when max_connections is
// small) and fits the model's testbed to it.
func calibrateTestbed(ctx context.Context, dsn string, cfg system.Config, st load.Statement, quick bool, backendGone func(context.Context, uint32) error, pg *pgbenchDriver) (*Testbed, error) {
	dur := time.Second
	if quick {
		dur = 400 * time.Millisecond
	}
	tb := &Testbed{Cores: runtime.NumCPU(), Scan: pg != nil}
	// 1, 2, 4 and 8 connections, then on doubling up to the pool's size:
	// contention that only shows with many backends is measured, not
	// extrapolated.
	ns := []int{1, 2, 4, 8}
	for n := 16; n/2 < cfg.Pooler.DefaultPoolSize && cfg.Pooler.PoolMode.Pooled(); n *= 2 {
		ns = append(ns, n)
	}
	for _, n := range ns {
		if n > cfg.Server.MaxConnections-2 {
			break
		}
		var lc loopCPU
		var err error
		if pg != nil {
			lc, err = pg.loop(ctx, dsn, n, n, cfg.Seed, dur, nil, true)
		} else {
			lc, err = closedLoop(ctx, dsn, st, cfg.Seed, n, dur, true, nil, backendGone)
		}
		if err != nil {
			return nil, err
		}
		if lc.stmts == 0 || !lc.watchedOK {
			return nil, fmt.Errorf("calibrate testbed: %d connections ran %d statements (backends' CPU readable: %v): the testbed needs PostgreSQL on this machine", n, lc.stmts, lc.watchedOK)
		}
		per := func(d time.Duration) time.Duration { return d / time.Duration(lc.stmts) }
		bg := lc.busy - (float64(lc.self)+float64(lc.watched)+float64(lc.proc))/float64(lc.wall)
		tb.Points = append(tb.Points, TestbedPoint{N: n, Stmts: lc.stmts, TPS: float64(lc.stmts) / lc.wall.Seconds(),
			Driver: per(lc.self), Server: per(lc.watched), Background: max(0, bg), P50: lc.p50, P99: lc.p99})
		tb.Speed = lc.speed
	}
	if len(tb.Points) == 0 {
		return nil, fmt.Errorf("calibrate testbed: server.max_connections %d leaves no room for a calibration connection", cfg.Server.MaxConnections)
	}
	return tb, nil
}

// fitTestbed sets the model's parts from the measured points: CPU per
// statement and background from the most concurrent point (the saturated
// cores decide the plateau), the fixed latency from the one-connection
// point, then σ and κ by a search that makes the model's direct throughput
// match the measured points.
//
// The direct points are matched with the direct loops' own CPU per
// statement (the driver's at the most concurrent point, a backend's at
// one connection), also for a row that measured its costs through the
// target: those are larger (a pooler's backend and driver are woken more
// often, on idler cores) and would make the direct model too slow to
// reach the measured points at any σ and κ, which then fit as 0. The
// row's own model runs the through costs with the σ, κ, spread and
// latency fitted here.
func fitTestbed(tb *Testbed, cfg system.Config) {
	last, first := tb.Points[len(tb.Points)-1], tb.Points[0]
	if tb.ThroughClients == 0 {
		// No target (a direct row): the backend's CPU of one connection
		// (it grows with more: the USL's contention, fitted below) and
		// the driver's of the most concurrent point (it shrinks as its
		// clients' work batches).
		tb.Driver, tb.Server = last.Driver, first.Server
		fitDirect(tb, cfg)
		return
	}
	d := *tb
	d.Driver, d.Server = last.Driver, first.Server
	fitDirect(&d, cfg)
	tb.Latency, tb.Contention, tb.Coherency, tb.Spread = d.Latency, d.Contention, d.Coherency, d.Spread
	tb.USL, tb.Background = d.USL, d.Background
	if tb.ThroughBusy > 0 {
		tb.Background = tb.ThroughOther
	}
}

// fitDirect fits the testbed d's background, latency, σ, κ and spread to
// its direct points with d's own CPU per statement.
func fitDirect(d *Testbed, cfg system.Config) {
	first := d.Points[0]
	var bg float64
	for _, p := range d.Points {
		bg += p.Background
	}
	d.Background = min(bg/float64(len(d.Points)), float64(d.Cores)*0.9)
	// What one connection's round trip spends beyond that CPU is
	// latency on the driver's side (its goroutine's wake-up through Go's
	// netpoller, the loopback): the model's think, off the server.
	cycle := time.Duration(float64(time.Second) / first.TPS)
	d.Latency = max(0, cycle-d.Driver-d.Server)
	var pts []usl.Point
	for _, p := range d.Points {
		pts = append(pts, usl.Point{N: float64(p.N), X: p.TPS})
	}
	if m, _, err := usl.Fit(pts); err == nil {
		d.USL = m
	}
	if len(d.Points) < 2 {
		return
	}
	// σ and κ from the points of 4 connections and more: with one or two
	// the processes hand the cores to each other in turn (one runs while
	// the other waits), which no run of many clients does.
	fit := d.Points[1:]
	for len(fit) > 1 && fit[0].N < 4 {
		fit = fit[1:]
	}
	loss := func(sigma, kappa float64) float64 {
		var e float64
		for _, p := range fit {
			x := directTPS(d, cfg, p.N, sigma, kappa)
			e += math.Pow(math.Log(x/p.TPS), 2)
		}
		return e
	}
	// Coordinate golden-section searches: σ over [0, 0.5], then κ over
	// [0, 0.05], twice.
	fitUSL := func(rounds int) {
		for range rounds {
			d.Contention = golden(func(s float64) float64 { return loss(s, d.Coherency) }, 0, 0.5)
			d.Coherency = golden(func(k float64) float64 { return loss(d.Contention, k) }, 0, 0.05)
		}
	}
	fitUSL(2)
	// The spread of the CPU per statement, then σ and κ again with it.
	if i := spreadPoint(d); i >= 0 {
		p := &d.Points[i]
		want := p.P99.Seconds() * 1e3
		d.Spread = golden(func(s float64) float64 {
			d.Spread = s
			m := direct(d, cfg, p.N, d.Contention, d.Coherency)
			return math.Pow(math.Log(m.P99Ms/want), 2)
		}, 0, 1.5)
		fitUSL(1)
		m := direct(d, cfg, p.N, d.Contention, d.Coherency)
		p.ModelP50, p.ModelP99 = msDur(m.P50Ms), msDur(m.P99Ms)
	}
	for i := range d.Points {
		d.Points[i].Model = directTPS(d, cfg, d.Points[i].N, d.Contention, d.Coherency)
	}
}

// golden minimises f over [a, b] by golden-section search.
func golden(f func(float64) float64, a, b float64) float64 {
	const r = 0.6180339887498949
	c, d := b-r*(b-a), a+r*(b-a)
	fc, fd := f(c), f(d)
	for range 30 {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - r*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + r*(b-a)
			fd = f(d)
		}
	}
	// The ends: a term that does not help should be exactly 0.
	best, fb := (a+b)/2, f((a+b)/2)
	if f0 := f(0); f0 <= fb {
		best = 0
	}
	return best
}

// directTPS is the testbed model's throughput of n connections straight
// to the server, back to back.
func directTPS(tb *Testbed, cfg system.Config, n int, sigma, kappa float64) float64 {
	return direct(tb, cfg, n, sigma, kappa).TPS
}

// direct is the testbed model of n connections straight to the server,
// back to back.
func direct(tb *Testbed, cfg system.Config, n int, sigma, kappa float64) system.Metrics {
	c := system.Default()
	c.Seed = cfg.Seed
	c.Pooler.PoolMode = poolmode.Direct
	c.Workload.Clients = n
	c.Workload.TxnsPerSession = max(200, 4000/n)
	c.Server.MaxConnections = max(cfg.Server.MaxConnections, n)
	applyTestbed(&c, tb, sigma, kappa)
	return system.Run(c).Metrics
}

// applyTestbed gives a model config the testbed's parts.
func applyTestbed(c *system.Config, tb *Testbed, sigma, kappa float64) {
	c.Workload.Query = sim.ConstDist(0)
	cpu := func(d time.Duration) sim.Dist {
		if tb.Spread > 0 && d > 0 {
			return sim.LognormalDist(sim.FromDuration(d), tb.Spread)
		}
		return sim.ConstDist(sim.FromDuration(d))
	}
	c.Workload.CPU = cpu(tb.Server)
	c.Workload.Think = sim.ConstDist(sim.FromDuration(tb.Latency))
	c.Server.Cores = tb.Cores
	c.Server.Contention, c.Server.Coherency = sigma, kappa
	// Linux's run queues, one per core, and the driver's threads: pgbench
	// -j, one per core, or the Go driver's, GOMAXPROCS.
	m := testbed.Machine{DriverCPU: cpu(tb.Driver), PoolerOnCores: true, Background: tb.Background,
		Scheduler: testbed.PerCore, DriverThreads: tb.Cores, DriverScan: tb.Scan}
	if len(tb.Speed) > 0 {
		m.Speed, m.SpeedPeriod = tb.Speed, sim.FromDuration(speedStep)
	}
	c.Machine = m
}

// calibrateThrough measures each process's CPU per statement through the
// row's target, the way a run uses them: a closed loop of the row's
// clients through the row's pool, for three seconds. The backends are
// the pool's servers (found in pg_stat_activity); the pooler is the
// proxy's event loop (its thread's CPU, proxyWatch.measureCPU) or the
// pgbouncer process; the driver is this
// process, less the proxy's loop. These are the model's CPU per statement:
// a process's cost per statement depends on how often it sleeps and wakes,
// which a direct loop does not reproduce, and on how many connections it
// serves (measured through PgBouncer at pool 8: pgbench 8.6 µs per
// transaction with 8 clients, 14.3 µs with 200; at pool 1 the backend's
// 26 µs with 8 clients, 16.5 µs with 50, its core no longer idle between
// statements).
func (l *lab) calibrateThrough(ctx context.Context, t *running, cfg system.Config, st load.Statement, tb *Testbed) error {
	// Three seconds: the machine's slow stretches last hundreds of
	// milliseconds (through PgBouncer at 200 clients the statements per
	// window varied by 13 % over 20 ms windows and still 12 % over
	// 100 ms), and a run's p99 is its slowest stretches' - a one-second
	// loop often saw none (the speed column, the model's tail).
	r, err := l.throughLoop(ctx, t, cfg, st, 3*time.Second)
	tb.ThroughPlacement = r.placement
	if err != nil {
		return err
	}
	tb.ThroughClients, tb.ThroughTPS, tb.ThroughBusy = r.clients, r.tps, r.busy
	tb.ThroughOther = r.other
	if r.speed != nil {
		tb.Speed = r.speed
	}
	tb.Driver, tb.Pooler, tb.Server = r.driver, r.pooler, r.server
	tb.AssignFirst = t.px != nil
	tb.Migrations, tb.MigrationsOK = r.migr, r.migrOK
	tb.WakeCurve = l.wakeCurve
	return nil
}

// throughCPU is what one closed loop through the target measured: its
// clients and statements per second, each process's CPU per statement,
// the machine's speed window by window and, through PgBouncer, where it
// and the pool's servers ran.
type throughCPU struct {
	clients                int
	stmts                  int64
	tps                    float64
	driver, pooler, server time.Duration
	speed                  []float64
	placement              *Placement
	migr                   float64 // the kernel's moves of the pooler and the servers between cores per statement, if migrOK
	migrOK                 bool
	busy                   float64 // the machine's CPUs busy during the loop, a fraction of all
	other                  float64 // cores busy with other work during the loop (otherCores)
}

// throughLoop runs the row's clients (as many as max_client_conn admits)
// through the target, back to back, for dur (--quick: 500 ms), and
// measures each process's CPU per statement (calibrateThrough).
func (l *lab) throughLoop(ctx context.Context, t *running, cfg system.Config, st load.Statement, dur time.Duration) (throughCPU, error) {
	var r throughCPU
	n := max(1, cfg.Workload.Clients)
	if m := cfg.Pooler.MaxClientConn; m > 0 {
		n = min(n, m)
	}
	if l.o.Quick {
		dur = 500 * time.Millisecond
	}
	// pooler is the pooler's own process or thread, watched with the
	// servers: PgBouncer's, or the proxy's pinned event loop's.
	var pooler []int
	if t.bouncer != nil {
		pooler = []int{t.bouncer.Pid()}
	}
	var nb int
	watch := func(ctx context.Context) ([]int, error) {
		pids, err := l.serverPids(ctx)
		nb = len(pids)
		return append(pooler, pids...), err
	}
	pg := l.pgbench()
	if t.px != nil && pg != nil {
		// The proxy's event loop on a thread of its own for the row
		// (running.pinLoop): its CPU is the pooler's, the rest of this
		// process's other work.
		if tid := t.pinLoop(); tid > 0 {
			pooler = []int{tid}
		}
	}
	var loop0 time.Duration
	if t.px != nil && pg == nil {
		t.watch.measureCPU(true)
		defer t.watch.measureCPU(false)
		loop0 = t.watch.timedCPU()
	}
	placed := l.watchPooler(ctx, t)
	var lc loopCPU
	var err error
	if pg != nil {
		lc, err = pg.loop(ctx, t.dsn, n, poolServers(cfg, n), cfg.Seed, dur, pooler, false)
		nb = len(lc.each) - len(pooler)
	} else {
		lc, err = closedLoop(ctx, t.dsn, st, cfg.Seed, n, dur, false, watch, nil)
	}
	r.placement = placed()
	if err != nil {
		return r, err
	}
	if lc.stmts == 0 || !lc.watchedOK || nb <= 0 {
		return r, fmt.Errorf("calibrate testbed through the target: %d clients ran %d statements; %d servers found, CPU times readable: %v", n, lc.stmts, nb, lc.watchedOK)
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(lc.stmts) }
	r.clients, r.stmts, r.tps, r.speed = n, lc.stmts, float64(lc.stmts)/lc.wall.Seconds(), lc.speed
	r.migr, r.migrOK = float64(lc.migr)/float64(lc.stmts), lc.migrOK
	r.busy = lc.busy / float64(runtime.NumCPU())
	switch {
	case pg != nil && t.px != nil && len(pooler) == 0:
		// The loop could not be pinned: this process is the proxy (and
		// the instruments, which are other work).
		r.pooler, r.driver, r.server = per(lc.proc-lc.instr), per(lc.self), per(lc.watched)
		l.logf("validate: through the proxy, CPU per statement: this process %v less its instruments'", r.pooler)
	case t.px != nil && pg == nil:
		loop := t.watch.timedCPU() - loop0
		r.pooler, r.driver = per(loop), per(lc.self-loop-lc.instr)
		r.server = per(lc.watched)
	default:
		// The pooler watched first (PgBouncer, or the proxy's pinned
		// loop: the rest of this process is other work), then the servers.
		r.driver = per(lc.self) // pgbench's
		if pg == nil {
			r.driver = per(lc.self - lc.instr) // this process's
		}
		r.pooler, r.server = per(lc.each[0]), per(lc.watched-lc.each[0])
	}
	// Clocks read at slightly different moments can leave a small part
	// below zero on a busy machine: a process's CPU is never negative.
	r.driver, r.pooler, r.server = max(0, r.driver), max(0, r.pooler), max(0, r.server)
	r.other = otherCores(lc.busy, (r.driver+r.pooler+r.server)*time.Duration(lc.stmts), lc.wall, runtime.NumCPU())
	return r, nil
}

// otherCores is how many cores were busy with other work over a window of
// wall: the machine's busy cores less the test's processes' CPU (work),
// this process's instruments, the kernel's work for no process and other
// processes alike; from 0 to 90 % of the cores (validate.background's
// bound).
func otherCores(busy float64, work, wall time.Duration, cores int) float64 {
	if wall <= 0 {
		return 0
	}
	return min(max(0, busy-work.Seconds()/wall.Seconds()), 0.9*float64(cores))
}

// serverPids are the PostgreSQL backends of the load's role other than
// the watching connection's: the pool's servers.
func (l *lab) serverPids(ctx context.Context) ([]int, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(cctx, l.watchDSN)
	if err != nil {
		return nil, fmt.Errorf("calibrate testbed: find the pool's servers: %w", err)
	}
	defer closeConn(conn)
	pids, err := serverPidsOn(cctx, conn, l.srv.user)
	if err != nil {
		return nil, fmt.Errorf("calibrate testbed: find the pool's servers: %w", err)
	}
	return pids, nil
}

// poolServers is how many servers n back-to-back clients keep open in the
// row's pool: the pool's size, fewer clients, or the database's or user's
// cap (a loop waits for them before it measures; a count it never reaches
// costs it serversWait).
func poolServers(cfg system.Config, n int) int {
	want := min(n, max(1, cfg.Pooler.DefaultPoolSize))
	for _, c := range []int{cfg.Pooler.MaxDBConnections, cfg.Pooler.MaxUserConnections} {
		if c > 0 {
			want = min(want, c)
		}
	}
	return want
}

// calibratedTestbed is the calibrated model of a CPU-bound row: the
// scenario with the testbed's parts and the pooler's thread on the cores,
// averaged over modelReplications replications.
func calibratedTestbed(cfg system.Config, cal Calibration) ModelRun {
	return replicated(testbedConfig(cfg, cal, cal.Testbed), modelReplications)
}

// modelReplications is how many replications - the same calibrated
// model with system.ReplicationSeed(seed, i)'s seeds - each run's model
// of a CPU-bound row averages. One replication is one draw of the speed
// timeline's start (validate.speed: a run of a few seconds plays a part of
// it) and of the lognormal CPU per statement, and the model of a run is
// compared with the run itself: its seed's luck must not be a verdict's.
// An uncommitted check on 2026-12-05 ran the calibrated models of six
// runs of pgbench -S at 50 clients through poolsim's proxy with ten seeds
// each: a run's model p50 spread over up to 23 % at pool 32 (its
// throughput up to 16 %) and 3 % at pool 16 - wider than the tolerances.
const modelReplications = 5

// replicated is the mean of n replications of c, run side by side (each
// is single-threaded and deterministic, so the mean does not depend on
// which ends first): the reported metrics as system.Replicated.RunMean
// averages them - a live run is one run, so its model is what one run
// reads on average, its percentiles the mean of the replications' own -
// and the machine's stats beside them (the run-queue waits, the
// preemptions, the driver threads' spread) averaged too. A model with
// classes keeps one run: RunMean has no per-class average.
func replicated(c system.Config, n int) ModelRun {
	if n <= 1 || len(c.Classes) > 0 {
		return runModel(c)
	}
	reps := make(system.Replicated, n)
	stats := make([]testbed.Stats, n)
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			ci := c
			ci.Seed = system.ReplicationSeed(c.Seed, i)
			r := runModel(ci)
			reps[i], stats[i] = r.Metrics, r.Stats
		}()
	}
	wg.Wait()
	m := ModelRun{Metrics: reps.RunMean()}
	for _, f := range []func(*testbed.Stats) *float64{
		func(s *testbed.Stats) *float64 { return &s.RunQueueServerUs },
		func(s *testbed.Stats) *float64 { return &s.RunQueuePoolerUs },
		func(s *testbed.Stats) *float64 { return &s.RunQueueDriverUs },
		func(s *testbed.Stats) *float64 { return &s.PoolerPreempts },
		func(s *testbed.Stats) *float64 { return &s.ServerPreempts },
		func(s *testbed.Stats) *float64 { return &s.DriverThreadSpread },
	} {
		var sum float64
		for i := range stats {
			sum += *f(&stats[i])
		}
		*f(&m.Stats) = sum / float64(n)
	}
	return m
}

// testbedConfig is the calibrated model's config of a CPU-bound row with
// testbed tb's parts.
func testbedConfig(cfg system.Config, cal Calibration, tb *Testbed) system.Config {
	cc := cfg
	applyTestbed(&cc, tb, tb.Contention, tb.Coherency)
	cc.Server.Connect = sim.ConstDist(0) // direct clients connect before time zero
	if cfg.Pooler.PoolMode.Pooled() {
		// The pool's servers' CPU per statement was measured where the
		// row runs (the through loop, or the run itself): whatever their
		// contention costs at the row's concurrency is in it already, and
		// σ and κ, fitted to the direct points from one connection's cost,
		// would count it twice (on a machine whose direct points fell from
		// 36,700/s at 2 connections to 8,300 at 32, σ of 0.07-0.22 left the
		// model at half its own through loop's throughput at pools 16 and
		// 32).
		cc.Server.Contention, cc.Server.Coherency = 0, 0
		// A statement is a request, a response and an assignment on the
		// pooler's thread: a third each (PgBouncer reads a waiting
		// client's query again once it has a server, so a hand-off costs
		// about a message). PgBouncer relays a released server's
		// ReadyForQuery before it hands the server to a waiter; poolsim's
		// proxy hands it over first: its turn reads the response, links
		// the waiter, reads its query and writes the batch with the
		// server's socket first (the dirty list is written last in,
		// first out), so the relay to the client runs while the server
		// works.
		per := tb.Pooler / 3
		cc.Pooler.CPUPerMsg, cc.Pooler.CPUPerAssign = sim.FromDuration(per), sim.FromDuration(per)
		cc.Pooler.AssignFirst = tb.AssignFirst
		cc.Pooler.ConnOverhead = 0
		// The hop an empty query measured is the thread's wake-up and the
		// loopback around its CPU: a thread that was asleep pays it when
		// a core is idle (as in that measurement), a busy one relays at
		// once, and one woken while the cores are all busy is switched
		// to at once (the model's rule, testbed.Machine.PoolerOnCores).
		cc.Pooler.Hop = 0
		cc.Pooler.Wakeup = sim.FromDuration(max(0, cal.Hop-per))
		cc.Server.Connect = sim.ConstDist(sim.FromDuration(cal.Connect))
		onMachine(&cc, func(m *testbed.Machine) {
			m.ServersOpen = cal.ServersOpen
			// With the cores' wake-up measured, a backend or the pooler's
			// thread woken onto an idle core from another waits it by the
			// core's idle time, in place of the pooler's constant wake-up.
			m.WakeCurve = tb.WakeCurve
			// A core out of work takes a queued thread from the other as
			// often as the kernel moved them in the through loop.
			idleBalance(m, tb)
			// A backend sends its result and runs on, keeping its core,
			// while the pooler relays it.
			m.ServerTail = serverTail
		})
	}
	return cc
}

// serverTail is the share of a pooled statement's CPU its backend runs
// after the response (testbed.Machine.ServerTail). Measured with pgbench -S
// at pool 1 on this project's 2-vCPU machine (lab/bench/server-tail.sh,
// results/pgbench-select-live/tail/server-tail.txt): after it wakes the
// pooler the backend keeps its core 6-17 µs (medians of six runs) of
// stretches on the core of 30-80 µs, the run's speed, but 20-22 % of
// them in every run, through PgBouncer and poolsim's proxy alike. So a
// share, not a duration: a run whose backends cost more per statement
// than the through loop's (the in-run costs) has a longer tail too.
const serverTail = 0.21

// findPgbench is the pgbench to run: the one next to the throwaway
// cluster's postgres, or the first in $PATH.
func (l *lab) findPgbench() (string, error) {
	where := "in $PATH"
	if l.cluster != nil {
		bin := filepath.Join(l.cluster.BinDir(), "pgbench")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
		where = "next to postgres in " + l.cluster.BinDir() + " or in $PATH"
	}
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		return "", fmt.Errorf("validate: validate.statement pgbench-select needs pgbench (%s): %w", where, err)
	}
	return bin, nil
}

// pgbenchInit makes the pgbench tables validate.statement pgbench-select
// reads: pgbench -i at the scenario's scale in the throwaway cluster's
// database; with --dsn the tables must already be there (validate never
// drops a user's tables), and their rows are counted. It returns the
// accounts.
func (l *lab) pgbenchInit(ctx context.Context, scale int) (int64, error) {
	bin, err := l.findPgbench()
	if err != nil && (l.cluster != nil || l.pgbenchNeeded) {
		return 0, err
	}
	l.pgbenchBin = bin
	if l.cluster != nil {
		ictx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ictx, bin, "-i", "-q", "-s", strconv.Itoa(scale))
		cmd.Env = append(os.Environ(), "PGHOST="+l.srv.host, "PGPORT="+strconv.Itoa(l.srv.port), "PGUSER="+l.srv.user,
			"PGPASSWORD="+l.srv.password, "PGDATABASE="+l.srv.database, "PGSSLMODE=disable")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("validate: pgbench -i -s %d: %w: %s", scale, err, strings.TrimSpace(string(out)))
		}
		l.logf("validate: pgbench -i -s %d: %s", scale, lastLines(string(out), 1))
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(cctx, l.srv.dsn)
	if err != nil {
		return 0, fmt.Errorf("validate: pgbench tables: %w", err)
	}
	pid := conn.PID()
	rs, err := conn.Exec(cctx, "SELECT count(*) FROM pgbench_accounts").ReadAll()
	closeConn(conn)
	if gerr := l.backendGone(ctx, pid); err == nil {
		err = gerr
	}
	if err != nil {
		return 0, fmt.Errorf("validate: validate.statement pgbench-select reads pgbench_accounts (run pgbench -i -s %d on the --dsn database first): %w", scale, err)
	}
	n, _ := strconv.ParseInt(string(rs[0].Rows[0][0]), 10, 64)
	if n == 0 {
		return 0, fmt.Errorf("validate: pgbench_accounts is empty: run pgbench -i -s %d first", scale)
	}
	return n, nil
}

// calibrateCPUBound is a CPU-bound row's calibration before its run: the
// connection cost, and the testbed straight to PostgreSQL.
func (l *lab) calibrateCPUBound(ctx context.Context, c system.Config, st load.Statement) (Calibration, error) {
	cal := Calibration{Kind: st.Kind}
	var err error
	if cal.Connect, err = measureConnect(ctx, l.srv.dsn, 11, l.backendGone); err != nil {
		return cal, err
	}
	tb, err := calibrateTestbed(ctx, l.srv.dsn, c, st, l.o.Quick, l.backendGone, l.pgbench())
	if err != nil {
		return cal, err
	}
	tb.Pgbench = l.pgbench() != nil
	cal.Testbed = tb
	p := tb.Points[0]
	cal.QueryMean = time.Duration(float64(time.Second) / p.TPS)
	cal.RTT = cal.QueryMean
	cal.Concurrency, cal.Samples = p.N, int(p.Stmts)
	var xs []string
	for _, p := range tb.Points {
		xs = append(xs, fmt.Sprintf("%d: %.0f/s, driver %v, server %v, other %.2f cores", p.N, p.TPS, p.Driver, p.Server, p.Background))
	}
	l.logf("validate: calibrated straight to PostgreSQL: %s", strings.Join(xs, "; "))
	return cal, nil
}

// pointsText is the direct points, measured and modelled.
func (tb *Testbed) pointsText() string {
	var xs []string
	for _, p := range tb.Points {
		xs = append(xs, fmt.Sprintf("%d: %.0f/s (measured %.0f)", p.N, p.Model, p.TPS))
	}
	return strings.Join(xs, ", ")
}

// writeTestbed is the report's testbed section: what each CPU-bound row's
// calibration measured (medians over its runs).
func (rep *Report) writeTestbed(p func(string, ...any)) {
	any := false
	for _, r := range rep.Rows {
		any = any || r.Cal.Testbed != nil
	}
	if !any {
		return
	}
	p("## Testbed\n\n")
	p("%s", "The statement is CPU-bound, and PostgreSQL's backends, the pooler and the load driver (this process) share the machine's cores. Before each run the validator measures, straight to PostgreSQL with 1, 2, 4 and 8 connections back to back: statements per second, the driver's CPU per statement (getrusage), the backends' (/proc/PID/schedstat) and the busy cores outside both (/proc/stat: other work). The calibrated model runs the driver's, the backends' and the pooler's CPU on the cores with a run queue per core, as Linux does (the pooler's thread one job at a time: a third of its CPU per request, response and assignment, and where a released server goes to a waiting client PgBouncer relays the response first and hands the server over after it, poolsim's proxy the other way round - its event loop writes the waiter's query to the server before the response to the client; the driver's as many threads as cores, each preparing its clients' statements in turn), with the background taken off the cores: a woken thread is placed on the waker's core if the waker sleeps, else on its own last core if idle, else on another idle core - unless the row's fit has the wake-up not look for one (\"no idle-core scan\" in the moves column: Linux's SIS_UTIL stops that look when the cores are busy), when it goes to the waker's core if nothing queues there, else to its own last core - else in the shortest queue, and waits there; a thread with more work keeps its core; a pooled statement's backend is its server's process, whoever the client, and sends its result with "+fmt.Sprintf("%.0f", 100*serverTail)+" % of its CPU for the statement still to run, keeping its core for it while the pooler relays (validate.server_tail; lab/bench/server-tail.sh measured it: the backend reads its socket again, finds it empty and goes to sleep), and a statement that reaches it meanwhile runs next there; a core out of work takes a queued thread from the other only if it has not run for 0.5 ms (Linux's sched_migration_cost: a hot thread stays), so a core idles beside the other's queue of a small pool's busy backends, which processor sharing never lets happen (measured through PgBouncer: the processes' CPU added up to 88-98 % of the cores while at pool 4 they waited in run queues as long again); the one-connection point's round trip less that CPU is latency on the driver's side (the model's think); the backends' σ and κ are searched so that the model's direct throughput matches the measured points from 4 connections up, with the direct loops' own CPU per statement (pgbench's at the most concurrent point, a backend's at one connection: the driver and server CPU columns are the through loop's, which the row's model runs); only the direct model runs σ and κ: a pooled row's servers' CPU per statement, measured where the row runs, holds what their contention costs there. Through the target, the row's clients in the row's pool (a closed loop of three seconds) measure each process's CPU per statement where it works as in the run (through PgBouncer, the share of the pool's servers on PgBouncer's core during the loop in parentheses: with one server they share a core or not, and the costs differ; with two, a run whose share is below its loop's has its model mixed with the apart arrangement's - PgBouncer's thread on one core, the servers on the other - and one above, with the together one's, by how far toward none or all it was, as the free model's placement is the loop's), because a process's cost per statement is not the statement's constant (pgbench polls all its sockets at every wake-up, so its cost grows with idle connections; a process woken on an idle core costs more than one on a busy core): the pool's servers (found in pg_stat_activity), the pooler (pgbouncer's /proc/PID/schedstat, or the in-process proxy's event loop thread) and the driver (this process, less the proxy's loop). The row's model runs the same processes' CPU per statement read over the run itself (the run's column: the servers' and PgBouncer's schedstat, pgbench's rusage, the proxy's loop thread's schedstat or this process's; these are the kernel's counters, not the run's throughput or latencies, which the model must still produce): this shared machine's speed drifts between a loop and the run after it by more than the tolerances, and the drift is in what a statement costs, not in how busy the cores are (lab/bench/loop-noise.sh); the model from the through loop alone is in the next section. Its background is the other work over the run in the same way: the machine's busy cores (/proc/stat) less those processes' CPU - the kernel's work for no process, other processes, and this process's instruments (pgbench's threads' run delay and the pooler's and servers' cores, each read every 20 ms on a thread of its own whose CPU is counted apart: through the in-process proxy they are not the pooler's CPU); a pooled row's other work column is the same over its through loop, the model from the loop's, and a direct row's the direct points' (the machine's busy cores less the driver's and the backends' CPU). A statement's CPU is not the same every time, and the processes wait for the cores in turn, not in the fluid shares of processor sharing: the driver's and the backend's CPU per statement are lognormal in the calibrated model, with the σ (spread column) searched so that the model's direct p99 at 8 connections matches the measured round trips' (their mean is the throughput's, which σ and κ match). The machine's speed varies as it runs (the scheduler moves the processes between the cores, other work comes and goes), and every connection feels it at once: the through loop's statements per 20 ms window over their mean, drawn in toward 1 by what chance alone explains, with its stalls cut out of them (a gap between consecutive statements' ends of more than 0.5 ms and 4 times the loop's 99th-percentile gap: nothing finished, every connection stopped at once; not looked for where that percentile is over 1 ms, a loop whose statements end in bursts), millisecond by millisecond in time order, are the speed column (its 5th, 50th and 95th percentiles and the milliseconds under half speed), and the calibrated model plays them in that order from a start its seed draws for all the jobs on the cores (validate.speed) — the latencies' tail: slow stretches outlast a 20 ms window, and a stall of a millisecond or more stops every transaction in flight, which a window's count spreads as a slowdown of a tenth. Each run's calibrated model is the mean of "+fmt.Sprint(modelReplications)+" replications of it (the same model with other seeds): one is one draw of the speed timeline's start - a run of a few seconds plays a part of it - and of the CPU per statement, and its luck is not the run's. The through column also says how busy the machine's CPUs were during that loop (/proc/stat), to set beside the run's and the calibrated model's busy cores in the row's Diagnostics. The moves column is how often the kernel moved the pooler or a pool's server to another core during the through loop, per statement (/proc/PID/task/TID/sched se.nr_migrations), and how often a core out of work in the row's model may take a thread queued on the other (one that has not run for 0.5 ms; validate.idle_balance): the rate, of none, once per 100, 30, 10, 3 or 1 ms, 300 or 100 µs, or every chance, each with and without the wake-up's look for an idle core, whose model of the through loop keeps the cores as busy as the machine's CPUs were in that loop (the through column; a median over the runs may fall between the rates) — a counter read before the run, as the CPU per statement is; the kernel's own moves, far fewer than a model needs to keep its cores as busy, decide only where the loop's busy CPUs were not read (one over the moves per second). The USL column is poolsim fit's curve through the direct points themselves (driver included), for reference. With validate.driver: pgbench the load driver is pgbench, a process of its own: its CPU is its threads' /proc/PID/task/*/schedstat in every loop (the direct points and through the target, all run by pgbench), and through the in-process proxy the pooler's CPU is its event loop's thread's, the loop kept on a thread of its own for the row (/proc/self/task/TID/schedstat), and the rest of this process - Go's runtime, logins, the instruments, on other threads beside the loop - is other work, not CPU in the pooler's one thread; and the model's driver threads work as pgbench's (validate.driver_scan): each polls, reads the results its poll found in client order, starts the transactions that ended in a second pass, and times a transaction from that start to the reading of its last result — the wait between a transaction's end and the next one's start is in neither's latency, as in pgbench's log. The scenario's own model (the first column of the tables) is the production what-if: it has no load driver. A pooled row's Diagnostics set the run's waits for a core per statement (each thread's run delay in /proc/PID/task/TID/schedstat: the pool's servers', the pooler's, the driver's) beside the calibrated model's waits in its cores' queues: where the model's throughput is right and its latencies' shape is not, they say which wait it has too much or too little of; through PgBouncer they also say how often PgBouncer's one thread was taken off its core while it could still run (its involuntary context switches per statement): a thread PgBouncer wakes while no core is idle lands on PgBouncer's core and may run first, and every client's relay waits behind it - which the calibrated model does only in a pool-1 row's apart arrangement (the section on the two arrangements). Medians over each row's runs.\n\n")
	p("| row | direct: connections → statements/s measured (model) | USL of the direct points (poolsim fit): σ / κ / λ | driver CPU | server CPU | latency | other work | model's σ / κ | CPU spread: direct p50 / p99 measured (model) → σ | pooler CPU | through the target: clients → statements/s, CPUs busy | CPU per statement in the run (the model's): driver / pooler / server | moves between cores per statement; the model's idle balancing | hop | speed p5 / p50 / p95 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		tb := r.Cal.Testbed
		if tb == nil {
			continue
		}
		var pts []string
		for _, pt := range tb.Points {
			pts = append(pts, fmt.Sprintf("%d → %.0f (%.0f)", pt.N, pt.TPS, pt.Model))
		}
		spread := "—"
		if i := spreadPoint(tb); i >= 0 {
			sp := tb.Points[i]
			spread = fmt.Sprintf("%d: %s / %s (%s / %s) → %.2f", sp.N, us(sp.P50), us(sp.P99), us(sp.ModelP50), us(sp.ModelP99), tb.Spread)
		}
		through := "—"
		if tb.ThroughClients > 0 {
			through = fmt.Sprintf("%d → %.0f", tb.ThroughClients, tb.ThroughTPS)
			if tb.ThroughBusy > 0 {
				through += fmt.Sprintf(", CPUs %.0f %% busy", 100*tb.ThroughBusy)
			}
			if tb.ThroughPlacement != nil {
				through += fmt.Sprintf(" (%.0f %%)", 100*tb.ThroughPlacement.Shared)
			}
		}
		moves := "—"
		if tb.MigrationsOK && tb.ThroughClients > 0 {
			moves = fmt.Sprintf("%.4f", tb.Migrations)
		}
		if tb.balanceSet {
			moves += "; " + balanceText(tb.Balance, tb.NoScan)
		}
		inRun := "—"
		if tb.Run.OK {
			inRun = fmt.Sprintf("%s / %s / %s", us(tb.Run.Driver), us(tb.Run.Pooler), us(tb.Run.Server))
		}
		p("| %s | %s | %.4f / %.5f / %.0f/s | %s | %s | %s | %.2f cores | %.4f / %.5f | %s | %s | %s | %s | %s | %s | %s |\n", r.Title(), strings.Join(pts, ", "), tb.USL.Sigma, tb.USL.Kappa, tb.USL.Lambda, us(tb.Driver), us(tb.Server), us(tb.Latency),
			tb.Background, tb.Contention, tb.Coherency, spread, us(tb.Pooler), through, inRun, moves, us(r.Cal.Hop), speedCell(tb.Speed))
	}
	p("\n")
	for _, r := range rep.Rows {
		if tb := r.Cal.Testbed; tb != nil && len(tb.WakeCurve) > 0 {
			p("An idle core's wake-up, which the pooled rows' calibrated models give a backend or the pooler's thread woken onto an idle core from another, in place of the pooler's constant wake-up (hop less a message's CPU), the longer the longer the core idled (two helper processes pinned to cores 0 and 1 passing a byte over a socket pair, each spinning a while before it answers, against the same on one core; once per validation, before anything starts): %s.\n\n", wakeCurveText(tb.WakeCurve))
			break
		}
	}
	rep.writeErrorSplit(p)
}

// writeErrorSplit is the report's split of each CPU-bound row's TPS
// error: the calibrated model (the run's own CPU per statement) against
// the run, the model from the through loop alone against that loop (the
// model's error at the loop's costs: the loop runs the row's clients
// through the row's pool, as the run does), and the loop against the run
// (the machine between the calibration and the run, which the run's own
// CPU takes out).
func (rep *Report) writeErrorSplit(p func(string, ...any)) {
	var mr, ml, lr []float64
	var lines []string
	inRun := false
	for _, r := range rep.Rows {
		tb := r.Cal.Testbed
		if tb == nil || tb.ThroughTPS <= 0 || r.Calibrated.TPS <= 0 || r.Measured.TPS <= 0 {
			continue
		}
		loopModel, both := r.Calibrated, "—"
		if r.Before != nil {
			loopModel, inRun = *r.Before, true
			both = fmt.Sprintf("%.0f", r.Before.TPS)
		}
		a, b, c := 100*(r.Calibrated.TPS/r.Measured.TPS-1), 100*(loopModel.TPS/tb.ThroughTPS-1), 100*(tb.ThroughTPS/r.Measured.TPS-1)
		mr, ml, lr = append(mr, a), append(ml, b), append(lr, c)
		lines = append(lines, fmt.Sprintf("| %s | %.0f | %s | %.0f | %.0f | %+.1f | %+.1f | %+.1f |\n", r.Title(), r.Calibrated.TPS, both, tb.ThroughTPS, r.Measured.TPS, a, b, c))
	}
	if len(lines) == 0 {
		return
	}
	p("### Where the TPS error comes from\n\n")
	p("%s", "The calibrated model's TPS against the run, and the same model from the through loop alone (three seconds of the row's clients through the row's pool right before the run, its CPU per statement in place of the run's: what the loop foretold) against that loop — the model's error at the loop's costs — and the loop against the run: the machine between the calibration and the run, which the run's own CPU per statement takes out of the calibrated model. Medians over the row's runs; at a pool-1 row through PgBouncer the models are the run's mix of the two arrangements.\n\n")
	p("%s", "| row | calibrated model | model from the loop alone | through loop | measured run | calibrated model vs run % | loop's model vs loop % | loop vs run % |\n|---|---|---|---|---|---|---|---|\n")
	for _, l := range lines {
		p("%s", l)
	}
	if !inRun {
		p("\nNo run's CPU per statement was read: the calibrated model is the loop's.\n")
	}
	p("\nOver the %d rows: calibrated model vs run %s; the loop's model vs its loop %s; loop vs run %s.\n\n", len(mr), meanSD(mr), meanSD(ml), meanSD(lr))
}

// meanSD is "mean +x.x %, standard deviation y.y points".
func meanSD(xs []float64) string {
	var s, q float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	for _, x := range xs {
		q += (x - m) * (x - m)
	}
	return fmt.Sprintf("mean %+.1f %%, standard deviation %.1f points", m, math.Sqrt(q/float64(len(xs))))
}

// combineTestbed is the testbed shown for a row: medians of its runs'.
func combineTestbed(cs []Calibration) *Testbed {
	var tbs []*Testbed
	for _, c := range cs {
		if c.Testbed != nil {
			tbs = append(tbs, c.Testbed)
		}
	}
	if len(tbs) == 0 {
		return nil
	}
	t := *tbs[0]
	t.Points = slices.Clone(t.Points)
	t.Driver = medianDur(tbs, func(x *Testbed) time.Duration { return x.Driver })
	t.Server = medianDur(tbs, func(x *Testbed) time.Duration { return x.Server })
	t.Latency = medianDur(tbs, func(x *Testbed) time.Duration { return x.Latency })
	t.Pooler = medianDur(tbs, func(x *Testbed) time.Duration { return x.Pooler })
	t.Background = medianOf(tbs, func(x *Testbed) float64 { return x.Background })
	t.ThroughTPS = medianOf(tbs, func(x *Testbed) float64 { return x.ThroughTPS })
	t.ThroughBusy = medianOf(tbs, func(x *Testbed) float64 { return x.ThroughBusy })
	if other := testbedsWhere(tbs, func(x *Testbed) bool { return x.ThroughBusy > 0 }); len(other) > 0 {
		t.ThroughOther = medianOf(other, func(x *Testbed) float64 { return x.ThroughOther })
	}
	fit := testbedsWhere(tbs, func(x *Testbed) bool { return x.balanceSet })
	t.balanceSet = len(fit) > 0
	if t.balanceSet {
		t.Balance = sim.Time(medianOf(fit, func(x *Testbed) float64 { return float64(x.Balance) }))
		t.NoScan = 2*len(testbedsWhere(fit, func(x *Testbed) bool { return x.NoScan })) > len(fit)
	}
	inRun := testbedsWhere(tbs, func(x *Testbed) bool { return x.Run.OK })
	t.Run = RunCPU{OK: len(inRun) > 0}
	if t.Run.OK {
		t.Run.Driver = medianDur(inRun, func(x *Testbed) time.Duration { return x.Run.Driver })
		t.Run.Pooler = medianDur(inRun, func(x *Testbed) time.Duration { return x.Run.Pooler })
		t.Run.Server = medianDur(inRun, func(x *Testbed) time.Duration { return x.Run.Server })
	}
	if other := testbedsWhere(tbs, func(x *Testbed) bool { return x.Run.OtherOK }); len(other) > 0 {
		t.Run.Other, t.Run.OtherOK = medianOf(other, func(x *Testbed) float64 { return x.Run.Other }), true
	}
	moved := testbedsWhere(tbs, func(x *Testbed) bool { return x.MigrationsOK })
	t.MigrationsOK = len(moved) > 0
	if t.MigrationsOK {
		t.Migrations = medianOf(moved, func(x *Testbed) float64 { return x.Migrations })
	}
	t.Contention = medianOf(tbs, func(x *Testbed) float64 { return x.Contention })
	t.Coherency = medianOf(tbs, func(x *Testbed) float64 { return x.Coherency })
	t.Spread = medianOf(tbs, func(x *Testbed) float64 { return x.Spread })
	placed := testbedsWhere(tbs, func(x *Testbed) bool { return x.ThroughPlacement != nil })
	t.ThroughPlacement = nil
	if len(placed) > 0 {
		t.ThroughPlacement = &Placement{Shared: medianOf(placed, func(x *Testbed) float64 { return x.ThroughPlacement.Shared })}
		for _, x := range placed {
			t.ThroughPlacement.Samples += x.ThroughPlacement.Samples
		}
	}
	t.Speed = nil
	for _, x := range tbs {
		t.Speed = append(t.Speed, x.Speed...)
	}
	var tog, apart []*Arrangement
	for _, x := range tbs {
		tog, apart = append(tog, x.Together), append(apart, x.Apart)
	}
	t.Together, t.Apart = combineArrangement(tog), combineArrangement(apart)
	for i := range t.Points {
		t.Points[i].TPS = medianOf(tbs, func(x *Testbed) float64 { return x.Points[min(i, len(x.Points)-1)].TPS })
		t.Points[i].Model = medianOf(tbs, func(x *Testbed) float64 { return x.Points[min(i, len(x.Points)-1)].Model })
		pt := func(x *Testbed) TestbedPoint { return x.Points[min(i, len(x.Points)-1)] }
		t.Points[i].P50 = medianDur(tbs, func(x *Testbed) time.Duration { return pt(x).P50 })
		t.Points[i].P99 = medianDur(tbs, func(x *Testbed) time.Duration { return pt(x).P99 })
		t.Points[i].ModelP50 = medianDur(tbs, func(x *Testbed) time.Duration { return pt(x).ModelP50 })
		t.Points[i].ModelP99 = medianDur(tbs, func(x *Testbed) time.Duration { return pt(x).ModelP99 })
	}
	return &t
}

// testbedsWhere are the runs' testbeds that keep, in order: those whose
// optional reading was taken, for its median.
func testbedsWhere(tbs []*Testbed, keep func(*Testbed) bool) []*Testbed {
	var out []*Testbed
	for _, x := range tbs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}
