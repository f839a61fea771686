package system

import "github.com/poolsim/poolsim/sim"

// Workers: the workload real applications have. An open class served by
// a fixed set of Workload.Workers application workers - Puma threads,
// Sidekiq or gunicorn workers - each holding one persistent connection
// (workload.workers with workload.arrival_rate and workload.duration):
//
//   - connecting: the workers connect at t = 0 in index order, exactly as
//     closed clients do. Direct: a backend start-up each (server.connect,
//     queued by server.connect_concurrency), refused beyond
//     max_connections. Through a pooler: a login, refused beyond
//     max_client_conn; the server is assigned lazily at the first
//     statement by the pool mode's rule, so in session mode a worker's
//     connection holds its server from its first statement until it
//     closes - a session pool smaller than the workers starves the rest.
//   - requests: they arrive as a Poisson stream at ArrivalRate for
//     Duration (the class's arrival stream, as an ordinary open class's),
//     join the class's application queue (FIFO), and the longest-idle
//     worker takes the head (a FIFO of idle workers: Puma's thread pool
//     and Sidekiq's BRPOP both wake the longest waiter). A request runs
//     TxnsPerRequest transactions (drawn per request from the "requests"
//     stream at the arrival's number, and every draw of the request keyed
//     by that number and its position in the request, so a request is
//     the same whichever worker runs it and in every configuration) of
//     StmtsPerTxn statements, with App between statements and between its
//     transactions; after its last result the worker is free at once (no
//     think). requests_per_session, txns_per_session, clients and think do
//     not apply, nor does an application pool (the workers hold their
//     connections themselves): Validate says so.
//   - latency: a request's runs from its arrival, the application queue's
//     wait included (req_*_ms); a transaction's from its first statement
//     sent, as for any client (a request that must reconnect first counts
//     the connect in its first transaction, as a new session does). The
//     application queue is measured as an application pool's wait queue:
//     app_wait_p99_ms per request taken (zeros included), app_wait_L,
//     _lambda and _W by Little's law over every request (each passes
//     through the queue, a free worker taking it at once).
//   - failures: a connection closed under a worker (query_wait_timeout, a
//     refused login or connection) fails the request it was running - its
//     transactions left counted in timed_out_txns or refused_txns, the
//     request in failed_reqs - and the worker opens a new connection (a
//     new session, paying the connect again) when it takes its next
//     request.
//   - the end: once arrivals stop the workers finish the queue, then each
//     disconnects when it is free (its session ends: a session-mode server
//     is released, the socket lingers in TIME_WAIT as a closed client's).
//     sessions counts worker connections; backlog_start/end count requests
//     in the system (queued or running). The steady window is an open
//     workload's: from the warm-up to the end of arrivals.

// Event kinds of the workers.
const (
	evWorkerUp    int32 = 100 + iota // worker ID connects at t = 0
	evWorkerFree                     // worker ID lost its connection and is free again
	evArrivalsEnd                    // class ID's arrivals are over: its idle workers disconnect
)

// pendingReq is a request of a workers class that has arrived and not yet
// been taken by a worker.
type pendingReq struct {
	key  uint64   // its draws' key: the class's base + the arrival's number
	at   sim.Time // when it arrived
	txns int32    // transactions it runs
}

// OfferedTPS is the workload's offered load in transactions per second:
// arrivals per second × the transactions each brings (0 when closed).
func (w Workload) OfferedTPS() float64 {
	if !w.Open() {
		return 0
	}
	return w.ArrivalRate * w.MeanTxnsPerSession()
}

// validateWorkers checks what applies with workers; p names the workload.
func (w Workload) validateWorkers(p string, bad func(string, ...any)) {
	if w.Workers < 0 || w.Workers > 1_000_000 {
		bad("%s.workers must be from 1 to 1000000 (or 0 for none), got %d", p, w.Workers)
	}
	if !w.Persistent() {
		return
	}
	if !w.Open() {
		bad("%s.workers needs %s.arrival_rate and %s.duration: requests arrive at random and queue for the workers", p, p, p)
	}
	if w.RequestsPerSession > 0 {
		bad("%s.requests_per_session does not apply with workers: a worker's connection lasts the whole run and takes request after request; say how many transactions a request runs with txns_per_request", p)
	}
	if w.TxnsPerSession != 1 {
		bad("%s.txns_per_session does not apply with workers: each request runs txns_per_request transactions", p)
	}
	if w.Think.MeanValue() > 0 || w.Think.Random() {
		bad("%s.think does not apply with workers: a worker takes the next request as soon as it is free, and the time between requests is the arrivals'; application time inside a request is workload.app", p)
	}
}

// workersAppPool refuses an application pool in front of workers; p
// prefixes the keys ("" or "classes.web.").
func workersAppPool(w Workload, a AppPool, p string, bad func(string, ...any)) {
	if w.Persistent() && a.Mode != NoAppPool {
		bad("%sapp_pool.mode %v with %sworkload.workers: the workers hold their connections themselves; use app_pool.mode none", p, a.Mode, p)
	}
}

// startWorkers schedules class cl's workers to connect at t = 0, in
// index order.
func (m *model) startWorkers(s *sim.Sim, cl int16) {
	k := &m.classes[cl]
	for range k.cfg.Workload.Workers {
		id := int32(len(m.users))
		m.users = append(m.users, newUser(k.base, cl))
		s.At(0, evWorkerUp, id, 0)
	}
	s.At(k.cfg.Workload.Duration, evArrivalsEnd, int32(cl), 0)
}

// workerUp is worker u's first connection attempt.
func (m *model) workerUp(s *sim.Sim, u int32) {
	now := s.Now()
	m.tally(m.users[u].cls, func(r *results) {
		if !r.attempted {
			r.attempted, r.firstAttempt = true, now
		}
	})
	m.workerConnect(s, u)
}

// workerConnect opens worker u's connection: a new session.
func (m *model) workerConnect(s *sim.Sim, u int32) {
	us := &m.users[u]
	us.begun, us.joined = s.Now(), false
	m.tally(us.cls, func(r *results) { r.m.Sessions++ })
	m.openConn(s, u)
}

// workerArrival is a request of workers class cl arriving: it joins the
// application queue, and the longest-idle worker, if any, takes it.
func (m *model) workerArrival(s *sim.Sim, cl int16) {
	k := &m.classes[cl]
	now := s.Now()
	key := k.base + k.sessions
	k.sessions++
	t := int32(k.txnsPer.Min)
	if k.txnsPer.Random() {
		r := m.reqs.At(key, 0)
		t = int32(k.txnsPer.Sample(&r))
	}
	id := take(&m.pending, &m.freePending)
	m.pending[id] = pendingReq{key: key, at: now, txns: t}
	m.tally(cl, func(r *results) { r.m.AttemptedTxns += int64(t) })
	m.active++
	k.queuedTxns += int64(t)
	k.app.waitQ.Push(now, id)
	if len(k.idle) > 0 { // the queue was empty: the request is the head
		u := k.idle[0]
		k.idle = k.idle[1:]
		id, waited, _ := k.app.waitQ.Pop(now)
		m.takeRequest(s, u, id, waited)
	}
	m.scheduleArrival(s, cl)
}

// takeRequest is worker u taking pending request id after it waited in
// the application queue: on its connection, or on a new one if it lost
// its own.
func (m *model) takeRequest(s *sim.Sim, u, id int32, waited sim.Time) {
	p := m.pending[id]
	m.freePending = append(m.freePending, id)
	us := &m.users[u]
	m.classes[us.cls].queuedTxns -= int64(p.txns)
	us.session = p.key
	us.txn, us.total, us.stmt, us.req = 0, p.txns, 0, 0
	us.reqLeft, us.reqStart, us.reqFirst = p.txns, p.at, false
	us.reqFailed, us.txnFailed = false, false
	m.appWaited(us.cls, waited)
	if m.trace != nil {
		m.taken = append(m.taken, u)
	}
	if us.conn < 0 {
		// The first transaction waits for the new connection, as a new
		// session's does.
		m.txnBegins(u, s.Now())
		us.started = true
		m.workerConnect(s, u)
		return
	}
	m.send(s, u)
}

// workerFree is worker u ready for work (connected, or done with a
// request): it takes the head of the application queue, or waits at the
// tail of the idle workers - or, once arrivals are over and the queue is
// empty, disconnects.
func (m *model) workerFree(s *sim.Sim, u int32) {
	k := &m.classes[m.users[u].cls]
	if id, waited, ok := k.app.waitQ.Pop(s.Now()); ok {
		m.takeRequest(s, u, id, waited)
		return
	}
	if k.ended {
		m.workerDone(s, u)
		return
	}
	k.idle = append(k.idle, u)
}

// requestDone is worker u past its request's last transaction.
func (m *model) requestDone(s *sim.Sim, u int32) {
	m.active--
	m.workerFree(s, u)
}

// workerLost is worker u's connection closed under it, or refused: the
// request it runs fails (its transactions left count in counter), and the
// worker is free again, without a connection, an instant later.
func (m *model) workerLost(s *sim.Sim, u int32, counter func(*Metrics) *int64) {
	us := &m.users[u]
	us.conn = -1
	m.sessionEnds(s, u)
	if us.reqLeft > 0 {
		n := int64(us.total - us.txn)
		m.tally(us.cls, func(r *results) {
			*counter(&r.m) += n
			r.m.FailedReqs++
		})
		us.txn, us.reqLeft = us.total, 0
		m.active--
	}
	us.stmt, us.txnFailed, us.reqFailed, us.started = 0, false, false, false
	s.After(0, evWorkerFree, u, 0)
}

// sessionEnds records the end of worker u's connection, if it got in.
func (m *model) sessionEnds(s *sim.Sim, u int32) {
	us := &m.users[u]
	if us.joined {
		d := s.Now() - us.begun
		m.tally(us.cls, func(r *results) { r.sessionLat.Add(d) })
		us.joined = false
	}
}

// workerDone is worker u leaving at the end: it closes its connection.
func (m *model) workerDone(s *sim.Sim, u int32) {
	us := &m.users[u]
	us.done = true
	if c := us.conn; c >= 0 {
		us.conn = -1
		m.sessionEnds(s, u)
		m.closeConn(s, c)
	}
}

// arrivalsEnd is class cl's arrivals over: its idle workers (the queue is
// empty while any is idle) disconnect; the busy ones do when they are
// free and the queue is empty.
func (m *model) arrivalsEnd(s *sim.Sim, cl int16) {
	k := &m.classes[cl]
	k.ended = true
	idle := k.idle
	k.idle = nil
	for _, u := range idle {
		m.workerDone(s, u)
	}
}
