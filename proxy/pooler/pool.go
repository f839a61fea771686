package pooler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/poolqueue"
)

// poolKey names a pool: PgBouncer keeps one per (database, user).
type poolKey struct{ db, user string }

// errShuttingDown ends waits when the proxy stops.
var errShuttingDown = errors.New("proxy is shutting down")

// pool holds the server connections of one (database, user). Its queue
// follows the rules the model follows too (models/poolqueue): waiting
// clients are served first come, first served; idle servers are reused last
// in, first out; a released server goes straight to the oldest waiter; at
// most one server login is in flight. Everything below key, conf and db
// belongs to the loop.
type pool struct {
	px   *Proxy
	key  poolKey
	conf *pgconn.Config // upstream settings with the pool's database and user
	// dirtyGen counts tagDirty: a login begun at an older count is not
	// used when it completes.
	dirtyGen uint64
	db       *dbCount
	user     *dbCount // the user's server connections, for max_user_connections

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
	// minSize is min_pool_size, reserve reserve_pool_size, the
	// database's own else the global ones (shaping.go).
	minSize, reserve int
	// tlsKey is the server TLS settings conf was made with: a change
	// closes the pool's servers (reload.go).
	tlsKey string
	// lastLifetimeClose is when server_lifetime last closed a server:
	// such closes are spread out (PgBouncer's life_over).
	lastLifetimeClose time.Time
	// checking counts servers running server_check_query.
	checking int

	// queue holds the waiting clients (arrival times in Unix
	// nanoseconds), the idle servers, the count of servers connected or
	// logging in and the login in flight.
	queue    poolqueue.Queue[*client, *server]
	servers  map[*server]struct{}
	params   map[string]string // the first server's ParameterStatus set, for client logins
	welcomeQ []chan error
	welcome  atomic.Pointer[welcomeCache] // params encoded once for logins (varcache.go)
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
	// checked holds the startup settings already tried on a server of the
	// pool (checkStartup, startup_check.go): nil for those PostgreSQL took,
	// its error for the others. Loop-owned.
	checked map[string]*pgproto3.ErrorResponse

	// counts are the SHOW STATS counters of the pool's clients, those
	// connected and those that have left: a client counts here directly,
	// so that it carries no counters of its own (96 bytes per idle client).
	// Loop-owned.
	counts counters
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
	return p.refs > 0 || p.clients > 0 || p.queue.Servers() > 0 || p.queue.LoggingIn() || p.queue.Waiting() > 0 || len(p.welcomeQ) > 0
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

// counters are PgBouncer's SHOW STATS counters. Times are in
// microseconds. A pool keeps them for its clients (pool.counts).
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
// nobody will wait for one. A paused pool fails no one fast: its clients
// wait for RESUME, as PgBouncer's find_server skips check_fast_fail under
// PAUSE.
func (p *pool) failingFast() bool {
	if !p.loginFailing || p.paused() {
		return false
	}
	servers := p.queue.Servers()
	if p.queue.LoggingIn() {
		servers--
	}
	if servers > 0 {
		return false
	}
	p.start()
	return true
}

// arrive is client c needing a server for a request that reached the
// proxy at since: it gets the most recently used idle server when no client
// waits ahead, or joins the wait queue, and a login starts if one is needed
// and allowed. A nil server without an error means c waits.
func (p *pool) arrive(c *client, since stamp) (*server, error) {
	for {
		s, ok := p.queue.Arrive(c, int64(since))
		if !ok {
			break
		}
		if p.needsCheck(s) {
			p.check(s) // back to the pool once checked; c tries again
			continue
		}
		s.state = stateActive
		return s, nil
	}
	if p.px.stoppingNow() {
		p.queue.Remove(c)
		return nil, errShuttingDown
	}
	p.launch()
	return nil, nil
}

// failWaiters fails every waiting client with e.
func (p *pool) failWaiters(e func() *pgproto3.ErrorResponse) {
	for {
		c, _, ok := p.queue.Next()
		if !ok {
			return
		}
		c.failWait(e())
	}
}

// expireWaiters fails the clients that have waited longer than d
// (query_wait_timeout), in arrival order.
func (p *pool) expireWaiters(now time.Time, d time.Duration) {
	before := now.Add(-d).UnixNano()
	for {
		c, ok := p.queue.Expire(before)
		if !ok {
			return
		}
		p.px.stats.waitTimeouts.Add(1)
		c.failWait(poolerError(poolmode.ErrQueryWaitTimeout))
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
	p.counts.assignments++
	p.counts.waitTime += wait.Microseconds()
	p.hist.wait.observe(wait.Microseconds())
	if o := p.px.observer; o != nil {
		o.Assigned(Wait{At: now, Wait: wait, Database: p.key.db, User: p.key.user})
	}
}

// launch starts a server login when someone needs a server, none is idle,
// no login is in flight and the limits allow it. When max_db_connections
// stops it, an idle server of another pool of the database is closed to
// make room (PgBouncer's evict_connection).
func (p *pool) launch() {
	if p.checking > 0 && p.checking >= p.queue.Waiting() {
		return // the servers being checked come back to the waiters first
	}
	if p.queue.Waiting() > 0 || (p.params == nil && len(p.welcomeQ) > 0) {
		p.start()
	}
}

// start starts a server login unless the queue's rules hold it back (one
// is in flight, a server is idle, the pool is full), the proxy stops or
// server_login_retry holds it back.
func (p *pool) start() {
	// A pool taken over on an online restart has servers but no welcome
	// yet: a client logging in gets one login for it even so.
	welcome := p.params == nil && len(p.welcomeQ) > 0 && !p.queue.LoggingIn()
	if !(p.queue.CanLaunch(p.size) || welcome || p.useReserve()) || p.px.stoppingNow() || p.paused() {
		return
	}
	p.startLogin(true)
}

// startLogin starts a server login once the pool's own rules allow one:
// unless server_login_retry holds it back or max_db_connections or
// max_user_connections is reached; evict lets it close an idle server of
// another pool of the database to make room. The retry window is
// PgBouncer 1.18's (launch_new_connection): after a login that failed -
// refused, timed out or refused by PostgreSQL with an error - none starts
// until ServerLoginRetry after the failed one started; a login that
// succeeds ends it. Logins start only for someone who waits, so once no
// client waits nothing is tried, and a client arriving after the window
// gets a login at once (loginretry_test.go).
func (p *pool) startLogin(evict bool) {
	now := p.px.loop.now
	if p.loginFailing && now.Sub(p.lastLaunch) < p.px.conf().ServerLoginRetry {
		return // the janitor tries again once server_login_retry has passed
	}
	if !p.db.reserve(p.maxDB) {
		if evict {
			p.px.evictIdle(p)
		}
		return
	}
	if !p.user.reserve(p.maxUser) {
		p.db.n.Add(-1) // the janitor and the user's next close try again
		return
	}
	p.queue.Launch()
	p.lastLaunch = now
	p.px.serverOpened()
	p.px.wg.Add(1)
	go p.connect(p.conf, p.entry.ConnectQuery, p.dirtyGen)
}

// connect opens one server connection on its own goroutine; it is the
// pool's only login in flight. The loop then takes the connection over:
// on success the server is released to the pool (and so to the oldest
// waiter); on failure, loginFailed decides who is told (as in PgBouncer).
func (p *pool) connect(conf *pgconn.Config, connectQuery string, gen uint64) {
	defer p.px.wg.Done()
	timeout := p.px.conf().ServerConnectTimeout
	ctx, cancel := context.WithTimeout(p.px.base, timeout)
	deadline, _ := ctx.Deadline()
	s, params, err := dialServer(ctx, p, conf, connectQuery)
	cancel()
	// A read or write bounded by the same deadline (the proxy's own login
	// exchange, serverauth.go) fails with an i/o timeout, which may come
	// just before the context itself is done: server_connect_timeout
	// fired either way.
	var ne net.Error
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && p.px.base.Err() == nil &&
		(!time.Now().Before(deadline) || errors.As(err, &ne) && ne.Timeout()) {
		err = fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
	}
	if err == nil {
		posted := p.px.loop.post(func() {
			if err := p.px.loop.add(&s.sk, s.fd); err != nil {
				_ = sysClose(s.fd)
				p.loginFailed(fmt.Errorf("register server connection: %w", err))
				return
			}
			p.loggedIn(s, params, gen != p.dirtyGen)
		})
		if !posted {
			_ = sysClose(s.fd)
		}
		return
	}
	if errors.Is(err, context.DeadlineExceeded) && p.px.base.Err() == nil {
		err = fmt.Errorf("server_connect_timeout (%v) fired: %w", timeout, err)
	}
	if isCertVerifyError(err) {
		// PgBouncer's (libtls') words, which operators and its test
		// suite look for.
		p.px.logf("%s/%s TLS handshake error: certificate verify failed: %v", p.key.db, p.key.user, err)
	}
	p.px.loop.post(func() { p.loginFailed(err) })
}

// loginFailed handles a failed server login, as PgBouncer 1.18 does. When
// PostgreSQL refused it with an error before the pool's first login
// succeeded (no welcome yet), every client logging in to the pool gets that
// error (kill_pool_logins) - unless it is 57P03, PostgreSQL starting up or
// shutting down, which fails no one as from PgBouncer 1.21
// (transientLoginError). Otherwise no one fails: clients waiting for a
// server stay queued while the janitor tries again, server_login_retry
// later, within query_wait_timeout - a PostgreSQL restarting ("the
// database system is shutting down / starting up", connection refused)
// costs them only the wait. Meanwhile a client that needs a server while
// the pool has none is refused at once (failingFast, PgBouncer's
// check_fast_fail). A login that failed without an answer (connection
// refused, server_connect_timeout) fails no one either: clients logging
// in wait for the next attempt within client_login_timeout.
func (p *pool) loginFailed(err error) {
	p.logLoginFailure(err) // loginlog.go
	var pe *pgconn.PgError
	answered := errors.As(err, &pe)
	p.queue.LoginFailed(answered) // its waiters stay queued, whatever it says
	p.loginFailing = true
	p.db.n.Add(-1)
	p.user.n.Add(-1)
	p.px.serverClosed()
	if answered && p.params == nil && !transientLoginError(pe) { // startingup.go
		welcomeQ := p.welcomeQ
		p.welcomeQ = nil
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

// loggedIn takes a new server into the pool. stale: the pool was tagged
// dirty (RECONNECT, or a RELOAD or SET that changed its connection
// settings: server TLS, the database entry) while the login was in
// flight; it is closed at once instead of being used, as PgBouncer's
// tag_pool_dirty drops logins in flight, and the pool logs in again.
func (p *pool) loggedIn(s *server, params map[string]string, stale bool) {
	p.queue.LoginDone()
	p.loginFailing = false
	p.servers[s] = struct{}{}
	s.state = stateActive
	if stale {
		p.px.serverLogf(s, "new connection to server (from %s)", addrText(s.local))
		s.closeNeeded = true
		p.release(s) // closes it
		p.launch()
		return
	}
	if p.params == nil {
		p.params = params
		if p.params == nil {
			p.params = map[string]string{}
		}
	}
	s.have = varsFrom(params)
	p.px.internAll(&s.have)
	p.px.serverLogf(s, "new connection to server (from %s)", addrText(s.local))
	if s.tlsVersion != 0 {
		p.px.serverLogf(s, "SSL established: %s", tlsText(s.tlsVersion, s.tlsSuite))
	}
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
	if p.lifeOver(s) {
		p.lastLifetimeClose = p.px.loop.now
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
	for {
		c, since, handed := p.queue.Release(s)
		if !handed {
			break // s is on the top of the idle stack
		}
		s.state = stateActive
		if c.handOver(s, time.Unix(0, since)) {
			return
		}
	}
	if p.px.stoppingNow() {
		p.closeServer(s, "proxy shutting down") // off the idle stack
		return
	}
	s.state = stateIdle
	s.idleSince = p.px.loop.now
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
	if s.checking {
		s.checking = false
		p.checking--
	}
	p.queue.Close(s)
	delete(p.servers, s)
	p.db.n.Add(-1)
	p.user.n.Add(-1)
	p.px.serverClosed()
	p.px.loop.close(&s.sk)
	s.ps.release(&p.px.ps) // the connection is closed: its statements are gone
	if reason != "" {
		p.px.serverLogf(s, "closing because: %s (age=%ds)", reason, int(p.px.loop.now.Sub(s.connectTime).Seconds()))
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
	keep := p.queue.Servers() // server_idle_timeout keeps min_pool_size, as in PgBouncer
	for _, s := range p.queue.Idle() {
		if d == 0 || (now.Sub(s.idleSince) > d && (p.minSize == 0 || keep > p.minSize)) {
			old = append(old, s)
			keep--
		}
	}
	for _, s := range old {
		p.closeServer(s, reason)
	}
}

// evictOldestIdle closes this pool's least recently used idle server, for
// another pool of the same database blocked by max_db_connections.
func (p *pool) evictOldestIdle() bool {
	idle := p.queue.Idle()
	if len(idle) == 0 {
		return false
	}
	p.closeServer(idle[0], "evicted")
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
	p.minSize, p.reserve = ps.MinPoolSize, ps.ReservePool
	p.queue.RoundRobin = p.px.conf().ServerRoundRobin
}

// appliedPooling are the keys of poolconf.Pooling the proxy applies: SHOW
// CONFIG shows them in force, SET and RELOAD change them, and a config
// file that sets another one is told it is not implemented.
var appliedPooling = []string{"pool_mode", "default_pool_size", "max_client_conn", "max_db_connections",
	"max_user_connections", "max_prepared_statements", "query_wait_timeout", "server_idle_timeout",
	"server_lifetime", "server_reset_query", "min_pool_size", "reserve_pool_size", "reserve_pool_timeout"}
