package system

import (
	"fmt"
	"math"
	"slices"

	"github.com/poolsim/poolsim/sim"
)

// Testbed is what shares the machine's cores with the server in a live
// validation: PostgreSQL, the pooler process and the load driver run on
// the same few cores there, so the driver's and the pooler's CPU slow the
// statements and the statements' slow theirs. The zero Testbed is a
// production what-if: the server has its cores to itself.
//
// The testbed's jobs share server.cores with the backends' by processor
// sharing: with n jobs running, all kinds together, each gets
// min(1, (cores − Background)/n) of a core, and a backend's job (a
// statement or a start-up) is slowed further by the USL factor of the
// backend jobs running; the driver's and the pooler's are not (the USL is
// PostgreSQL's internal contention).
type Testbed struct {
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
	// Linux has; runqueue.go).
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
	// Measured (bench/pgbench-passes.sh: pgbench -S -c 50 -j 2 -t 600 -l
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
	// its own (bench/pool1-arrangements.sh): the model of each is run
	// with its own.
	Affinity Affinity
	// Wakeup is how long an idle core takes to wake for a backend that a
	// thread on another core woke (PerCore only): the backend waits that
	// long on its core before its statement runs. On a virtual machine an
	// idle vCPU must be run again by the host first; a backend woken on
	// its waker's core, or on a busy core, starts without it. The
	// pooler's own wake-up is pooler.wakeup. Measured on this project's
	// 2-vCPU machine at pool 1 through PgBouncer pinned apart
	// (bench/pool1-arrangements.sh): every statement's backend wakes on
	// an idle core, and without it the model was 26 % fast.
	Wakeup sim.Time
	// WakeCurve, instead of the two constant wake-ups (Wakeup and
	// pooler.wakeup), makes an idle core's wake-up grow with how long it
	// has idled (PerCore only): a backend's or the pooler's thread woken
	// onto an idle core other than its waker's waits WakeCurve at the
	// core's idle time, linear between the points and flat beyond them.
	// A virtual machine's guest polls for a while before it halts its
	// vCPU, and a halted vCPU waits for the host: measured on this
	// project's 2-vCPU machine (bench/wake-pingpong.sh) 14-16 µs after
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
	// (bench/pool-sched.sh).
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
	// (bench/server-tail.sh). Direct connections' statements have none.
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
	// (bench/handover.sh: 0.07-0.32 a statement at pool 1 with PgBouncer
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
	// makes them. Not CPU: it does not turn the testbed on. A direct
	// row has no pool and ignores it. 0: every pool starts empty.
	ServersOpen int
}

// WakePoint is a point of Testbed.WakeCurve: after Idle of idle, a core
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
// (testbed.affinity).
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

// Scheduler is how the testbed's jobs share the cores.
type Scheduler uint8

const (
	// Shared is processor sharing: the cores are one pool, and every
	// running job gets an equal share of them.
	Shared Scheduler = iota
	// PerCore is a run queue per core: a job is placed on one core as
	// it starts and waits there, and a core out of work idles while the
	// other's queue waits (runqueue.go).
	PerCore
)

// String is the scheduler's name in a scenario.
func (s Scheduler) String() string {
	if s == PerCore {
		return "per_core"
	}
	return "shared"
}

// On reports whether anything shares the server's cores.
func (t Testbed) On() bool {
	return t.DriverCPU.MeanValue() > 0 || t.PoolerOnCores || t.Background > 0 || len(t.Speed) > 0 || t.Scheduler != Shared
}

// validate checks a testbed against the server's cores.
func (t Testbed) validate(cores int, bad func(string, ...any)) {
	if t.DriverCPU.MeanValue() < 0 || t.DriverCPU.Min < 0 {
		bad("testbed.driver_cpu must not be negative")
	}
	if math.IsNaN(t.Background) || math.IsInf(t.Background, 0) || t.Background < 0 {
		bad("testbed.background must be a number of cores, 0 or more, got %v", t.Background)
		return
	}
	for i, f := range t.Speed {
		if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > maxSpeed {
			bad("testbed.speed[%d]: a factor of the cores' speed must be above 0 and at most %v, got %v", i, maxSpeed, f)
			return
		}
	}
	if len(t.Speed) > 0 && t.SpeedPeriod != 0 && t.SpeedPeriod < minSpeedPeriod {
		bad("testbed.speed_period: the cores' speed changes every period, a duration of at least %v; got %v", minSpeedPeriod, t.SpeedPeriod)
	}
	if len(t.Speed) == 0 && t.SpeedPeriod != 0 {
		bad("testbed.speed_period is set without testbed.speed: want the list of speed factors it changes between")
	}
	if t.DriverThreads < 0 {
		bad("testbed.driver_threads must be 0 (every client its own) or more, got %d", t.DriverThreads)
	}
	if t.DriverScan && t.DriverThreads <= 0 {
		bad("testbed.driver_scan is set without testbed.driver_threads: it is the order in which each thread takes its clients")
	}
	if t.DriverThreads > 0 && t.DriverCPU.MeanValue() <= 0 {
		bad("testbed.driver_threads is set without testbed.driver_cpu: the threads run the driver's CPU per statement")
	}
	if t.Affinity != Free && (t.Scheduler != PerCore || !t.PoolerOnCores) {
		bad("testbed.affinity %s pins the pooler's thread and the backends to cores: it needs testbed.scheduler per_core and testbed.pooler_on_cores true", t.Affinity)
	}
	if t.Wakeup < 0 {
		bad("testbed.wakeup must not be negative, got %v", t.Wakeup)
	}
	if t.Wakeup > 0 && t.Scheduler != PerCore {
		bad("testbed.wakeup is an idle core's wake-up for a backend placed on it: it needs testbed.scheduler per_core")
	}
	for i, p := range t.WakeCurve {
		if p.Idle < 0 || p.Wake < 0 {
			bad("testbed.wake_curve[%d]: idle and wake-up must not be negative, got %v and %v", i, p.Idle, p.Wake)
			return
		}
		if i > 0 && p.Idle <= t.WakeCurve[i-1].Idle {
			bad("testbed.wake_curve[%d]: the idle times must rise point by point, got %v after %v", i, p.Idle, t.WakeCurve[i-1].Idle)
			return
		}
	}
	if len(t.WakeCurve) > 0 && t.Scheduler != PerCore {
		bad("testbed.wake_curve is an idle core's wake-up by how long it idled: it needs testbed.scheduler per_core")
	}
	if len(t.WakeCurve) > 0 && t.Wakeup > 0 {
		bad("testbed.wake_curve and testbed.wakeup both set the idle core's wake-up: set one")
	}
	if t.NoIdleBalance && t.Scheduler != PerCore {
		bad("testbed.idle_balance false keeps queued threads on their cores: it needs testbed.scheduler per_core")
	}
	if t.NoIdleScan && t.Scheduler != PerCore {
		bad("testbed.idle_scan false stops a woken thread's look for an idle core: it needs testbed.scheduler per_core")
	}
	if math.IsNaN(t.ServerTail) || t.ServerTail < 0 || t.ServerTail > maxServerTail {
		bad("testbed.server_tail is the share of a pooled statement's CPU its backend runs after the response: want 0 to %v, got %v", maxServerTail, t.ServerTail)
	}
	if t.ServerTail > 0 && t.Scheduler != PerCore {
		bad("testbed.server_tail keeps a backend's core for the tail of its statement: it needs testbed.scheduler per_core")
	}
	if math.IsNaN(t.PoolerPreempt) || t.PoolerPreempt < 0 || t.PoolerPreempt > maxPoolerPreempt {
		bad("testbed.pooler_preempt is how often per pooled statement a woken driver thread takes the pooler's core: want 0 to %v, got %v", maxPoolerPreempt, t.PoolerPreempt)
	}
	if t.PoolerPreempt > 0 && (t.Scheduler != PerCore || !t.PoolerOnCores) {
		bad("testbed.pooler_preempt takes the pooler's core from its thread: it needs testbed.scheduler per_core and testbed.pooler_on_cores")
	}
	if math.IsNaN(t.ServerPreempt) || t.ServerPreempt < 0 || t.ServerPreempt > maxPoolerPreempt {
		bad("testbed.server_preempt is how often per pooled statement a woken driver thread takes a backend's core: want 0 to %v, got %v", maxPoolerPreempt, t.ServerPreempt)
	}
	if t.ServerPreempt > 0 && t.Scheduler != PerCore {
		bad("testbed.server_preempt takes a backend's core: it needs testbed.scheduler per_core")
	}
	if t.ServersOpen < 0 {
		bad("testbed.servers_open must be 0 (every pool starts empty) or more, got %d", t.ServersOpen)
	}
	if t.IdleBalanceEvery < 0 {
		bad("testbed.idle_balance must be true, false or a positive duration, got %v", t.IdleBalanceEvery)
	}
	if t.IdleBalanceEvery > 0 && (t.Scheduler != PerCore || t.NoIdleBalance) {
		bad("testbed.idle_balance %v limits how often a core out of work takes a queued thread: it needs testbed.scheduler per_core", t.IdleBalanceEvery)
	}
	if t.Affinity == Apart && cores < 2 {
		bad("testbed.affinity apart puts the backends on other cores than the pooler's: it needs server.cores 2 or more, got %d", cores)
	}
	if !t.On() {
		return
	}
	if cores <= 0 {
		bad("testbed: the load driver's CPU, the pooler on the cores and a background share server.cores: set server.cores above 0")
		return
	}
	if t.Background >= float64(cores) {
		bad("testbed.background: %v is not below server.cores %d", t.Background, cores)
	}
}

// maxSpeed bounds a speed factor: a window a hundred times faster than
// the calibration is a measuring error, not a machine.
const maxSpeed = 100

// maxServerTail bounds testbed.server_tail: a backend's work after its
// response is its statement's last steps, not most of it.
const maxServerTail = 0.5

// maxPoolerPreempt bounds testbed.pooler_preempt: measured, well under
// one a statement; more than a few is a measuring error.
const maxPoolerPreempt = 4

// DefaultSpeedPeriod is testbed.speed_period's default.
const DefaultSpeedPeriod = 20 * sim.Millisecond

// minSpeedPeriod bounds how often the speed changes: the model takes the
// time window by window.
const minSpeedPeriod = 100 * sim.Microsecond

// coresFull reports whether every core left to the test is busy as a
// thread is woken: the jobs running and the waker's own (a message is
// sent by a job that has just finished its CPU - the backend's statement,
// the driver's - and is still on its core as it wakes the receiver). A
// thread woken then shares the busy cores at once; with a core idle it
// waits for that core to wake (pooler.wakeup).
func (v *server) coresFull() bool {
	if v.cpus != nil {
		return v.coresFullCores()
	}
	return float64(len(v.running)+1) >= v.avail
}

// rates are the CPU work a backend's job and another job receive per
// unit of time with the jobs running now: their share of the cores left
// to the test, the backends' slowed by the USL factor of the backend
// jobs.
func (v *server) rates() (backend, other float64) {
	share := 1.0
	if n := float64(len(v.running)); n > v.avail {
		share = v.avail / n
	}
	share *= v.spd
	k := float64(max(v.nb, 1))
	return share / (1 + v.cfg.Contention*(k-1) + v.cfg.Coherency*k*(k-1)), share
}

// initSpeed starts the cores' speed: the factors in their order from a
// start drawn from the seed's "testbed speed" stream, or a constant 1
// without testbed.speed.
func (v *server) initSpeed(tb Testbed, seed uint64) {
	v.spd = 1
	if len(tb.Speed) == 0 {
		return
	}
	v.speeds, v.spdPeriod = tb.Speed, tb.SpeedPeriod
	if v.spdPeriod == 0 {
		v.spdPeriod = DefaultSpeedPeriod
	}
	v.spdNext = int(sim.NewRand(seed, "testbed speed").IntN(uint64(len(v.speeds))))
	v.spdEnd = 0
	v.nextSpeed()
}

// nextSpeed moves to the next window's speed factor: the list's next,
// after its last its first again. A machine's slow stretches outlast a
// window (bench/stalls.sh: pgbench's transactions per 20 ms window through
// PgBouncer correlate 0.56-0.82 with the next window's), so the factors
// keep their order.
func (v *server) nextSpeed() {
	v.spd = v.speeds[v.spdNext]
	v.spdNext = (v.spdNext + 1) % len(v.speeds)
	v.spdEnd += v.spdPeriod
}

// advanceMixed is advance with two rates: every job of a kind loses the
// same work, so rounding stays monotonic within a kind. With a varying
// speed the time is taken window by window.
func (v *server) advanceMixed(now sim.Time) {
	for v.last < now {
		end := now
		if v.speeds != nil && v.spdEnd < end {
			end = v.spdEnd
		}
		if len(v.running) > 0 {
			dt := float64(end - v.last)
			rb, ro := v.rates()
			db, do := dt*rb, dt*ro
			for i := range v.running {
				v.running[i].left -= v.running[i].rate(db, do)
			}
		}
		v.last = end
		if v.speeds != nil && end == v.spdEnd {
			v.nextSpeed()
		}
	}
}

func (v *server) runMixed(j cpuJob) {
	if j.kind.backend() {
		v.nb++
	}
	v.running = append(v.running, j)
}

// countMixed sets the levels: jobs counts the backends' jobs, others the
// driver's and the pooler's, used the cores they keep busy together.
func (v *server) countMixed(now sim.Time) {
	n := len(v.running)
	v.jobs.Set(now, int64(v.nb))
	v.others.Set(now, int64(n-v.nb))
	v.used.Set(now, int64(math.Round(1e6*min(float64(n), v.avail))))
}

// nextMixed is how long until the first running job finishes at the
// current rates, found by a scan (there are at most a few hundred), in
// whole nanoseconds rounded up.
func (v *server) nextMixed() sim.Time {
	rb, ro := v.rates()
	first := math.Inf(1)
	for _, j := range v.running {
		first = min(first, max(j.left, 0)/j.rate(rb, ro))
	}
	next := sim.Time(math.Ceil(first))
	if v.speeds != nil {
		// The speed changes first: the plan is made again there.
		next = min(next, v.spdEnd-v.last)
	}
	return next
}

// testbedUtil is the cores' mean utilisation with a testbed: the test's
// jobs and the background together, over all the cores.
func (m *model) testbedUtil(level func(int) float64) float64 {
	return (level(lvUsed)/1e6 + m.cfg.Testbed.Background) / float64(m.cfg.Server.Cores)
}

// driverStart runs the load driver's CPU for client u's next statement
// on the cores, and reports whether it did (the statement is sent when it
// is done). With testbed.driver_scan the last statement of a transaction
// gets half of it here, sending; the other half reads its result
// (driverRead).
func (m *model) driverStart(s *sim.Sim, u int32) bool {
	d := m.draw(&m.cfg.Testbed.DriverCPU, m.driver, u)
	if d <= 0 {
		return false
	}
	us := &m.users[u]
	if m.cfg.Testbed.DriverScan && int(us.stmt)+1 == m.classes[us.cls].stmts {
		us.drvEnd = d - d/2
		d /= 2
	}
	m.driverJob(s, u, d)
	return true
}

// driverJob runs d of the driver's CPU for client u: at once, or on its
// thread (testbed.driver_threads), one job at a time.
func (m *model) driverJob(s *sim.Sim, u int32, d sim.Time) {
	us := &m.users[u]
	us.drvDemand, us.drvStart = d, s.Now()
	if len(m.drv) > 0 {
		k := int(u) % len(m.drv)
		t := &m.drv[k]
		if m.cfg.Testbed.DriverScan {
			if !us.reading && us.stmt == 0 {
				t.starts = append(t.starts, u)
			} else {
				t.q = append(t.q, u)
			}
			if !t.busy {
				// The thread wakes and polls: every client ready by
				// the time it runs is in its pass.
				t.busy, t.polling = true, true
				m.runJob(s, cpuJob{conn: u, kind: jobDriver, left: float64(pollCPU)})
			}
			return
		}
		if t.busy {
			t.q = append(t.q, u)
			return
		}
		t.busy = true
	}
	m.runJob(s, cpuJob{conn: u, kind: jobDriver, left: float64(d)})
}

// driverNext starts driver thread k's next job, taken off its queue.
func (m *model) driverNext(s *sim.Sim, k int) {
	u := m.drv[k].next(m.cfg.Testbed.DriverScan)
	us := &m.users[u]
	if m.cfg.Testbed.DriverScan && !us.reading && us.stmt == 0 && us.part == (parts{}) {
		// pgbench's clock starts as its thread starts the transaction,
		// not as the last one ended: the pass between is not in its
		// latency.
		now := s.Now()
		if us.reqStart == us.txnStart {
			us.reqStart = now
		}
		us.txnStart, us.drvStart = now, now
	}
	m.runJob(s, cpuJob{conn: u, kind: jobDriver, left: float64(us.drvDemand)})
}

// driverDone is the driver done with client u's statement: its own time
// counts as the client's, the rest as time lost to sharing the cores;
// the statement goes (or, reading a result, the client has it).
func (m *model) driverDone(s *sim.Sim, u int32) {
	if len(m.drv) > 0 {
		k := int(u) % len(m.drv)
		t := &m.drv[k]
		if t.polling { // the thread's poll, not u's job: its pass starts
			t.polling = false
			m.driverNext(s, k)
			return
		}
		// The thread goes on to its next client's statement first: it
		// keeps its core (per-core run queues) while the statement it
		// sent wakes the pooler.
		if len(t.q) > 0 || len(t.pass) > 0 || len(t.starts) > 0 {
			m.driverNext(s, k)
		} else {
			t.busy = false
		}
	}
	us := &m.users[u]
	us.part.think += us.drvDemand
	us.part.cpuQueue += s.Now() - us.drvStart - us.drvDemand
	if us.reading {
		us.reading = false
		m.received(s, u)
		return
	}
	m.dispatch(s, u)
}

// driverRead reports whether client u's result, the last of its
// transaction, waits for the driver to read it (testbed.driver_scan):
// pgbench's thread reads it in its next pass, and ends the transaction
// there - the next one starts in the pass after.
func (m *model) driverRead(s *sim.Sim, u int32) bool {
	us := &m.users[u]
	if !m.cfg.Testbed.DriverScan || us.drvEnd <= 0 {
		return false
	}
	us.reading = true
	m.driverJob(s, u, us.drvEnd)
	us.drvEnd = 0
	return true
}

// pollCPU is the CPU of a woken driver thread's poll (testbed.driver_scan):
// a job so short it only marks when the thread runs - its poll returns
// what has come by then.
const pollCPU = 100 * sim.Nanosecond

// drvThread is one of the load driver's threads (testbed.driver_threads):
// it prepares its clients' statements one at a time, the others queued.
type drvThread struct {
	busy    bool
	polling bool    // with scan: its job is a poll (pollCPU)
	q       []int32 // clients waiting for it, in the order they became ready
	// With scan: the clients whose transaction ended and which start the
	// next, and the pass under way, in client order.
	starts, pass []int32
	// Its clients' completed transactions and their latencies' sum
	// (Metrics.DriverThreadSpread).
	txns   int64
	latSum sim.Time
}

// next takes the client whose statement the thread prepares next off its
// queue: the first to become ready, or with scan (as pgbench's thread,
// testbed.driver_scan) the next of the pass in client order. pgbench's
// thread polls its sockets and goes through the clients whose result that
// poll found, from the first to the last, reading each; a transaction's
// last result ends it, and the client starts its next in a second pass,
// made without polling, over the clients that ended; then it polls again.
// A result that comes during the passes waits for that poll. So a client
// early in the order sends its statement early in the pass and has the
// rest of the passes for the round trip to come back before the next
// poll; a late one has little.
func (t *drvThread) next(scan bool) int32 {
	if !scan {
		c := t.q[0]
		t.q = t.q[1:]
		return c
	}
	if len(t.pass) == 0 {
		if len(t.starts) > 0 {
			t.pass, t.starts = append(t.pass, t.starts...), t.starts[:0]
		} else { // poll
			t.pass, t.q = append(t.pass, t.q...), t.q[:0]
		}
		slices.Sort(t.pass)
	}
	c := t.pass[0]
	t.pass = t.pass[1:]
	return c
}

// describe is the testbed in one sentence for the assumptions.
func (t Testbed) describe(c Config) string {
	var parts string
	if t.DriverCPU.MeanValue() > 0 {
		parts = fmt.Sprintf("the load driver's CPU (%v per statement)", t.DriverCPU.MeanValue())
	}
	if t.PoolerOnCores {
		if parts != "" {
			parts += " and "
		}
		parts += "the pooler's thread"
	}
	out := "the testbed: "
	if parts != "" {
		out += parts + fmt.Sprintf(" run on the server's %d cores, shared with the statements but not slowed by their contention", c.Server.Cores)
	} else {
		out += fmt.Sprintf("the statements run on the server's %d cores", c.Server.Cores)
	}
	if t.DriverThreads > 0 {
		out += fmt.Sprintf(", the driver's statements prepared by %d threads one at a time each", t.DriverThreads)
		if t.DriverScan {
			out += " in client order, a pass at a time"
		}
	}
	if t.Scheduler == PerCore {
		out += ", a run queue per core (a job waits on the core it was placed on; a core out of work takes only a thread idle 0.5 ms or more)"
	}
	if t.NoIdleScan {
		out += ", a woken thread placed on its waker's or its own last core without a look for an idle one"
	}
	switch t.Affinity {
	case Together:
		out += ", the pooler's thread and the backends pinned to core 0"
	case Apart:
		out += ", the pooler's thread pinned to core 0 and the backends to the others"
	}
	if t.Wakeup > 0 {
		out += fmt.Sprintf(", a backend woken onto an idle core from another waiting %v for it to wake", t.Wakeup.Duration())
	}
	if t.ServerTail > 0 {
		out += fmt.Sprintf(", a pooled statement's backend sending its response with %.3g %% of its CPU still to run, on the same core", 100*t.ServerTail)
	}
	if t.PoolerPreempt > 0 {
		out += fmt.Sprintf(", a driver's thread woken by a result taking the pooler's core from it %.3g times a pooled statement", t.PoolerPreempt)
	}
	if t.ServerPreempt > 0 {
		out += fmt.Sprintf(", a driver's thread woken by a result taking a backend's core from it %.3g times a pooled statement", t.ServerPreempt)
	}
	if c := t.WakeCurve; len(c) > 0 {
		out += fmt.Sprintf(", a backend or the pooler's thread woken onto an idle core from another waiting for it to wake, %v after %v idle to %v after %v", c[0].Wake.Duration(), c[0].Idle.Duration(), c[len(c)-1].Wake.Duration(), c[len(c)-1].Idle.Duration())
	}
	if t.Background > 0 {
		out += fmt.Sprintf(", %.3g cores busy with other work", t.Background)
	}
	if len(t.Speed) > 0 {
		lo, hi := slices.Min(t.Speed), slices.Max(t.Speed)
		p := t.SpeedPeriod
		if p == 0 {
			p = DefaultSpeedPeriod
		}
		out += fmt.Sprintf(", their speed drawn every %v from %d factors between %.2f and %.2f", p.Duration(), len(t.Speed), lo, hi)
	}
	return out + " (as in a live validation on one machine)"
}
