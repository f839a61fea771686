package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// pooler is one pooler process: its client connections, its pool of
// server connections (one database, one user) and its single CPU thread.
// A fleet (pooler.processes > 1, so_reuseport) is several of them behind
// one port, each with its own pools and budgets.
type pooler struct {
	connected int       // client connections to this process
	idle      []int32   // idle servers, LIFO (top is the end)
	servers   int       // servers open or logging in
	loggingIn bool      // a login is in flight (at most one per pool)
	full      bool      // PostgreSQL refused a login: stop growing
	waitQ     *sim.FIFO // connections waiting for a server, FIFO

	// The process's thread: messages relayed one at a time, FIFO.
	msgs   []int32 // queued messages: a connection's request (c) or response (^c)
	busy   bool
	cpu    sim.Level // 1 while the thread works (or wakes)
	queued int       // messages handled
}

func (p *pooler) init() {
	p.waitQ = sim.NewFIFO(0)
	p.cpu = sim.NewLevel(0)
}

// loginID is the start-up id of process p's server login; connection ids
// are never negative.
func loginID(p int) int32    { return -1 - int32(p) }
func loginProc(id int32) int { return int(-1 - id) }

// toPooler is a connection's request or a server's response reaching its
// pooler process. Without a pooler CPU model it is handled at once;
// otherwise it queues for the process's single thread.
func (m *model) toPooler(s *sim.Sim, c int32, response bool) {
	msg := c
	if response {
		msg = ^c
	}
	cfg := m.cfg.Pooler
	if cfg.CPUPerMsg == 0 && cfg.Wakeup == 0 {
		m.relay(s, msg)
		return
	}
	m.conns[c].msgAt = s.Now()
	p := &m.pools[m.conns[c].proc]
	if p.busy {
		p.msgs = append(p.msgs, msg)
		return
	}
	m.startMsg(s, int(m.conns[c].proc), msg, true)
}

// startMsg runs msg on process pi's thread: a thread that was asleep
// first wakes (pooler.wakeup), then spends cpu_per_msg, more the more
// client connections it serves (pooler.conn_overhead).
func (m *model) startMsg(s *sim.Sim, pi int, msg int32, wake bool) {
	p := &m.pools[pi]
	cfg := m.cfg.Pooler
	d := sim.FromSeconds(cfg.CPUPerMsg.Seconds() * (1 + cfg.ConnOverhead*float64(p.connected)))
	if wake {
		d += cfg.Wakeup
		p.cpu.Set(s.Now(), 1)
	}
	p.busy = true
	s.After(d, evPoolerMsg, msg, int64(pi))
}

// poolerMsgDone is process pi finishing a message: relay it, then take
// the next queued one without sleeping.
func (m *model) poolerMsgDone(s *sim.Sim, msg int32, pi int) {
	p := &m.pools[pi]
	p.queued++
	if len(p.msgs) > 0 {
		next := p.msgs[0]
		p.msgs = p.msgs[1:]
		m.startMsg(s, pi, next, false)
	} else {
		p.busy = false
		p.cpu.Set(s.Now(), 0)
	}
	c := msg
	if c < 0 {
		c = ^c
	}
	m.users[m.conns[c].user].part.pooler += s.Now() - m.conns[c].msgAt
	m.relay(s, msg)
}

// relay passes a message on: a request to the connection's server (or
// the wait for one), a response back over the hop to the client.
func (m *model) relay(s *sim.Sim, msg int32) {
	if msg < 0 {
		m.reply(s, ^msg)
		return
	}
	m.atPooler(s, msg)
}

// atPooler is a statement reaching the pooler: it runs on the
// connection's server, or waits for one (lazy assignment). Every request
// passes through the wait queue, so assignments without a wait count in
// its Little's-law accounts as waits of 0; idle servers exist only while
// nobody waits.
func (m *model) atPooler(s *sim.Sim, c int32) {
	cn := &m.conns[c]
	if cn.server >= 0 {
		m.execute(s, c)
		return
	}
	p := &m.pools[cn.proc]
	now := s.Now()
	p.waitQ.Push(now, c)
	if n := len(p.idle); n > 0 {
		srv := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.waitQ.Pop(now)
		m.assign(s, c, srv, 0)
		return
	}
	m.waitNo++
	cn.waitNo = m.waitNo
	if t := m.cfg.Pooler.QueryWaitTimeout; t > 0 {
		s.At(m.timeoutAt(now+t), evWaitTimeout, c, cn.waitNo)
	}
	m.grow(s, int(cn.proc))
}

// timeoutAt is when a waiter whose query_wait_timeout runs out at due is
// disconnected: at the first janitor check after due (PgBouncer compares
// the wait with the timeout every 1/3 s, strictly later), or at due itself
// with TimeoutCheck 0.
func (m *model) timeoutAt(due sim.Time) sim.Time {
	p := m.cfg.Pooler.TimeoutCheck
	if p <= 0 {
		return due
	}
	return (due/p + 1) * p
}

// srvBack is a session-mode server coming back from its client's
// disconnect (the Terminate's hop to the pooler, then server_reset_query):
// it goes to the next waiter, or idle.
func (m *model) srvBack(s *sim.Sim, pi int, srv int32) {
	m.linked.Add(s.Now(), -1)
	m.release(s, pi, srv)
}

// assign links server srv to connection c and runs its statement.
func (m *model) assign(s *sim.Sim, c, srv int32, waited sim.Time) {
	cn := &m.conns[c]
	cn.server, cn.waitNo = srv, 0
	m.users[cn.user].part.wait += waited
	m.waits.Add(waited)
	if waited > 0 {
		m.waited++
	}
	m.linked.Add(s.Now(), 1)
	m.execute(s, c)
}

// grow opens one more server connection for process pi when its clients
// wait, no login is in flight and the pool is below its limit
// (PgBouncer's launch_new_connection).
func (m *model) grow(s *sim.Sim, pi int) {
	p := &m.pools[pi]
	if p.loggingIn || p.full || p.waitQ.Len() == 0 || p.servers >= m.lim {
		return
	}
	p.loggingIn = true
	p.servers++
	id := loginID(pi)
	if m.srv.startup.Acquire(s.Now(), id) {
		m.beginStartup(s, id)
	}
}

// loginRefused is PostgreSQL refusing process pi's login (max_connections
// is taken: a fleet whose budgets were not divided). With no server at
// all, the waiting clients get the server's error (sorry, too many
// clients already) and are disconnected; otherwise they wait for the
// servers the pool has.
func (m *model) loginRefused(s *sim.Sim, pi int) {
	p := &m.pools[pi]
	p.loggingIn = false
	p.servers--
	p.full = true
	m.results.m.LoginsRefused++
	if p.servers > 0 {
		return
	}
	for {
		c, _, ok := p.waitQ.Pop(s.Now())
		if !ok {
			return
		}
		m.conns[c].waitNo = 0
		m.results.m.ConnRefused++
		m.disconnect(s, c, &m.results.m.RefusedTxns)
	}
}

// loginDone is a new server ready: it goes to the oldest waiter, and the
// pool may launch the next login.
func (m *model) loginDone(s *sim.Sim, pi int) {
	p := &m.pools[pi]
	p.loggingIn = false
	srv := m.nextServer
	m.nextServer++
	m.results.m.ServerConns = max(m.results.m.ServerConns, int64(m.nextServer))
	m.release(s, pi, srv)
	m.grow(s, pi)
}

// release returns srv to process pi's pool: to the oldest waiter if there
// is one, else to the top of the idle stack.
func (m *model) release(s *sim.Sim, pi int, srv int32) {
	p := &m.pools[pi]
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
	m.executing.Add(s.Now(), -1)
	if m.mode == poolmode.Direct {
		m.reply(s, c)
		return
	}
	cn := &m.conns[c]
	u := &m.users[cn.user]
	status := poolmode.InBlock
	if m.mode == poolmode.Statement || int(u.stmt) == m.cfg.Workload.StmtsPerTxn-1 || u.txnFailed {
		status = poolmode.Idle // statement mode runs every statement as autocommit; a failed transaction is rolled back
	}
	switch m.mode.AfterReady(status, 0) {
	case poolmode.Release:
		srv := cn.server
		cn.server = -1
		m.linked.Add(s.Now(), -1)
		m.release(s, int(cn.proc), srv)
	case poolmode.Keep:
	default:
		panic("system: statement mode saw a transaction block") // the model never opens one
	}
	m.toPooler(s, c, true)
}

// waitTimeout disconnects a connection still waiting for the same server
// request when query_wait_timeout runs out (FATAL query_wait_timeout).
func (m *model) waitTimeout(s *sim.Sim, c int32, waitNo int64) {
	cn := &m.conns[c]
	if cn.waitNo != waitNo {
		return // served in time; the connection may since have been reused
	}
	m.end = s.Now()
	if _, ok := m.pools[cn.proc].waitQ.Remove(s.Now(), c); !ok {
		panic("system: timed-out connection not in the wait queue")
	}
	cn.waitNo = 0
	m.results.m.WaitTimeouts++
	m.disconnect(s, c, &m.results.m.TimedOutTxns)
}
