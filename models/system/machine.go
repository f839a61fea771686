package system

import "github.com/poolsim/poolsim/sim"

// The CPU port. What runs the model's CPU work - the backends' statements
// and start-ups, slowed by the USL's contention and coherency - is the
// server's cores shared by processor sharing (ps.go), the model's only
// built-in. A live validation runs PostgreSQL, the pooler and the load
// driver on one small machine, whose scheduler and load driver the lab
// models (lab/testbed): it plugs them in through Config.Machine, on the
// types below, and the model knows nothing of drivers, pinning, run
// queues or wake-ups.

// Machine is what a system runs on when it is not a production server's
// own cores: a machine the caller models, which takes the CPU work and may
// add work of its own (a load driver's, the pooler's thread). A Machine
// is a description, safe for concurrent use: every run starts its own
// parts (Start).
type Machine interface {
	// Check reports through bad what is wrong with the machine for the
	// configuration c (it is called by Config.Validate).
	Check(c Config, bad func(format string, args ...any))
	// Describe is the machine in one sentence, for Assumptions.
	Describe(c Config) string
	// Random reports whether the machine draws random numbers of its own
	// in a run of c (a distribution, a random start), so that a study of
	// c needs replications (Config.Stochastic).
	Random(c Config) bool
	// Start sets one run up on h, before its first event, and returns
	// the run's parts.
	Start(h *Host) Parts
}

// Parts are what a Machine gives one run. The zero Parts change nothing:
// the run is the production what-if.
type Parts struct {
	// CPU runs the run's CPU work in place of processor sharing over
	// Server.Cores; nil keeps processor sharing.
	CPU CPU
	// Pooler runs the pooler processes' threads on CPU (JobPooler jobs)
	// instead of each on a CPU of its own.
	Pooler bool
	// Clients is work the clients do on the machine; nil: none.
	Clients Clients
	// Report, if set, is what the machine has to say of the run once it
	// is over: Result.Machine.
	Report func() any
}

// CPU runs one run's CPU work. It is driven by the model's events: the
// model hands it jobs (Run) and calls Tick at the moment it planned
// (Host.Plan); a job's work is done only at a Tick, where the CPU hands it
// back (Host.Finished).
type CPU interface {
	// Run starts job j's CPU phase now. For a JobStatement it returns the
	// work after which the statement's result goes (j.Work, or less when
	// the backend replies before its work is all done and runs the rest
	// after); for other jobs j.Work.
	Run(j Job) sim.Time
	// Tick is the moment of the CPU's last Host.Plan: it brings the jobs'
	// work up to now, hands those done to Host.Finished and plans again.
	Tick()
	// PoolerWakeup is how long a pooler thread that was asleep waits
	// before its work starts on the CPU, where the thread's own wake-up
	// is wakeup (pooler.wakeup); asked only with Parts.Pooler.
	PoolerWakeup(wakeup sim.Time) sim.Time
	// Levels are the CPU's time-weighted levels, asked once before the
	// run: the model marks them at its steady window's edges.
	Levels() []*sim.Level
	// Measure is the CPU's utilisation over the steady window (its busy
	// cores, over Server.Cores) and the mean number of backend jobs in
	// their CPU phase (cpu_jobs_L); level(i) is the window's mean of
	// Levels()[i].
	Measure(level func(i int) float64) (util, backendJobs float64)
}

// Clients is client-side work a machine runs: a load driver preparing
// each statement and reading each result on the same cores.
type Clients interface {
	// Send is client u about to send its statement. It reports whether
	// the machine takes it; it then calls Host.Send(u, ...) when the
	// statement goes.
	Send(u int32) bool
	// Read is client u's result arriving. It reports whether the machine
	// takes it; it then calls Host.Receive(u, ...) when the client has
	// read it.
	Read(u int32) bool
	// Completed is client u's transaction completed, taking lat.
	Completed(u int32, lat sim.Time)
}

// JobKind says whose CPU work a job is.
type JobKind uint8

const (
	// JobStatement is a backend running a statement: ID is the client's
	// connection, Server the pooler's server whose backend runs it (-1 in
	// direct mode, where the connection is its own backend).
	JobStatement JobKind = iota
	// JobStartup is a backend starting: ID is its connection, or a pool's
	// login id (negative).
	JobStartup
	// JobPooler is a pooler process's thread relaying a message or
	// handing a server over (Parts.Pooler only): ID is the process.
	JobPooler
)

// Backend reports whether k is a backend's work: only that is slowed by
// the USL's contention and coherency (PostgreSQL's own).
func (k JobKind) Backend() bool { return k <= JobStartup }

// Job is a piece of CPU work the model hands a CPU.
type Job struct {
	Kind   JobKind
	ID     int32
	Server int32
	Work   sim.Time // CPU time at the cores' full speed
}

// Position is where a client is in its session and transaction.
type Position struct {
	Session uint64 // the session's number (a client slot reused by a new session gets a new one)
	Stmt    int    // the statement under way, from 0
	Stmts   int    // the transaction's statements
	Failed  bool   // the transaction failed: the statement under way ends it
}

// Host is the model's side of one run, for a Machine's parts: its clock
// and settings, the CPU's plans, and the hand-back of work done. Its
// methods may be called only while the run is under way (from Start on),
// from the model's own calls into the parts.
type Host struct {
	m *model
	s *sim.Sim
}

// Now is the run's virtual time.
func (h *Host) Now() sim.Time { return h.s.Now() }

// Seed is the run's seed, for the machine's own random streams.
func (h *Host) Seed() uint64 { return h.m.cfg.Seed }

// Server is the server's settings: its cores and the USL's terms.
func (h *Host) Server() Server { return h.m.cfg.Server }

// Plan asks for the CPU's Tick after dt; it voids every earlier plan.
func (h *Host) Plan(dt sim.Time) {
	h.m.cpuGen++
	h.s.After(dt, evCPUDone, 0, h.m.cpuGen)
}

// Unplan voids every earlier plan: nothing is due.
func (h *Host) Unplan() { h.m.cpuGen++ }

// Finished hands back job j, whose work is done: a start-up, the
// pooler's work, or a statement, whose result then goes.
func (h *Host) Finished(j Job) { h.m.finish(h.s, j) }

// Send sends client u's statement now, after client-side work taken by
// Clients.Send: own is the client's CPU, counted as the client's time
// (think), waited its wait for the cores (cpu_queue).
func (h *Host) Send(u int32, own, waited sim.Time) {
	h.m.clientWork(u, own, waited)
	h.m.dispatch(h.s, u)
}

// Receive gives client u its result now, read by client-side work taken
// by Clients.Read (own and waited as in Send).
func (h *Host) Receive(u int32, own, waited sim.Time) {
	h.m.clientWork(u, own, waited)
	h.m.received(h.s, u)
}

// Position is where client u is in its transaction.
func (h *Host) Position(u int32) Position {
	us := &h.m.users[u]
	return Position{Session: us.session, Stmt: int(us.stmt), Stmts: h.m.classes[us.cls].stmts, Failed: us.txnFailed}
}

// Draw samples d from the family f at client u's statement under way
// (its session and its position in it: common random numbers).
func (h *Host) Draw(d *sim.Dist, f sim.Streams, u int32) sim.Time { return h.m.draw(d, f, u) }

// Restart starts client u's transaction's clock again now, and its
// request's if that began with it, unless the transaction has been
// charged time already (its connection's set-up); it reports whether it
// did. A load driver that times a transaction from when it starts it,
// not from when the last one ended, calls it there.
func (h *Host) Restart(u int32) bool {
	us := &h.m.users[u]
	if us.part != (parts{}) {
		return false
	}
	now := h.s.Now()
	if us.reqStart == us.txnStart {
		us.reqStart = now
	}
	us.txnStart = now
	return true
}

// OpenServers has every pool start with n idle servers open at time zero,
// within its limit and, in all, server.max_connections (a pooler that has
// run before). Call it from Machine.Start.
func (h *Host) OpenServers(n int) { h.m.serversOpen = n }

// clientWork counts client-side work in client u's transaction.
func (m *model) clientWork(u int32, own, waited sim.Time) {
	us := &m.users[u]
	us.part.think += own
	us.part.cpuQueue += waited
}
