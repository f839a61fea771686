package testbed

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Tests of the testbed: the load driver's and the pooler's CPU on the
// server's cores, a background, and the pooler's cost per assignment.

// cpuBound is n closed clients with no think, hop or fixed query time:
// each statement is the driver's d then the server's s of CPU on cores.
func cpuBound(mode poolmode.Mode, n, txns int, d, s sim.Time, cores int) rig {
	c := closed(mode, n, txns, 1, 0, 0)
	c.Workload.CPU = sim.ConstDist(s)
	c.Testbed.DriverCPU = sim.ConstDist(d)
	c.Server.Cores = cores
	c.Server.MaxConnections = n + 10
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	c.Pooler.DefaultPoolSize = n
	return c
}

func TestTestbedDriverSharesTheCores(t *testing.T) {
	const d, s = 500 * sim.Microsecond, sim.Millisecond
	// One client: its driver and its statement never overlap, each has a
	// core to itself - throughput exactly 1/(d+s).
	one := Run(cpuBound(poolmode.Direct, 1, 2000, d, s, 2)).Metrics
	within(t, "1 client, tps", one.TPS, 1/(d+s).Seconds(), 1e-9)
	// Many clients: the cores are always busy, each transaction needs
	// d+s of them - cores/(d+s).
	many := Run(cpuBound(poolmode.Direct, 60, 300, d, s, 2)).Metrics
	within(t, "60 clients, tps_steady", many.TPSSteady, 2/(d+s).Seconds(), 0.01)
	within(t, "60 clients, cpu_util", many.CPUUtil, 1, 0.01)
	// A background of half a core leaves 1.5 to the test.
	c := cpuBound(poolmode.Direct, 60, 300, d, s, 2)
	c.Testbed.Background = 0.5
	bg := Run(c).Metrics
	within(t, "60 clients, background 0.5, tps_steady", bg.TPSSteady, 1.5/(d+s).Seconds(), 0.01)
	within(t, "60 clients, background 0.5, cpu_util (background included)", bg.CPUUtil, 1, 0.01)
	// The same through a transaction pooler with no cost of its own.
	tx := Run(cpuBound(poolmode.Transaction, 60, 300, d, s, 2)).Metrics
	within(t, "transaction pooler, 60 clients, tps_steady", tx.TPSSteady, 2/(d+s).Seconds(), 0.01)
}

func TestTestbedPoolerOnCores(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d, s, p sim.Time
	}{
		{"cores bound", 500 * sim.Microsecond, sim.Millisecond, 100 * sim.Microsecond},
		{"thread bound", 20 * sim.Microsecond, 20 * sim.Microsecond, 400 * sim.Microsecond},
	} {
		c := cpuBound(poolmode.Transaction, 60, 300, tc.d, tc.s, 2)
		c.Pooler.CPUPerMsg = tc.p
		c.Testbed.PoolerOnCores = true
		m := Run(c).Metrics
		// Each statement is two messages on the single thread.
		want := min(2/(tc.d+tc.s+2*tc.p).Seconds(), 1/(2*tc.p).Seconds())
		within(t, tc.name+", tps_steady", m.TPSSteady, want, 0.02)
		// The same thread on a CPU of its own is not slowed by the
		// cores, nor does it slow them.
		c.Testbed.PoolerOnCores = false
		own := Run(c).Metrics
		wantOwn := min(2/(tc.d+tc.s).Seconds(), 1/(2*tc.p).Seconds())
		within(t, tc.name+", pooler on its own CPU, tps_steady", own.TPSSteady, wantOwn, 0.02)
	}
}

func TestTestbedUSLSlowsOnlyBackends(t *testing.T) {
	// Only the driver uses the cores: contention and coherency, which
	// are PostgreSQL's, must not slow it.
	c := cpuBound(poolmode.Direct, 40, 200, sim.Millisecond, 0, 2)
	base := Run(c).Metrics
	c.Server.Contention, c.Server.Coherency = 0.2, 0.01
	usl := Run(c).Metrics
	if usl.TPS != base.TPS || usl.MeanMs != base.MeanMs {
		t.Errorf("σ 0.2, κ 0.01 with driver jobs only: %.6g tps, %.6g ms mean; without them %.6g tps, %.6g ms", usl.TPS, usl.MeanMs, base.TPS, base.MeanMs)
	}
	within(t, "driver only, tps_steady", usl.TPSSteady, 2/sim.Millisecond.Seconds(), 0.01)
	// The backends are still slowed: 40 statements of 1 ms on 64 cores
	// (never short of a core) with the driver's 1 ms each too.
	c = cpuBound(poolmode.Direct, 40, 200, sim.Millisecond, sim.Millisecond, 64)
	plain := Run(c).Metrics
	c.Server.Contention = 0.2
	slowed := Run(c).Metrics
	if !(slowed.TPS < 0.8*plain.TPS) {
		t.Errorf("σ 0.2 on the backends: %.6g tps against %.6g without: want it well below", slowed.TPS, plain.TPS)
	}
}

// TestPoolerOnCoresCPUPerAssign: the pooler's thread alone on the cores
// (one client, nothing else there) takes the time it takes on a CPU of
// its own, which models/system's TestPoolerCPUPerAssign holds to the hand
// count: in statement mode (an assignment every statement) and in
// transaction mode, a message waking the thread, an assignment following
// the message that led to it without sleeping.
func TestPoolerOnCoresCPUPerAssign(t *testing.T) {
	for _, mode := range []poolmode.Mode{poolmode.Statement, poolmode.Transaction} {
		c := closed(mode, 1, 500, 6, 100*sim.Microsecond, 0)
		c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign, c.Pooler.Wakeup = 10*sim.Microsecond, 5*sim.Microsecond, 7*sim.Microsecond
		own := system.Run(c.Config).Metrics
		c.Server.Cores = 2
		c.Testbed.PoolerOnCores = true
		on := Run(c).Metrics
		if on.Assignments != own.Assignments || on.Assignments == 0 {
			t.Errorf("%v: %d assignments on the cores, %d on a CPU of its own", mode, on.Assignments, own.Assignments)
		}
		within(t, mode.String()+", thread on the cores: tps", on.TPS, own.TPS, 1e-9)
		within(t, mode.String()+", thread on the cores: the thread's utilisation", on.PoolerCPUMean, own.PoolerCPUMean, 1e-9)
	}
}

func TestTestbedMM1PS(t *testing.T) {
	// The driver's jobs alone on one core: Poisson arrivals of
	// exponential work make M/M/1-PS, mean response E[S]/(1−ρ) = 20 ms at
	// λ = 50/s, E[S] = 10 ms.
	c := openPool(50, 200, sim.ConstDist(0), 4000*sim.Second)
	c.Testbed.DriverCPU = sim.ExpDist(10 * sim.Millisecond)
	c.Server.Cores = 1
	c.Server.MaxConnections = 200
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	m := Run(c).Metrics
	within(t, "M/M/1-PS mean response (ms)", m.MeanMs, 20, 0.03)
	within(t, "CPU utilisation", m.CPUUtil, 0.5, 0.02)
	if m.CPUJobsL != 0 {
		t.Errorf("cpu_jobs_L %.6g: the driver's jobs are not statements", m.CPUJobsL)
	}
}

func TestTestbedPartsAddUp(t *testing.T) {
	for _, app := range []system.AppPoolMode{system.NoAppPool, system.QueuePool} {
		for i, mode := range poolmode.Modes {
			c := closed(mode, 40, 4, 3, 0, 0)
			c.Workload.Query = sim.ExpDist(200 * sim.Microsecond)
			c.Workload.CPU = sim.ExpDist(300 * sim.Microsecond)
			c.Workload.Think = sim.ExpDist(500 * sim.Microsecond)
			c.Pooler.Hop = 30 * sim.Microsecond
			c.Pooler.DefaultPoolSize = 6
			c.Server.Cores = 2
			c.Server.Contention = 0.03
			c.Server.MaxConnections = 30
			c.Server.SuperuserReserved = 0 // every slot serves the clients
			c.Server.Connect = sim.ExpDist(2 * sim.Millisecond)
			c.AppPool = system.AppPool{Mode: app, Size: 8, MaxOverflow: 2, Timeout: 5 * sim.Millisecond}
			c.Pooler.Processes = 2
			c.Pooler.CPUPerMsg = 5 * sim.Microsecond
			c.Pooler.CPUPerAssign = 3 * sim.Microsecond
			c.Pooler.Wakeup = 20 * sim.Microsecond
			c.Testbed = Machine{DriverCPU: sim.ExpDist(100 * sim.Microsecond), PoolerOnCores: true, Background: 0.3}
			if i%2 == 1 { // pgbench's threads
				c.Testbed.DriverThreads, c.Testbed.DriverScan = 2, true
			}
			mt := Run(c).Metrics
			checkConservation(t, mt)
			if mt.OKTxns == 0 {
				t.Errorf("app pool %v, %v: no transaction completed", app, mode)
			}
			if again := Run(c); !reflect.DeepEqual(again.Metrics, mt) {
				t.Errorf("app pool %v, %v: two runs differ", app, mode)
			}
		}
	}
}

func TestTestbedZeroChangesNothing(t *testing.T) {
	c := closed(poolmode.Transaction, 30, 20, 3, 100*sim.Microsecond, 200*sim.Microsecond)
	c.Workload.CPU = sim.ExpDist(300 * sim.Microsecond)
	c.Server.Cores = 2
	c.Server.Contention = 0.05
	c.Pooler.CPUPerMsg = 5 * sim.Microsecond
	c.Pooler.Wakeup = 10 * sim.Microsecond
	want := system.Run(c.Config)                     // no machine at all
	c.Testbed = Machine{DriverCPU: sim.ConstDist(0)} // a zero driver is no testbed
	if got := system.Run(c.cfg()); !reflect.DeepEqual(got, want) {
		t.Errorf("a zero testbed changed the result:\n%+v\nwant\n%+v", got.Metrics, want.Metrics)
	}
}

func TestTestbedValidation(t *testing.T) {
	for _, tc := range []struct {
		tb    Machine
		cores int
		want  string
	}{
		{Machine{Background: 2.5}, 2, "validate.background: 2.5 is not below server.cores 2"},
		{Machine{Background: 2}, 2, "validate.background: 2 is not below server.cores 2"},
		{Machine{Background: -1}, 2, "validate.background must be a number of cores, 0 or more"},
		{Machine{DriverCPU: sim.ConstDist(sim.Millisecond)}, 0, "set server.cores above 0"},
		{Machine{PoolerOnCores: true}, 0, "set server.cores above 0"},
		{Machine{Background: 0.5}, 0, "set server.cores above 0"},
		{Machine{Scheduler: PerCore}, 0, "set server.cores above 0"},
		{Machine{DriverCPU: sim.ConstDist(sim.Millisecond), DriverThreads: -1}, 2, "validate.driver_threads must be 0"},
		{Machine{DriverThreads: 2}, 2, "validate.driver_threads is set without validate.driver_cpu"},
		{Machine{DriverCPU: sim.ConstDist(sim.Millisecond), DriverScan: true}, 2, "validate.driver_scan is set without validate.driver_threads"},
		{Machine{Affinity: Together, PoolerOnCores: true}, 2, "validate.affinity together pins the pooler's thread and the backends to cores: it needs validate.scheduler per_core"},
		{Machine{Affinity: Apart, Scheduler: PerCore}, 2, "it needs validate.scheduler per_core and validate.pooler_on_cores true"},
		{Machine{Affinity: Apart, Scheduler: PerCore, PoolerOnCores: true}, 1, "validate.affinity apart puts the backends on other cores than the pooler's: it needs server.cores 2 or more, got 1"},
	} {
		c := rig{Config: system.Default()}
		c.Server.Cores = tc.cores
		c.Testbed = tc.tb
		err := c.Validate()
		if err == nil || !errors.Is(err, system.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v on %d cores: %v, want an error with %q", tc.tb, tc.cores, err, tc.want)
		}
	}
	c := rig{Config: system.Default()}
	c.Pooler.CPUPerAssign = -1
	if err := c.Validate(); err == nil {
		t.Error("a negative pooler.cpu_per_assign passed")
	}
	c = rig{Config: system.Default()}
	c.Server.Cores = 2
	c.Testbed = Machine{DriverCPU: sim.ConstDist(sim.Millisecond), PoolerOnCores: true, Background: 1.5}
	if err := c.Validate(); err != nil {
		t.Errorf("a testbed on 2 cores with 1.5 busy: %v", err)
	}
}

func TestTestbedSpeed(t *testing.T) {
	const d, s = 200 * sim.Microsecond, 800 * sim.Microsecond
	base := cpuBound(poolmode.Transaction, 40, 300, d, s, 2)
	plain := Run(base).Metrics
	// A speed of 1 in every window is the cores as they were: only the
	// plans made again at each window's end differ, by rounding.
	one := base
	one.Testbed.Speed, one.Testbed.SpeedPeriod = []float64{1}, 7*sim.Millisecond
	same := Run(one).Metrics
	within(t, "speed 1, tps_steady", same.TPSSteady, plain.TPSSteady, 1e-6)
	within(t, "speed 1, p99", same.P99Ms, plain.P99Ms, 1e-6)
	// Cores at half their speed carry half the load.
	half := base
	half.Testbed.Speed, half.Testbed.SpeedPeriod = []float64{0.5}, 5*sim.Millisecond
	within(t, "speed 0.5, tps_steady", Run(half).Metrics.TPSSteady, plain.TPSSteady/2, 0.01)
	// Stretches of three windows at 0.6 and three at 1.4 (mean 1), played
	// in order, keep about the throughput of the mean of their rates and
	// spread the latencies: the slow stretch's transactions take longer,
	// every connection at once.
	vary := base
	vary.Testbed.Speed, vary.Testbed.SpeedPeriod = []float64{0.6, 0.6, 0.6, 1.4, 1.4, 1.4}, 20*sim.Millisecond
	v := Run(vary).Metrics
	within(t, "speed 0.6³|1.4³, tps_steady", v.TPSSteady, plain.TPSSteady, 0.05)
	if r := v.P99Ms / plain.P99Ms; r < 1.3 {
		t.Errorf("speed 0.6³|1.4³: p99 %.3f ms is %.2f× the constant speed's %.3f ms, want the slow stretches' tail (≥ 1.3×)", v.P99Ms, r, plain.P99Ms)
	}
	// The factors keep their order: the same six alternating, each
	// shorter than a transaction, average out in it.
	alt := base
	alt.Testbed.Speed, alt.Testbed.SpeedPeriod = []float64{0.6, 1.4, 0.6, 1.4, 0.6, 1.4}, 20*sim.Millisecond
	if a := Run(alt).Metrics; a.P99Ms >= v.P99Ms {
		t.Errorf("speed alternating 0.6|1.4: p99 %.3f ms, want below the stretches' %.3f ms", a.P99Ms, v.P99Ms)
	}
	// The same seed draws the same windows.
	if again := Run(vary).Metrics; !reflect.DeepEqual(again, v) {
		t.Error("speed 0.6³|1.4³: two runs of one seed differ")
	}
}

func TestTestbedSpeedInvalid(t *testing.T) {
	for _, tc := range []struct {
		speed  []float64
		period sim.Time
		want   string
	}{
		{[]float64{1, 0}, sim.Millisecond, "validate.speed[1]"},
		{[]float64{1}, -sim.Millisecond, "validate.speed_period"},
		{[]float64{1}, sim.Microsecond, "validate.speed_period"},
		{nil, sim.Millisecond, "without validate.speed"},
	} {
		c := cpuBound(poolmode.Direct, 2, 10, sim.Microsecond, sim.Microsecond, 2)
		c.Testbed.Speed, c.Testbed.SpeedPeriod = tc.speed, tc.period
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("speed %v every %v: error %v, want one naming %s", tc.speed, tc.period, err, tc.want)
		}
	}
}

func TestPoolerWakesOnlyAnIdleCore(t *testing.T) {
	// Pool 1 of 200 clients on 2 cores: the driver's, the backend's and
	// the pooler's CPU keep both cores busy, so the thread, woken by the
	// job that has just finished on one of them, never waits for an idle
	// core to wake - pooler.wakeup costs nothing, and the throughput is
	// near the lesser of the cores' bound, 2 / (d + s + request +
	// response + assignment), and the server's cycle, 1 / (s + response
	// + assignment), sharing the cores slowing the latter a little.
	const d, s, p = 30 * sim.Microsecond, 20 * sim.Microsecond, 7 * sim.Microsecond
	c := cpuBound(poolmode.Transaction, 200, 100, d, s, 2)
	c.Pooler.DefaultPoolSize = 1
	c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign = p, p
	c.Testbed.PoolerOnCores = true
	awake := Run(c).Metrics
	c.Pooler.Wakeup = 20 * sim.Microsecond
	woken := Run(c).Metrics
	within(t, "pool 1, busy cores, wakeup 20µs: tps_steady against wakeup 0", woken.TPSSteady, awake.TPSSteady, 0.01)
	if bound := min(2/(d+s+3*p).Seconds(), 1/(s+2*p).Seconds()); woken.TPSSteady > bound || woken.TPSSteady < 0.9*bound {
		t.Errorf("pool 1, busy cores: tps_steady %.0f, want within 10%% below %.0f", woken.TPSSteady, bound)
	}
	// One client leaves a core idle at every message: each of its two
	// messages per statement pays the wake-up (TestPoolerCPUPerAssign
	// has the exact sums).
	one := cpuBound(poolmode.Transaction, 1, 500, d, s, 2)
	one.Pooler.CPUPerMsg, one.Pooler.CPUPerAssign = p, p
	one.Testbed.PoolerOnCores = true
	base := Run(one).Metrics
	one.Pooler.Wakeup = 20 * sim.Microsecond
	slow := Run(one).Metrics
	within(t, "1 client: the latency the wake-ups add (ms)", slow.MeanMs-base.MeanMs, (2*20*sim.Microsecond).Seconds()*1e3, 0.01)
}

// TestTestbedStallsKeepThroughput: a speed timeline of millisecond steps
// with two-millisecond stops (1 % of the time, every job on the cores
// stopped) and the rest 1/0.99 fast, as validate's speedTimeline makes of
// a loop's stalls, keeps the per-core model's throughput and lengthens its
// tail: the stops hold up every transaction in flight.
func TestTestbedStallsKeepThroughput(t *testing.T) {
	c := cpuBound(poolmode.Transaction, 50, 150, 25*sim.Microsecond, 30*sim.Microsecond, 2)
	c.Pooler.DefaultPoolSize = 8
	c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign = 8*sim.Microsecond, 8*sim.Microsecond
	c.Testbed.PoolerOnCores, c.Testbed.Scheduler, c.Testbed.DriverThreads = true, PerCore, 2
	c.Testbed.WakeCurve = []WakePoint{{Idle: 30 * sim.Microsecond, Wake: 15 * sim.Microsecond}, {Idle: 250 * sim.Microsecond, Wake: 55 * sim.Microsecond}}
	c.Testbed.IdleBalanceEvery = 5 * sim.Millisecond
	c.Workload.CPU = sim.LognormalDist(30*sim.Microsecond, 0.3)
	plain := Run(c).Metrics
	var tl []float64
	for i := range 3000 {
		f := 1 / 0.99
		if i%200 < 2 {
			f = 0.05
		}
		tl = append(tl, f)
	}
	c.Testbed.Speed, c.Testbed.SpeedPeriod = tl, sim.Millisecond
	m := Run(c).Metrics
	within(t, "1 % stalls, tps_steady", m.TPSSteady, plain.TPSSteady, 0.01)
	if m.P99Ms <= plain.P99Ms*1.02 {
		t.Errorf("1 %% stalls: p99 %.3f ms, want above the constant speed's %.3f ms", m.P99Ms, plain.P99Ms)
	}
}

// TestRunQueueWaits: with per-core run queues, 4 clients back to back on
// one core, each statement 100 µs of CPU and nothing else, take turns: each
// statement waits for the other three, 300 µs, in the core's queue; on 8
// cores none waits.
func TestRunQueueWaits(t *testing.T) {
	c := cpuBound(poolmode.Direct, 4, 500, 0, 100*sim.Microsecond, 1)
	c.Testbed.Scheduler = PerCore
	one := Run(c).Metrics
	within(t, "1 core: run-queue wait per statement (µs)", one.RunQueueServerUs, 300, 0.01)
	if one.RunQueuePoolerUs != 0 || one.RunQueueDriverUs != 0 {
		t.Errorf("no pooler or driver threads: their waits %v and %v µs, want 0", one.RunQueuePoolerUs, one.RunQueueDriverUs)
	}
	c.Server.Cores = 8
	if w := Run(c).Metrics.RunQueueServerUs; w != 0 {
		t.Errorf("8 cores: run-queue wait per statement %v µs, want 0", w)
	}
}
