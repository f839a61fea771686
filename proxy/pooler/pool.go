package pooler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// poolKey names a pool: PgBouncer keeps one per (database, user).
type poolKey struct{ db, user string }

// errShuttingDown ends waits when the proxy stops.
var errShuttingDown = errors.New("proxy is shutting down")

// pool holds the server connections of one (database, user). Waiting
// clients are served first come, first served; idle servers are reused last
// in, first out; a released server goes straight to the oldest waiter; at
// most one server login is in flight. Everything below key, conf and db
// belongs to the loop.
type pool struct {
	px   *Proxy
	key  poolKey
	conf *pgconn.Config // upstream settings with the pool's database and user
	db   *dbCount
	user *dbCount // the user's server connections, for max_user_connections

	// The pool's settings (poolconf.Settings.PoolFor), replaced on reload.
	mode    poolmode.Mode
	size    int
	maxDB   int // max_db_connections; 0 = unlimited
	maxUser int // max_user_connections; 0 = unlimited
	// Prepared statements are tracked in transaction and statement mode
	// with max_prepared_statements > 0 (PgBouncer's
	// is_prepared_statements_enabled); fixed when the pool is made.
	psOn  bool
	psMax int
	// entry is the [databases] entry the pool was made from.
	entry poolconf.Database
	// waitKey names the pool in the proxy's wait log.
	waitKey int32

	idle     []*server // LIFO: the last element is the most recently used
	waiters  []*waiter // FIFO: the first element has waited longest
	servers  map[*server]struct{}
	nservers int               // connected servers plus a login in flight
	login    bool              // a server login is in flight
	params   map[string]string // the first server's ParameterStatus set, for client logins
	welcomeQ []chan error
	// loginFailing is PgBouncer's last_login_failed: the last server login
	// failed. lastLaunch is when the last one started (server_login_retry).
	loginFailing bool
	lastLaunch   time.Time
	clients      int // logged-in clients of this pool
	// auto: no [databases] entry names the pool's database, so
	// autodb_idle_timeout may drop it.
	auto bool
	// refs counts the clients holding the pool, logging in or logged in;
	// it is guarded by Proxy.mu, so that a pool is never dropped
	// (autodb_idle_timeout) under a client that has just found it.
	refs int

	retired counters // SHOW STATS counts of clients that have left
	// hist is the pool's distributions of client waits, transaction and
	// query times (Proxy.Stats, the Prometheus endpoint); loop-owned.
	hist struct{ wait, xact, query hist }
}

// dbCount counts the server connections of one database across its pools,
// for max_db_connections.
type dbCount struct {
	n atomic.Int64
	// idleSince is when the database's pools were last seen with no client
	// and no server (loop-owned; zero while in use), for
	// autodb_idle_timeout.
	idleSince time.Time
}

// inUse reports whether the pool has clients, servers, a login in flight
// or anyone waiting. It runs on the loop with Proxy.mu held.
func (p *pool) inUse() bool {
	return p.refs > 0 || p.clients > 0 || p.nservers > 0 || p.login || len(p.waiters) > 0 || len(p.welcomeQ) > 0
}

// reserve takes a slot unless max (0 = unlimited) is reached.
func (d *dbCount) reserve(max int) bool {
	for {
		n := d.n.Load()
		if max > 0 && n >= int64(max) {
			return false
		}
		if d.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// waiter is a client waiting for a server: its place in the pool's queue.
type waiter struct {
	c     *client
	since stamp // when the request reached the proxy
}

// counters are PgBouncer's SHOW STATS counters. Times are in
// microseconds. Each client keeps its own; a pool adds them up when the
// client leaves.
type counters struct {
	assignments, xacts, queries, received, sent int64
	xactTime, queryTime, waitTime, logins       int64
	// Prepared statements, counted only while they are tracked, as
	// PgBouncer does: named Parses from clients, Parses sent to servers
	// for named statements (forwarded or injected), Binds of named
	// statements.
	clientParses, serverParses, binds int64
}

func (a *counters) add(b *counters) {
	a.assignments += b.assignments
	a.xacts += b.xacts
	a.queries += b.queries
	a.received += b.received
	a.sent += b.sent
	a.xactTime += b.xactTime
	a.queryTime += b.queryTime
	a.waitTime += b.waitTime
	a.logins += b.logins
	a.clientParses += b.clientParses
	a.serverParses += b.serverParses
	a.binds += b.binds
}

// awaitWelcome returns the ParameterStatus values of the pool's first
// server, opening one if none has been seen yet. It runs on a login
// goroutine; the map is not changed afterwards. As in PgBouncer 1.18 the
// client waits while server logins fail without an answer from PostgreSQL
// (refused, unreachable, server_connect_timeout), one attempt per
// server_login_retry, until deadline (client_login_timeout; zero waits for
// ever): then errLoginTimeout. A login PostgreSQL refuses with an error
// ends the wait with that error.
func (p *pool) awaitWelcome(ctx context.Context, deadline time.Time) (map[string]string, error) {
	var params map[string]string
	ch := make(chan error, 1)
	if !p.px.loop.call(func() {
		if p.params != nil {
			params = p.params
			return
		}
		p.welcomeQ = append(p.welcomeQ, ch)
		p.launch()
	}) {
		return nil, errShuttingDown
	}
	if params != nil {
		return params, nil
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	forget := func() {
		p.px.loop.post(func() {
			if i := slices.Index(p.welcomeQ, ch); i >= 0 {
				p.welcomeQ = slices.Delete(p.welcomeQ, i, i+1)
			}
		})
	}
	select {
	case err := <-ch:
		if err != nil {
			return nil, err
		}
	case <-timeout:
		forget()
		return nil, errLoginTimeout
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-p.px.stopping:
		return nil, errShuttingDown
	}
	if !p.px.loop.call(func() { params = p.params }) {
		return nil, errShuttingDown
	}
	return params, nil
}

// failingFast reports whether a client that needs a server must be refused
// at once: the last login failed and the pool has no server (PgBouncer's
// check_fast_fail). It starts a login if server_login_retry allows, as
// nobody will wait for one.
func (p *pool) failingFast() bool {
	if !p.loginFailing {
		return false
	}
	servers := p.nservers
	if p.login {
		servers--
	}
	if servers > 0 {
		return false
	}
	p.start()
	return true
}

// takeIdle returns the most recently used idle server when no client waits
// ahead, or nil.
func (p *pool) takeIdle() *server {
	n := len(p.idle)
	if n == 0 || len(p.waiters) > 0 {
		return nil
	}
	s := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	s.state = stateActive
	return s
}

// enqueue puts c at the end of the wait queue and starts a login if one is
// needed and allowed.
func (p *pool) enqueue(c *client, since time.Time) error {
	if p.px.stoppingNow() {
		return errShuttingDown
	}
	w := &c.wait
	w.c, w.since = c, stampOf(since)
	p.waiters = append(p.waiters, w)
	p.launch()
	return nil
}

// dequeue removes w from the wait queue; false if it was no longer there.
func (p *pool) dequeue(w *waiter) bool {
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		return true
	}
	return false
}

// failWaiters fails every waiting client with e.
func (p *pool) failWaiters(e func() *pgproto3.ErrorResponse) {
	ws := p.waiters
	p.waiters = nil
	for _, w := range ws {
		w.c.failWait(e())
	}
}

// expireWaiters fails the clients that have waited longer than d
// (query_wait_timeout); the queue is in arrival order.
func (p *pool) expireWaiters(now time.Time, d time.Duration) {
	for len(p.waiters) > 0 && now.Sub(p.waiters[0].since.time()) > d {
		w := p.waiters[0]
		p.waiters = slices.Delete(p.waiters, 0, 1)
		p.px.stats.waitTimeouts.Add(1)
		w.c.failWait(poolerError(poolmode.ErrQueryWaitTimeout))
	}
}

var (
	errQueryWaitTimeout   = errors.New("query_wait_timeout")
	errServerLoginFailing = errors.New("server login has been failing")
)

// assigned records an assignment.
func (p *pool) assigned(c *client, since time.Time) {
	now := p.px.loop.now
	wait := now.Sub(since)
	if wait < 0 {
		wait = 0
	}
	c.st.assignments++
	c.st.waitTime += wait.Microseconds()
	p.hist.wait.observe(wait.Microseconds())
	p.px.waits.add(now, wait, p.waitKey)
}

// launch starts a server login when someone needs a server, none is idle,
// no login is in flight and the limits allow it. When max_db_connections
// stops it, an idle server of another pool of the database is closed to
// make room (PgBouncer's evict_connection).
func (p *pool) launch() {
	if len(p.waiters) > 0 || (p.params == nil && len(p.welcomeQ) > 0) {
		p.start()
	}
}

// start starts a server login unless one is in flight, the pool is full,
// the proxy stops or server_login_retry holds it back.
func (p *pool) start() {
	if p.login || p.nservers >= p.size || p.px.stoppingNow() || p.paused() {
		return
	}
	now := p.px.loop.now
	if p.loginFailing && now.Sub(p.lastLaunch) < p.px.conf().ServerLoginRetry {
		return // the janitor tries again once server_login_retry has passed
	}
	if !p.db.reserve(p.maxDB) {
		p.px.evictIdle(p)
		return
	}
	if !p.user.reserve(p.maxUser) {
		p.db.n.Add(-1) // the janitor and the user's next close try again
		return
	}
	p.login = true
	p.lastLaunch = now
	p.nservers++
	p.px.serverOpened()
	p.px.wg.Add(1)
	go p.connect()
}

// connect opens one server connection on its own goroutine; it is the
// pool's only login in flight. The loop then takes the connection over:
// on success the server is released to the pool (and so to the oldest
// waiter); on failure, if the pool has no servers, every waiting client gets
// the server's error, as in PgBouncer.
func (p *pool) connect() {
	defer p.px.wg.Done()
	timeout := p.px.conf().ServerConnectTimeout
	ctx, cancel := context.WithTimeout(p.px.base, timeout)
	s, params, err := dialServer(ctx, p)
	cancel()
	if err == nil {
		posted := p.px.loop.post(func() {
			if err := p.px.loop.add(&s.sk, s.fd); err != nil {
				_ = sysClose(s.fd)
				p.loginFailed(fmt.Errorf("register server connection: %w", err))
				return
			}
			p.loggedIn(s, params)
		})
		if !posted {
			_ = sysClose(s.fd)
		}
		return
	}
	if errors.Is(err, context.DeadlineExceeded) && p.px.base.Err() == nil {
		err = fmt.Errorf("server_connect_timeout (%v) fired: %w", timeout, err)
	}
	p.px.loop.post(func() { p.loginFailed(err) })
}

// loginFailed handles a failed server login. When PostgreSQL refused it
// with an error and the pool has no server, every client logging in to the
// pool and every client waiting for a server gets that error (PgBouncer's
// kill_pool_logins). A login that failed without an answer (connection
// refused, server_connect_timeout) fails no one: the clients keep waiting
// for the next attempt, server_login_retry later, within
// client_login_timeout or query_wait_timeout, while new requests of a pool
// with no server are refused at once (check_fast_fail). The detail goes to
// the log only.
func (p *pool) loginFailed(err error) {
	p.login = false
	p.loginFailing = true
	p.nservers--
	p.db.n.Add(-1)
	p.user.n.Add(-1)
	p.px.serverClosed()
	var pe *pgconn.PgError
	if p.nservers == 0 && errors.As(err, &pe) {
		failed := p.waiters
		p.waiters = nil
		welcomeQ := p.welcomeQ
		p.welcomeQ = nil
		for _, w := range failed {
			w.c.failWait(serverErrorResponse(err))
		}
		for _, ch := range welcomeQ {
			ch <- err
		}
	}
	p.px.logf("pool %s/%s: server login failed: %v", p.key.db, p.key.user, err)
	if p.paused() {
		p.px.pauseProgress()
	}
	p.px.kickDB(p)
}

func (p *pool) loggedIn(s *server, params map[string]string) {
	p.login = false
	p.loginFailing = false
	p.servers[s] = struct{}{}
	s.state = stateActive
	if p.params == nil {
		p.params = params
		if p.params == nil {
			p.params = map[string]string{}
		}
	}
	s.have = varsFrom(params)
	p.px.internAll(&s.have)
	welcomeQ := p.welcomeQ
	p.welcomeQ = nil
	// Into the pool first, then wake the clients waiting for the welcome:
	// otherwise their first query could find no idle server and start a
	// second login needlessly.
	p.release(s)
	for _, ch := range welcomeQ {
		ch <- nil
	}
	p.launch()
}

// encodeWelcome encodes the server's parameters as ParameterStatus messages,
// in name order.
func encodeWelcome(params map[string]string) []byte {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	var b []byte
	for _, k := range names {
		b, _ = (&pgproto3.ParameterStatus{Name: k, Value: params[k]}).Encode(b)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

// release returns an unlinked server to the pool: to the oldest waiter, or
// to the top of the idle stack. A server with cancels in flight is held
// until they settle; one past server_lifetime, or any server while the proxy
// stops and no one waits, is closed.
func (p *pool) release(s *server) {
	if s.closed {
		return
	}
	if s.cancels > 0 {
		s.held = true
		s.state = stateBeingCanceled
		return
	}
	if lt := p.px.conf().ServerLifetime; lt > 0 && p.px.loop.now.Sub(s.connectTime) > lt {
		p.closeServer(s, "server lifetime over")
		return
	}
	if s.closeNeeded {
		p.closeServer(s, "close needed (RECONNECT or a changed database)")
		return
	}
	if p.paused() {
		p.closeServer(s, "pooler paused")
		return
	}
	for len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = slices.Delete(p.waiters, 0, 1)
		s.state = stateActive
		if w.c.handOver(s, w.since.time()) {
			return
		}
	}
	if p.px.stoppingNow() {
		p.closeServer(s, "proxy shutting down")
		return
	}
	s.state = stateIdle
	s.idleSince = p.px.loop.now
	p.idle = append(p.idle, s)
	// Another pool of the database may be waiting for a slot this idle
	// server can give up.
	p.px.kickDB(p)
}

// closeServer closes a server connection and forgets it; it is idempotent.
func (p *pool) closeServer(s *server, reason string) {
	if s.closed {
		return
	}
	s.closed = true
	if i := slices.Index(p.idle, s); i >= 0 {
		p.idle = slices.Delete(p.idle, i, i+1)
	}
	delete(p.servers, s)
	p.nservers--
	p.db.n.Add(-1)
	p.user.n.Add(-1)
	p.px.serverClosed()
	p.px.loop.close(&s.sk)
	s.ps.release(&p.px.ps) // the connection is closed: its statements are gone
	if reason != "" {
		p.px.debugf("server %d (%s/%s) closed: %s", s.id, p.key.db, p.key.user, reason)
	}
	if p.paused() {
		p.px.pauseProgress()
	}
	p.launch()
	p.px.kickDB(p)
}

// closeIdle closes idle servers idle for longer than d (server_idle_timeout),
// or all of them when d is 0.
func (p *pool) closeIdle(now time.Time, d time.Duration, reason string) {
	var old []*server
	for _, s := range p.idle {
		if d == 0 || now.Sub(s.idleSince) > d {
			old = append(old, s)
		}
	}
	for _, s := range old {
		p.closeServer(s, reason)
	}
}

// evictOldestIdle closes this pool's least recently used idle server, for
// another pool of the same database blocked by max_db_connections.
func (p *pool) evictOldestIdle() bool {
	if len(p.idle) == 0 {
		return false
	}
	p.closeServer(p.idle[0], "evicted for max_db_connections")
	return true
}

// allServers lists the pool's servers (SHOW SERVERS, shutdown).
func (p *pool) allServers() []*server {
	out := make([]*server, 0, len(p.servers))
	for s := range p.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (k poolKey) String() string { return fmt.Sprintf("%s/%s", k.db, k.user) }

// apply puts a pool's settings in force (at creation and on reload). It
// runs on the loop, or before the loop knows the pool.
func (p *pool) apply(ps poolconf.Pool) {
	p.mode, p.size, p.maxDB, p.maxUser = ps.Mode, ps.Size, ps.MaxDBConnections, ps.MaxUserConnections
}

// appliedPooling are the keys of poolconf.Pooling the proxy applies: SHOW
// CONFIG shows them in force, SET and RELOAD change them, and a config
// file that sets another one is told it is not implemented.
var appliedPooling = []string{"pool_mode", "default_pool_size", "max_client_conn", "max_db_connections",
	"max_user_connections", "max_prepared_statements", "query_wait_timeout", "server_idle_timeout",
	"server_lifetime", "server_reset_query"}
