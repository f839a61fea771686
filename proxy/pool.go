package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// poolKey names a pool: PgBouncer keeps one per (database, user).
type poolKey struct{ db, user string }

// errShuttingDown ends waits when the proxy stops.
var errShuttingDown = errors.New("proxy is shutting down")

// pool holds the server connections of one (database, user). Waiting
// clients are served first come, first served; idle servers are reused last
// in, first out; a released server goes straight to the oldest waiter; at
// most one server login is in flight.
type pool struct {
	px   *Proxy
	key  poolKey
	conf *pgconn.Config // upstream settings with the pool's database and user
	db   *dbCount

	mu       sync.Mutex
	idle     []*server // LIFO: the last element is the most recently used
	waiters  []*waiter // FIFO: the first element has waited longest
	servers  map[*server]struct{}
	nservers int  // connected servers plus a login in flight
	login    bool // a server login is in flight
	welcome  []byte
	welcomeQ []chan error
	lastErr  error // the last failed login, while the pool has no servers
	clients  int   // logged-in clients of this pool

	retired counters // SHOW STATS counts of clients that have left; under mu
}

// dbCount counts the server connections of one database across its pools,
// for max_db_connections.
type dbCount struct{ n atomic.Int64 }

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
	since time.Time // when the request reached the proxy
}

// counters are PgBouncer's SHOW STATS counters. Times are in
// microseconds. Each client keeps its own under its mu (no shared cache line
// on the hot path); a pool adds them up when the client leaves.
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

// awaitWelcome returns the encoded ParameterStatus messages of the pool's
// first server, opening one if none has been seen yet.
func (p *pool) awaitWelcome(ctx context.Context) ([]byte, error) {
	p.mu.Lock()
	if p.welcome != nil {
		w := p.welcome
		p.mu.Unlock()
		return w, nil
	}
	ch := make(chan error, 1)
	p.welcomeQ = append(p.welcomeQ, ch)
	evict := p.launchLocked()
	p.mu.Unlock()
	if evict {
		p.px.evictIdle(p)
	}
	select {
	case err := <-ch:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.px.stopping:
		return nil, errShuttingDown
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.welcome, nil
}

// takeIdle returns the most recently used idle server when no client waits
// ahead, or nil.
func (p *pool) takeIdle() *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeIdleLocked()
}

func (p *pool) takeIdleLocked() *server {
	n := len(p.idle)
	if n == 0 || len(p.waiters) > 0 {
		return nil
	}
	s := p.idle[n-1]
	p.idle = p.idle[:n-1]
	s.state = stateActive
	return s
}

// enqueue puts c at the end of the wait queue, unless a server is idle
// after all (it is returned) or the proxy is stopping (error). c.mu is held:
// the client is marked queued before anyone can hand it a server.
func (p *pool) enqueue(c *client, since time.Time) (*server, error) {
	p.mu.Lock()
	if s := p.takeIdleLocked(); s != nil {
		p.mu.Unlock()
		return s, nil
	}
	if p.px.stoppingNow() {
		p.mu.Unlock()
		return nil, errShuttingDown
	}
	w := &c.wait
	w.c, w.since = c, since
	p.waiters = append(p.waiters, w)
	c.waiting.Store(since.UnixNano())
	evict := p.launchLocked()
	p.mu.Unlock()
	if evict {
		// Not under c.mu's protection needs: evictIdle takes other pools'
		// locks only, never a client's.
		p.px.evictIdle(p)
	}
	if d := p.px.cfg.QueryWaitTimeout; d > 0 {
		c.armWaitTimer(d - time.Since(since))
	}
	return nil, nil
}

// dequeue removes w from the wait queue; false if it was no longer there
// (a server or a failure was handed to it meanwhile).
func (p *pool) dequeue(w *waiter) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		return true
	}
	return false
}

// dequeueOlder removes w if it is queued and has waited at least d.
func (p *pool) dequeueOlder(w *waiter, d time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, w); i >= 0 && time.Since(w.since) >= d {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		return true
	}
	return false
}

// failWaiters fails every waiting client with e.
func (p *pool) failWaiters(e func() *pgproto3.ErrorResponse) {
	p.mu.Lock()
	ws := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	for _, w := range ws {
		w.c.failWait(e())
	}
}

var errQueryWaitTimeout = errors.New("query_wait_timeout")

// assigned records an assignment; c.mu is held.
func (p *pool) assigned(c *client, since time.Time) {
	now := time.Now()
	wait := now.Sub(since)
	c.st.assignments++
	c.st.waitTime += wait.Microseconds()
	p.px.waits.add(Wait{At: now, Wait: wait, Database: p.key.db, User: p.key.user})
}

// launchLocked starts a server login when someone needs a server, none is
// idle, no login is in flight and the limits allow it. It reports whether
// max_db_connections stopped it, so the caller may evict an idle server of
// another pool (outside p.mu).
func (p *pool) launchLocked() (dbFull bool) {
	need := len(p.waiters) > 0 || (p.welcome == nil && len(p.welcomeQ) > 0)
	if !need || p.login || p.nservers >= p.px.cfg.PoolSize {
		return false
	}
	select {
	case <-p.px.stopping:
		return false
	default:
	}
	if !p.db.reserve(p.px.cfg.MaxDBConnections) {
		return true
	}
	p.login = true
	p.nservers++
	p.px.wg.Add(1)
	go p.connect()
	return false
}

// connect opens one server connection; it is the pool's only login in
// flight. On success the server is released to the pool (and so to the
// oldest waiter); on failure, if the pool has no servers, every waiting
// client gets the server's error, as in PgBouncer.
func (p *pool) connect() {
	defer p.px.wg.Done()
	ctx, cancel := context.WithTimeout(p.px.base, p.px.cfg.ServerConnectTimeout)
	s, params, err := dialServer(ctx, p)
	cancel()

	p.mu.Lock()
	p.login = false
	if err != nil {
		p.nservers--
		p.db.n.Add(-1)
		var failed []*waiter
		var welcomeQ []chan error
		if p.nservers == 0 {
			failed, p.waiters = p.waiters, nil
			welcomeQ, p.welcomeQ = p.welcomeQ, nil
			p.lastErr = err
		}
		p.mu.Unlock()
		for _, w := range failed {
			w.c.failWait(serverErrorResponse(err))
		}
		for _, ch := range welcomeQ {
			ch <- err
		}
		p.px.logf("pool %s/%s: server login failed: %v", p.key.db, p.key.user, err)
		p.px.kickDB(p)
		return
	}
	p.lastErr = nil
	p.servers[s] = struct{}{}
	s.state = stateActive
	var welcomeQ []chan error
	if p.welcome == nil {
		p.welcome = encodeWelcome(params)
	}
	welcomeQ, p.welcomeQ = p.welcomeQ, nil
	p.px.wg.Add(1)
	go s.run()
	p.mu.Unlock()
	// Into the pool first, then wake the clients waiting for the welcome:
	// otherwise their first query could find no idle server and start a
	// second login needlessly.
	p.release(s)
	for _, ch := range welcomeQ {
		ch <- nil
	}
	p.kick()
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

// kick launches a login if waiters need one.
func (p *pool) kick() {
	p.mu.Lock()
	evict := p.launchLocked()
	p.mu.Unlock()
	if evict {
		p.px.evictIdle(p)
	}
}

// release returns an unlinked server to the pool: to the oldest waiter, or
// to the top of the idle stack. A server with cancels in flight is held
// until they settle; one past server_lifetime, or any server while the proxy
// stops and no one waits, is closed.
func (p *pool) release(s *server) {
	p.mu.Lock()
	if s.closed {
		p.mu.Unlock()
		return
	}
	if s.cancels > 0 {
		s.held = true
		s.state = stateBeingCanceled
		p.mu.Unlock()
		return
	}
	if lt := p.px.cfg.ServerLifetime; lt > 0 && time.Since(s.connectTime) > lt {
		p.mu.Unlock()
		p.closeServer(s, "server lifetime over")
		return
	}
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = slices.Delete(p.waiters, 0, 1)
		s.state = stateActive
		p.mu.Unlock()
		if !w.c.handOver(s, w.since) {
			p.release(s) // the client left meanwhile: next waiter, or idle
		}
		return
	}
	select {
	case <-p.px.stopping:
		p.mu.Unlock()
		p.closeServer(s, "proxy shutting down")
		return
	default:
	}
	s.state = stateIdle
	s.idleSince = time.Now()
	p.idle = append(p.idle, s)
	p.mu.Unlock()
	// Another pool of the database may be waiting for a slot this idle
	// server can give up.
	p.px.kickDB(p)
}

// closeServer closes a server connection and forgets it; it is idempotent.
func (p *pool) closeServer(s *server, reason string) {
	p.mu.Lock()
	if s.closed {
		p.mu.Unlock()
		return
	}
	s.closed = true
	if i := slices.Index(p.idle, s); i >= 0 {
		p.idle = slices.Delete(p.idle, i, i+1)
	}
	delete(p.servers, s)
	p.nservers--
	p.db.n.Add(-1)
	p.mu.Unlock()
	_ = s.conn.Close()
	if reason != "" {
		p.px.debugf("server %d (%s/%s) closed: %s", s.id, p.key.db, p.key.user, reason)
	}
	p.kick()
	p.px.kickDB(p)
}

// closeIdle closes idle servers idle for longer than d (server_idle_timeout),
// or all of them when d is 0.
func (p *pool) closeIdle(d time.Duration, reason string) {
	p.mu.Lock()
	var old []*server
	now := time.Now()
	for _, s := range p.idle {
		if d == 0 || now.Sub(s.idleSince) > d {
			old = append(old, s)
		}
	}
	p.mu.Unlock()
	for _, s := range old {
		p.closeServer(s, reason)
	}
}

// evictOldestIdle closes this pool's least recently used idle server, for
// another pool of the same database blocked by max_db_connections.
func (p *pool) evictOldestIdle() bool {
	p.mu.Lock()
	if len(p.idle) == 0 {
		p.mu.Unlock()
		return false
	}
	s := p.idle[0]
	p.mu.Unlock()
	p.closeServer(s, "evicted for max_db_connections")
	return true
}

// allServers lists the pool's servers (SHOW SERVERS, shutdown).
func (p *pool) allServers() []*server {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*server, 0, len(p.servers))
	for s := range p.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (k poolKey) String() string { return fmt.Sprintf("%s/%s", k.db, k.user) }
