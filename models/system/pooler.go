package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/poolqueue"
	"github.com/poolsim/poolsim/sim"
)

// proc is one pooler process: its client connections and its single CPU
// thread. A fleet (pooler.processes > 1, so_reuseport) is several of them
// behind one port, each with its own pools and budgets.
type proc struct {
	connected int // client connections to this process

	// The process's thread: messages relayed and assignments made one at
	// a time, FIFO.
	msgs   []work // queued work
	cur    work   // the work in hand while busy
	cost   sim.Time
	busy   bool
	idleAt sim.Time  // when the thread last ran out of work (-1: never)
	cpu    sim.Level // 1 while the thread works (or wakes)
	queued int       // messages handled

	// Servers open or logging in per database and per user (indexes of
	// model.dbs and model.usersOf), for max_db_connections and
	// max_user_connections.
	dbServers, userServers []int
}

// work is a piece of a pooler thread's work: relaying a message (msg is a
// connection's request c or its response ^c) or handing the server just
// linked to connection msg (pooler.cpu_per_assign).
type work struct {
	msg    int32
	assign bool
}

// pooler is one pool of one process: the server connections of one
// database and user (one PoolSpec).
type pooler struct {
	proc, spec int
	// queue holds the connections waiting for a server, the idle servers
	// and the login in flight, by the rules the proxy follows too.
	queue poolqueue.Queue[int32, int32]
	// wait measures the wait queue; every change to queue's waiters is
	// counted here.
	wait    sim.QueueStats
	full    bool // PostgreSQL refused a login: stop growing
	blocked bool // max_db_connections or max_user_connections held its growth
}

func (p *pooler) init(proc, spec int) {
	p.proc, p.spec = proc, spec
	p.wait = sim.NewQueueStats(0)
}

// loginID is the start-up id of pool p's server login; connection ids are
// never negative.
func loginID(p int) int32    { return -1 - int32(p) }
func loginPool(id int32) int { return int(-1 - id) }

// toPooler is a connection's request or a server's response reaching its
// pooler process. Without a pooler CPU model it is handled at once;
// otherwise it queues for the process's single thread.
func (m *model) toPooler(s *sim.Sim, c int32, response bool) {
	msg := c
	if response {
		msg = ^c
	}
	if !m.thread {
		m.relay(s, msg)
		return
	}
	m.toThread(s, c, work{msg: msg})
}

// toThread queues w, for connection c, on the thread of c's process; an
// idle thread starts it at once, first waking - unless it is an
// assignment the thread makes as it finishes the message that led to it.
func (m *model) toThread(s *sim.Sim, c int32, w work) {
	now := s.Now()
	m.conns[c].msgAt = now
	pi := int(m.conns[c].proc)
	p := &m.procs[pi]
	if p.busy {
		p.msgs = append(p.msgs, w)
		return
	}
	m.startWork(s, pi, w, !(w.assign && p.idleAt == now))
}

// startWork runs w on process pi's thread: a thread that was asleep
// first wakes (pooler.wakeup; on the run's CPU, Parts.Pooler, as long as
// the CPU says: CPU.PoolerWakeup), then spends cpu_per_msg on a message,
// more the more client connections it serves (pooler.conn_overhead), or
// cpu_per_assign on an assignment - on a CPU of its own, or as a job on
// the run's CPU.
func (m *model) startWork(s *sim.Sim, pi int, w work, wake bool) {
	p := &m.procs[pi]
	cfg := m.cfg.Pooler
	d := sim.FromSeconds(cfg.CPUPerMsg.Seconds() * (1 + cfg.ConnOverhead*float64(p.connected)))
	if w.assign {
		d = cfg.CPUPerAssign
	}
	if p.cpu.Value() == 0 { // it was idle
		p.cpu.Set(s.Now(), 1)
	}
	p.busy, p.cur, p.cost = true, w, d
	var delay sim.Time
	if wake {
		delay = cfg.Wakeup
		if m.poolerOnCPU {
			delay = m.port.PoolerWakeup(cfg.Wakeup)
		}
	}
	switch {
	case !m.poolerOnCPU:
		s.After(d+delay, evPoolerMsg, w.msg, int64(pi))
	case delay > 0:
		s.After(delay, evPoolerWake, w.msg, int64(pi))
	default:
		m.poolerJob(s, pi)
	}
}

// poolerJob runs the work in hand of process pi's thread as a job on the
// run's CPU (Parts.Pooler).
func (m *model) poolerJob(s *sim.Sim, pi int) {
	p := &m.procs[pi]
	if p.cost <= 0 {
		s.After(0, evPoolerMsg, p.cur.msg, int64(pi))
		return
	}
	m.runJob(Job{Kind: JobPooler, ID: int32(pi), Work: p.cost})
}

// threadDone is process pi finishing its work in hand: take the next
// queued work without sleeping, then relay the message or run the
// statement of the connection given its server.
func (m *model) threadDone(s *sim.Sim, pi int) {
	p := &m.procs[pi]
	w := p.cur
	if !w.assign {
		p.queued++
	}
	if len(p.msgs) > 0 {
		next := p.msgs[0]
		p.msgs = p.msgs[1:]
		m.startWork(s, pi, next, false)
	} else {
		p.busy = false
		p.cpu.Set(s.Now(), 0)
		p.idleAt = s.Now()
	}
	c := w.msg
	if c < 0 {
		c = ^c
	}
	m.users[m.conns[c].user].part.pooler += s.Now() - m.conns[c].msgAt
	if w.assign {
		m.execute(s, c)
		return
	}
	m.relay(s, w.msg)
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
	p := &m.pools[cn.pool]
	now := s.Now()
	p.wait.Arrive(now)
	if srv, ok := p.queue.Arrive(c, int64(now)); ok {
		p.wait.Depart(now, 0)
		m.assign(s, c, srv, 0)
		return
	}
	m.waitNo++
	cn.waitNo = m.waitNo
	if t := m.cfg.Pooler.QueryWaitTimeout; t > 0 {
		s.At(m.timeoutAt(now+sim.Time(t)), evWaitTimeout, c, cn.waitNo)
	}
	m.grow(s, int(cn.pool))
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
	m.unlink(s.Now(), pi)
	m.release(s, pi, srv)
}

// link and unlink count a server of pool pi held for a client.
func (m *model) link(now sim.Time, pi int) {
	m.linked.Add(now, 1)
	if m.multi {
		m.specLinked[m.pools[pi].spec].Add(now, 1)
	}
}

func (m *model) unlink(now sim.Time, pi int) {
	m.linked.Add(now, -1)
	if m.multi {
		m.specLinked[m.pools[pi].spec].Add(now, -1)
	}
}

// assign links server srv to connection c and runs its statement.
func (m *model) assign(s *sim.Sim, c, srv int32, waited sim.Time) {
	cn := &m.conns[c]
	cn.server, cn.waitNo = srv, 0
	us := &m.users[cn.user]
	us.part.wait += waited
	m.tally(us.cls, func(r *results) {
		r.waits.Add(waited)
		r.m.WaitMaxMs = max(r.m.WaitMaxMs, ms(waited))
		if waited > 0 {
			r.waited++
		}
	})
	m.link(s.Now(), int(cn.pool))
	if m.cfg.Pooler.CPUPerAssign > 0 { // the thread hands the server over first
		m.toThread(s, c, work{msg: c, assign: true})
		return
	}
	m.execute(s, c)
}

// grow opens one more server connection for pool pi when its clients
// wait, no login is in flight and the pool is below its limits
// (PgBouncer's launch_new_connection): its pool_size, then the database's
// max_db_connections and the user's max_user_connections, for which an
// idle server of another pool of the same database or user is closed
// first (evict_connection); if none is idle the pool waits for one.
func (m *model) grow(s *sim.Sim, pi int) {
	p := &m.pools[pi]
	lim := m.specLim[p.spec]
	if p.full || !p.queue.NeedLaunch(lim) && !p.queue.BelowMin(min(m.cfg.Pooler.MinPoolSize, lim)) {
		return
	}
	if !m.roomFor(s, pi) {
		p.blocked = true
		return
	}
	p.blocked = false
	p.queue.Launch()
	m.countServer(pi, 1)
	id := loginID(pi)
	if m.srv.startup.Acquire(s.Now(), id) {
		m.beginStartup(s, id)
	}
}

// roomFor reports whether pool pi may open a server under
// max_db_connections and max_user_connections, closing another pool's
// idle server of the same database or user to make room.
func (m *model) roomFor(s *sim.Sim, pi int) bool {
	p := &m.pools[pi]
	pr := &m.procs[p.proc]
	db, usr := m.specDB[p.spec], m.specUser[p.spec]
	if lim := m.cfg.Pooler.MaxDBConnections; lim > 0 && pr.dbServers[db] >= m.cfg.share(lim) {
		if !m.evict(s, pi, func(q int) bool { return m.specDB[q] == db }) {
			return false
		}
	}
	if lim := m.cfg.Pooler.MaxUserConnections; lim > 0 && pr.userServers[usr] >= m.cfg.share(lim) {
		if !m.evict(s, pi, func(q int) bool { return m.specUser[q] == usr }) {
			return false
		}
	}
	return true
}

// evict closes an idle server of another pool of pool pi's process whose
// spec matches, and reports whether it found one.
func (m *model) evict(s *sim.Sim, pi int, match func(spec int) bool) bool {
	proc := m.pools[pi].proc
	for j := proc * len(m.specs); j < (proc+1)*len(m.specs); j++ {
		q := &m.pools[j]
		idle := q.queue.Idle()
		if j == pi || len(idle) == 0 || !match(q.spec) {
			continue
		}
		q.queue.Close(idle[len(idle)-1]) // the most recently used
		q.full = false
		m.countServer(j, -1)
		m.srv.closeBackend(s.Now())
		m.results.m.ServersEvicted++
		return true
	}
	return false
}

// countServer counts a server of pool pi opening (+1) or closing (-1)
// against its database's and user's limits.
func (m *model) countServer(pi int, d int) {
	if !m.multi {
		return
	}
	p := &m.pools[pi]
	pr := &m.procs[p.proc]
	pr.dbServers[m.specDB[p.spec]] += d
	pr.userServers[m.specUser[p.spec]] += d
}

// loginRefused is PostgreSQL refusing pool pi's login (max_connections
// is taken: a fleet whose budgets were not divided, or pools whose sizes
// add up beyond it). With no server at all, the waiting clients get the
// server's error (sorry, too many clients already) and are disconnected;
// otherwise they wait for the servers the pool has.
func (m *model) loginRefused(s *sim.Sim, pi int) {
	p := &m.pools[pi]
	fail := p.queue.LoginFailed(true) // refused with an error
	m.countServer(pi, -1)
	p.full = true
	m.results.m.LoginsRefused++
	if !fail {
		return
	}
	now := s.Now()
	for {
		c, since, ok := p.queue.Next()
		if !ok {
			return
		}
		p.wait.Depart(now, now-sim.Time(since))
		m.conns[c].waitNo = 0
		m.tally(m.conns[c].cls, func(r *results) { r.m.ConnRefused++ })
		m.disconnect(s, c, refusedTxns)
	}
}

// openAtStart opens the idle servers a machine asked for
// (Host.OpenServers) in every pool at time zero, pool by pool, each
// within its pool's limit and all within server.max_connections.
func (m *model) openAtStart(s *sim.Sim) {
	// min_pool_size: every pooled pool starts its logins at once, one at a
	// time, up to min(min_pool_size, its limit) (grow tops it up).
	if m.cfg.Pooler.MinPoolSize > 0 {
		for pi := range m.pools {
			if m.specs[m.pools[pi].spec].Mode.Pooled() {
				m.grow(s, pi)
			}
		}
	}
	n := m.serversOpen
	if n <= 0 {
		return
	}
	for pi := range m.pools {
		p := &m.pools[pi]
		if !m.specs[p.spec].Mode.Pooled() {
			continue
		}
		for range min(n, m.specLim[p.spec]) {
			if m.srv.backends >= m.cfg.Server.Usable() || !m.roomFor(s, pi) {
				return
			}
			p.queue.Launch()
			m.countServer(pi, 1)
			m.srv.openBackend(s.Now())
			m.loginDone(s, pi)
		}
	}
}

// loginDone is a new server ready: it goes to the oldest waiter, and the
// pool may launch the next login.
func (m *model) loginDone(s *sim.Sim, pi int) {
	m.pools[pi].queue.LoginDone()
	srv := m.nextServer
	m.nextServer++
	m.results.m.ServerConns = max(m.results.m.ServerConns, int64(m.nextServer))
	m.release(s, pi, srv)
	m.grow(s, pi)
}

// release returns srv to pool pi: to the oldest waiter if there is one,
// else to the top of the idle stack - where a pool of the same database
// or user held by max_db_connections or max_user_connections may take
// its place.
func (m *model) release(s *sim.Sim, pi int, srv int32) {
	p := &m.pools[pi]
	if c, since, ok := p.queue.Release(srv); ok {
		now := s.Now()
		waited := now - sim.Time(since)
		p.wait.Depart(now, waited)
		m.assign(s, c, srv, waited)
		return
	}
	if m.multi {
		m.unblock(s, p.proc)
	}
}

// unblock lets the pools of process proc that max_db_connections or
// max_user_connections held try again, oldest waiter first.
func (m *model) unblock(s *sim.Sim, proc int) {
	for {
		best := -1
		var oldest sim.Time
		for j := proc * len(m.specs); j < (proc+1)*len(m.specs); j++ {
			q := &m.pools[j]
			if !q.blocked {
				continue
			}
			since, ok := q.queue.Oldest()
			if t := sim.Time(since); ok && (best < 0 || t < oldest) {
				best, oldest = j, t
			}
		}
		if best < 0 {
			return
		}
		m.grow(s, best)
		if m.pools[best].blocked {
			return
		}
	}
}

// statementDone is the server finishing connection c's statement:
// ReadyForQuery goes back, and the pool-mode rule decides whether the
// server stays linked.
func (m *model) statementDone(s *sim.Sim, c int32) {
	cn := &m.conns[c]
	m.execDone(s.Now(), cn.cls)
	if cn.mode == poolmode.Direct {
		m.reply(s, c)
		return
	}
	u := &m.users[cn.user]
	status := poolmode.InBlock
	if cn.mode == poolmode.Statement || int(u.stmt) == m.classes[cn.cls].cfg.Workload.StmtsPerTxn-1 || u.txnFailed {
		status = poolmode.Idle // statement mode runs every statement as autocommit; a failed transaction is rolled back
	}
	switch cn.mode.AfterReady(status, 0) {
	case poolmode.Release:
		srv := cn.server
		cn.server = -1
		m.unlink(s.Now(), int(cn.pool))
		if m.cfg.Pooler.CPUPerAssign > 0 && !m.cfg.Pooler.AssignFirst {
			// The thread relays the ReadyForQuery, then hands the
			// server to a waiter: the assignment queues behind it.
			m.toPooler(s, c, true)
			m.release(s, int(cn.pool), srv)
			return
		}
		// The server goes to a waiter first - with pooler.assign_first
		// its assignment starts the thread's queue - and the
		// ReadyForQuery is relayed after it.
		m.release(s, int(cn.pool), srv)
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
	now := s.Now()
	m.end = now
	p := &m.pools[cn.pool]
	since, ok := p.queue.Remove(c)
	if !ok {
		panic("system: timed-out connection not in the wait queue")
	}
	p.wait.Depart(now, now-sim.Time(since))
	cn.waitNo = 0
	m.tally(cn.cls, func(r *results) { r.m.WaitTimeouts++ })
	m.disconnect(s, c, timedOutTxns)
}
