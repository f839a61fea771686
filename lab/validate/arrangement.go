package validate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Pool 1 through PgBouncer is two machines. With one server, PgBouncer's
// thread and the backend either share a core - each wakes the other on
// its own core and they take turns, one core's worth of work at the rate
// both costs allow - or run on two, where every hand-off wakes an idle
// core and each process costs more per statement. The kernel picks one
// as the run starts and mostly keeps it (lab/bench/pool1-arrangements.sh:
// 22,330 transactions a second pinned together against 12,800 apart at
// 50 clients). No one model of the free machine predicts a run: which
// arrangement it gets is the scheduler's choice, not the workload's.
//
// So at such a row the calibration pins PgBouncer and its server with
// sched_setaffinity, as taskset does - both to core 0, then PgBouncer to
// core 0 and the server to core 1 - runs the through loop in each
// arrangement, and unpins them before the run. Each arrangement's model
// runs with its own measured CPU per statement and the per-core
// scheduler pinned the same way (testbed.Machine.Affinity), a backend or
// the pooler's thread woken onto an idle core waiting for it to wake, the
// longer the longer it idled (testbed.Machine.WakeCurve, measured once by
// wake.go; where that fails a backend waits the pooler's own wake-up,
// testbed.Machine.Wakeup). A run's calibrated model is the two weighted by where the run
// itself ran: the share of its placement samples with the server on
// PgBouncer's core (Placement.Shared).

// Arrangement is one pinned through loop at a pool of one server and the
// calibrated model of it.
type Arrangement struct {
	Apart                  bool
	TPS                    float64       // statements per second measured pinned
	Driver, Pooler, Server time.Duration // CPU per statement measured pinned
	Speed                  []float64     // the machine's speed window by window in the loop
	// Placement is the sampled placement during the loop: the check that
	// the pinning held (share 1 together, 0 apart).
	Placement *Placement
	// Preempts is how often PgBouncer was taken off its core while it
	// could run, per statement in the loop, if PreemptsOK (its
	// involuntary context switches, as RunDelay.PoolerPreempts). Apart,
	// nearly all are pgbench's threads that PgBouncer woke onto its core
	// (lab/bench/handover.sh), and the arrangement's model takes them
	// (validate.pooler_preempt); together most are the backend it shares
	// the core with, which the model does not take: one core's work in
	// another order.
	Preempts   float64
	PreemptsOK bool
	// ServerPreempts is the same for its one server (its involuntary
	// context switches per statement): apart, the server's core is also
	// pgbench's threads', and the arrangement's model takes the rate
	// (validate.server_preempt); together, most are PgBouncer's.
	ServerPreempts float64
	// Busy is how busy the machine's CPUs were during the loop, a
	// fraction of all (/proc/stat), to which fitArrangement fits the
	// arrangement model's idle balancing (Balance, NoScan, if balanceSet)
	// as fitBalance fits the free model's to the free loop's: pinned, the
	// kernel places pgbench's threads by other cores' load than free.
	Busy float64
	// Wait and ServerWait are PgBouncer's and its server's waits for a
	// core per statement in the loop (their schedstat run delay), if
	// WaitOK: to set beside the model's pooler's and backend's waits in
	// their cores' queues (Model.RunQueuePoolerUs, RunQueueServerUs).
	Wait, ServerWait time.Duration
	WaitOK           bool
	Balance          sim.Time
	NoScan           bool
	balanceSet       bool
	// Model is the arrangement's calibrated model: the row's scenario
	// with these costs, pinned as the loop was; lat its transactions'
	// latency quantiles (ms) at latGrid points, for mixing.
	Model ModelRun
	lat   []float64
}

// latGrid is how many quantiles of an arrangement model's latency a mix
// reads: a mixed percentile is within a thousandth of the rank.
const latGrid = 1000

// latQuantiles are s's quantiles at (i+0.5)/n, i < n, in ms.
func latQuantiles(s *sim.Samples, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = s.Percentile(100 * (float64(i) + 0.5) / float64(n)).Milliseconds()
	}
	return out
}

// name is the arrangement's name in reports and logs.
func (a *Arrangement) name() string {
	if a.Apart {
		return "apart"
	}
	return "together"
}

// pinsArrangements reports whether a row's calibration pins the
// arrangements: a CPU-bound pooled row through PgBouncer (one thread to
// pin; the proxy's event loop is not one), a pool of one server, and two
// cores or more.
func pinsArrangements(target string, live Live, c system.Config) bool {
	return target == TargetPgBouncer && wakesCores(live, c) && c.Pooler.DefaultPoolSize == 1
}

// wakesCores reports whether a row's calibrated model takes the measured
// wake-up curve of an idle core (Testbed.WakeCurve): a CPU-bound pooled
// row on two cores or more, where the pooler's thread and the backends
// wake each other across the cores.
func wakesCores(live Live, c system.Config) bool {
	return testbedKind(live, c) && pooledOnCores(c)
}

// pooledOnCores reports whether a CPU-bound row is pooled on two cores
// or more (wakesCores, for a row known to be CPU-bound).
func pooledOnCores(c system.Config) bool {
	return c.Pooler.PoolMode.Pooled() && runtime.NumCPU() >= 2
}

// calibrateArrangements runs the through loop with PgBouncer and its one
// server pinned together and then apart, sets tb.Together and tb.Apart,
// and gives the two processes their own affinity back before it returns.
// Where the processes cannot be pinned (no permission to set another
// user's affinity) it says so and leaves the row to the free model.
func (l *lab) calibrateArrangements(ctx context.Context, t *running, cfg system.Config, st load.Statement, tb *Testbed) (err error) {
	tb.Together, tb.Apart = nil, nil
	if t.bouncer == nil || !pinsArrangements(l.o.Target, l.live, cfg) {
		return nil
	}
	pids, err := l.serverPids(ctx)
	if err != nil {
		return err
	}
	if len(pids) != 1 {
		l.logf("validate: pool 1 has %d servers after the through loop, not 1: the arrangements are not pinned", len(pids))
		return nil
	}
	bouncer, server := t.bouncer.Pid(), pids[0]
	restore, err := saveAffinity(bouncer, server)
	if err != nil {
		l.logf("validate: the arrangements are not pinned: %v", err)
		return nil
	}
	defer func() {
		if rerr := restore(); rerr != nil && err == nil {
			err = fmt.Errorf("calibrate arrangements: give PgBouncer and its server their cores back: %w", rerr)
		}
	}()
	for _, apart := range []bool{false, true} {
		core := 0
		if apart {
			core = 1
		}
		if err := pinProcess(bouncer, 0); err != nil {
			return l.unpinned(err)
		}
		if err := pinProcess(server, core); err != nil {
			return l.unpinned(err)
		}
		inv0, inv0OK := involuntary(bouncer)
		sinv0, sinv0OK := involuntary(server)
		d0, s0 := threadDelays(bouncer), threadDelays(server)
		r, err := l.throughLoop(ctx, t, cfg, st, 3*time.Second)
		if err != nil {
			return fmt.Errorf("calibrate arrangements: %w", err)
		}
		a := &Arrangement{Apart: apart, TPS: r.tps, Driver: r.driver, Pooler: r.pooler, Server: r.server, Speed: r.speed, Placement: r.placement, Busy: r.busy}
		inv1, ok := involuntary(bouncer)
		sinv1, sok := involuntary(server)
		if ok && sok && inv0OK && sinv0OK && inv1 >= inv0 && sinv1 >= sinv0 && r.stmts > 0 {
			n := float64(r.stmts)
			a.Preempts, a.ServerPreempts, a.PreemptsOK = float64(inv1-inv0)/n, float64(sinv1-sinv0)/n, true
		}
		if d1, s1 := threadDelays(bouncer), threadDelays(server); d0 != nil && d1 != nil && s0 != nil && s1 != nil && r.stmts > 0 {
			n := time.Duration(r.stmts)
			a.Wait, a.ServerWait, a.WaitOK = delaySince(d0, d1)/n, delaySince(s0, s1)/n, true
		}
		if apart {
			tb.Apart = a
		} else {
			tb.Together = a
		}
		l.logf("validate: pinned %s: %d clients, %.0f/s; CPU per statement: driver %v, pooler %v, server %v; preempted a statement: PgBouncer %.2f, server %.2f", a.name(), r.clients, r.tps, r.driver, r.pooler, r.server, a.Preempts, a.ServerPreempts)
	}
	now, err := l.serverPids(ctx)
	if err != nil {
		return err
	}
	if len(now) != 1 || now[0] != server {
		// PgBouncer replaced its server mid-way: the loops ran unpinned.
		l.logf("validate: PgBouncer's server changed while pinned (%d, now %v): the arrangements are dropped", server, now)
		tb.Together, tb.Apart = nil, nil
	}
	return nil
}

// unpinned is a pinning that failed: a permission it lacks is said and
// leaves the row to the free model; anything else is an error.
func (l *lab) unpinned(err error) error {
	if errors.Is(err, syscall.EPERM) {
		l.logf("validate: the arrangements are not pinned (%v): pool 1 is judged by the free model", err)
		return nil
	}
	return fmt.Errorf("calibrate arrangements: %w", err)
}

// tasks are a process's thread ids.
func tasks(pid int) ([]int, error) {
	if pid != os.Getpid() {
		// A thread of this process other than its first (the proxy's
		// pinned event loop, running.pinLoop) is itself alone: its
		// /proc/TID/task lists the whole process.
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(pid)); err == nil {
			return []int{pid}, nil
		}
	}
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range es {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d has no threads", pid)
	}
	return out, nil
}

// pinProcess lets every thread of process pid run on core alone.
func pinProcess(pid, core int) error {
	ts, err := tasks(pid)
	if err != nil {
		return fmt.Errorf("pin process %d to core %d: %w", pid, core, err)
	}
	for _, t := range ts {
		if err := pinTask(t, core); err != nil {
			return fmt.Errorf("pin process %d to core %d: %w", pid, core, err)
		}
	}
	return nil
}

// arrangementConfig is the calibrated model of one arrangement: the row's
// testbed with the arrangement's costs and speed, the pooler's thread and
// the backend pinned as in its loop, and a thread woken onto an idle core
// waiting for it: by the measured curve of the core's idle time
// (Testbed.WakeCurve), or without one a backend the pooler's wake-up.
func arrangementConfig(cfg system.Config, cal Calibration, a *Arrangement) system.Config {
	tb := *cal.Testbed
	tb.Driver, tb.Pooler, tb.Server = a.Driver, a.Pooler, a.Server
	if len(a.Speed) > 0 {
		tb.Speed = a.Speed
	}
	if a.balanceSet {
		tb.Balance, tb.NoScan, tb.balanceSet = a.Balance, a.NoScan, true
	}
	cc := testbedConfig(cfg, cal, &tb)
	aff := testbed.Together
	if a.Apart {
		aff = testbed.Apart
	}
	pin(&cc, &tb, aff)
	if a.Apart && a.PreemptsOK {
		onMachine(&cc, func(m *testbed.Machine) {
			m.PoolerPreempt = min(a.Preempts, maxPreempt)
			m.ServerPreempt = min(a.ServerPreempts, maxPreempt)
		})
	}
	return cc
}

// maxPreempt is the most testbed.Machine.PoolerPreempt takes (its bound).
const maxPreempt = testbed.MaxPreempt

// pin places the pooler's thread and the backends of calibrated model cc
// by aff; pinned, a thread woken onto an idle core waits for it to wake:
// by testbed tb's measured curve, or without one a backend the pooler's
// wake-up.
func pin(cc *system.Config, tb *Testbed, aff testbed.Affinity) {
	onMachine(cc, func(m *testbed.Machine) {
		m.Affinity = aff
		if aff != testbed.Free && len(tb.WakeCurve) == 0 {
			m.Wakeup = cc.Pooler.Wakeup
		}
	})
}

// runForMix runs calibrated model cc, keeping its latencies' quantiles
// for mixing (mixArrangements).
func runForMix(cc system.Config) (ModelRun, []float64) {
	r, lat := system.RunLatencies(cc)
	return ModelRun{r.Metrics, testbed.StatsOf(r)}, latQuantiles(lat, latGrid)
}

// modelArrangements fits each arrangement's idle balancing to its loop
// (fitArrangement) and runs its calibrated model.
func modelArrangements(cfg system.Config, cal Calibration) {
	tb := cal.Testbed
	for _, a := range []*Arrangement{tb.Together, tb.Apart} {
		if a != nil {
			fitArrangement(cfg, cal, a)
			a.Model, a.lat = runForMix(arrangementConfig(cfg, cal, a))
		}
	}
}

// fitArrangement chooses arrangement a's idle balancing and idle-core
// scan as fitBalance does the free model's: the pair of balanceSteps'
// rates and scan or none whose model of a's pinned loop keeps the cores
// as busy as the machine's CPUs were in it. The free loop's fit does not
// carry over: measured through PgBouncer at 200 clients, pool 1, a free
// loop fitted to no balancing and no scan, and the together model with
// it kept pgbench's threads on PgBouncer's and the backend's busy core -
// 7,450 statements a second against the pinned loop's 12,458. Without
// the loop's busy CPUs the free model's fit stays.
func fitArrangement(cfg system.Config, cal Calibration, a *Arrangement) {
	tb := cal.Testbed
	if a.Busy <= 0 || tb.ThroughClients <= 0 {
		return
	}
	c := cfg
	c.Workload.Clients = tb.ThroughClients
	c.Workload.TxnsPerSession = max(50, c.Workload.TxnsPerSession/4)
	best, noScan := fitIdle(a.Busy, func(b sim.Time, ns bool) float64 {
		x := *a
		x.Balance, x.NoScan, x.balanceSet = b, ns, true
		return system.Run(arrangementConfig(c, cal, &x)).Metrics.CPUUtil
	})
	a.Balance, a.NoScan, a.balanceSet = best, noScan, true
}

// calibratedRun is the calibrated model of one run of a row: with the
// arrangements pinned in its calibration and its placement sampled, the
// two arrangements' models weighted by the run's share of time with the
// server on PgBouncer's core; at a pool of two servers, the free model
// mixed with a pinned one by how the run's placement differed from its
// loop's (placed.go); otherwise the row's calibrated model. A
// pooled CPU-bound row's runs each process's CPU per statement measured
// over the run (inrun.go).
func calibratedRun(cfg system.Config, a attempt) ModelRun {
	tb := a.cal.Testbed
	if cal, ok := heldInRun(a); ok {
		return calibrated(cfg, cal)
	}
	if tb == nil || !tb.Run.OK {
		return beforeRun(cfg, a)
	}
	if tb.Together == nil || tb.Apart == nil || a.x.Placement == nil {
		cal := a.cal
		cal.Testbed = withRunCPU(tb)
		if mixesPlacement(cfg, tb, a.x.Placement) {
			return placedRun(cfg, cal, tb.ThroughPlacement.Shared, a.x.Placement.Shared)
		}
		return calibrated(cfg, cal)
	}
	tog, apart := arrangementsAtRunCPU(cfg, a.cal, a.x.Placement.Shared)
	return mixArrangements(tog, apart, a.x.Placement.Shared)
}

// heldInRun is a pooled row's calibration of a sleep, cpu or sql
// statement with the statement's hold and the pool's login pace the run
// itself showed (the target's SHOW STATS over the run, the gaps between
// its servers' backend starts) in place of the loop's through the
// target before it, as a CPU-bound row takes each process's CPU per
// statement from the run: how long pg_sleep and a login take moves with
// what else the machine runs (on a 2-vCPU VM, 40 clients in statement
// mode held their servers 4.8-5.4 ms and logged in every 18.8-34 ms
// against 4.3-4.7 ms and 18-24 ms in the 18-connection loop before).
// The loop's model stays the row's before-run model.
func heldInRun(a attempt) (Calibration, bool) {
	cal := a.cal
	if cal.Hold <= 0 || a.x.HoldQueries <= 0 || a.x.HoldMs <= 0 {
		return cal, false
	}
	cal.Hold = time.Duration(a.x.HoldMs * 1e6)
	if a.x.StartsInRun >= 2 && a.x.StartGapMs > 0 {
		cal.ConnectLoaded = time.Duration(a.x.StartGapMs * 1e6)
	}
	return cal, true
}

// beforeRun is the calibrated model of one run from what was measured
// before it alone: a CPU-bound row's through loop (and pinned loops)
// right before the run.
func beforeRun(cfg system.Config, a attempt) ModelRun {
	tb := a.cal.Testbed
	if tb == nil || tb.Together == nil || tb.Apart == nil || a.x.Placement == nil {
		return calibrated(cfg, a.cal)
	}
	return mixArrangements(tb.Together, tb.Apart, a.x.Placement.Shared)
}

// mixArrangements is a run that spent share of its time together and the
// rest apart. Its rates are the two models' weighted by time; its
// transactions come from each in proportion to time × rate, so its
// latencies are the mixture of the two models' distributions with those
// weights (a run that switches often does more of its transactions in
// the faster arrangement: its p50 leans there, its p99 to the slower).
// Counts are the together model's.
func mixArrangements(tog, apart *Arrangement, share float64) ModelRun {
	share = min(1, max(0, share))
	t, a := tog.Model, apart.Model
	m := t
	lin := func(x, y float64) float64 { return share*x + (1-share)*y }
	m.TPS, m.TPSSteady, m.ReqTPS = lin(t.TPS, a.TPS), lin(t.TPSSteady, a.TPSSteady), lin(t.ReqTPS, a.ReqTPS)
	// The transactions' weights.
	wt := 0.0
	if m.TPS > 0 {
		wt = share * t.TPS / m.TPS
	}
	m.MeanMs = wt*t.MeanMs + (1-wt)*a.MeanMs
	m.WaitMeanMs = wt*t.WaitMeanMs + (1-wt)*a.WaitMeanMs
	m.P50Ms = mixQuantile(tog.lat, apart.lat, wt, 0.50, t.P50Ms, a.P50Ms)
	m.P95Ms = mixQuantile(tog.lat, apart.lat, wt, 0.95, t.P95Ms, a.P95Ms)
	m.P99Ms = mixQuantile(tog.lat, apart.lat, wt, 0.99, t.P99Ms, a.P99Ms)
	// The waits' and the requests' distributions are not kept: weighted
	// as the means are.
	m.WaitP50Ms, m.WaitP99Ms = wt*t.WaitP50Ms+(1-wt)*a.WaitP50Ms, wt*t.WaitP99Ms+(1-wt)*a.WaitP99Ms
	m.ReqP50Ms, m.ReqP99Ms = wt*t.ReqP50Ms+(1-wt)*a.ReqP50Ms, wt*t.ReqP99Ms+(1-wt)*a.ReqP99Ms
	if m.TPS > 0 {
		m.WallMs = 1000 * float64(m.OKTxns) / m.TPS
	}
	return m
}

// mixQuantile is the q-quantile of the mixture of two distributions given
// by their quantiles at equal steps (x and y, each sorted), weighted w and
// 1-w; without them, the two quantiles xq and yq weighted the same way.
func mixQuantile(x, y []float64, w, q, xq, yq float64) float64 {
	if len(x) == 0 || len(y) == 0 {
		return w*xq + (1-w)*yq
	}
	// Merge the two sorted grids, each point carrying its weight.
	wx, wy := w/float64(len(x)), (1-w)/float64(len(y))
	i, j, cum := 0, 0, 0.0
	for i < len(x) || j < len(y) {
		var v float64
		if j >= len(y) || (i < len(x) && x[i] <= y[j]) {
			v, cum = x[i], cum+wx
			i++
		} else {
			v, cum = y[j], cum+wy
			j++
		}
		if cum >= q-1e-12 {
			return v
		}
	}
	return max(x[len(x)-1], y[len(y)-1])
}

// combineArrangement is the arrangement shown for a row: medians of its
// runs' (nil unless every run pinned it).
func combineArrangement(xs []*Arrangement) *Arrangement {
	if len(xs) == 0 {
		return nil
	}
	for _, x := range xs {
		if x == nil {
			return nil
		}
	}
	a := *xs[0]
	a.TPS = medianOf(xs, func(x *Arrangement) float64 { return x.TPS })
	a.Driver = medianDur(xs, func(x *Arrangement) time.Duration { return x.Driver })
	a.Pooler = medianDur(xs, func(x *Arrangement) time.Duration { return x.Pooler })
	a.Server = medianDur(xs, func(x *Arrangement) time.Duration { return x.Server })
	a.PreemptsOK = true
	for _, x := range xs {
		a.PreemptsOK = a.PreemptsOK && x.PreemptsOK
	}
	a.Preempts = medianOf(xs, func(x *Arrangement) float64 { return x.Preempts })
	a.ServerPreempts = medianOf(xs, func(x *Arrangement) float64 { return x.ServerPreempts })
	a.Model.ServerPreempts = medianOf(xs, func(x *Arrangement) float64 { return x.Model.ServerPreempts })
	a.WaitOK = true
	for _, x := range xs {
		a.WaitOK = a.WaitOK && x.WaitOK
	}
	a.Wait = medianDur(xs, func(x *Arrangement) time.Duration { return x.Wait })
	a.ServerWait = medianDur(xs, func(x *Arrangement) time.Duration { return x.ServerWait })
	a.Model.RunQueuePoolerUs = medianOf(xs, func(x *Arrangement) float64 { return x.Model.RunQueuePoolerUs })
	a.Model.RunQueueServerUs = medianOf(xs, func(x *Arrangement) float64 { return x.Model.RunQueueServerUs })
	// The busy CPUs' median, with the idle balancing fitted to the run's
	// loop nearest to it.
	a.Busy = medianOf(xs, func(x *Arrangement) float64 { return x.Busy })
	near := xs[0]
	for _, x := range xs[1:] {
		if math.Abs(x.Busy-a.Busy) < math.Abs(near.Busy-a.Busy) {
			near = x
		}
	}
	a.Balance, a.NoScan, a.balanceSet = near.Balance, near.NoScan, near.balanceSet
	a.Model.PoolerPreempts = medianOf(xs, func(x *Arrangement) float64 { return x.Model.PoolerPreempts })
	a.Model.TPS = medianOf(xs, func(x *Arrangement) float64 { return x.Model.TPS })
	a.Model.P50Ms = medianOf(xs, func(x *Arrangement) float64 { return x.Model.P50Ms })
	a.Model.P99Ms = medianOf(xs, func(x *Arrangement) float64 { return x.Model.P99Ms })
	a.Placement = nil
	var shares []float64
	samples := 0
	for _, x := range xs {
		if x.Placement != nil {
			shares = append(shares, x.Placement.Shared)
			samples += x.Placement.Samples
		}
	}
	if len(shares) > 0 {
		a.Placement = &Placement{Samples: samples, Shared: median(shares)}
	}
	a.Speed = nil
	return &a
}

// writeArrangements is the report's section on the pinned arrangements
// of its pool-1 rows through PgBouncer.
func (rep *Report) writeArrangements(p func(string, ...any)) {
	var rows []Row
	for _, r := range rep.Rows {
		if tb := r.Cal.Testbed; tb != nil && tb.Together != nil && tb.Apart != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("## Pool 1 through PgBouncer: the two arrangements\n\n")
	p("%s", "With one server, PgBouncer's thread and the backend share a core or run on two, and the kernel keeps one arrangement for most of a run; each has costs of its own. The calibration pins them with sched_setaffinity (both on core 0; then PgBouncer on core 0, the server on core 1), runs the three-second through loop in each and unpins them before the run. Each arrangement's model runs its own measured CPU per statement with the per-core scheduler pinned the same way, a thread woken onto an idle core waiting for it to wake, the longer the longer it idled (the testbed's wake-up curve above; where it could not be measured, a backend waits the pooler's wake-up, hop less a message's CPU). A run's calibrated model is the two weighted by the run's own share of placement samples with the server on PgBouncer's core (the runs column), each arrangement's costs scaled, process by process, to what the run's mix of the two cost in CPU per statement (read over the run); its model from the loops alone is the two unscaled. After the CPU, how often PgBouncer and its server were taken off their cores while they could run, per statement in the pinned loop (their involuntary context switches): apart, nearly all are pgbench's threads woken onto their cores running first (lab/bench/handover.sh), and the apart model takes those rates (validate.pooler_preempt, validate.server_preempt: a driver's thread woken by a result takes the core of the pooler or of a backend while it runs; the model's own counts in parentheses); together, most are the two taking turns on the core they share, one core's work in another order, which the model does not take. Then PgBouncer's and its server's waits for a core per statement in the loop (schedstat run delay), each with the arrangement model's pooler's or backend's wait in its core's queue. Medians over the row's runs; \"held\" is that share during the pinned loop (1 together, 0 apart: the pinning held), then how busy the machine's CPUs were in that loop and the arrangement model's idle balancing fitted to it, as the free model's is to the free loop's (the testbed's moves column): pinned, the kernel spreads pgbench's threads by the cores' load otherwise than free.\n\n")
	p("| row | together: statements/s measured (model) | PgBouncer / server / driver CPU; PgBouncer / server preempted; waits (model) | held | apart: statements/s measured (model) | PgBouncer / server / driver CPU; PgBouncer / server preempted (model); waits (model) | held | runs: TPS (share) → model |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		tb := r.Cal.Testbed
		cells := func(a *Arrangement) string {
			held := "—"
			if a.Placement != nil {
				held = fmt.Sprintf("%.2f", a.Placement.Shared)
			}
			if a.balanceSet {
				held += fmt.Sprintf("; CPUs %.0f %% busy, %s", 100*a.Busy, balanceText(a.Balance, a.NoScan))
			}
			pre := ""
			if a.PreemptsOK {
				pre = fmt.Sprintf("; %.2f / %.2f", a.Preempts, a.ServerPreempts)
				if a.Apart {
					pre = fmt.Sprintf("; %.2f (%.2f) / %.2f (%.2f)", a.Preempts, a.Model.PoolerPreempts, a.ServerPreempts, a.Model.ServerPreempts)
				}
			}
			if a.WaitOK {
				pre += fmt.Sprintf("; waits %s (%.1f µs) / %s (%.1f µs)", us(a.Wait), a.Model.RunQueuePoolerUs, us(a.ServerWait), a.Model.RunQueueServerUs)
			}
			return fmt.Sprintf("%.0f (%.0f) | %s / %s / %s%s | %s", a.TPS, a.Model.TPS, us(a.Pooler), us(a.Server), us(a.Driver), pre, held)
		}
		var runs []string
		for i, x := range r.Repeats {
			s := fmt.Sprintf("%.0f", x.TPS)
			if x.Placement != nil {
				s += fmt.Sprintf(" (%.0f %%)", 100*x.Placement.Shared)
			}
			if i < len(r.RepeatModels) {
				s += fmt.Sprintf(" → %.0f", r.RepeatModels[i].TPS)
			}
			runs = append(runs, s)
		}
		p("| %s | %s | %s | %s |\n", r.Title(), cells(tb.Together), cells(tb.Apart), strings.Join(runs, ", "))
	}
	p("\n")
}
