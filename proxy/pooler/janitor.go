package pooler

import (
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The client-side guards, as PgBouncer 1.18's janitor runs them
// (src/janitor.c), at each of its ticks (three a second, Proxy.tick):
//
//   - query_timeout: a client linked to a server that has not finished
//     its request - a query running, or a transaction left open - whose
//     last message came longer ago than query_timeout: the server is
//     closed ("query timeout"), the client gets FATAL "query timeout" and
//     is closed. A client still waiting for a server that long gets FATAL
//     "query_timeout". No CancelRequest is sent: PostgreSQL sees the
//     connection close.
//   - idle_transaction_timeout: a client whose server has said it is in a
//     transaction (ReadyForQuery T or E) and that has sent nothing since,
//     for longer than idle_transaction_timeout: the server is closed, the
//     client gets FATAL "idle transaction timeout". It guards every
//     transaction a client leaves open, in every pool mode, an aborted one
//     (E) too, and counts from that ReadyForQuery: a message the server
//     sends unasked meanwhile (a NOTICE) does not start the count again, as
//     it does in PgBouncer, which counts from the server's last message.
//   - client_idle_timeout: a client with no server linked whose last
//     message came longer ago than client_idle_timeout gets FATAL
//     "client_idle_timeout" and is closed (a session-mode client keeps its
//     server between queries, so as in PgBouncer it is not idle).
//
// Each close is logged with PgBouncer's words: "closing because: query
// timeout (age=3s)" on the server's line and on the client's. The checks
// read the settings in force at each tick, so SET and RELOAD apply at once.

// guardPooling are the keys of poolconf.Pooling the guards apply: as
// appliedPooling's, SHOW CONFIG shows them in force and SET changes them.
var guardPooling = []string{"query_timeout", "idle_transaction_timeout", "client_idle_timeout"}

// PgBouncer's texts (the FATAL sent and the log's reason).
const (
	reasonQueryTimeout     = "query timeout"
	reasonWaitQueryTimeout = "query_timeout"
	reasonIdleTransaction  = "idle transaction timeout"
	reasonClientIdle       = "client_idle_timeout"
	reasonWaitTimeout      = "query_wait_timeout"
	reasonLoginServerDown  = "client_login_timeout (server down)"
)

// guardClients runs the guards; it runs on the loop, at a janitor tick,
// before the query_wait_timeout check (a waiter past both gets
// query_timeout, as in PgBouncer).
func (p *Proxy) guardClients(now time.Time) {
	cfg := p.conf()
	qt, itt, cit := cfg.QueryTimeout, cfg.IdleTransactionTimeout, cfg.ClientIdleTimeout
	if qt > 0 {
		for _, pl := range p.loopPools {
			pl.expireWaitersQT(now, qt)
		}
	}
	if qt > 0 || itt > 0 {
		type victim struct {
			c      *client
			s      *server
			reason string
		}
		var out []victim
		for _, pl := range p.loopPools {
			for s := range pl.servers {
				c := s.client
				if c == nil || c.gone || c.checking {
					continue
				}
				switch {
				case qt > 0 && !c.clean() && now.Sub(c.requestTime.time()) > qt:
					out = append(out, victim{c, s, reasonQueryTimeout})
				case itt > 0 && c.idleTx != 0 && now.Sub(c.idleTx.time()) > itt:
					out = append(out, victim{c, s, reasonIdleTransaction})
				}
			}
		}
		for _, v := range out {
			p.closeLinked(v.c, v.s, v.reason, now)
		}
	}
	if cit > 0 {
		var idle []*client
		p.mu.Lock()
		for _, c := range p.keys {
			if c.adopted && !c.gone && c.server == nil && !c.queued && !c.checking && now.Sub(c.requestTime.time()) > cit {
				idle = append(idle, c)
			}
		}
		p.mu.Unlock()
		for _, c := range idle {
			p.clientLogf(c, "closing because: %s (age=%ds)", reasonClientIdle, ageSecs(now, c.connectTime.time()))
			c.fatalClose(poolerError(reasonClientIdle))
		}
	}
}

// expireWaitersQT fails the clients that have waited for a server longer
// than query_timeout d, with PgBouncer's "query_timeout".
func (p *pool) expireWaitersQT(now time.Time, d time.Duration) {
	before := now.Add(-d).UnixNano()
	for {
		c, ok := p.queue.Expire(before)
		if !ok {
			return
		}
		p.px.clientLogf(c, "closing because: %s (age=%ds)", reasonWaitQueryTimeout, ageSecs(now, c.connectTime.time()))
		c.failWait(poolerError(reasonWaitQueryTimeout))
	}
}

// closeLinked closes server s and its client c for reason, as PgBouncer's
// disconnect_server does for a linked server: both are logged, the server
// gets a Terminate, the client the reason as a FATAL.
func (p *Proxy) closeLinked(c *client, s *server, reason string, now time.Time) {
	p.serverLogf(s, "closing because: %s (age=%ds)", reason, ageSecs(now, s.connectTime))
	c.unlink(s)
	s.terminate()
	s.pool.closeServer(s, "")
	p.clientLogf(c, "closing because: %s (age=%ds)", reason, ageSecs(now, c.connectTime.time()))
	c.fatalClose(poolerError(reason))
}

// terminate sends the server a Terminate, best effort, before it is closed:
// PostgreSQL then ends the session without logging a lost connection.
func (s *server) terminate() {
	if s.sk.closed || s.sk.werr {
		return
	}
	b, _ := (&pgproto3.Terminate{}).Encode(nil)
	l := s.pool.px.loop
	l.send(&s.sk, b)
	l.flush(&s.sk)
}

// ageSecs is PgBouncer's "age" of a connection in whole seconds.
func ageSecs(now, since time.Time) int64 { return int64(now.Sub(since) / time.Second) }

// welcomeWait is how long a client logging in at now may wait for its
// pool's first server, and the reason it is closed with after that: the
// earliest of query_timeout ("query_timeout"), query_wait_timeout and the
// client_login_timeout deadline ("client_login_timeout (server down)"), as
// PgBouncer's janitor checks a client waiting for its login (zero: no
// limit).
func welcomeWait(cfg *Config, now, loginDeadline time.Time) (time.Time, string) {
	at, why := loginDeadline, reasonLoginServerDown
	for _, l := range []struct {
		d   time.Duration
		why string
	}{{cfg.QueryWaitTimeout, reasonWaitTimeout}, {cfg.QueryTimeout, reasonWaitQueryTimeout}} {
		if l.d > 0 && (at.IsZero() || !now.Add(l.d).After(at)) {
			at, why = now.Add(l.d), l.why
		}
	}
	return at, why
}
