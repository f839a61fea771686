package system

import (
	"context"

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
)

// model is the system's state; it is the sim.Handler.
type model struct {
	cfg  Config
	mode poolmode.Mode
	lim  int // pool size limit

	arrive, connect, reuseport *sim.Rand
	// Common random numbers: a client's draws are keyed by its session and
	// its position in it, not by the order the model asks for them.
	query, cpu, think, appGap, choice, parse, reqs sim.Streams
	sessions                                       uint64 // sessions started (open workload: the arrival number)
	active                                         int64  // sessions in the system

	users     []user
	freeUsers []int32 // finished client slots for reuse (open workload)
	conns     []conn
	freeConns []int32

	app        appPool
	pools      []pooler    // one per pooler process
	waits      sim.Samples // pooler waits, one per assignment
	waited     int64       // assignments that waited
	linked     sim.Level   // servers linked to a client
	executing  sim.Level   // statements executing at the server (CPU or fixed part)
	waitNo     int64       // numbers the waits for a server
	nextServer int32       // servers opened so far (their ids)
	srv        server
	prep       prep
	results    results
	window     window
	end        sim.Time              // time of the last state change
	trace      map[uint64][]sim.Time // session -> query times drawn, when traced
	done       <-chan struct{}       // closed when the caller gives up
	canceled   bool                  // the run stopped early because done was closed
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
	cfg, atLimit, err := Resolved(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	m, s := simulateWith(cfg, options{done: ctx.Done()})
	if m.canceled {
		return Result{}, ctx.Err()
	}
	r := m.result(s)
	if atLimit {
		r.Metrics.WarmupAtLimit = 1
	}
	return r, nil
}

// simulate runs cfg to the end and returns the model and engine.
func simulate(cfg Config) (*model, *sim.Sim) { return simulateWith(cfg, options{}) }

// options are a run's internal variants.
type options struct {
	pilot bool            // take a snapshot at every point of the warm-up grid
	trace bool            // record every client's query times (tests)
	done  <-chan struct{} // stop when it is closed (a context's Done)
}

// simulateWith runs cfg with options.
func simulateWith(cfg Config, o options) (*model, *sim.Sim) {
	if err := cfg.Validate(); err != nil {
		panic("system.Run: " + err.Error())
	}
	m := &model{
		cfg:       cfg,
		mode:      cfg.Pooler.Mode,
		lim:       cfg.poolLimit(),
		query:     sim.NewStreams(cfg.Seed, "query"),
		cpu:       sim.NewStreams(cfg.Seed, "cpu"),
		think:     sim.NewStreams(cfg.Seed, "think"),
		appGap:    sim.NewStreams(cfg.Seed, "app"),
		reqs:      sim.NewStreams(cfg.Seed, "requests"),
		choice:    sim.NewStreams(cfg.Seed, "statements"),
		parse:     sim.NewStreams(cfg.Seed, "parse"),
		arrive:    sim.NewRand(cfg.Seed, "arrivals"),
		connect:   sim.NewRand(cfg.Seed, "connect"),
		reuseport: sim.NewRand(cfg.Seed, "reuseport"),
		pools:     make([]pooler, cfg.Pooler.Processes),
		linked:    sim.NewLevel(0),
		executing: sim.NewLevel(0),
	}
	m.app.init()
	m.prep.init(cfg)
	m.results.procConns = make([]int64, cfg.Pooler.Processes)
	for i := range m.pools {
		m.pools[i].init()
	}
	m.srv.init(cfg.Server)
	var s sim.Sim
	w := cfg.Workload
	m.window.init(m, &s, o.pilot)
	m.done = o.done
	if o.trace {
		m.trace = map[uint64][]sim.Time{}
	}
	if w.Open() {
		m.scheduleArrival(&s)
	} else {
		m.users = make([]user, w.Clients)
		for i := range m.users {
			m.users[i] = newUser(uint64(i))
			s.At(0, evSession, int32(i), 0)
		}
	}
	s.Run(m)
	return m, &s
}

// draw samples d from the family f at client u's current statement: its
// session and its position in it (transaction, statement).
func (m *model) draw(d sim.Dist, f sim.Streams, u int32) sim.Time {
	if !d.Random() {
		return d.Mean
	}
	us := &m.users[u]
	r := f.At(us.session, uint64(us.txn)<<32|uint64(uint32(us.stmt)))
	return d.Sample(&r)
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
	switch e.Kind {
	case evArrive:
		m.end = s.Now()
		m.arrival(s)
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
		m.poolerMsgDone(s, e.ID, int(e.Arg))
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
	}
}

func (m *model) result(s *sim.Sim) Result {
	return Result{Metrics: m.metrics(s), Compat: CompatFor(m.cfg)}
}

// CompatFor is the session-feature matrix of c's pool mode and settings.
func CompatFor(c Config) compat.Matrix {
	return compat.For(c.Pooler.Mode, c.Pooler.MaxPreparedStatements)
}
