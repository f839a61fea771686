package testbed

import (
	"math"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Machine is the test machine of a live validation, as the model runs
// it (system.Machine): PostgreSQL, the pooler process and the load driver
// run on the same few cores there, so the driver's and the pooler's CPU
// slow the statements and the statements' slow theirs. The zero Machine
// changes nothing: the server has its cores to itself.
//
// Its jobs share the server's cores (server.cores) by processor sharing
// (Shared: with n jobs running, all kinds together, each gets
// min(1, (cores − Background)/n) of a core) or on a run queue per core
// (PerCore, percore.go), and a backend's job (a statement or a start-up)
// is slowed further by the USL factor of the backend jobs running; the
// driver's and the pooler's are not (the USL is PostgreSQL's internal
// contention). Its parameters were fitted to one 2-vCPU machine and are
// frozen: poolsim validate sets them from what it measures.
type Machine struct {
	// DriverCPU is the load driver's CPU per statement: a job on the
	// cores each client runs after its pause and before it sends the
	// statement (the driver is multi-threaded: every client's job is its
	// own). In a transaction's parts its own time counts as think (the
	// client's time) and what sharing the cores adds to it as cpu_queue.
	DriverCPU sim.Dist
	// PoolerOnCores runs each pooler process's thread on the cores: every
	// message (pooler.cpu_per_msg) and assignment (pooler.cpu_per_assign)
	// is a job there, one at a time per process (its thread is single:
	// the rest queue as they do on a CPU of its own). pooler.wakeup stays
	// a delay before the job, the scheduler's latency, not CPU - and only
	// when a core is idle as the thread wakes: an idle core must be woken
	// first (on a virtual machine, the host runs its vCPU again), a busy
	// one switches to the thread at once. Measured on this project's
	// 2-vCPU machine through PgBouncer at pool 1: an empty query's hop
	// with the cores idle is 17-27 µs more than the pooler's CPU, while at
	// 200 clients, the cores 80-90 % busy, the server's cycle (1/TPS) was
	// within a few µs of the backend's and the pooler's CPU per statement.
	PoolerOnCores bool
	// Background is cores' worth of CPU busy with work outside the test
	// (other processes): the test keeps cores − Background of them.
	Background float64
	// Speed is how fast the cores run, window by window, as factors of
	// their calibrated speed (measured: a closed loop's statements per
	// window over its mean). On one machine the scheduler's placement of
	// the processes on the cores, other work and frequency changes make
	// the same load run faster or slower for tens of milliseconds at a
	// time, or stop it for a millisecond or more, and every connection
	// feels it at once: the latencies' tail. The model plays the factors
	// in their order, one per SpeedPeriod, from a start drawn from a
	// seeded stream ("testbed speed"), after the last the first again;
	// every job on the cores, backends', driver's and pooler's alike,
	// runs at the factor of its rate.
	// Empty: the cores keep one speed. SpeedPeriod 0 is
	// DefaultSpeedPeriod.
	Speed       []float64
	SpeedPeriod sim.Time
	// Scheduler is how the jobs share the cores: Shared (processor
	// sharing, the default) or PerCore (every core its own run queue, as
	// Linux has; percore.go).
	Scheduler Scheduler
	// DriverThreads is the load driver's threads: client u's statements
	// are prepared by thread u mod DriverThreads, one at a time, the
	// others queued (pgbench -j). 0: every client its own.
	DriverThreads int
	// DriverScan makes each driver thread work as pgbench's does. It
	// polls its clients' sockets and goes through the clients whose
	// result the poll found, from the first to the last; a result that
	// comes during the pass waits for the next poll (a thread woken polls
	// when it runs, not when its first result came). Reading a
	// transaction's last result ends the transaction; the client starts
	// its next in a second pass, made without polling, over the clients
	// that ended, and pgbench's clock for it starts there: the time
	// between is in neither transaction's latency. The driver's CPU per
	// statement is split between the two, half reading and half sending.
	// Measured (lab/bench/pgbench-passes.sh: pgbench -S -c 50 -j 2 -t 600 -l
	// at pool 16): the latencies pgbench logged added up to 96-97 % of
	// its clients' time through PgBouncer, whose threads read 4 results
	// a pass, and 75-88 % through poolsim's proxy, 7-10 a pass. Without
	// it (the Go driver) each thread takes its clients in the order they
	// became ready and times a transaction from the moment its client is
	// ready to send.
	DriverScan bool
	// Affinity pins the pooler's thread and the backends to cores, as
	// taskset does (PerCore only): Free (the default) lets the
	// scheduler place them, Together pins both to core 0, Apart the
	// pooler to core 0 and the backends to the others. The driver's
	// threads stay free. With one server the kernel settles in one of
	// the two arrangements and keeps it for a run, and each has costs of
	// its own (lab/bench/pool1-arrangements.sh): the model of each is run
	// with its own.
	Affinity Affinity
	// Wakeup is how long an idle core takes to wake for a backend that a
	// thread on another core woke (PerCore only): the backend waits that
	// long on its core before its statement runs. On a virtual machine an
	// idle vCPU must be run again by the host first; a backend woken on
	// its waker's core, or on a busy core, starts without it. The
	// pooler's own wake-up is pooler.wakeup. Measured on this project's
	// 2-vCPU machine at pool 1 through PgBouncer pinned apart
	// (lab/bench/pool1-arrangements.sh): every statement's backend wakes on
	// an idle core, and without it the model was 26 % fast.
	Wakeup sim.Time
	// WakeCurve, instead of the two constant wake-ups (Wakeup and
	// pooler.wakeup), makes an idle core's wake-up grow with how long it
	// has idled (PerCore only): a backend's or the pooler's thread woken
	// onto an idle core other than its waker's waits WakeCurve at the
	// core's idle time, linear between the points and flat beyond them.
	// A virtual machine's guest polls for a while before it halts its
	// vCPU, and a halted vCPU waits for the host: measured on this
	// project's 2-vCPU machine (lab/bench/wake-pingpong.sh) 14-16 µs after
	// 33-43 µs of idle, 53-56 µs after 200-300 µs.
	WakeCurve []WakePoint
	// NoIdleBalance keeps every queued thread on its core (PerCore only):
	// a core that runs out of work does not take a thread queued on
	// another, however long that thread has not run. By default it takes
	// one that has not run for 0.5 ms (Linux's balancing on a newly idle
	// core, which passes over cache-hot threads). Measured through
	// PgBouncer on this project's 2-vCPU machine (pgbench -S, pool 8,
	// /proc/PID/sched's se.nr_migrations), PgBouncer and its servers
	// changed cores about once per 10,000 transactions
	// (lab/bench/pool-sched.sh).
	NoIdleBalance bool
	// IdleBalanceEvery, if positive, lets a core out of work take a
	// queued thread from another at most once per IdleBalanceEvery
	// (PerCore only): the kernel's rate of moves, where it was measured,
	// in place of one at every chance.
	IdleBalanceEvery sim.Time
	// NoIdleScan stops a woken thread's look for an idle core (PerCore
	// only): with neither its waker's core nor its own last core idle, it
	// goes to the waker's core if nothing queues there, else to its own
	// last core, though another core idles. By default it takes any idle
	// core. Linux looks for one only while the cores are not too busy
	// (SIS_UTIL, from 5.19: the scan's depth falls with the last-level
	// cache's utilisation, to none above about 60 % on two cores), so at
	// a small pool's load a thread PgBouncer wakes lands on PgBouncer's
	// busy core while the other idles.
	NoIdleScan bool
	// ServerTail is the share of a pooled statement's CPU that its
	// backend runs after it has sent the response (PerCore only, at most
	// 0.5): the response goes on (to the pooler) when the rest is done,
	// and the backend keeps its core for the tail; a statement that
	// reaches its server meanwhile runs next on that core, with no
	// wake-up. The client's statement is the part before. A backend
	// writes its result, which wakes the pooler, and then runs on -
	// reading its socket again, finding it empty, going to sleep - while
	// the pooler relays on another core: measured through PgBouncer and
	// poolsim's proxy at pool 1 on this project's 2-vCPU machine
	// (lab/bench/server-tail.sh). Direct connections' statements have none.
	ServerTail float64
	// PoolerPreempt is how often, per pooled statement, a load driver's
	// thread woken by a result takes the pooler's core from it while it
	// runs (PerCore only, at most 4): the pooler's thread, with its work
	// not done, waits at the head of that core's queue until the driver's
	// job is done. Linux's wake-up preemption: a woken thread that has
	// run less than the one on the core may take it at once. PgBouncer's
	// one thread relays every client's messages, so each such stop holds
	// them all, and with one server the next query's hand-over waits too;
	// poolsim validate sets it to PgBouncer's involuntary context
	// switches per statement measured in the loop the model stands for
	// (lab/bench/handover.sh: 0.07-0.32 a statement at pool 1 with PgBouncer
	// and its server on two cores, nearly all by pgbench's threads). The
	// model spends a credit of PoolerPreempt a statement at the first
	// driver wake-up that finds the pooler on a core.
	PoolerPreempt float64
	// ServerPreempt is the same for the backends (PerCore only, at most
	// 4): how often, per pooled statement, a woken driver's thread takes
	// a core from a backend running a statement, which waits behind it.
	// poolsim validate sets it for pool 1 through PgBouncer apart: there
	// the one server's core is also pgbench's threads', and its
	// involuntary context switches (0.1-0.3 a statement) are theirs.
	ServerPreempt float64
	// ServersOpen is how many servers each pool already has open and idle
	// at time zero (at most its limit, and no more in all than
	// server.max_connections): a live run's pooler opens one for the
	// first client's login (PgBouncer caches that server's welcome) and
	// keeps those the validator's calibration through it opened, so its
	// first clients do not wait for a login as a model's empty pool
	// makes them. Not CPU: it does not turn the cores' model on. A direct
	// row has no pool and ignores it. 0: every pool starts empty.
	ServersOpen int
}

// WakePoint is a point of Machine.WakeCurve: after Idle of idle, a core
// takes Wake to wake.
type WakePoint struct{ Idle, Wake sim.Time }

// wakeAt is the curve's wake-up after idle: linear between the points,
// flat beyond them.
func wakeAt(c []WakePoint, idle sim.Time) sim.Time {
	if idle <= c[0].Idle {
		return c[0].Wake
	}
	for i := 1; i < len(c); i++ {
		if idle <= c[i].Idle {
			a, b := c[i-1], c[i]
			f := float64(idle-a.Idle) / float64(b.Idle-a.Idle)
			return a.Wake + sim.Time(math.Round(f*float64(b.Wake-a.Wake)))
		}
	}
	return c[len(c)-1].Wake
}

// Affinity is where the pooler's thread and the backends may run
// (Machine.Affinity).
type Affinity uint8

const (
	// Free: wherever the scheduler places them.
	Free Affinity = iota
	// Together: the pooler's thread and every backend on core 0.
	Together
	// Apart: the pooler's thread on core 0, the backends on the others.
	Apart
)

// String is the affinity's name in a scenario.
func (a Affinity) String() string {
	switch a {
	case Together:
		return "together"
	case Apart:
		return "apart"
	}
	return "free"
}

// Scheduler is how the machine's jobs share the cores.
type Scheduler uint8

const (
	// Shared is processor sharing: the cores are one pool, and every
	// running job gets an equal share of them.
	Shared Scheduler = iota
	// PerCore is a run queue per core: a job is placed on one core as
	// it starts and waits there, and a core out of work idles while the
	// other's queue waits (percore.go).
	PerCore
)

// String is the scheduler's name in a scenario.
func (s Scheduler) String() string {
	if s == PerCore {
		return "per_core"
	}
	return "shared"
}

// On reports whether anything shares the server's cores: the model's
// CPU is then the machine's.
func (t Machine) On() bool {
	return t.DriverCPU.MeanValue() > 0 || t.PoolerOnCores || t.Background > 0 || len(t.Speed) > 0 || t.Scheduler != Shared
}

// DefaultSpeedPeriod is Machine.SpeedPeriod's default.
const DefaultSpeedPeriod = 20 * sim.Millisecond

// Start sets one run up (system.Machine): the pools' open servers, and,
// if anything shares the cores, the run's CPU - processor sharing with
// the machine's jobs or a run queue per core - with the pooler's thread
// on it and the load driver's client-side work.
func (t Machine) Start(h *system.Host) system.Parts {
	h.OpenServers(t.ServersOpen)
	if !t.On() {
		return system.Parts{}
	}
	c := newCores(h, t)
	var cpu system.CPU = (*shared)(c)
	if t.Scheduler == PerCore && c.srv.Cores > 0 {
		cpu = newPerCore(c, t)
	}
	p := system.Parts{CPU: cpu, Pooler: t.PoolerOnCores, Report: c.report}
	if t.DriverCPU.MeanValue() > 0 {
		c.drv = newDriver(h, t, c.run)
		p.Clients = c.drv
	}
	return p
}

var _ system.Machine = Machine{}
