package system

import (
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Event kinds.
const (
	evArrive      int32 = iota // open workload: the next session arrives
	evConnect                  // a client tries to connect
	evStartupDone              // a backend finished starting (direct client or pool login)
	evSend                     // a client sends its next statement
	evAtPooler                 // a statement reaches the pooler
	evQueryDone                // the server finished a statement
	evRecv                     // the client has the statement's result
	evWaitTimeout              // query_wait_timeout for a waiting client (Arg: wait number)
)

// poolLogin is the startup-queue entry of a pool's server login (client
// entries are client indices, which are never negative).
const poolLogin int32 = -1

type client struct {
	txn, stmt int32    // position in the session: current transaction and statement
	server    int32    // linked server, -1 when none
	waitNo    int64    // number of the current wait for a server, 0 when not waiting
	txnStart  sim.Time // when the current transaction's first statement was sent
	hop       sim.Time // hop time spent in the current transaction
	done      bool     // session over (finished, refused or timed out)
}

// model is the system's state; it is the sim.Handler.
type model struct {
	cfg  Config
	mode poolmode.Mode
	lim  int // pool size limit

	query, think, arrive, connect *sim.Rand

	clients []client
	free    []int32 // finished client slots for reuse (open workload)

	// server
	backends  int           // open backend connections (direct clients and pool servers)
	startup   *sim.Resource // backend start-up workers (connect_concurrency); ids are clients or poolLogin
	busy      sim.Level     // backends linked to a client
	connected int           // clients connected to the pooler

	// pooler
	idle     []int32 // idle servers, LIFO (top is the end)
	servers  int     // servers open or logging in
	loggedIn bool    // a login is in flight
	waitQ    *sim.FIFO
	waitSeq  int64

	// results
	lat, wait             sim.Samples
	m                     Metrics
	firstAttempt, lastTxn sim.Time
	attempted             bool
	hopTotal              sim.Time
	end                   sim.Time // time of the last state change
	waited                int64    // assignments that waited
}

// Run simulates cfg and returns its measurements. cfg must be valid
// (Validate); Run panics on an invalid configuration.
func Run(cfg Config) Result {
	if err := cfg.Validate(); err != nil {
		panic("system.Run: " + err.Error())
	}
	m := &model{
		cfg:     cfg,
		mode:    cfg.Pooler.Mode,
		lim:     cfg.poolLimit(),
		query:   sim.NewRand(cfg.Seed, "query"),
		think:   sim.NewRand(cfg.Seed, "think"),
		arrive:  sim.NewRand(cfg.Seed, "arrivals"),
		connect: sim.NewRand(cfg.Seed, "connect"),
		waitQ:   sim.NewFIFO(0),
		busy:    sim.NewLevel(0),
		startup: sim.NewResource(0, cfg.Server.ConnectConcurrency),
	}
	var s sim.Sim
	w := cfg.Workload
	if w.Open() {
		m.scheduleArrival(&s)
	} else {
		m.clients = make([]client, w.Clients)
		for i := range m.clients {
			m.clients[i].server = -1
			s.At(0, evConnect, int32(i), 0)
		}
	}
	s.Run(m)
	return m.result(&s)
}

func (m *model) Handle(s *sim.Sim, e sim.Event) {
	if e.Kind != evWaitTimeout {
		m.end = s.Now()
	}
	switch e.Kind {
	case evArrive:
		m.arrival(s)
	case evConnect:
		m.connectClient(s, e.ID)
	case evStartupDone:
		m.startupDone(s, e.ID)
	case evSend:
		m.send(s, e.ID)
	case evAtPooler:
		m.atPooler(s, e.ID)
	case evQueryDone:
		m.queryDone(s, e.ID)
	case evRecv:
		m.recv(s, e.ID)
	case evWaitTimeout:
		m.waitTimeout(s, e.ID, e.Arg)
	}
}

// scheduleArrival schedules the next Poisson arrival, if it falls within
// the workload's duration.
func (m *model) scheduleArrival(s *sim.Sim) {
	gap := sim.FromSeconds(m.arrive.ExpFloat64() / m.cfg.Workload.ArrivalRate)
	if t := s.Now() + gap; t < m.cfg.Workload.Duration {
		s.At(t, evArrive, 0, 0)
	}
}

func (m *model) arrival(s *sim.Sim) {
	var id int32
	if n := len(m.free); n > 0 {
		id = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		id = int32(len(m.clients))
		m.clients = append(m.clients, client{})
	}
	m.clients[id] = client{server: -1}
	m.connectClient(s, id)
	m.scheduleArrival(s)
}

// connectClient is a client's connection attempt.
func (m *model) connectClient(s *sim.Sim, id int32) {
	if !m.attempted {
		m.attempted, m.firstAttempt = true, s.Now()
	}
	m.m.Sessions++
	m.m.AttemptedTxns += int64(m.cfg.Workload.TxnsPerSession)
	if m.mode == poolmode.Direct {
		m.startBackend(s, id)
		return
	}
	if m.connected >= m.cfg.Pooler.MaxClientConn {
		m.refuse(id) // FATAL no more connections allowed (max_client_conn)
		return
	}
	m.connected++
	m.send(s, id)
}

func (m *model) refuse(id int32) {
	m.m.ConnRefused++
	m.m.RefusedTxns += int64(m.cfg.Workload.TxnsPerSession)
	m.finish(id)
}

// startBackend asks a start-up worker to start a backend for id (a direct
// client or poolLogin); requests beyond connect_concurrency queue in
// arrival order.
func (m *model) startBackend(s *sim.Sim, id int32) {
	if m.startup.Acquire(s.Now(), id) {
		m.beginStartup(s, id)
	}
}

// beginStartup runs on a worker that took id. The backend claims its
// max_connections slot as it starts; a direct client that finds every slot
// taken is refused (sorry, too many clients already) and the worker moves
// straight on to the next request.
func (m *model) beginStartup(s *sim.Sim, id int32) {
	for m.backends >= m.cfg.Server.MaxConnections {
		if id == poolLogin { // cannot happen while the pool limit is capped at max_connections
			m.loggedIn = false
			m.servers--
		} else {
			m.refuse(id)
		}
		next, ok := m.startup.Release(s.Now())
		if !ok {
			return
		}
		id = next
	}
	m.backends++
	s.After(m.cfg.Server.Connect.Sample(m.connect), evStartupDone, id, 0)
}

func (m *model) startupDone(s *sim.Sim, id int32) {
	if id == poolLogin {
		m.loggedIn = false
		m.m.ServerConns = max(m.m.ServerConns, int64(m.servers))
		m.releaseServer(s, int32(m.servers-1))
	} else {
		m.busy.Add(s.Now(), 1)
		m.m.ServerConns = max(m.m.ServerConns, int64(m.backends))
		m.send(s, id)
	}
	if next, ok := m.startup.Release(s.Now()); ok {
		m.beginStartup(s, next)
	}
	if id == poolLogin {
		m.grow(s)
	}
}

// send is a client sending its next statement.
func (m *model) send(s *sim.Sim, id int32) {
	c := &m.clients[id]
	if c.stmt == 0 {
		c.txnStart, c.hop = s.Now(), 0
	}
	if m.mode == poolmode.Direct {
		s.After(m.cfg.Workload.Query.Sample(m.query), evQueryDone, id, 0)
		return
	}
	c.hop += m.cfg.Pooler.Hop
	s.After(m.cfg.Pooler.Hop, evAtPooler, id, 0)
}

// atPooler is a statement reaching the pooler: it runs on the client's
// server, or waits for one (lazy assignment).
func (m *model) atPooler(s *sim.Sim, id int32) {
	c := &m.clients[id]
	if c.server < 0 {
		// Every request passes through the wait queue, so assignments
		// without a wait count in its Little's-law accounts as waits of 0.
		// Idle servers exist only while nobody waits.
		now := s.Now()
		m.waitQ.Push(now, id)
		if n := len(m.idle); n > 0 {
			srv := m.idle[n-1]
			m.idle = m.idle[:n-1]
			m.waitQ.Pop(now)
			m.assign(s, id, srv, 0)
			return
		}
		m.waitSeq++
		c.waitNo = m.waitSeq
		if t := m.cfg.Pooler.QueryWaitTimeout; t > 0 {
			s.After(t, evWaitTimeout, id, c.waitNo)
		}
		m.grow(s)
		return
	}
	m.startQuery(s, id)
}

// assign links server srv to waiting client id.
func (m *model) assign(s *sim.Sim, id, srv int32, waited sim.Time) {
	c := &m.clients[id]
	c.server, c.waitNo = srv, 0
	m.wait.Add(waited)
	m.m.Assignments++
	if waited > 0 {
		m.waited++
	}
	m.busy.Add(s.Now(), 1)
	m.startQuery(s, id)
}

func (m *model) startQuery(s *sim.Sim, id int32) {
	s.After(m.cfg.Workload.Query.Sample(m.query), evQueryDone, id, 0)
}

// grow opens one more server connection when clients wait, no login is in
// flight and the pool is below its limit (PgBouncer's launch_new_connection).
func (m *model) grow(s *sim.Sim) {
	if m.loggedIn || m.waitQ.Len() == 0 || m.servers >= m.lim {
		return
	}
	m.loggedIn = true
	m.servers++
	m.startBackend(s, poolLogin)
}

// releaseServer returns srv to the pool: to the oldest waiter if there is
// one, else to the top of the idle stack.
func (m *model) releaseServer(s *sim.Sim, srv int32) {
	if id, waited, ok := m.waitQ.Pop(s.Now()); ok {
		m.assign(s, id, srv, waited)
		return
	}
	m.idle = append(m.idle, srv)
}

// queryDone is the server finishing a statement: ReadyForQuery goes back,
// and the pool-mode rule decides whether the server stays linked.
func (m *model) queryDone(s *sim.Sim, id int32) {
	c := &m.clients[id]
	if m.mode == poolmode.Direct {
		m.recv(s, id)
		return
	}
	status := poolmode.InBlock
	if m.mode == poolmode.Statement || int(c.stmt) == m.cfg.Workload.StmtsPerTxn-1 {
		status = poolmode.Idle // statement mode runs every statement as autocommit
	}
	switch m.mode.AfterReady(status, 0) {
	case poolmode.Release:
		srv := c.server
		c.server = -1
		m.busy.Add(s.Now(), -1)
		m.releaseServer(s, srv)
	case poolmode.Keep:
	default:
		panic("system: statement mode saw a transaction block") // the model never opens one
	}
	c.hop += m.cfg.Pooler.Hop
	s.After(m.cfg.Pooler.Hop, evRecv, id, 0)
}

// recv is the client holding a statement's result.
func (m *model) recv(s *sim.Sim, id int32) {
	c := &m.clients[id]
	w := m.cfg.Workload
	c.stmt++
	if int(c.stmt) == w.StmtsPerTxn {
		now := s.Now()
		m.m.OKTxns++
		m.lat.Add(now - c.txnStart)
		m.hopTotal += c.hop
		m.lastTxn = now
		c.stmt = 0
		c.txn++
		if int(c.txn) == w.TxnsPerSession {
			m.disconnect(s, id)
			return
		}
	}
	s.After(w.Think.Sample(m.think), evSend, id, 0)
}

// disconnect ends a connected client's session.
func (m *model) disconnect(s *sim.Sim, id int32) {
	c := &m.clients[id]
	if m.mode == poolmode.Direct {
		m.backends--
		m.busy.Add(s.Now(), -1)
		m.finish(id)
		return
	}
	m.connected--
	if srv := c.server; srv >= 0 {
		c.server = -1
		m.busy.Add(s.Now(), -1)
		// The session ends between transactions, so the server is clean:
		// reset (session mode) or plain release.
		switch m.mode.ClientGone(true) {
		case poolmode.Reset, poolmode.Release:
			m.releaseServer(s, srv)
		default:
			panic("system: a clean server was not released")
		}
	}
	m.finish(id)
}

func (m *model) finish(id int32) {
	m.clients[id].done = true
	if m.cfg.Workload.Open() {
		m.free = append(m.free, id)
	}
}

// waitTimeout disconnects a client still waiting for the same server
// request when query_wait_timeout runs out.
func (m *model) waitTimeout(s *sim.Sim, id int32, waitNo int64) {
	c := &m.clients[id]
	if c.waitNo != waitNo || c.done {
		return
	}
	if _, ok := m.waitQ.Remove(s.Now(), id); !ok {
		panic("system: timed-out client not in the wait queue")
	}
	c.waitNo = 0
	m.end = s.Now()
	m.m.WaitTimeouts++
	m.m.TimedOutTxns += int64(m.cfg.Workload.TxnsPerSession - int(c.txn))
	m.connected--
	m.finish(id)
}

func (m *model) result(s *sim.Sim) Result {
	// Stale wait timeouts (for clients served in time) are still popped
	// after the last real event; the run ends at the last state change.
	end := m.end
	mt := m.m
	mt.Events = int64(s.Handled())
	for i := range m.clients {
		if c := &m.clients[i]; !c.done {
			mt.UnfinishedTxn += int64(m.cfg.Workload.TxnsPerSession - int(c.txn))
		}
	}
	wall := m.lastTxn - m.firstAttempt
	if mt.OKTxns == 0 {
		wall = 0
	}
	mt.WallMs = ms(wall)
	if wall > 0 {
		mt.TPS = float64(mt.OKTxns) / wall.Seconds()
	}
	mt.MeanMs = ms(m.lat.Mean())
	mt.P50Ms = ms(m.lat.Percentile(50))
	mt.P95Ms = ms(m.lat.Percentile(95))
	mt.P99Ms = ms(m.lat.Percentile(99))
	mt.WaitMeanMs = ms(m.wait.Mean())
	mt.WaitP50Ms = ms(m.wait.Percentile(50))
	mt.WaitP99Ms = ms(m.wait.Percentile(99))
	if mt.Assignments > 0 {
		mt.WaitProb = float64(m.waited) / float64(mt.Assignments)
	}
	if mt.OKTxns > 0 {
		mt.HopMsPerTxn = ms(m.hopTotal) / float64(mt.OKTxns)
	}
	size := m.lim
	if m.mode == poolmode.Direct {
		size = m.cfg.Server.MaxConnections
	}
	mt.ServerUtil = m.busy.Mean(end) / float64(size)
	mt.WaitL, mt.WaitLambda, mt.WaitW = m.waitQ.Little(end)
	mt.WaitMaxLen = m.waitQ.MaxLen()
	return Result{Metrics: mt, Compat: compat.For(m.mode, m.cfg.Pooler.MaxPreparedStatements)}
}
