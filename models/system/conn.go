package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// conn is one client connection: to the pooler, or in direct mode to its
// own backend.
type conn struct {
	user      int32 // the client using it, -1 when idle in the app pool
	server    int32 // linked pooler server, -1 when none
	proc      int32 // the pooler process the kernel gave it
	pool      int32 // its pool at that process (index into model.pools)
	cls       int16 // the class whose application opened it
	mode      poolmode.Mode
	msgAt     sim.Time // when its message in flight reached the pooler thread
	serial    int64    // which connection opened it was (1, 2, ...)
	driver    driver   // prepared statements, as its driver sees them
	waitNo    int64    // number of its current wait for a server, 0 when not waiting
	requested sim.Time // when it asked to open, or to be given a server
	cpuDemand sim.Time // the running statement's CPU time
	cpuStart  sim.Time // when its CPU phase began
	fixed     sim.Time // the running statement's non-CPU time
}

// openConn opens a new connection for client u. In direct mode it needs a
// backend (start-up queue, max_connections); a pooler answers the login
// itself, so it only checks max_client_conn.
func (m *model) openConn(s *sim.Sim, u int32) {
	c := take(&m.conns, &m.freeConns)
	d := m.conns[c].driver
	cl := m.users[u].cls
	k := &m.classes[cl]
	m.conns[c] = conn{user: u, server: -1, requested: s.Now(), cls: cl, mode: k.mode}
	m.tally(cl, func(r *results) { r.m.ConnsOpened++ })
	m.conns[c].serial = m.results.m.ConnsOpened
	if m.prep.on {
		d.reset(m.prep.n)
		m.conns[c].driver = d
	}
	k.app.opens++
	if k.mode == poolmode.Direct {
		if m.srv.startup.Acquire(s.Now(), c) {
			m.beginStartup(s, c)
		}
		return
	}
	if n := m.cfg.Pooler.Processes; n > 1 {
		m.conns[c].proc = int32(m.reuseport.IntN(uint64(n))) // so_reuseport hashes new connections
	}
	cn := &m.conns[c]
	cn.pool = cn.proc*int32(len(m.specs)) + int32(k.spec)
	pr := &m.procs[cn.proc]
	if pr.connected >= m.cfg.share(m.cfg.Pooler.MaxClientConn) {
		m.refuse(s, c) // FATAL no more connections allowed (max_client_conn)
		return
	}
	pr.connected++
	m.results.procConns[cn.proc]++
	m.connOpened(s, c)
}

// connOpened hands a newly opened connection to its client.
func (m *model) connOpened(s *sim.Sim, c int32) {
	u := m.conns[c].user
	m.users[u].part.connect += s.Now() - m.conns[c].requested
	a := &m.classes[m.conns[c].cls].app
	a.opens--
	a.open++
	m.connReady(s, u, c)
}

// refuse is a connection attempt refused by PostgreSQL (max_connections)
// or the pooler (max_client_conn).
func (m *model) refuse(s *sim.Sim, c int32) {
	u, cl := m.conns[c].user, m.conns[c].cls
	m.classes[cl].app.opens--
	m.freeConns = append(m.freeConns, c)
	m.tally(cl, func(r *results) { r.m.ConnRefused++ })
	m.failTxn(s, u, refusedTxns)
	m.appSlotFreed(s, cl)
}

// beginStartup runs on a start-up worker that took c (a direct
// connection, or a pool's login id). The backend claims its max_connections slot
// as it starts; a direct connection that finds every slot taken is refused
// (sorry, too many clients already) and the worker moves straight on.
func (m *model) beginStartup(s *sim.Sim, c int32) {
	for m.srv.backends >= m.cfg.Server.MaxConnections {
		if c < 0 {
			m.loginRefused(s, loginPool(c))
		} else {
			m.refuse(s, c)
		}
		next, ok := m.srv.startup.Release(s.Now())
		if !ok {
			return
		}
		c = next
	}
	m.srv.openBackend(s.Now())
	m.startBackend(s, c)
}

func (m *model) startupDone(s *sim.Sim, c int32) {
	if next, ok := m.srv.startup.Release(s.Now()); ok {
		defer m.beginStartup(s, next)
	}
	if c < 0 {
		m.loginDone(s, loginPool(c))
		return
	}
	m.srv.busy.Add(s.Now(), 1)
	if m.multi { // a direct pool's backends in use count as linked
		m.specLinked[m.classes[m.conns[c].cls].spec].Add(s.Now(), 1)
	}
	m.connOpened(s, c)
}

// closeConn closes a connection its client is done with. A linked pooler
// server goes back to the pool (the connection is closed between
// transactions, so the server is clean); a direct backend exits. The
// client's side of the socket lingers in TIME_WAIT.
func (m *model) closeConn(s *sim.Sim, c int32) {
	now := s.Now()
	cn := &m.conns[c]
	if cn.mode == poolmode.Direct {
		m.srv.closeBackend(now)
		m.srv.busy.Add(now, -1)
		if m.multi {
			m.specLinked[m.classes[cn.cls].spec].Add(now, -1)
		}
	} else {
		pi := int(cn.pool)
		m.procs[cn.proc].connected--
		if srv := cn.server; srv >= 0 {
			cn.server = -1
			// The pooler sees the disconnect a hop later; a session server
			// is then reset (server_reset_query) before it is reused.
			delay := m.cfg.Pooler.Hop
			switch cn.mode.ClientGone(true) {
			case poolmode.Reset:
				delay += m.cfg.Pooler.ResetCost
			case poolmode.Release:
			default:
				panic("system: a clean server was not released")
			}
			if delay > 0 {
				s.After(delay, evRelease, srv, int64(pi))
			} else {
				m.srvBack(s, pi, srv)
			}
		}
	}
	k := &m.classes[cn.cls]
	k.app.open--
	linger := k.cfg.Workload.TimeWait
	m.tally(cn.cls, func(r *results) { r.timeWait(now, linger) })
	m.freeConns = append(m.freeConns, c)
}

// disconnect is the pooler closing a connection that waits for a server
// (query_wait_timeout, or the server refusing the pool's login): the
// client's transaction fails and counts in counter.
func (m *model) disconnect(s *sim.Sim, c int32, counter func(*Metrics) *int64) {
	u, cl := m.conns[c].user, m.conns[c].cls
	m.procs[m.conns[c].proc].connected--
	m.classes[cl].app.open--
	m.freeConns = append(m.freeConns, c)
	m.failTxn(s, u, counter)
	m.appSlotFreed(s, cl)
}

// appPool is the application-side pool's state.
type appPool struct {
	idle   []int32   // idle connections, LIFO
	open   int       // connections open (in use or idle)
	opens  int       // connections being opened (asked for, not yet open)
	waitQ  *sim.FIFO // clients waiting for a connection
	waitNo int64
}

func (a *appPool) init() { a.waitQ = sim.NewFIFO(0) }

// appAcquire gets client u a connection: an idle one, a new one while the
// pool is below size + max_overflow (always, for NullPool), or a place in
// the FIFO queue with a timeout.
func (m *model) appAcquire(s *sim.Sim, u int32) {
	cl := m.users[u].cls
	k := &m.classes[cl]
	a, cfg := &k.app, k.cfg.AppPool
	now := s.Now()
	if cfg.Mode == QueuePool {
		if n := len(a.idle); n > 0 {
			c := a.idle[n-1]
			a.idle = a.idle[:n-1]
			m.appWaited(cl, 0)
			m.connReady(s, u, c)
			return
		}
		if a.open+a.opens >= cfg.Size+cfg.MaxOverflow {
			a.waitQ.Push(now, u)
			a.waitNo++
			m.users[u].appWaitNo = a.waitNo
			if cfg.Timeout > 0 {
				s.After(cfg.Timeout, evAppTimeout, u, a.waitNo)
			}
			return
		}
	}
	m.appWaited(cl, 0)
	m.openConn(s, u)
}

// appWaited records an application-pool acquisition's wait.
func (m *model) appWaited(cl int16, w sim.Time) {
	m.tally(cl, func(r *results) { r.appWait(w) })
}

// appRelease returns connection c after a transaction: to the oldest
// waiting client, else back to the idle list while the pool holds fewer
// than size idle connections, else it is closed (overflow, or NullPool).
func (m *model) appRelease(s *sim.Sim, c int32) {
	k := &m.classes[m.conns[c].cls]
	a, cfg := &k.app, k.cfg.AppPool
	m.conns[c].user = -1
	if cfg.Mode == QueuePool {
		if u, waited, ok := a.waitQ.Pop(s.Now()); ok {
			m.handOver(s, u, c, waited)
			return
		}
		if len(a.idle) < cfg.Size {
			a.idle = append(a.idle, c)
			return
		}
	}
	m.closeConn(s, c)
}

func (m *model) handOver(s *sim.Sim, u, c int32, waited sim.Time) {
	us := &m.users[u]
	us.appWaitNo = 0
	us.part.appWait += waited
	m.appWaited(us.cls, waited)
	m.connReady(s, u, c)
}

// appSlotFreed lets the oldest waiter of class cl open a connection in
// the place of one that was refused or closed by the pooler.
func (m *model) appSlotFreed(s *sim.Sim, cl int16) {
	k := &m.classes[cl]
	a, cfg := &k.app, k.cfg.AppPool
	if cfg.Mode != QueuePool || a.open+a.opens >= cfg.Size+cfg.MaxOverflow {
		return
	}
	if u, waited, ok := a.waitQ.Pop(s.Now()); ok {
		us := &m.users[u]
		us.appWaitNo = 0
		us.part.appWait += waited
		m.appWaited(cl, waited)
		m.openConn(s, u)
	}
}

// appTimeout fails a client still waiting for the same app-pool request.
func (m *model) appTimeout(s *sim.Sim, u int32, waitNo int64) {
	us := &m.users[u]
	if us.appWaitNo != waitNo || us.done {
		return
	}
	m.end = s.Now()
	if _, ok := m.classes[us.cls].app.waitQ.Remove(s.Now(), u); !ok {
		panic("system: timed-out client not in the app-pool queue")
	}
	us.appWaitNo = 0
	m.tally(us.cls, func(r *results) { r.m.AppTimeouts++ })
	m.failTxn(s, u, appTimeoutTxns)
}

// The counters a failed transaction counts in.
func refusedTxns(m *Metrics) *int64    { return &m.RefusedTxns }
func timedOutTxns(m *Metrics) *int64   { return &m.TimedOutTxns }
func appTimeoutTxns(m *Metrics) *int64 { return &m.AppTimeoutTxns }
