package pooler

import (
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Pool shaping as PgBouncer 1.18 does it (src/janitor.c check_pool_size,
// check_unused_servers, pool_server_maint; src/objects.c
// launch_new_connection, life_over). All of it runs on the loop: at a
// server's release, at a client's request and in the janitor's tick (three
// times a second); nothing here runs per message.
//
//   - min_pool_size (per database: min_pool_size=): while the pool has
//     logged-in clients, the janitor opens one server per tick until the
//     pool has min_pool_size (at most pool_size), within max_db_connections
//     and max_user_connections - never evicting another pool's server for
//     it. server_idle_timeout does not close servers below it.
//   - reserve_pool_size (per database: reserve_pool=) and
//     reserve_pool_timeout: when the pool is full and the client that has
//     waited longest has waited reserve_pool_timeout, up to
//     reserve_pool_size more servers are opened, one at a time ("taking
//     connection from reserve_pool").
//   - server_lifetime: a server connected longer is closed when released
//     and, when idle, by the janitor; such closes are spread out, one per
//     server_lifetime/pool_size in a pool, so the pool is not emptied at
//     once ("server lifetime over").
//   - server_check_query, server_check_delay: a server idle longer than
//     the delay runs the query before a client gets it; the client waits
//     meanwhile, and a server the query fails on is closed.
//   - server_round_robin: idle servers are reused in turn (poolqueue's
//     RoundRobin), set with the pool's other settings.
//   - A pool made smaller gives back idle servers beyond pool_size +
//     reserve_pool_size in the janitor ("too many servers in the pool").
//   - server_fast_close: a server that must close (RECONNECT, a changed
//     database) is closed, with its client, as soon as its transaction
//     ends, instead of when its session-mode client leaves.
//   - connect_query (per database): run on each new server before use
//     (dialServer); an error is logged and ignored, as in PgBouncer.

// lifeOver reports whether server s has outlived server_lifetime and may
// close now: at most one lifetime close per server_lifetime/pool_size in a
// pool (PgBouncer's life_over). 0 disables server_lifetime.
func (p *pool) lifeOver(s *server) bool {
	lt := p.px.conf().ServerLifetime
	now := p.px.loop.now
	if lt <= 0 || now.Sub(s.connectTime) < lt {
		return false
	}
	var gap time.Duration
	if p.size > 0 {
		gap = lt / time.Duration(p.size)
	}
	return now.Sub(p.lastLifetimeClose) >= gap
}

// useReserve reports whether a full pool may open one more server from
// its reserve: reserve_pool_timeout and reserve_pool_size are set, the
// pool has had a server (its welcome is known), the client that has
// waited longest has waited reserve_pool_timeout and the reserve is not
// used up. It logs PgBouncer's line when it says yes.
func (p *pool) useReserve() bool {
	timeout := p.px.conf().ReservePoolTimeout
	if timeout <= 0 || p.reserve <= 0 || p.params == nil || p.queue.LoggingIn() || len(p.queue.Idle()) > 0 {
		return false
	}
	c, since, ok := p.queue.Head()
	if !ok || p.px.loop.now.Sub(time.Unix(0, since)) < timeout {
		return false
	}
	if p.queue.Servers() >= p.size+p.reserve {
		return false
	}
	p.px.clientLogf(c, "taking connection from reserve_pool")
	return true
}

// maintain is the janitor's work on one pool, after server_idle_timeout:
// idle servers past server_lifetime are closed, servers due to close are
// closed fast (server_fast_close) and min_pool_size is topped up.
func (p *pool) maintain(now time.Time) {
	var over []*server
	for _, s := range p.queue.Idle() {
		if s.closeNeeded {
			over = append(over, s)
		} else if p.lifeOver(s) {
			p.lastLifetimeClose = now
			over = append(over, s)
		}
	}
	for _, s := range over {
		if s.closeNeeded {
			p.closeServer(s, "database configuration changed")
		} else {
			p.closeServer(s, "server lifetime over")
		}
	}
	if p.px.conf().ServerFastClose {
		var fast []*server
		for s := range p.servers {
			if c := s.client; s.closeNeeded && c != nil && !s.setting && c.clean() {
				fast = append(fast, s)
			}
		}
		for _, s := range fast {
			c := s.client
			c.unlink(s)
			p.closeServer(s, "database configuration changed")
			c.finish(false)
		}
	}
	// A pool made smaller (SET, RELOAD) gives back idle servers beyond
	// pool_size + reserve_pool_size at once (PgBouncer's check_pool_size).
	connected := p.queue.Servers()
	if p.queue.LoggingIn() {
		connected--
	}
	for many := connected - (p.size + p.reserve); many > 0; many-- {
		idle := p.queue.Idle()
		if len(idle) == 0 {
			break
		}
		p.closeServer(idle[0], "too many servers in the pool")
	}
	if p.clients > 0 && p.minSize > 0 && p.queue.Servers() < min(p.minSize, p.size) &&
		!p.queue.LoggingIn() && !p.px.stoppingNow() && !p.paused() {
		p.startLogin(false)
	}
}

// needsCheck reports whether server s, taken from the idle stack, must
// run server_check_query before a client gets it.
func (p *pool) needsCheck(s *server) bool {
	cfg := p.px.conf()
	return cfg.ServerCheckQuery != "" && p.px.loop.now.Sub(s.idleSince) > cfg.ServerCheckDelay
}

// check runs server_check_query on s, taken off the idle stack; s is
// released to the pool when it answers, closed when it fails.
func (p *pool) check(s *server) {
	b, _ := (&pgproto3.Query{String: p.px.conf().ServerCheckQuery}).Encode(nil)
	s.state = stateTested
	s.resetting, s.checking = true, true
	p.checking++
	p.px.loop.send(&s.sk, b)
}

// appNameWithHost is application_name_add_host's application_name:
// "NAME - HOST:PORT" of the client's address ("app" when the client gave
// none), as PgBouncer writes it.
func appNameWithHost(name string, remote net.Addr) string {
	if name == "" {
		name = "app"
	}
	addr := "unix"
	if remote != nil {
		if ap := addrPort(remote); ap.IsValid() {
			addr = ap.String()
		}
	}
	return name + " - " + addr
}
