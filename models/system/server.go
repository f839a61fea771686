package system

import (
	"math"

	"github.com/poolsim/poolsim/sim"
)

// server is PostgreSQL: backend slots, backend start-up, and the CPU that
// running statements share.
type server struct {
	cfg      Server
	startup  *sim.Resource // start-up workers (connect_concurrency); ids are connections or pools' login ids
	backends int           // open backends, each holding a max_connections slot
	open     sim.Level     // open backends over time (memory)
	busy     sim.Level     // direct mode: backends in use by a client

	running []cpuJob  // jobs in their CPU phase, in arrival order
	least   float64   // the least work left among them (without a testbed)
	done    []cpuJob  // cpuDone's buffer
	last    sim.Time  // when their work left was last brought up to date
	gen     int64     // generation of the pending CPU-done event
	jobs    sim.Level // backend jobs in their CPU phase: statements and start-ups
	cores   sim.Level // cores in use, min(jobs, cores); not kept with a testbed (used is)

	// A testbed (testbed.go): the load driver's and the pooler's jobs
	// share the cores with the backends', and a background holds part of
	// them.
	tb     bool
	avail  float64   // cores left to the test: cores − testbed.background
	nb     int       // backend jobs among running
	others sim.Level // driver and pooler jobs in their CPU phase
	used   sim.Level // cores busy with the test's jobs, min(all jobs, avail), in millionths of a core

	// The cores' speed (testbed.speed): the factor of the current
	// window, which ends at spdEnd, and the next one's index; speeds nil:
	// always 1.
	spd       float64
	speeds    []float64
	spdPeriod sim.Time
	spdEnd    sim.Time
	spdNext   int

	// Per-core run queues (testbed.scheduler: per_core, runqueue.go).
	cpus       []pcore
	ctx        int                 // the core whose finished job the model is handling; -1 otherwise
	ctxEnt     entity              // that job's entity
	prev       map[entity]int      // each entity's last core
	ran        map[entity]sim.Time // when each entity last left a core
	fin        []int               // cpuDoneCores' buffer
	nq         int                 // jobs in their CPU phase, running or queued
	drvThreads int                 // testbed.driver_threads
	affinity   Affinity            // testbed.affinity
	wakeup     float64             // testbed.wakeup, ns
	wakeCurve  []WakePoint         // testbed.wake_curve
	noSteal    bool                // testbed.idle_balance false
	noScan     bool                // testbed.idle_scan false
	stealEvery sim.Time            // testbed.idle_balance as a duration (0: at every chance)
	lastSteal  sim.Time            // when a core last took a queued thread (-1: never)
	idleAt     []sim.Time          // when each core last finished a job (per-core)
	rqWait     [4]sim.Time         // per job kind: how long its jobs waited in a core's queue (per-core)
	rqJobs     [4]int64            // per job kind: jobs started on a core (per-core)

	// A backend's tail (testbed.server_tail, per-core queues only): the
	// share of a pooled statement's CPU its backend runs after the
	// response, keeping its core; the servers whose backend runs one now;
	// and the statement that reached such a server meanwhile, which runs
	// next on that core.
	tail      float64
	tailing   map[int32]bool
	afterTail map[int32]cpuJob

	// The pooler and the backends taken off their cores by a woken
	// driver's thread (testbed.pooler_preempt, testbed.server_preempt;
	// per-core queues only): the rates per pooled statement, the credits
	// not yet spent, the preemptions made and the pooled statements done.
	preempt, credit, srvPreempt, srvCredit float64
	preempted, srvPreempted, pooledDone    int64
}

// jobKind says whose CPU work a job is. Statements and start-ups are the
// backends': only they are slowed by the USL's contention and coherency.
type jobKind uint8

const (
	jobStatement jobKind = iota // a backend running a statement
	jobStartup                  // a backend starting
	jobDriver                   // the load driver preparing a client's statement (testbed)
	jobPooler                   // a pooler process's thread (testbed.pooler_on_cores)
)

func (k jobKind) backend() bool { return k <= jobStartup }

// cpuJob is a job's CPU work left, in nanoseconds.
type cpuJob struct {
	conn int32 // the connection, a pool's login id (negative), the client (driver) or the pooler process
	// srv is the pooler's server whose backend runs a statement: with
	// per-core queues that backend is the thread (its process), whoever
	// the client; -1 in direct mode, where the connection is its own.
	srv  int32
	kind jobKind
	left float64
	// after is the statement's CPU its backend runs after it has sent
	// the response (testbed.server_tail); tail marks that part's job.
	after float64
	tail  bool
	// wake is how long the job waits, on its core, for that core to wake
	// before its work starts (testbed.wakeup, per-core queues only), in
	// nanoseconds of time, not work.
	wake float64
	// queued is when the job joined its core's queue (per-core queues);
	// resumed marks a job preempted before it was done (preemptOn).
	queued  sim.Time
	resumed bool
}

// rate is the job's rate of the two a scheduler gives: a backend's
// (slowed by the USL) or another's.
func (j cpuJob) rate(backend, other float64) float64 {
	if j.kind.backend() {
		return backend
	}
	return other
}

func (v *server) init(cfg Server, tb Testbed) {
	v.cfg = cfg
	v.startup = sim.NewResource(0, cfg.ConnectConcurrency)
	v.open, v.busy, v.jobs, v.cores = sim.NewLevel(0), sim.NewLevel(0), sim.NewLevel(0), sim.NewLevel(0)
	v.others, v.used = sim.NewLevel(0), sim.NewLevel(0)
	v.tb, v.avail = tb.On(), float64(cfg.Cores)-tb.Background
	v.drvThreads = tb.DriverThreads
	v.affinity = tb.Affinity
	v.wakeup = float64(tb.Wakeup)
	v.wakeCurve = tb.WakeCurve
	v.noSteal, v.stealEvery, v.lastSteal = tb.NoIdleBalance, tb.IdleBalanceEvery, -1
	v.noScan = tb.NoIdleScan
	if tb.Scheduler == PerCore && cfg.Cores > 0 {
		v.initCores(cfg.Cores)
		v.tail = tb.ServerTail
		v.preempt, v.srvPreempt = tb.PoolerPreempt, tb.ServerPreempt
	}
}

func (v *server) openBackend(now sim.Time) {
	v.backends++
	v.open.Set(now, int64(v.backends))
}

func (v *server) closeBackend(now sim.Time) {
	v.backends--
	v.open.Set(now, int64(v.backends))
}

// rate is the CPU work each of n running statements receives per unit of
// time: its share of the cores, slowed by the Universal Scalability Law's
// contention (σ) and coherency (κ) terms.
func (v *server) rate(n int) float64 {
	share := 1.0
	if n > v.cfg.Cores {
		share = float64(v.cfg.Cores) / float64(n)
	}
	k := float64(n)
	return share / (1 + v.cfg.Contention*(k-1) + v.cfg.Coherency*k*(k-1))
}

// advance brings the running statements' work left up to now. Rounding
// is monotonic, so the least work left is the least less the same work.
func (v *server) advance(now sim.Time) {
	if v.cpus != nil {
		v.advanceCores(now)
		return
	}
	if v.tb {
		v.advanceMixed(now)
		return
	}
	if n := len(v.running); n > 0 && now > v.last {
		done := float64(now-v.last) * v.rate(n)
		for i := range v.running {
			v.running[i].left -= done
		}
		v.least -= done
	}
	v.last = now
}

// run adds a job to the running ones.
func (v *server) run(j cpuJob) {
	if v.cpus != nil {
		v.runCores(j)
		return
	}
	if v.tb {
		v.runMixed(j)
		return
	}
	if len(v.running) == 0 {
		v.least = j.left
	} else {
		v.least = min(v.least, j.left)
	}
	v.running = append(v.running, j)
}

func (v *server) count(now sim.Time) {
	if v.cpus != nil {
		v.countCores(now)
		return
	}
	if v.tb {
		v.countMixed(now)
		return
	}
	n := int64(len(v.running))
	v.jobs.Set(now, n)
	v.cores.Set(now, min(n, int64(v.cfg.Cores)))
}

// reschedule plans the CPU-done event of the statement that will finish
// first at the current rate; earlier plans are void (generation).
func (v *server) reschedule(s *sim.Sim) {
	v.gen++
	if v.cpus != nil {
		if dt, ok := v.nextCores(); ok {
			s.After(dt, evCPUDone, 0, v.gen)
		}
		return
	}
	n := len(v.running)
	if n == 0 {
		return
	}
	if v.tb {
		s.After(v.nextMixed(), evCPUDone, 0, v.gen)
		return
	}
	dt := sim.Time(math.Ceil(max(v.least, 0) / v.rate(n)))
	s.After(dt, evCPUDone, 0, v.gen)
}

// runJob starts a job on the cores: the others' work left brought up to
// now, the job added, the levels counted and the next completion planned.
func (m *model) runJob(s *sim.Sim, j cpuJob) {
	v := &m.srv
	now := s.Now()
	v.advance(now)
	v.run(j)
	v.count(now)
	v.reschedule(s)
}

// startBackend runs a backend's start-up: on a CPU server it is CPU work
// shared with the running statements (PostgreSQL forks and initialises a
// process: measured, about 20 ms one at a time and 10 ms each in a storm on
// 2 cores); otherwise a fixed delay.
func (m *model) startBackend(s *sim.Sim, c int32) {
	d := m.cfg.Server.Connect.Sample(m.connect)
	v := &m.srv
	if d > 0 && v.cfg.Cores > 0 {
		m.runJob(s, cpuJob{conn: c, srv: -1, kind: jobStartup, left: float64(d)})
		return
	}
	s.After(d, evStartupDone, c, 0)
}

// execute runs connection c's statement at the server: first its CPU time
// (shared by the cores when the server models them), then its fixed part.
func (m *model) execute(s *sim.Sim, c int32) {
	cn := &m.conns[c]
	w := m.wl(cn.user)
	cn.cpuDemand = m.draw(&w.CPU, m.cpu, cn.user)
	cn.fixed = m.draw(&w.Query, m.query, cn.user)
	if m.trace != nil {
		k := m.users[cn.user].session
		m.trace[k] = append(m.trace[k], cn.fixed)
	}
	m.execStart(s.Now(), cn.cls)
	v := &m.srv
	if parse, fail := m.parseCost(c); fail {
		// ERROR: prepared statement does not exist; the transaction ends.
		m.users[cn.user].txnFailed = true
		cn.cpuDemand, cn.fixed = 0, 0
	} else if v.cfg.Cores > 0 {
		cn.cpuDemand += parse // parsing and planning is CPU work
	} else {
		cn.fixed += parse
	}
	if cn.cpuDemand > 0 && v.cfg.Cores > 0 {
		cn.cpuStart = s.Now()
		j := cpuJob{conn: c, srv: cn.server, kind: jobStatement, left: float64(cn.cpuDemand)}
		if v.tail > 0 && cn.server >= 0 {
			// Its backend sends the response with the tail still to run:
			// the client's statement is the part before (runqueue.go).
			j.after = math.Round(v.tail * j.left)
			j.left -= j.after
			cn.cpuDemand -= sim.Time(j.after)
		}
		m.runJob(s, j)
		return
	}
	m.users[cn.user].part.service += cn.cpuDemand + cn.fixed
	s.After(cn.cpuDemand+cn.fixed, evFixedDone, c, 0)
}

// cpuDone finishes the statements whose CPU work is done and moves them
// on to their fixed part.
func (m *model) cpuDone(s *sim.Sim, gen int64) {
	v := &m.srv
	if gen != v.gen {
		return // a plan made void by a later arrival
	}
	now := s.Now()
	m.end = now
	v.advance(now)
	if v.cpus != nil {
		v.cpuDoneCores(func(j cpuJob) { m.finish(s, j) })
		v.count(now)
		v.reschedule(s)
		return
	}
	finished := v.done[:0]
	kept := v.running[:0]
	least := math.Inf(1)
	nb := 0
	for _, j := range v.running {
		if j.left <= 0.5 { // within half a nanosecond: done
			finished = append(finished, j)
			continue
		}
		if j.left < least { // both above 0.5: no NaN or signed zero for min to mind
			least = j.left
		}
		if j.kind.backend() {
			nb++
		}
		kept = append(kept, j)
	}
	v.running, v.done, v.least, v.nb = kept, finished, least, nb
	v.count(now)
	v.reschedule(s)
	for _, j := range finished {
		m.finish(s, j)
	}
}

// finish moves a job whose CPU work is done on: a start-up, the driver's
// or the pooler's work, or a statement to its fixed part.
func (m *model) finish(s *sim.Sim, j cpuJob) {
	c := j.conn
	switch j.kind {
	case jobStartup:
		m.startupDone(s, c)
		return
	case jobDriver:
		m.driverDone(s, c)
		return
	case jobPooler:
		m.threadDone(s, int(c))
		return
	}
	now := s.Now()
	cn := &m.conns[c]
	p := &m.users[cn.user].part
	p.cpuQueue += now - cn.cpuStart - cn.cpuDemand
	p.service += cn.cpuDemand + cn.fixed
	if cn.fixed > 0 {
		s.After(cn.fixed, evFixedDone, c, 0)
	} else {
		m.statementDone(s, c)
	}
}
