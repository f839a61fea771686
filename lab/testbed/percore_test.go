package testbed

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Tests of the per-core run queues (validate.scheduler: per_core).

func TestPerCoreColdIsMachineRepairman(t *testing.T) {
	// Threads that sleep a second between jobs are never cache hot: a
	// core out of work takes the other's queued job at once, no core
	// idles beside a queue, and exponential CPU on 4 cores is the
	// machine-repairman M/M/4//20 of TestFiniteSource - X = 15.82305173/s,
	// W = 263.9786776 ms - whichever way the cores are shared.
	for _, sch := range []Scheduler{Shared, PerCore} {
		cfg := repairman(20_000, sch)
		m := Run(cfg).Metrics
		within(t, sch.String()+": throughput (1/s)", m.TPS, 15.82305173, 0.02)
		within(t, sch.String()+": response time (ms)", m.MeanMs, 263.9786776, 0.02)
		checkConservation(t, m)
	}
}

// repairman is the machine-repairman M/M/4//20: 20 clients, each
// transaction 200 ms of exponential CPU on 4 cores after a second's
// exponential think, txns transactions each.
func repairman(txns int, sch Scheduler) rig {
	cfg := rig{Config: system.Default()}
	cfg.Workload = system.Workload{Clients: 20, TxnsPerSession: txns, StmtsPerTxn: 1,
		Query: sim.ConstDist(0), CPU: sim.ExpDist(200 * sim.Millisecond), Think: sim.ExpDist(sim.Second)}
	cfg.Pooler.PoolMode = poolmode.Direct
	cfg.Server.Cores = 4
	cfg.Server.MaxConnections = 30
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	cfg.Testbed.Scheduler = sch
	return cfg
}

// hub is pgbench -S through a transaction pooler on 2 shared cores, with
// this project's measured costs per statement: the pooler's thread (on
// the cores), the driver's two threads, the backends.
func hub(clients, pool int, sch Scheduler) rig {
	c := closed(poolmode.Transaction, clients, 600, 1, 0, 0)
	c.Workload.CPU = sim.ConstDist(22500)
	c.Workload.Think = sim.ConstDist(20 * sim.Microsecond)
	c.Pooler.DefaultPoolSize = pool
	c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign = 5400, 5400
	c.Pooler.Wakeup = 15 * sim.Microsecond
	c.Server.Cores = 2
	c.Server.MaxConnections = 48
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	c.Testbed = Machine{DriverCPU: sim.ConstDist(14300), PoolerOnCores: true, Background: 0.01,
		Scheduler: sch, DriverThreads: 2}
	return c
}

func TestPerCoreIdlesBesideHotQueues(t *testing.T) {
	// A pool of 8: every thread runs every few tens of microseconds, so
	// none may move to a core that runs out of work; the cores idle
	// while the other's queue waits - processor sharing never does.
	shared := Run(hub(200, 8, Shared)).Metrics
	per := Run(hub(200, 8, PerCore)).Metrics
	within(t, "shared: cpu_util", shared.CPUUtil, 1, 0.01)
	if per.CPUUtil > 0.97 || per.TPSSteady > 0.97*shared.TPSSteady {
		t.Errorf("per-core queues, pool 8: cpu_util %.3f, tps_steady %.0f vs shared %.0f: want the cores idle beside hot queues (util ≤ 0.97, tps 3 %% lower)",
			per.CPUUtil, per.TPSSteady, shared.TPSSteady)
	}
	// A pool of 32: each backend runs every ~0.8 ms, longer than the
	// migration cost, and a core out of work takes one: less idle.
	big := Run(hub(200, 32, PerCore)).Metrics
	if big.CPUUtil <= per.CPUUtil+0.02 {
		t.Errorf("per-core queues: cpu_util %.3f at pool 32, %.3f at pool 8: want the large pool's cold backends to fill idle cores", big.CPUUtil, per.CPUUtil)
	}
	checkConservation(t, per)
	checkConservation(t, big)
}

func TestPerCoreDeterministic(t *testing.T) {
	a, b := Run(hub(50, 4, PerCore)).Metrics, Run(hub(50, 4, PerCore)).Metrics
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs of one seed differ:\n%+v\n%+v", a, b)
	}
}

func TestDriverThreadsQueue(t *testing.T) {
	// One driver thread of 100 µs per statement and a server of 10 µs
	// on 4 cores: the thread is the bottleneck, 10,000 statements/s
	// whatever the clients; with every client its own, the 4 cores are.
	c := cpuBound(poolmode.Direct, 20, 500, 100*sim.Microsecond, 10*sim.Microsecond, 4)
	c.Testbed.DriverThreads = 1
	within(t, "1 driver thread: tps_steady", Run(c).Metrics.TPSSteady, 10_000, 0.01)
	c.Testbed.DriverThreads = 0
	within(t, "a driver per client: tps_steady", Run(c).Metrics.TPSSteady, 4/(110e-6), 0.01)
}

func TestPerCoreSlicesLongJobs(t *testing.T) {
	// One core; 0.5 % of the statements take 20 ms of CPU, the rest 20 µs.
	// Run to their ends, the long ones would hold the core while the
	// short ones queue behind them for up to 20 ms; sliced at
	// timeSlice, a short one waits a slice at most for each long one
	// ahead of it.
	c := closed(poolmode.Direct, 4, 2000, 1, 0, 0)
	samples := make([]sim.Time, 200)
	for i := range samples {
		samples[i] = 20 * sim.Microsecond
	}
	samples[0] = 20 * sim.Millisecond
	tab, err := sim.NewEmpiricalSamples(samples)
	if err != nil {
		t.Fatal(err)
	}
	c.Workload.CPU = sim.EmpiricalDist(tab)
	c.Workload.Think = sim.ConstDist(sim.Millisecond)
	c.Server.Cores = 1
	c.Server.MaxConnections = 10
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	c.Testbed.Scheduler = PerCore
	sliced := Run(c).Metrics
	old := timeSlice
	timeSlice = 3600 * sim.Second
	whole := Run(c).Metrics
	timeSlice = old
	t.Logf("p50: sliced %.3f ms, run to their ends %.3f ms; mean %.3f, %.3f; p99 %.3f, %.3f", sliced.P50Ms, whole.P50Ms, sliced.MeanMs, whole.MeanMs, sliced.P99Ms, whole.P99Ms)
	// The p99 is a short statement's (the long ones are 0.5 %).
	if lim := 2 * timeSlice.Seconds() * 1e3; sliced.P99Ms > lim {
		t.Errorf("sliced: p99 %.3f ms: want a short statement to wait no more than two slices (%.2f ms)", sliced.P99Ms, lim)
	}
	if whole.P99Ms < 3*sliced.P99Ms {
		t.Errorf("run to their ends: p99 %.3f ms, sliced %.3f ms: want the long jobs to hold the core without slices", whole.P99Ms, sliced.P99Ms)
	}
	checkConservation(t, sliced)
}

// TestPerCoreAffinity: pinned as taskset pins them, the pooler's thread
// and the backends run only on their cores. Together on one core their
// CPU per transaction bounds the throughput, which free placement
// exceeds; apart, a pool's backends share the other core alone.
func TestPerCoreAffinity(t *testing.T) {
	run := func(c rig, a Affinity) metrics {
		c.Testbed.Affinity = a
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return Run(c).Metrics
	}
	// Pool 1: the pooler's thread (3 × 5.4 µs per transaction) and the
	// backend (22.5 µs) on core 0 make at most 1/38.7 µs.
	c := hub(50, 1, PerCore)
	bound := 1 / 38.7e-6
	free, together := run(c, Free), run(c, Together)
	if together.TPSSteady > 1.01*bound {
		t.Errorf("together: %.0f/s, above the one core's %.0f/s", together.TPSSteady, bound)
	}
	if free.TPSSteady < 1.05*bound {
		t.Errorf("free: %.0f/s, want above one core's %.0f/s (the test shows nothing otherwise)", free.TPSSteady, bound)
	}
	// Pool 2 of backends at 100 µs a statement: apart they share core 1
	// (at most 10,000/s), free they spread over both.
	c = hub(50, 2, PerCore)
	c.Workload.CPU = sim.ConstDist(100 * sim.Microsecond)
	free, apart := run(c, Free), run(c, Apart)
	if apart.TPSSteady > 1.01*10_000 {
		t.Errorf("apart, pool 2: %.0f/s, above core 1's 10,000/s", apart.TPSSteady)
	}
	if free.TPSSteady < 1.3*10_000 {
		t.Errorf("free, pool 2: %.0f/s, want the two backends on both cores (above 13,000/s)", free.TPSSteady)
	}
	// Deterministic, and the assumptions say it.
	if !reflect.DeepEqual(run(c, Apart), apart) {
		t.Error("apart: two runs differ")
	}
	c.Testbed.Affinity = Apart
	if a := c.Testbed.Describe(c.cfg()); !strings.Contains(a, "the pooler's thread pinned to core 0 and the backends to the others") {
		t.Errorf("assumptions %q do not say the pinning", a)
	}
}

func TestPerCoreBackendWakeup(t *testing.T) {
	run := func(a Affinity, w sim.Time) metrics {
		c := hub(50, 1, PerCore)
		c.Testbed.Affinity, c.Testbed.Wakeup = a, w
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return Run(c).Metrics
	}
	const w = 20 * sim.Microsecond
	// Together the backend wakes on its waker's core: no core to wake.
	if a, b := run(Together, 0), run(Together, w); a.TPSSteady != b.TPSSteady {
		t.Errorf("together: %.0f/s without the wake-up, %.0f/s with: want the same (the backend wakes on the pooler's core)", a.TPSSteady, b.TPSSteady)
	}
	// Apart every statement's backend wakes on core 1, idle unless a
	// driver's thread runs there: the cycle grows by about the wake-up.
	a, b := run(Apart, 0), run(Apart, w)
	grew := 1e9/b.TPSSteady - 1e9/a.TPSSteady // ns per transaction
	if grew < 0.5*float64(w) || grew > 2.5*float64(w) {
		t.Errorf("apart: %.0f/s without the wake-up, %.0f/s with: the cycle grew %.1f µs, want about the wake-up's %v", a.TPSSteady, b.TPSSteady, grew/1e3, w.Duration())
	}
	// A waking core idles, as /proc/stat counts it: the cores' busy time
	// per transaction is the same with the wake-up as without.
	busy := func(m metrics) float64 { return m.CPUUtil / m.TPS }
	if ra, rb := busy(a), busy(b); math.Abs(rb/ra-1) > 0.01 {
		t.Errorf("apart: the cores busy %.1f µs per transaction without the wake-up, %.1f µs with: want the same (a waking core is idle)", 2e6*ra, 2e6*rb)
	}
	c := hub(50, 1, Shared)
	c.Testbed.Wakeup = w
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "validate.wakeup") {
		t.Errorf("validate.wakeup with processor sharing: %v, want an error naming validate.wakeup", err)
	}
}

func TestWakeAt(t *testing.T) {
	c := []WakePoint{{40 * sim.Microsecond, 15 * sim.Microsecond}, {100 * sim.Microsecond, 45 * sim.Microsecond}}
	for _, x := range []struct{ idle, want sim.Time }{
		{0, 15 * sim.Microsecond}, {40 * sim.Microsecond, 15 * sim.Microsecond}, {70 * sim.Microsecond, 30 * sim.Microsecond},
		{100 * sim.Microsecond, 45 * sim.Microsecond}, {sim.Second, 45 * sim.Microsecond},
	} {
		if got := wakeAt(c, x.idle); got != x.want {
			t.Errorf("wakeAt(%v) = %v, want %v", x.idle, got, x.want)
		}
	}
}

func TestPerCoreWakeCurve(t *testing.T) {
	run := func(c rig) float64 {
		c.Testbed.Affinity = Apart
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return Run(c).Metrics.TPSSteady
	}
	base := hub(50, 1, PerCore)
	// A curve of zeros replaces pooler.wakeup: the same as no wake-ups.
	none := base
	none.Pooler.Wakeup = 0
	zero := base
	zero.Testbed.WakeCurve = []WakePoint{{0, 0}}
	if a, b := run(none), run(zero); a != b {
		t.Errorf("a zero curve: %.0f/s, no wake-ups: %.0f/s: want the same (the curve replaces pooler.wakeup)", b, a)
	}
	// Apart at pool 1 each core idles tens of µs between hand-offs: a
	// curve cheap after short idles costs little, one flat at its far
	// end a lot.
	short := base
	short.Testbed.WakeCurve = []WakePoint{{10 * sim.Microsecond, 5 * sim.Microsecond}, {sim.Millisecond, 60 * sim.Microsecond}}
	flat := base
	flat.Testbed.WakeCurve = []WakePoint{{0, 60 * sim.Microsecond}}
	n, s, f := run(none), run(short), run(flat)
	if !(n > s && s > 1.2*f) {
		t.Errorf("apart: %.0f/s without wake-ups, %.0f/s with a wake-up rising from 5 µs, %.0f/s at 60 µs flat: want each slower, the flat one by far", n, s, f)
	}
}

func TestPerCoreNoIdleBalance(t *testing.T) {
	// The machine-repairman of TestPerCoreColdIsMachineRepairman with
	// every thread cold: a woken thread finds an idle core if there is
	// one, but a job queued behind another while a core was busy waits
	// there when a core frees up, unless that core takes it. Without the
	// balancing: slower (1.7 % at these parameters), and deterministic.
	cfg := repairman(2_000, PerCore)
	with := Run(cfg).Metrics
	cfg.Testbed.NoIdleBalance = true
	without := Run(cfg).Metrics
	if !(without.TPS < 0.99*with.TPS) || !(without.CPUUtil < with.CPUUtil) {
		t.Errorf("without the idle balancing: %.2f/s, cpu_util %.3f; with it %.2f/s, %.3f: want fewer transactions and idler cores", without.TPS, without.CPUUtil, with.TPS, with.CPUUtil)
	}
	if again := Run(cfg).Metrics; !reflect.DeepEqual(again, without) {
		t.Error("two runs without the idle balancing differ")
	}
	// At most one take a second: between the two.
	cfg.Testbed.NoIdleBalance, cfg.Testbed.IdleBalanceEvery = false, sim.Second
	some := Run(cfg).Metrics
	if some.TPS < 0.995*without.TPS || some.TPS > 1.005*with.TPS || reflect.DeepEqual(some, without) || reflect.DeepEqual(some, with) {
		t.Errorf("a take a second at most: %.2f/s, between %.2f (never) and %.2f (at every chance) expected, and neither", some.TPS, without.TPS, with.TPS)
	}
	checkConservation(t, without)
	// pgbench through a pool of 8: the model's own steals of the backends
	// gone, the cores idle longer beside the queues.
	h := hub(200, 8, PerCore)
	per := Run(h).Metrics
	h.Testbed.NoIdleBalance = true
	stay := Run(h).Metrics
	if !(stay.CPUUtil < per.CPUUtil) {
		t.Errorf("pool 8 without the idle balancing: cpu_util %.3f, with it %.3f: want idler cores", stay.CPUUtil, per.CPUUtil)
	}
}

func TestPerCoreNoIdleScan(t *testing.T) {
	// pgbench through a pool of 2 on 2 cores: a thread the pooler wakes
	// while its own last core is busy finds the other core idle if it
	// looks; without the look (validate.idle_scan false) it queues on the
	// waker's or its own last core, and the other core idles beside it:
	// idler cores, fewer transactions, and the same run twice.
	h := hub(50, 2, PerCore)
	scan := Run(h).Metrics
	h.Testbed.NoIdleScan = true
	stay := Run(h).Metrics
	if !(stay.CPUUtil < scan.CPUUtil-0.01) || !(stay.TPSSteady < scan.TPSSteady) {
		t.Errorf("pool 2 without the idle-core scan: cpu_util %.3f, tps_steady %.0f; with it %.3f, %.0f: want idler cores and fewer transactions",
			stay.CPUUtil, stay.TPSSteady, scan.CPUUtil, scan.TPSSteady)
	}
	if again := Run(h).Metrics; !reflect.DeepEqual(again, stay) {
		t.Error("two runs without the idle-core scan differ")
	}
	checkConservation(t, stay)
	// Cold threads (the machine-repairman, a second's think between
	// jobs): a woken thread's last core is idle most of the time, and
	// where it is not the other core takes the queued job at once (idle
	// balancing: the thread is cold) - the scan changes little.
	cfg := repairman(2_000, PerCore)
	with := Run(cfg).Metrics
	cfg.Testbed.NoIdleScan = true
	without := Run(cfg).Metrics
	within(t, "cold threads without the scan: throughput (1/s)", without.TPS, with.TPS, 0.02)
}

func TestPerCoreBackendIsTheServer(t *testing.T) {
	// Through a pooler a statement runs on its server's backend, whichever
	// client sent it: the scheduler sees one thread per server (one last
	// core, one cache-hot clock), not one per client; a direct
	// connection is its own backend. (The model hands each statement's
	// server over: models/system's TestMachineJobsNameTheServer.)
	v := &perCore{drvThreads: 2}
	a := v.entity(job{conn: 7, srv: 0, kind: kStatement})
	if b := v.entity(job{conn: 12, srv: 0, kind: kStatement}); a != b {
		t.Errorf("two clients' statements on server 0: entities %x and %x, want one", a, b)
	}
	if b := v.entity(job{conn: 7, srv: 1, kind: kStatement}); a == b {
		t.Errorf("statements on servers 0 and 1: one entity %x, want two", a)
	}
	if d, e := v.entity(job{conn: 7, srv: -1, kind: kStatement}), v.entity(job{conn: 8, srv: -1, kind: kStatement}); d == e || d>>32 != 0 {
		t.Errorf("direct connections 7 and 8: entities %x and %x, want each its own backend", d, e)
	}
	if d, e := v.entity(job{conn: 1, kind: kDriver}), v.entity(job{conn: 3, kind: kDriver}); d != e {
		t.Errorf("clients 1 and 3 on 2 driver threads: entities %x and %x, want thread 1's", d, e)
	}
}

// runConserved validates c, runs it and checks the run's conservation laws.
func runConserved(t *testing.T, c rig) metrics {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := Run(c).Metrics
	checkConservation(t, m)
	return m
}

// cycle is a run's steady time per transaction, in nanoseconds.
func cycle(m metrics) float64 { return 1e9 / m.TPSSteady }

func TestPerCoreServerTail(t *testing.T) {
	const share = 0.3
	// Pinned together the pooler's thread waits for the tail on the one
	// core: the same work in the same order, the same throughput.
	c := hub(50, 1, PerCore)
	c.Testbed.Affinity = Together
	a := runConserved(t, c)
	c.Testbed.ServerTail = share
	b := runConserved(t, c)
	if math.Abs(b.TPSSteady/a.TPSSteady-1) > 0.01 {
		t.Errorf("together: %.0f/s without the tail, %.0f/s with: want the same (one core does it all)", a.TPSSteady, b.TPSSteady)
	}
	// Apart, with the backend the bottleneck (60 µs a statement), the
	// pooler wakes, relays the response and hands the server on while
	// the backend runs its tail on core 1: the cycle shrinks by the
	// tail (18 µs), as the pooler's part of it (its 15 µs wake-up, a
	// response and an assignment) outlasts the tail.
	c = hub(50, 1, PerCore)
	c.Workload.CPU = sim.ConstDist(60 * sim.Microsecond)
	c.Testbed.Affinity = Apart
	a = runConserved(t, c)
	c.Testbed.ServerTail = share
	b = runConserved(t, c)
	tail := share * 60e3 // ns
	if d := cycle(a) - cycle(b); d < 0.9*tail || d > 1.1*tail {
		t.Errorf("apart: %.0f/s without the tail, %.0f/s with: the cycle shrank %.2f µs, want about the tail's %.2f", a.TPSSteady, b.TPSSteady, d/1e3, tail/1e3)
	}
	if !reflect.DeepEqual(runConserved(t, c), b) {
		t.Error("apart with a tail: two runs differ")
	}
	// A tail longer than the pooler's part: the next statement reaches
	// the backend still on its core and runs straight after the tail,
	// with no wake-up - the backend never sleeps, and a core's wake-up
	// (validate.wakeup) costs nothing; the backend's 100 µs a statement
	// bound the throughput at 10,000/s.
	c = hub(50, 1, PerCore)
	c.Workload.CPU = sim.ConstDist(100 * sim.Microsecond)
	c.Testbed.Affinity, c.Testbed.ServerTail = Apart, 0.5
	a = runConserved(t, c)
	c.Testbed.Wakeup = 20 * sim.Microsecond
	b = runConserved(t, c)
	if a.TPSSteady > 10_000*1.01 || a.TPSSteady < 10_000*0.97 {
		t.Errorf("apart, 100 µs statements, half a tail: %.0f/s, want the backend's 10,000/s", a.TPSSteady)
	}
	if math.Abs(b.TPSSteady/a.TPSSteady-1) > 0.01 {
		t.Errorf("apart, half a tail: %.0f/s without a core's wake-up, %.0f/s with 20 µs: want the same (the backend never sleeps)", a.TPSSteady, b.TPSSteady)
	}
	// The client's statement is the part before the tail: its latency
	// parts still add up, and the assumptions say it.
	c.Testbed.ServerTail = share
	if d := c.Testbed.Describe(c.cfg()); !strings.Contains(d, "sending its response with 30 % of its CPU still to run") {
		t.Errorf("assumptions %q do not say the tail", d)
	}
	for _, tc := range []struct {
		tail float64
		sch  Scheduler
		want string
	}{
		{0.6, PerCore, "want 0 to 0.5"},
		{-0.1, PerCore, "want 0 to 0.5"},
		{math.NaN(), PerCore, "want 0 to 0.5"},
		{0.2, Shared, "needs validate.scheduler per_core"},
	} {
		c := hub(50, 1, tc.sch)
		c.Testbed.ServerTail = tc.tail
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "validate.server_tail") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("server_tail %v with %v: %v, want an error naming validate.server_tail and %q", tc.tail, tc.sch, err, tc.want)
		}
	}
}

// TestPerCorePoolerPreempt: validate.pooler_preempt has a driver's thread
// woken by a result take the pooler's core at the measured rate, and the
// pooler's hand-over of the one server waits behind it.
func TestPerCorePoolerPreempt(t *testing.T) {
	// As poolsim validate's calibrated model of pgbench: no hop, and a
	// driver thread that reads results (validate.driver_scan), so a result
	// wakes its driver's thread as the pooler relays it, while it has more
	// to do (the assignment that follows the relay).
	c := hub(50, 1, PerCore)
	c.Workload.CPU = sim.ConstDist(60 * sim.Microsecond)
	c.Testbed.Affinity = Apart
	c.Pooler.Hop = 0
	c.Testbed.DriverScan = true
	a := runConserved(t, c)
	if a.PoolerPreempts != 0 {
		t.Errorf("no pooler_preempt: the model preempted the pooler %.3f times a statement, want 0", a.PoolerPreempts)
	}
	for _, rate := range []float64{0.1, 0.3, 0.6} {
		c.Testbed.PoolerPreempt = rate
		b := runConserved(t, c)
		if math.Abs(b.PoolerPreempts/rate-1) > 0.05 {
			t.Errorf("pooler_preempt %v: the model preempted the pooler %.3f times a statement, want the rate within 5 %%", rate, b.PoolerPreempts)
		}
		// Each preemption holds the pooler for at most a driver's job
		// (14.3 µs); with one server the cycle grows by some of that.
		d := cycle(b) - cycle(a)
		if d <= 0 || d > rate*14300*1.05 {
			t.Errorf("pooler_preempt %v: %.0f/s without, %.0f/s with: the cycle grew %.2f µs, want above 0 and at most the driver's %.2f µs a statement",
				rate, a.TPSSteady, b.TPSSteady, d/1e3, rate*14.3)
		}
		t.Logf("pooler_preempt %v: %.0f/s → %.0f/s, cycle +%.2f µs, %.3f preemptions a statement, pooler's wait %.2f µs", rate, a.TPSSteady, b.TPSSteady, d/1e3, b.PoolerPreempts, b.RunQueuePoolerUs)
		if !reflect.DeepEqual(runConserved(t, c), b) {
			t.Errorf("pooler_preempt %v: two runs differ", rate)
		}
	}
	if d := c.Testbed.Describe(c.cfg()); !strings.Contains(d, "taking the pooler's core from it 0.6 times a pooled statement") {
		t.Errorf("assumptions %q do not say the preemption", d)
	}
	// A backend's core taken by a driver's thread: the statement, the
	// bottleneck here, waits behind a driver's job every time - the cycle
	// grows by up to the driver's job a preemption, and the backend's
	// wait in its core's queue with it.
	c.Testbed.PoolerPreempt = 0
	for _, rate := range []float64{0.2, 0.5} {
		c.Testbed.ServerPreempt = rate
		b := runConserved(t, c)
		if math.Abs(b.ServerPreempts/rate-1) > 0.05 || b.PoolerPreempts != 0 {
			t.Errorf("server_preempt %v: the model preempted a backend %.3f and the pooler %.3f times a statement, want the rate and 0", rate, b.ServerPreempts, b.PoolerPreempts)
		}
		d := cycle(b) - cycle(a)
		if d <= 0 || d > rate*14300*1.05 || b.RunQueueServerUs <= a.RunQueueServerUs {
			t.Errorf("server_preempt %v: %.0f/s without, %.0f/s with, backend's wait %.2f → %.2f µs: the cycle grew %.2f µs, want above 0 and at most the driver's %.2f µs a statement, and a longer wait",
				rate, a.TPSSteady, b.TPSSteady, a.RunQueueServerUs, b.RunQueueServerUs, d/1e3, rate*14.3)
		}
		t.Logf("server_preempt %v: %.0f/s → %.0f/s, cycle +%.2f µs, %.3f preemptions a statement, backend's wait %.2f → %.2f µs", rate, a.TPSSteady, b.TPSSteady, d/1e3, b.ServerPreempts, a.RunQueueServerUs, b.RunQueueServerUs)
	}
	if d := c.Testbed.Describe(c.cfg()); !strings.Contains(d, "taking a backend's core from it 0.5 times a pooled statement") {
		t.Errorf("assumptions %q do not say the backend's preemption", d)
	}
	for _, tc := range []struct {
		rate float64
		sch  Scheduler
		want string
	}{
		{4.5, PerCore, "want 0 to 4"},
		{math.NaN(), PerCore, "want 0 to 4"},
		{0.2, Shared, "needs validate.scheduler per_core"},
	} {
		c := hub(50, 1, tc.sch)
		c.Testbed.ServerPreempt = tc.rate
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "validate.server_preempt") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("server_preempt %v with %v: %v, want an error naming validate.server_preempt and %q", tc.rate, tc.sch, err, tc.want)
		}
	}
	for _, tc := range []struct {
		rate   float64
		sch    Scheduler
		onCore bool
		want   string
	}{
		{5, PerCore, true, "want 0 to 4"},
		{-0.1, PerCore, true, "want 0 to 4"},
		{math.NaN(), PerCore, true, "want 0 to 4"},
		{0.2, Shared, true, "needs validate.scheduler per_core"},
		{0.2, PerCore, false, "validate.pooler_on_cores"},
	} {
		c := hub(50, 1, tc.sch)
		c.Testbed.PoolerPreempt, c.Testbed.PoolerOnCores = tc.rate, tc.onCore
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "validate.pooler_preempt") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pooler_preempt %v with %v, on cores %v: %v, want an error naming validate.pooler_preempt and %q", tc.rate, tc.sch, tc.onCore, err, tc.want)
		}
	}
}
