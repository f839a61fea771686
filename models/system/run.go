package system

import (
	"context"
	"math"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Event kinds. ID is a client (user) or a connection as noted.
const (
	evArrive      int32 = iota // open workload: the next session arrives
	evSession                  // closed workload: client ID starts its session
	evStartupDone              // a backend finished starting: connection ID, or a pool's login id
	evSend                     // client ID sends its next statement (or starts a transaction)
	evAtPooler                 // connection ID's statement reaches the pooler
	evCPUDone                  // the earliest running statement finishes its CPU work (Arg: generation)
	evFixedDone                // connection ID's statement finishes its non-CPU server time
	evRecv                     // client ID has its statement's result
	evWaitTimeout              // query_wait_timeout for connection ID (Arg: wait number)
	evAppTimeout               // app-pool acquire timeout for client ID (Arg: wait number)
	evPoolerMsg                // a pooler thread finished relaying message ID (Arg: process)
	evRelease                  // a session-mode server is back from its client's disconnect and reset: server ID (Arg: process)
	evSnapshot                 // open workload: the statistics' accounts at a point of the steady window's grid
	evPoolerWake               // a pooler thread woke for its work, which now runs on the run's CPU (Arg: process)
)

// model is the system's state; it is the sim.Handler.
type model struct {
	cfg   Config
	multi bool // classes of its own: per-class results, per-pool accounts

	connect, reuseport *sim.Rand
	// Common random numbers: a client's draws are keyed by its session and
	// its position in it, not by the order the model asks for them.
	query, cpu, think, appGap, choice, parse, reqs sim.Streams
	active                                         int64 // sessions in the system

	thread bool // the pooler's threads are modelled (pooler.cpu_per_msg, wakeup or cpu_per_assign)

	// The run's CPU: the built-in processor sharing (ps), or a machine's
	// port with its parts (machine.go); cpuGen numbers the CPU's plans
	// (Host.Plan), the last of which alone is due.
	ps          ps
	port        CPU
	poolerOnCPU bool
	clients     Clients
	report      func() any
	cpuGen      int64
	cpuLevels   []*sim.Level // the run's CPU's levels, last in levels()
	serversOpen int          // idle servers each pool opens at time zero (Host.OpenServers)

	classes  []classRun
	specs    []PoolSpec // the pools' specs, resolved
	specLim  []int      // each spec's server limit at one process
	specDB   []int      // each spec's database, as an index
	specUser []int      // each spec's user, as an index

	users     []user
	freeUsers []int32 // finished client slots for reuse (open workload)
	conns     []conn
	freeConns []int32
	// Workers classes' requests that arrived and wait for a worker
	// (workers.go), and their free slots.
	pending     []pendingReq
	freePending []int32

	procs      []proc      // the pooler processes
	pools      []pooler    // every process's pools: process p's pool of spec k is p*len(specs)+k
	linked     sim.Level   // servers linked to a client
	executing  sim.Level   // statements executing at the server (CPU or fixed part)
	specLinked []sim.Level // the same per pool spec (multi only)
	specExec   []sim.Level
	waitNo     int64 // numbers the waits for a server
	nextServer int32 // servers opened so far (their ids)
	srv        server
	prep       prep
	results    results // the whole run's; with classes each class has its own too
	window     window
	end        sim.Time              // time of the last state change
	trace      map[uint64][]sim.Time // session -> query times drawn, when traced
	taken      []int32               // workers: the worker that took each request, in order, when traced
	done       <-chan struct{}       // closed when the caller gives up
	canceled   bool                  // the run stopped early because done was closed
}

// classRun is one class's state in a run.
type classRun struct {
	cfg      Class
	spec     int // its pool's spec
	mode     poolmode.Mode
	app      appPool
	res      *results // nil without classes (the run's results are the class's)
	arrive   *sim.Rand
	sessions uint64 // sessions started (open workload: the arrival number)
	base     uint64 // added to a session's number for its draws: the class's own range

	// The workload's settings read per statement, resolved once (its
	// methods take it by value, a copy each time).
	stmts    int         // statements per transaction
	requests int         // requests per session
	txnsPer  sim.IntDist // transactions per request
	pause    sim.Dist    // between a request's statements and transactions
	appSet   bool        // pause is workload.app (its own stream), not think
	noApp    bool        // no application pool: a connection per session
	open     bool

	// Workers (workers.go): the class's arrivals are requests served by
	// its workers; app.waitQ is then the application queue of requests
	// (pending ids), idle the workers waiting for one, longest idle first.
	workers    bool
	idle       []int32
	queuedTxns int64 // transactions of the requests in the queue
	ended      bool  // arrivals are over
}

// tally records into the run's results and, with classes, class cl's.
func (m *model) tally(cl int16, f func(r *results)) {
	f(&m.results)
	if r := m.classes[cl].res; r != nil {
		f(r)
	}
}

// execStart and execDone count a statement executing at the server.
func (m *model) execStart(now sim.Time, cl int16) {
	m.executing.Add(now, 1)
	if m.multi {
		m.specExec[m.classes[cl].spec].Add(now, 1)
	}
}

func (m *model) execDone(now sim.Time, cl int16) {
	m.executing.Add(now, -1)
	if m.multi {
		m.specExec[m.classes[cl].spec].Add(now, -1)
	}
}

// Run simulates cfg and returns its measurements. cfg must be valid
// (Validate); Run panics on an invalid configuration.
//
// An open workload with an automatic warm-up first runs its pilots
// (AutoWarmup); a caller running many replications of one configuration
// resolves the warm-up once (Resolved) and runs the replications with it.
func Run(cfg Config) Result {
	r, _ := RunContext(context.Background(), cfg)
	return r
}

// RunContext is Run that stops within a few thousand events of ctx being
// done, and then returns ctx's error and no result.
func RunContext(ctx context.Context, cfg Config) (Result, error) {
	r, _, err := runModel(ctx, cfg)
	return r, err
}

// RunLatencies is Run that also returns every completed transaction's
// latency, for a caller that combines the distributions of several runs
// (Percentile reads them).
func RunLatencies(cfg Config) (Result, *sim.Samples) {
	r, m, err := runModel(context.Background(), cfg)
	if err != nil {
		return r, &sim.Samples{}
	}
	return r, &m.results.lat
}

// runModel resolves cfg's warm-up, runs it and returns the result and the
// model it ran.
func runModel(ctx context.Context, cfg Config) (Result, *model, error) {
	cfg, atLimit, err := Resolved(ctx, cfg)
	if err != nil {
		return Result{}, nil, err
	}
	m, s := simulateWith(cfg, options{done: ctx.Done()})
	if m.canceled {
		return Result{}, nil, ctx.Err()
	}
	r := m.result(s)
	if atLimit {
		r.Metrics.WarmupAtLimit = 1
	}
	return r, m, nil
}

// simulate runs cfg to the end and returns the model and engine.
func simulate(cfg Config) (*model, *sim.Sim) { return simulateWith(cfg, options{}) }

// options are a run's internal variants.
type options struct {
	pilot      bool            // take a snapshot at every point of the warm-up grid
	trace      bool            // record every client's query times (tests)
	done       <-chan struct{} // stop when it is closed (a context's Done)
	exactLimit int             // samples each recorder keeps exactly (0: sim.ExactLimit; tests)
}

// simulateWith runs cfg with options.
func simulateWith(cfg Config, o options) (*model, *sim.Sim) {
	if err := cfg.Validate(); err != nil {
		panic("system.Run: " + err.Error())
	}
	m := &model{
		cfg:       cfg,
		multi:     cfg.Multi(),
		query:     sim.NewStreams(cfg.Seed, "query"),
		cpu:       sim.NewStreams(cfg.Seed, "cpu"),
		think:     sim.NewStreams(cfg.Seed, "think"),
		appGap:    sim.NewStreams(cfg.Seed, "app"),
		reqs:      sim.NewStreams(cfg.Seed, "requests"),
		choice:    sim.NewStreams(cfg.Seed, "statements"),
		parse:     sim.NewStreams(cfg.Seed, "parse"),
		thread:    cfg.Pooler.CPUPerMsg != 0 || cfg.Pooler.Wakeup != 0 || cfg.Pooler.CPUPerAssign != 0,
		connect:   sim.NewRand(cfg.Seed, "connect"),
		reuseport: sim.NewRand(cfg.Seed, "reuseport"),
		linked:    sim.NewLevel(0),
		executing: sim.NewLevel(0),
	}
	m.initPools()
	m.initClasses()
	m.prep.init(cfg)
	m.results.init(cfg.Pooler.Processes)
	switch {
	case o.pilot: // reads only its latency sums: the recorders go straight to their histograms
		m.setExactLimit(1)
	case o.exactLimit > 0:
		m.setExactLimit(o.exactLimit)
	}
	m.srv.init(cfg.Server)
	var s sim.Sim
	m.initCPU(&s)
	m.window.init(m, &s, o.pilot)
	m.openAtStart(&s)
	m.done = o.done
	if o.trace {
		m.trace = map[uint64][]sim.Time{}
	}
	for i := range m.classes {
		k := &m.classes[i]
		w := k.cfg.Workload
		if w.Open() {
			m.scheduleArrival(&s, int16(i))
			if w.Persistent() {
				m.startWorkers(&s, int16(i))
			}
			continue
		}
		for j := range w.Clients {
			id := int32(len(m.users))
			m.users = append(m.users, newUser(k.base+uint64(j), int16(i)))
			s.At(m.firstThink(w, id), evSession, id, 0)
		}
	}
	s.Run(m)
	return m, &s
}

// initCPU sets up the run's CPU: processor sharing, or the parts of
// cfg.Machine.
func (m *model) initCPU(s *sim.Sim) {
	h := &Host{m: m, s: s}
	m.ps.init(h, m.cfg.Server)
	var cpu CPU = &m.ps
	if m.cfg.Machine != nil {
		p := m.cfg.Machine.Start(h)
		m.clients, m.report = p.Clients, p.Report
		if p.CPU != nil {
			m.port, cpu = p.CPU, p.CPU
			m.poolerOnCPU = p.Pooler
		}
	}
	m.cpuLevels = cpu.Levels()
}

// firstThink is when closed client u starts: at once, or - when its
// workload runs requests - after a think, as a worker waits for its first
// request as for every later one (so the clients do not all start at 0).
func (m *model) firstThink(w Workload, u int32) sim.Time {
	if !w.RequestLevel() {
		return 0
	}
	if !w.Think.Random() {
		return w.Think.Mean
	}
	r := m.think.At(m.users[u].session, math.MaxUint64)
	return w.Think.Sample(&r)
}

// draw samples d from the family f at client u's current statement: its
// session and its position in it (transaction, statement).
func (m *model) draw(d *sim.Dist, f sim.Streams, u int32) sim.Time {
	if !d.Random() {
		return d.Mean
	}
	us := &m.users[u]
	r := f.At(us.session, uint64(us.txn)<<32|uint64(uint32(us.stmt)))
	return d.Sample(&r)
}

// initPools lays out the pools: each spec at each process, with its limit
// and its database's and user's index.
func (m *model) initPools() {
	c := m.cfg
	m.specs = c.PoolList()
	dbs, usrs := map[string]int{}, map[string]int{}
	for _, p := range m.specs {
		lim := min(c.share(p.Size), c.Server.Usable())
		if c.Pooler.MaxDBConnections > 0 {
			lim = min(lim, c.share(c.Pooler.MaxDBConnections))
		}
		if c.Pooler.MaxUserConnections > 0 {
			lim = min(lim, c.share(c.Pooler.MaxUserConnections))
		}
		m.specLim = append(m.specLim, lim)
		if _, ok := dbs[p.Database]; !ok {
			dbs[p.Database] = len(dbs)
		}
		if _, ok := usrs[p.User]; !ok {
			usrs[p.User] = len(usrs)
		}
		m.specDB = append(m.specDB, dbs[p.Database])
		m.specUser = append(m.specUser, usrs[p.User])
	}
	m.procs = make([]proc, c.Pooler.Processes)
	m.pools = make([]pooler, len(m.procs)*len(m.specs))
	for i := range m.procs {
		m.procs[i].cpu = sim.NewLevel(0)
		m.procs[i].idleAt = -1
		m.procs[i].dbServers, m.procs[i].userServers = make([]int, len(dbs)), make([]int, len(usrs))
		for k := range m.specs {
			m.pools[i*len(m.specs)+k].init(i, k)
		}
	}
	if m.multi {
		m.specLinked, m.specExec = make([]sim.Level, len(m.specs)), make([]sim.Level, len(m.specs))
	}
}

// initClasses sets up each class: its pool, its application pool, its
// results and its arrivals.
func (m *model) initClasses() {
	c := m.cfg
	for i, cl := range c.ClassList() {
		k := classRun{cfg: cl, spec: max(c.poolOf(cl), 0)}
		k.mode = m.specs[k.spec].Mode
		w := cl.Workload
		k.stmts, k.pause, k.appSet, k.open = w.StmtsPerTxn, w.AppPause(), w.AppSet, w.Open()
		k.requests, k.txnsPer = w.Requests()
		k.noApp = cl.AppPool.Mode == NoAppPool
		k.workers = w.Persistent()
		k.app.init()
		name := "arrivals"
		if m.multi {
			k.res = &results{}
			k.res.init(c.Pooler.Processes)
			name += "/" + cl.Name
			k.base = uint64(i) << 40
		}
		if cl.Workload.Open() {
			k.arrive = sim.NewRand(c.Seed, name)
		}
		m.classes = append(m.classes, k)
	}
}

func (m *model) Handle(s *sim.Sim, e sim.Event) {
	if m.done != nil && s.Handled()&(1<<14-1) == 0 {
		select {
		case <-m.done:
			m.canceled = true
			s.Stop()
			return
		default:
		}
	}
	m.window.due(m, s.Now())
	switch e.Kind {
	case evArrive:
		m.end = s.Now()
		m.arrival(s, int16(e.ID))
	case evSession:
		m.end = s.Now()
		m.startSession(s, e.ID)
	case evStartupDone:
		m.end = s.Now()
		m.startupDone(s, e.ID)
	case evSend:
		m.end = s.Now()
		m.send(s, e.ID)
	case evAtPooler:
		m.end = s.Now()
		m.toPooler(s, e.ID, false)
	case evPoolerMsg:
		m.end = s.Now()
		m.threadDone(s, int(e.Arg))
	case evPoolerWake:
		m.end = s.Now()
		m.poolerJob(s, int(e.Arg))
	case evCPUDone:
		m.cpuDone(s, e.Arg)
	case evFixedDone:
		m.end = s.Now()
		m.statementDone(s, e.ID)
	case evRecv:
		m.end = s.Now()
		m.recv(s, e.ID)
	case evWaitTimeout:
		m.waitTimeout(s, e.ID, e.Arg)
	case evAppTimeout:
		m.appTimeout(s, e.ID, e.Arg)
	case evRelease:
		m.end = s.Now()
		m.srvBack(s, int(e.Arg), e.ID)
	case evSnapshot:
		m.window.snap(m, s.Now())
	case evWorkerUp:
		m.end = s.Now()
		m.workerUp(s, e.ID)
	case evWorkerFree:
		m.end = s.Now()
		m.workerFree(s, e.ID)
	case evArrivalsEnd:
		m.end = s.Now()
		m.arrivalsEnd(s, int16(e.ID))
	}
}

func (m *model) result(s *sim.Sim) Result {
	r := Result{Metrics: m.metrics(s), Compat: CompatFor(m.cfg)}
	if m.report != nil {
		r.Machine = m.report()
	}
	if m.multi {
		for i := range m.classes {
			r.Classes = append(r.Classes, ClassResult{Name: m.classes[i].cfg.Name, Metrics: m.classMetrics(s, i)})
		}
	}
	return r
}

// CompatFor is the session-feature matrix of c's pool mode and settings.
func CompatFor(c Config) compat.Matrix {
	return compat.For(c.Pooler.PoolMode, c.Pooler.MaxPreparedStatements)
}
