package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// user is one client of the workload: a session of transactions of
// statements.
type user struct {
	session   uint64   // which session it is: the client's index, or the arrival's number
	txn, stmt int32    // position in the session
	conn      int32    // the connection it uses now, -1 when none
	appWaitNo int64    // number of its current app-pool wait, 0 when not waiting
	txnStart  sim.Time // when the current transaction began (connection requested or first statement sent)
	part      parts    // where the current transaction's time went
	txnFailed bool     // a statement failed: the transaction ends at its reply
	started   bool     // the current transaction's clock already runs (it began with the connection)
	joined    bool     // it got a connection at least once
	begun     sim.Time // when its session started
	done      bool     // session over
}

func newUser(session uint64) user { return user{session: session, conn: -1} }

// parts splits one transaction's latency: each is a sum over its
// statements, and together they add up to the latency exactly.
type parts struct {
	appWait  sim.Time // waiting for an application-pool connection
	connect  sim.Time // opening a connection (backend start-up, queued start-ups)
	wait     sim.Time // waiting for a server at the pooler
	cpuQueue sim.Time // CPU time lost to sharing the cores and to contention
	service  sim.Time // the statements' own server time (CPU demand + fixed part)
	hop      sim.Time // client<->pooler hops
	pooler   sim.Time // queueing for and being relayed by the pooler process's thread
	think    sim.Time // client think time between the transaction's statements
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
	id := take(&m.users, &m.freeUsers)
	m.users[id] = newUser(m.sessions)
	m.sessions++
	m.startSession(s, id)
	m.scheduleArrival(s)
}

// startSession is a client beginning its session. Without an application
// pool it opens its own connection for the whole session; with one it
// borrows a connection per transaction.
func (m *model) startSession(s *sim.Sim, u int32) {
	r := &m.results
	if !r.attempted {
		r.attempted, r.firstAttempt = true, s.Now()
	}
	r.m.Sessions++
	r.m.AttemptedTxns += int64(m.cfg.Workload.TxnsPerSession)
	m.active++
	m.users[u].begun = s.Now()
	if m.cfg.AppPool.Mode == NoAppPool {
		// The first transaction waits for the session's connection: its
		// clock starts with the request to connect, so the connection
		// set-up and its queue count in its latency.
		us := &m.users[u]
		us.txnStart, us.part, us.started = s.Now(), parts{}, true
		m.openConn(s, u)
		return
	}
	m.beginTxn(s, u)
}

// beginTxn starts a transaction of a client that holds no connection:
// it asks the application pool for one.
func (m *model) beginTxn(s *sim.Sim, u int32) {
	us := &m.users[u]
	us.txnStart, us.part = s.Now(), parts{}
	m.appAcquire(s, u)
}

// connReady is called when client u has connection c (just opened, or
// handed over by the application pool): the transaction's statements start.
func (m *model) connReady(s *sim.Sim, u, c int32) {
	us := &m.users[u]
	us.conn = c
	us.joined = true
	m.conns[c].user = u
	m.send(s, u)
}

// send is a client sending its next statement; a client without a
// connection (between pooled transactions) first borrows one.
func (m *model) send(s *sim.Sim, u int32) {
	us := &m.users[u]
	if us.conn < 0 {
		m.beginTxn(s, u)
		return
	}
	if us.stmt == 0 && m.cfg.AppPool.Mode == NoAppPool {
		if us.started {
			us.started = false
		} else {
			us.txnStart, us.part = s.Now(), parts{}
		}
	}
	c := us.conn
	if m.mode == poolmode.Direct {
		m.execute(s, c)
		return
	}
	us.part.hop += m.cfg.Pooler.Hop
	s.After(m.cfg.Pooler.Hop, evAtPooler, c, 0)
}

// reply sends a finished statement's result back to its client.
func (m *model) reply(s *sim.Sim, c int32) {
	u := m.conns[c].user
	if m.mode == poolmode.Direct {
		m.recv(s, u)
		return
	}
	m.users[u].part.hop += m.cfg.Pooler.Hop
	s.After(m.cfg.Pooler.Hop, evRecv, u, 0)
}

// recv is the client holding a statement's result.
func (m *model) recv(s *sim.Sim, u int32) {
	us := &m.users[u]
	w := m.cfg.Workload
	think := m.draw(w.Think, m.think, u) // drawn at the position of the statement answered
	us.stmt++
	last := int(us.stmt) == w.StmtsPerTxn || us.txnFailed
	if last {
		if us.txnFailed {
			us.txnFailed = false
			m.results.m.PreparedErrorTxns++
		} else {
			m.results.txnDone(s.Now(), us)
			m.window.completed(s.Now())
		}
		us.stmt = 0
		us.txn++
		c := us.conn
		if m.cfg.AppPool.Mode != NoAppPool {
			us.conn = -1
			m.appRelease(s, c)
		}
		if int(us.txn) == w.TxnsPerSession {
			if m.cfg.AppPool.Mode == NoAppPool {
				us.conn = -1
				m.closeConn(s, c)
			}
			m.endSession(s, u)
			return
		}
	}
	if !last {
		us.part.think += think
	}
	s.After(think, evSend, u, 0)
}

// failTxn ends client u's current transaction without success: its
// connection was refused or closed under it, or the app pool timed out.
// Without an application pool the whole session ends with it; with one
// the client goes on to its next transaction.
func (m *model) failTxn(s *sim.Sim, u int32, counter *int64) {
	us := &m.users[u]
	us.conn = -1
	w := m.cfg.Workload
	if m.cfg.AppPool.Mode == NoAppPool {
		*counter += int64(w.TxnsPerSession - int(us.txn))
		m.endSession(s, u)
		return
	}
	*counter++
	think := m.draw(w.Think, m.think, u)
	us.stmt = 0
	us.txn++
	if int(us.txn) == w.TxnsPerSession {
		m.endSession(s, u)
		return
	}
	s.After(think, evSend, u, 0)
}

func (m *model) endSession(s *sim.Sim, u int32) {
	us := &m.users[u]
	us.done = true
	m.active--
	if us.joined {
		m.results.sessionLat.Add(s.Now() - us.begun)
		m.window.sessionOver(m, s.Now())
	}
	if m.cfg.Workload.Open() {
		m.freeUsers = append(m.freeUsers, u)
	}
}

// take returns a free slot of items for reuse, or appends a new one.
func take[T any](items *[]T, free *[]int32) int32 {
	if n := len(*free); n > 0 {
		id := (*free)[n-1]
		*free = (*free)[:n-1]
		return id
	}
	var zero T
	*items = append(*items, zero)
	return int32(len(*items) - 1)
}
