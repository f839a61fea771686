package pooler

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// client is one client connection. Its login (and the admin console) runs
// on its own goroutine over conn; a logged-in pooled client then belongs to
// the loop, which reads its messages from sk and forwards them to the linked
// server.
type client struct {
	id          uint64
	px          *Proxy
	pool        *pool
	lg          *loginIO // login and console only; nil once the loop has the client
	connectTime stamp
	remote      netip.AddrPort // zero for a non-TCP connection
	pid         uint32         // BackendKeyData the proxy gave the client
	secret      uint32

	// local is the proxy's end, one of a few addresses every client
	// shares (Proxy.locals; nil for a non-TCP connection).
	local *netip.AddrPort

	// peerUID and peerPID are the process's at the other end of a Unix
	// socket (SO_PEERCRED; -1 and 0 when unknown), for peer
	// authentication, SHOW CLIENTS' remote_pid and the log (a uid_t and a
	// pid_t: 32 bits).
	peerUID, peerPID int32

	// Owned by the loop once the client is adopted.
	sk          sock
	requestTime stamp // of the last request
	server      *server
	outstanding int // Query, Sync and FunctionCall sent, not yet answered by ReadyForQuery
	fwdLeft     int // bytes of a large message still to pass to the server (or to drop with none linked)
	// waitSince is when the request waiting for a server reached the proxy.
	waitSince  stamp
	xactStart  stamp
	queryStart stamp

	// want is the client's tracked settings (varcache.go): once the loop
	// has the client, the proxy's one copy of them (Proxy.internVars),
	// shared with every client that has the same; extra the other
	// settings it asked for at login (startup.go), nil when none (most
	// clients).
	want  *vars
	extra *settings

	// The startup settings' check (startup_check.go): checking while they
	// are tried on a server, check what it needs (nil when none is due or
	// once it is over).
	check *startupCheck
	// idleTx is when the server last said the client is idle in a
	// transaction (ReadyForQuery T or E, nothing pending), 0 when not:
	// idle_transaction_timeout counts from it (janitor.go).
	idleTx stamp

	// Prepared statements (pool.psOn): the client's statement names.
	stmts map[string]*psEntry

	txStatus poolmode.TxStatus
	// tlsVersion and tlsSuite describe a client's TLS connection (0: plain
	// TCP), for SHOW CLIENTS.
	tlsVersion, tlsSuite uint16
	// counted: the connection holds a place in Proxy.conns (connClosed
	// gives it back); console: it is an admin console connection. Owned by
	// the login goroutine, then by the loop.
	counted    bool
	console    bool
	adopted    bool
	pendingExt bool // extended-protocol messages sent since the last Sync
	stalled    bool // the server's output is full: not read until it drains
	queued     bool // waiting for a server; the request stays in sk's buffer
	gone       bool // finish has run
	// unix: the client came over the Unix socket.
	unix bool
	// checking: its startup settings are being tried (check above).
	checking bool
}

// loginIO is what a client needs only while it logs in (and on the
// console): kept apart so that a logged-in client does not carry it.
type loginIO struct {
	conn    net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	appName string
	// db and user are the start-up packet's, for log lines before the
	// client has a pool.
	db, user string
}

// stamp is a wall-clock instant in Unix nanoseconds, 0 for none: 8 bytes
// where a time.Time takes 24, for the instants kept per client.
type stamp int64

func stampOf(t time.Time) stamp { return stamp(t.UnixNano()) }

func (s stamp) time() time.Time { return time.Unix(0, int64(s)) }

var clientIDs atomic.Uint64

// extraSettings is what the client asked for at login besides its tracked
// settings (nil for none).
func (c *client) extraSettings() settings {
	if c.extra == nil {
		return nil
	}
	return *c.extra
}

// localAddr is the proxy's end of the client's TCP connection (zero for
// none).
func (c *client) localAddr() netip.AddrPort {
	if c.local == nil {
		return netip.AddrPort{}
	}
	return *c.local
}

// adopt takes a logged-in client into the loop: fd is its connection's
// descriptor, buffered what was read past the login. welcome, when not
// nil, is the end of the login, sent once the client's startup settings
// pass their check on a server (startup_check.go).
func (c *client) adopt(fd int, buffered []byte, welcome []byte) {
	l := c.px.loop
	if c.px.stoppingNow() {
		_ = sysClose(fd)
		c.px.connClosed(c)
		c.px.removeClient(c)
		return
	}
	c.sk.c = c
	if len(buffered) > 0 {
		l.buffer(&c.sk, len(buffered))
	}
	if err := l.add(&c.sk, fd); err != nil {
		_ = sysClose(fd)
		c.px.logf("client %d: %v", c.id, err)
		c.px.connClosed(c)
		c.px.removeClient(c)
		return
	}
	c.sk.w = copy(c.sk.buf, buffered)
	c.adopted = true
	c.pool.counts.logins++
	c.want = c.px.internVars(c.want)
	c.txStatus = poolmode.Idle
	c.pool.clients++
	c.requestTime = stampOf(l.now) // client_idle_timeout counts from the login
	if c.check != nil {
		c.checkStartup(welcome)
	}
	if c.px.pause.suspend && len(buffered) == 0 && !c.checking && !c.gone {
		return // SUSPEND: read once resumed (an online restart may take it over unread)
	}
	c.input()
	if !c.gone {
		l.idle(&c.sk) // an idle client holds no read buffer
	}
}

// input handles the client's messages as far as its state allows: it stops
// while the client waits for a server, while its startup settings are
// checked and while the server's output is full.
func (c *client) input() {
	l := c.px.loop
	if c.checking && !c.queued && c.server != nil && !c.server.setting {
		c.startupChecked(c.server) // no SET was needed: the server has them
	}
	if c.queued || c.checking {
		if c.sk.hup { // left while waiting
			c.finish(false)
		}
		return
	}
	for !c.gone && !c.queued && !c.stalled {
		need := c.step()
		if need == 0 {
			continue
		}
		if need < 0 {
			return
		}
		if !c.sk.more {
			if c.sk.eof {
				c.finish(c.fwdLeft > 0 && c.server != nil)
			}
			return
		}
		l.fill(&c.sk, need)
	}
}

// step handles the next client message, or part of a large one. A message
// that needs a server waits for one (lazy assignment) when none is linked.
// It returns 0 when it made progress, the number of buffered bytes it needs
// to go on, or -1 when the client must not be read now.
func (c *client) step() int {
	sk := &c.sk
	l := c.px.loop
	s := c.server
	if s != nil && l.full(&s.sk) {
		c.stalled = true
		return -1
	}
	avail := sk.w - sk.r
	if c.fwdLeft > 0 {
		if avail == 0 {
			return 1
		}
		var dst *sock // none linked: the rest is dropped
		if s != nil {
			dst = &s.sk
		}
		l.pass(sk, &c.fwdLeft, dst)
		return 0
	}
	if avail < 5 {
		return 5
	}
	typ, ln := sk.header()
	if ln < 4 || ln+1 > c.px.conf().MaxPacketSize {
		// PgBouncer's get_header: checked before anything is read or
		// allocated for the body; the text shows up to 8 bytes in hex.
		c.fatalClose(poolerError(fmt.Sprintf("bad packet header: '%x'", sk.buf[sk.r:sk.r+min(avail, 8)])))
		return -1
	}
	if !frontendTypes[typ] {
		c.fatalClose(poolerError("unknown client packet type"))
		return -1
	}
	n := ln + 1
	now := l.now
	c.requestTime = stampOf(now)
	c.idleTx = 0
	if typ == msgTerminate {
		c.finish(false)
		return -1
	}
	whole := avail >= n
	// With prepared statements tracked, Parse, Bind, Describe and Close are
	// taken whole to be rewritten; a Close of a named statement is answered
	// here and needs no server.
	rewrite := c.pool.psOn && (typ == msgParse || typ == msgBind || typ == msgDescribe || typ == msgClose)
	if rewrite && !whole {
		return n
	}
	if rewrite && typ == msgClose {
		if name, ok := namedStmtClose(sk.buf[sk.r+5 : sk.r+n]); ok {
			sk.r += n
			c.psClose(name, n)
			return 0
		}
	}
	if s == nil {
		if !c.pool.mode.NeedsServer(typ) {
			take := min(n, avail)
			sk.r += take
			c.fwdLeft = n - take // dropped: no server is linked
			return 0
		}
		// A pool failing fast has no server, so none is idle either.
		if c.pool.failingFast() {
			c.fatalClose(poolerError(poolmode.ErrServerLoginFailing))
			return -1
		}
		var err error
		if s, err = c.pool.arrive(c, stampOf(now)); err != nil {
			c.fatalClose(serverErrorResponse(err))
			return -1
		}
		if s == nil {
			c.waiting(now)
			return -1
		}
		c.outstanding, c.pendingExt = 0, false
		c.pool.assigned(c, now)
		c.link(s)
	}
	msg := sk.buf[sk.r : sk.r+min(n, avail)]
	if rewrite {
		out, fatal := c.psRequest(s, msg, s.sk.out)
		if fatal != "" {
			c.fatalClose(poolerError(fatal))
			return -1
		}
		if !s.sk.closed && !s.sk.werr {
			s.sk.out = out
			l.markDirty(&s.sk)
		}
	} else {
		if c.pool.psOn {
			c.psTrack(s, typ)
		}
		l.send(&s.sk, msg)
		c.fwdLeft = n - len(msg)
	}
	c.count(typ, now)
	c.pool.counts.received += int64(n)
	sk.r += len(msg)
	return 0
}

// request counts a Query, Sync or FunctionCall sent to the server.
func (c *client) request(now time.Time) {
	if c.outstanding == 0 {
		c.queryStart = stampOf(now)
	}
	if c.xactStart == 0 {
		c.xactStart = stampOf(now)
	}
	c.outstanding++
}

// count records the effect of a message sent to the server.
func (c *client) count(typ byte, now time.Time) {
	switch typ {
	case msgQuery, msgFunctionCall:
		c.request(now)
	case msgSync:
		c.request(now)
		c.pendingExt = false
	case msgParse, msgBind, msgExecute, msgDescribe, msgClose:
		c.pendingExt = true
	}
}

// ready handles the linked server's ReadyForQuery (msg, status): it is
// forwarded and the pool mode's release rule applied.
func (c *client) ready(s *server, status poolmode.TxStatus, msg []byte) {
	l := c.px.loop
	ps := c.pool.psOn
	if ps {
		c.psReady(s)
	}
	now := l.now
	st := &c.pool.counts
	st.queries++
	if c.outstanding > 0 {
		c.outstanding--
		if c.outstanding == 0 {
			us := now.Sub(c.queryStart.time()).Microseconds()
			st.queryTime += us
			c.pool.hist.query.observe(us)
		}
	}
	if status == poolmode.Idle && c.xactStart != 0 {
		us := now.Sub(c.xactStart.time()).Microseconds()
		st.xacts++
		st.xactTime += us
		c.pool.hist.xact.observe(us)
		c.xactStart = 0
	}
	c.txStatus = status
	pending := c.outstanding
	if c.pendingExt {
		pending++
	}
	if status != poolmode.Idle && pending == 0 {
		c.idleTx = stampOf(now)
	} else {
		c.idleTx = 0
	}
	d := c.pool.mode.AfterReady(status, pending)
	if d == poolmode.Refuse {
		// As PgBouncer, the client gets only the FATAL: what the server
		// answered (BEGIN's CommandComplete) and is not yet written is
		// dropped, unless a write of it has begun.
		if c.sk.sent == 0 {
			c.sk.out = c.sk.out[:0]
		}
		c.unlink(s)
		c.pool.closeServer(s, poolmode.ErrTxBlockNotAllowed)
		c.fatalClose(poolerError(poolmode.ErrTxBlockNotAllowed))
		return
	}
	l.send(&c.sk, msg)
	if ps {
		c.psFakes(s)
	}
	st.sent += int64(len(msg))
	if d == poolmode.Release {
		c.unlink(s)
		c.pool.release(s)
	}
	if c.px.stoppingNow() && c.clean() {
		c.finish(false) // graceful shutdown: the client is between transactions
	}
}

// link makes s the client's server. Where the server's tracked settings
// differ from the client's, a SET for them goes to the server first and its
// replies are swallowed.
func (c *client) link(s *server) {
	c.server = s
	c.txStatus = poolmode.Idle
	s.client = c
	if s.sk.closed || s.sk.werr {
		return
	}
	var sql strings.Builder
	setTracked(&sql, c.want, &s.have)
	if extra := c.extraSettings(); !sameSettings(extra, s.extra) {
		applySettings(&sql, extra, s.extra)
		s.extra = extra
	}
	if sql.Len() > 0 {
		s.sk.out, _ = (&pgproto3.Query{String: sql.String()}).Encode(s.sk.out)
		s.setting = true
		c.px.loop.markDirty(&s.sk)
	}
}

// unlink breaks the link to s.
func (c *client) unlink(s *server) {
	c.server = nil
	s.client = nil
}

// clean reports whether the client is between requests and outside a
// transaction block, so its server could be reused.
func (c *client) clean() bool {
	if c.fwdLeft > 0 || c.outstanding != 0 || c.pendingExt || c.txStatus != poolmode.Idle {
		return false
	}
	if s := c.server; s != nil && c.pool.psOn {
		return s.ps.pending() == 0
	}
	return true
}

// finish ends the client: its server is reset, released or closed as
// ClientGone decides. partial is true when the client left in the middle of
// a message (the server may hold part of it).
func (c *client) finish(partial bool) {
	if c.gone {
		return
	}
	c.gone = true
	l := c.px.loop
	s := c.server
	clean := !partial && c.clean()
	if s != nil {
		c.unlink(s)
	}
	if c.queued {
		c.pool.queue.Remove(c)
		c.queued = false
	}
	c.forgetStmts()
	if c.sk.pending() > 0 && !c.sk.closed {
		l.flush(&c.sk) // a FATAL, most likely
	}
	l.close(&c.sk)
	c.px.connClosed(c)
	c.px.removeClient(c)
	if s == nil {
		return
	}
	switch c.pool.mode.ClientGone(clean) {
	case poolmode.Reset:
		if q := c.px.conf().ServerResetQuery; q != "" {
			s.reset(q)
		} else {
			c.pool.release(s)
		}
	case poolmode.Release:
		c.pool.release(s)
	default:
		c.pool.closeServer(s, "client disconnected while server was not ready")
	}
}

// serverLost tells the client its server connection broke, as PgBouncer
// does, and closes the client.
func (c *client) serverLost(s *server) {
	if c.server == s {
		c.unlink(s)
		c.px.loop.send(&c.sk, encodeError(poolerError("server conn crashed?")))
	}
	c.finish(true)
}

// fatalClose sends a FATAL error to the client and ends it.
func (c *client) fatalClose(e *pgproto3.ErrorResponse) {
	c.px.loop.send(&c.sk, encodeError(e))
	c.finish(false)
}

// waiting marks the client queued in its pool since now; its request
// stays buffered until a server is handed over.
func (c *client) waiting(now time.Time) {
	c.outstanding, c.pendingExt, c.txStatus = 0, false, poolmode.Idle
	c.queued, c.waitSince = true, stampOf(now)
}

// handOver links a released server to this waiting client, which reads on
// once the loop's current work is done; false means the client is no longer
// waiting and the server must go elsewhere.
func (c *client) handOver(s *server, since time.Time) bool {
	if !c.queued || c.gone {
		return false
	}
	c.queued = false
	c.pool.assigned(c, since)
	c.link(s)
	l := c.px.loop
	l.resume = append(l.resume, c)
	return true
}

// failWait ends a waiting client with e (query_wait_timeout, a failed
// server login, shutdown). The pool has already taken it off the queue.
func (c *client) failWait(e *pgproto3.ErrorResponse) {
	if !c.queued || c.gone {
		return
	}
	c.queued = false
	c.fatalClose(e)
}

func encodeError(e *pgproto3.ErrorResponse) []byte {
	b, _ := e.Encode(nil)
	return b
}
