package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// pooler is the PgBouncer-style pool of server connections (one database,
// one user).
type pooler struct {
	connected int       // client connections to the pooler
	idle      []int32   // idle servers, LIFO (top is the end)
	servers   int       // servers open or logging in
	loggingIn bool      // a login is in flight (at most one per pool)
	waitQ     *sim.FIFO // connections waiting for a server, FIFO
	waitNo    int64
	waits     sim.Samples // one per assignment
	waited    int64       // assignments that waited
	linked    sim.Level   // servers linked to a client
}

func (p *pooler) init() {
	p.waitQ = sim.NewFIFO(0)
	p.linked = sim.NewLevel(0)
}

// atPooler is a statement reaching the pooler: it runs on the
// connection's server, or waits for one (lazy assignment). Every request
// passes through the wait queue, so assignments without a wait count in
// its Little's-law accounts as waits of 0; idle servers exist only while
// nobody waits.
func (m *model) atPooler(s *sim.Sim, c int32) {
	p := &m.pool
	cn := &m.conns[c]
	if cn.server >= 0 {
		m.execute(s, c)
		return
	}
	now := s.Now()
	p.waitQ.Push(now, c)
	if n := len(p.idle); n > 0 {
		srv := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.waitQ.Pop(now)
		m.assign(s, c, srv, 0)
		return
	}
	p.waitNo++
	cn.waitNo = p.waitNo
	if t := m.cfg.Pooler.QueryWaitTimeout; t > 0 {
		s.After(t, evWaitTimeout, c, cn.waitNo)
	}
	m.grow(s)
}

// assign links server srv to connection c and runs its statement.
func (m *model) assign(s *sim.Sim, c, srv int32, waited sim.Time) {
	p := &m.pool
	cn := &m.conns[c]
	cn.server, cn.waitNo = srv, 0
	m.users[cn.user].part.wait += waited
	p.waits.Add(waited)
	if waited > 0 {
		p.waited++
	}
	p.linked.Add(s.Now(), 1)
	m.execute(s, c)
}

// grow opens one more server connection when clients wait, no login is
// in flight and the pool is below its limit (PgBouncer's
// launch_new_connection).
func (m *model) grow(s *sim.Sim) {
	p := &m.pool
	if p.loggingIn || p.waitQ.Len() == 0 || p.servers >= m.lim {
		return
	}
	p.loggingIn = true
	p.servers++
	if m.srv.startup.Acquire(s.Now(), poolLogin) {
		m.beginStartup(s, poolLogin)
	}
}

// loginDone is a new server ready: it goes to the oldest waiter, and the
// pool may launch the next login.
func (p *pooler) loginDone(s *sim.Sim, m *model) {
	p.loggingIn = false
	m.results.m.ServerConns = max(m.results.m.ServerConns, int64(p.servers))
	p.release(s, m, int32(p.servers-1))
	m.grow(s)
}

// release returns srv to the pool: to the oldest waiter if there is one,
// else to the top of the idle stack.
func (p *pooler) release(s *sim.Sim, m *model, srv int32) {
	if c, waited, ok := p.waitQ.Pop(s.Now()); ok {
		m.assign(s, c, srv, waited)
		return
	}
	p.idle = append(p.idle, srv)
}

// statementDone is the server finishing connection c's statement:
// ReadyForQuery goes back, and the pool-mode rule decides whether the
// server stays linked.
func (m *model) statementDone(s *sim.Sim, c int32) {
	if m.mode != poolmode.Direct {
		cn := &m.conns[c]
		u := &m.users[cn.user]
		status := poolmode.InBlock
		if m.mode == poolmode.Statement || int(u.stmt) == m.cfg.Workload.StmtsPerTxn-1 {
			status = poolmode.Idle // statement mode runs every statement as autocommit
		}
		switch m.mode.AfterReady(status, 0) {
		case poolmode.Release:
			srv := cn.server
			cn.server = -1
			m.pool.linked.Add(s.Now(), -1)
			m.pool.release(s, m, srv)
		case poolmode.Keep:
		default:
			panic("system: statement mode saw a transaction block") // the model never opens one
		}
	}
	m.reply(s, c)
}

// waitTimeout disconnects a connection still waiting for the same server
// request when query_wait_timeout runs out (FATAL query_wait_timeout).
func (m *model) waitTimeout(s *sim.Sim, c int32, waitNo int64) {
	cn := &m.conns[c]
	if cn.waitNo != waitNo {
		return // served in time; the connection may since have been reused
	}
	m.end = s.Now()
	if _, ok := m.pool.waitQ.Remove(s.Now(), c); !ok {
		panic("system: timed-out connection not in the wait queue")
	}
	cn.waitNo = 0
	m.results.m.WaitTimeouts++
	m.dropConn(s, c)
}
