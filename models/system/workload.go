package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// user is one client of the workload: a session of requests of
// transactions of statements.
type user struct {
	session   uint64   // which session it is: the client's index, or the arrival's number (in its class's range)
	cls       int16    // its class
	txn, stmt int32    // position in the session: transactions counted across requests
	req       int32    // the request it runs (counted in the session)
	reqLeft   int32    // transactions of the current request still to run, this one included
	total     int32    // transactions of the whole session
	reqStart  sim.Time // when the current request's first transaction began
	reqFirst  bool     // the next transaction to begin is its request's first
	reqFailed bool     // a transaction of the current request failed
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

func newUser(session uint64, cls int16) user {
	return user{session: session, cls: cls, conn: -1, reqFirst: true}
}

// wl is client u's workload (its class's).
func (m *model) wl(u int32) *Workload { return &m.classes[m.users[u].cls].cfg.Workload }

// txnsOf is how many transactions request req of client u's session runs
// (drawn from the session's own stream at that request: common random
// numbers).
func (m *model) txnsOf(u int32, req int32) int32 {
	d := &m.classes[m.users[u].cls].txnsPer
	if !d.Random() {
		return int32(d.Min)
	}
	r := m.reqs.At(m.users[u].session, uint64(req))
	return int32(d.Sample(&r))
}

// txnBegins starts client u's transaction clock at now (and its request's,
// for the request's first transaction).
func (m *model) txnBegins(u int32, now sim.Time) {
	us := &m.users[u]
	us.txnStart, us.part = now, parts{}
	if us.reqFirst {
		us.reqStart, us.reqFirst = now, false
	}
}

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

// scheduleArrival schedules class cl's next Poisson arrival, if it falls
// within the workload's duration.
func (m *model) scheduleArrival(s *sim.Sim, cl int16) {
	k := &m.classes[cl]
	w := &k.cfg.Workload
	gap := sim.FromSeconds(k.arrive.ExpFloat64() / w.ArrivalRate)
	if t := s.Now() + gap; t < w.Duration {
		s.At(t, evArrive, int32(cl), 0)
	}
}

func (m *model) arrival(s *sim.Sim, cl int16) {
	k := &m.classes[cl]
	if k.workers {
		m.workerArrival(s, cl)
		return
	}
	id := take(&m.users, &m.freeUsers)
	m.users[id] = newUser(k.base+k.sessions, cl)
	k.sessions++
	m.startSession(s, id)
	m.scheduleArrival(s, cl)
}

// startSession is a client beginning its session. Without an application
// pool it opens its own connection for the whole session; with one it
// borrows a connection per transaction.
func (m *model) startSession(s *sim.Sim, u int32) {
	us := &m.users[u]
	now := s.Now()
	m.tally(us.cls, func(r *results) {
		if !r.attempted {
			r.attempted, r.firstAttempt = true, now
		}
	})
	m.tally(us.cls, func(r *results) { r.m.Sessions++ })
	k := &m.classes[us.cls]
	for q := range int32(k.requests) {
		t := m.txnsOf(u, q)
		us.total += t
		if q == 0 {
			us.reqLeft = t
		}
	}
	m.tally(us.cls, func(r *results) { r.m.AttemptedTxns += int64(us.total) })
	m.active++
	us.begun = s.Now()
	if k.noApp {
		// The first transaction waits for the session's connection: its
		// clock starts with the request to connect, so the connection
		// set-up and its queue count in its latency.
		m.txnBegins(u, s.Now())
		us.started = true
		m.openConn(s, u)
		return
	}
	m.beginTxn(s, u)
}

// beginTxn starts a transaction of a client that holds no connection:
// it asks the application pool for one.
func (m *model) beginTxn(s *sim.Sim, u int32) {
	m.txnBegins(u, s.Now())
	m.appAcquire(s, u)
}

// connReady is called when client u has connection c (just opened, or
// handed over by the application pool): the transaction's statements start.
func (m *model) connReady(s *sim.Sim, u, c int32) {
	us := &m.users[u]
	us.conn = c
	us.joined = true
	m.conns[c].user = u
	if us.reqLeft == 0 && m.classes[us.cls].workers {
		m.workerFree(s, u) // a worker connected before its first request
		return
	}
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
	if us.stmt == 0 && m.classes[us.cls].noApp {
		if us.started {
			us.started = false
		} else {
			m.txnBegins(u, s.Now())
		}
	}
	if m.clients != nil && m.clients.Send(u) {
		return // sent when the machine's client-side work is done (Host.Send)
	}
	m.dispatch(s, u)
}

// dispatch sends client u's statement: straight to its backend in direct
// mode, else over the hop to the pooler.
func (m *model) dispatch(s *sim.Sim, u int32) {
	us := &m.users[u]
	c := us.conn
	if m.conns[c].mode == poolmode.Direct {
		m.execute(s, c)
		return
	}
	us.part.hop += m.cfg.Pooler.Hop
	s.After(m.cfg.Pooler.Hop, evAtPooler, c, 0)
}

// reply sends a finished statement's result back to its client.
func (m *model) reply(s *sim.Sim, c int32) {
	u := m.conns[c].user
	if m.conns[c].mode == poolmode.Direct {
		m.recv(s, u)
		return
	}
	m.users[u].part.hop += m.cfg.Pooler.Hop
	s.After(m.cfg.Pooler.Hop, evRecv, u, 0)
}

// recv is a statement's result reaching its client: a machine's
// client-side work may take it (Clients.Read), which hands it on to
// received when it is done (Host.Receive).
func (m *model) recv(s *sim.Sim, u int32) {
	if m.clients != nil && m.clients.Read(u) {
		return
	}
	m.received(s, u)
}

// received is the client holding a statement's result. Between the
// statements of a transaction and between the transactions of a request
// it pauses for the application (Workload.AppPause); between requests it
// thinks.
func (m *model) received(s *sim.Sim, u int32) {
	us := &m.users[u]
	k := &m.classes[us.cls]
	pause := &k.pause
	stream := m.appGap
	if !k.appSet {
		stream = m.think
	}
	last := int(us.stmt)+1 == k.stmts || us.txnFailed
	if last && us.reqLeft == 1 { // the request's last transaction: think follows
		pause, stream = &k.cfg.Workload.Think, m.think
	}
	gap := m.draw(pause, stream, u) // drawn at the position of the statement answered
	us.stmt++
	if last {
		if us.txnFailed {
			us.txnFailed = false
			us.reqFailed = true
			m.tally(us.cls, func(r *results) { r.m.PreparedErrorTxns++ })
		} else {
			now := s.Now()
			m.tally(us.cls, func(r *results) { r.txnDone(now, us) })
			m.window.completed(m, now)
			if m.clients != nil {
				m.clients.Completed(u, now-us.txnStart)
			}
		}
		us.stmt = 0
		us.txn++
		m.txnOver(s, u)
		c := us.conn
		if !k.noApp {
			us.conn = -1
			m.appRelease(s, c)
		}
		if us.txn == us.total {
			if k.workers {
				m.requestDone(s, u)
				return
			}
			if k.noApp {
				us.conn = -1
				m.closeConn(s, c)
			}
			m.endSession(s, u)
			return
		}
	}
	if !last {
		us.part.think += gap
	}
	s.After(gap, evSend, u, 0)
}

// txnOver moves client u past a transaction (completed or failed): the
// request ends with its last one, counted when none of them failed.
func (m *model) txnOver(s *sim.Sim, u int32) {
	us := &m.users[u]
	us.reqLeft--
	if us.reqLeft > 0 {
		return
	}
	if us.reqFailed {
		m.tally(us.cls, func(r *results) { r.m.FailedReqs++ })
	} else {
		lat := s.Now() - us.reqStart
		m.tally(us.cls, func(r *results) { r.reqDone(lat) })
	}
	us.req++
	us.reqFailed, us.reqFirst = false, true
	if int(us.req) < m.classes[us.cls].requests {
		us.reqLeft = m.txnsOf(u, us.req)
	}
}

// failTxn ends client u's current transaction without success: its
// connection was refused or closed under it, or the app pool timed out.
// Without an application pool the whole session ends with it; with one
// the client goes on to its next transaction.
func (m *model) failTxn(s *sim.Sim, u int32, counter func(*Metrics) *int64) {
	if m.classes[m.users[u].cls].workers {
		m.workerLost(s, u, counter)
		return
	}
	us := &m.users[u]
	us.conn = -1
	k := &m.classes[us.cls]
	if k.noApp {
		n, left := int64(us.total-us.txn), int64(m.requestsLeft(u))
		m.tally(us.cls, func(r *results) {
			*counter(&r.m) += n
			r.m.FailedReqs += left
		})
		m.endSession(s, u)
		return
	}
	m.tally(us.cls, func(r *results) { *counter(&r.m)++ })
	us.reqFailed = true
	pause, stream := &k.pause, m.appGap
	if !k.appSet {
		stream = m.think
	}
	if us.reqLeft == 1 {
		pause, stream = &k.cfg.Workload.Think, m.think
	}
	gap := m.draw(pause, stream, u)
	us.stmt = 0
	us.txn++
	m.txnOver(s, u)
	if us.txn == us.total {
		m.endSession(s, u)
		return
	}
	s.After(gap, evSend, u, 0)
}

// requestsLeft is how many of client u's requests have not ended, the
// current one included.
func (m *model) requestsLeft(u int32) int32 {
	return int32(m.classes[m.users[u].cls].requests) - m.users[u].req
}

func (m *model) endSession(s *sim.Sim, u int32) {
	us := &m.users[u]
	us.done = true
	m.active--
	if us.joined {
		d := s.Now() - us.begun
		m.tally(us.cls, func(r *results) { r.sessionLat.Add(d) })
		m.window.sessionOver(m, s.Now())
	}
	if m.classes[us.cls].open {
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
