package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// client is one logged-in client connection. Its goroutine (serve) is the
// only reader of conn and the only writer to its linked server; the linked
// server's goroutine writes the server's replies to w under mu.
type client struct {
	id          uint64
	px          *Proxy
	pool        *pool
	conn        net.Conn
	r           *bufio.Reader
	w           *bufio.Writer // guarded by mu once logged in
	pid         uint32        // BackendKeyData the proxy gave the client
	secret      uint32
	connectTime time.Time
	appName     string

	waiting     atomic.Int64 // UnixNano since the client waits for a server; 0 if not
	requestTime atomic.Int64 // UnixNano of the last request

	mu               sync.Mutex
	server           *server
	outstanding      int  // Query, Sync and FunctionCall sent, not yet answered by ReadyForQuery
	pendingExt       bool // extended-protocol messages sent since the last Sync
	txStatus         poolmode.TxStatus
	sending          bool // serve is writing to the server without mu
	releaseAfterSend bool // the server became releasable while sending
	xactStart        time.Time
	queryStart       time.Time
	st               counters // this client's share of SHOW STATS

	// Prepared statements (Proxy.psOn): the client's statement names, and
	// buffers for the message being rewritten and for what it becomes.
	stmts map[string]*psEntry
	msg   []byte
	out   []byte

	// Waiting for a server. While queued the client's complete messages are
	// kept in pending and its goroutine goes on reading the client, so the
	// goroutine that releases a server links it, writes pending and nothing
	// has to wake this client's goroutine on the way.
	queued    bool
	pending   []byte
	gone      bool          // finish has run
	failed    bool          // the wait failed or the server broke: the connection is closed
	wake      chan struct{} // capacity 1: a link or a failure while queued
	wait      waiter        // the queue entry, reused
	waitTimer *time.Timer   // query_wait_timeout, reused
}

// maxPending bounds the bytes a waiting client may queue in the proxy;
// beyond it the client's goroutine stops reading until it has a server.
const maxPending = 64 << 10

var clientIDs atomic.Uint64

// serve forwards the client's messages until it leaves. A message that needs
// a server waits for one (lazy assignment) when none is linked.
func (c *client) serve() {
	mode := c.px.cfg.Mode
	for {
		typ, n, err := header(c.r)
		if err != nil {
			bad := errors.Is(err, errProtocol)
			if bad {
				c.fatal(poolerError("invalid client packet"))
			}
			c.finish(bad)
			return
		}
		if !frontendTypes[typ] {
			c.fatal(poolerError("unknown client packet type"))
			c.finish(true)
			return
		}
		now := time.Now()
		c.requestTime.Store(now.UnixNano())
		if typ == 'X' {
			c.finish(false)
			return
		}
		// With prepared statements tracked, Parse, Bind, Describe and Close
		// are read whole to be rewritten; a Close of a named statement is
		// answered here and needs no server.
		var raw []byte
		if c.px.psOn && (typ == 'P' || typ == 'B' || typ == 'D' || typ == 'C') {
			if raw, err = c.readMsg(n); err != nil {
				c.finish(true)
				return
			}
			if typ == 'C' {
				if name, ok := namedStmtClose(raw[5:]); ok {
					c.psClose(name, n)
					continue
				}
			}
		}
		c.mu.Lock()
		s := c.server
		if s == nil && c.queued {
			// More input while waiting: wait for the server (or the
			// failure) before reading on.
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.px.base.Done():
			}
			c.mu.Lock()
			s = c.server
			if s == nil && c.failed {
				c.mu.Unlock()
				c.finish(false)
				return
			}
			// s may be nil again: the queued request was answered and the
			// server released before this goroutine ran. Then wait anew.
		}
		if s == nil {
			c.mu.Unlock()
			if !mode.NeedsServer(typ) {
				if _, err := c.r.Discard(n); err != nil {
					c.finish(true)
					return
				}
				continue
			}
			if s = c.pool.takeIdle(); s == nil {
				var queued bool
				if s, queued, err = c.queue(n, now); err != nil {
					c.fatal(serverErrorResponse(err))
					c.finish(false)
					return
				}
				if queued {
					continue // the whole request is queued; read on
				}
				if s == nil { // queued without the request: wait for the link
					select {
					case <-c.wake:
					case <-c.px.base.Done():
					}
					c.mu.Lock()
					s = c.server
					c.mu.Unlock()
					if s == nil {
						c.finish(false)
						return
					}
				}
			} else {
				c.mu.Lock()
				c.outstanding, c.pendingExt = 0, false
				c.pool.assigned(c, now)
				c.link(s)
				c.mu.Unlock()
			}
			c.mu.Lock()
			if c.server != s { // the server broke meanwhile
				c.mu.Unlock()
				c.finish(false)
				return
			}
		}
		var out []byte
		if raw != nil {
			var fatal string
			if out, fatal = c.psRequest(s, raw, c.out[:0]); fatal != "" {
				c.mu.Unlock()
				c.fatal(poolerError(fatal))
				c.finish(false)
				return
			}
		} else if c.px.psOn {
			c.psTrack(s, typ)
		}
		c.count(typ, now)
		c.sending = true
		c.mu.Unlock()

		var rerr error
		if raw != nil {
			_, rerr = s.w.Write(out)
			c.out = keepSmall(out)
			c.msg = keepSmall(c.msg)
		} else {
			rerr = forward(s.w, c.r, n)
		}
		var werr error
		if rerr == nil && !wholeMessageBuffered(c.r) {
			werr = s.w.Flush()
		}
		c.mu.Lock()
		c.st.received += int64(n)
		c.sending = false
		release := c.releaseAfterSend && c.server == s
		c.releaseAfterSend = false
		if release {
			c.unlinkLocked(s)
		}
		c.mu.Unlock()
		if release {
			if err := s.w.Flush(); err != nil {
				c.pool.closeServer(s, "write: "+err.Error())
			} else {
				c.pool.release(s)
			}
		}
		if rerr != nil {
			c.finish(true) // the server has part of a message: it is closed
			return
		}
		if werr != nil {
			c.pool.closeServer(s, "write: "+werr.Error())
			c.serverLost(s)
			c.finish(true)
			return
		}
	}
}

// request counts a Query, Sync or FunctionCall sent to the server. c.mu is held.
func (c *client) request(now time.Time) {
	if c.outstanding == 0 {
		c.queryStart = now
	}
	if c.xactStart.IsZero() {
		c.xactStart = now
	}
	c.outstanding++
}

// fromServer forwards one server message of n bytes to the client. It runs
// on the server's goroutine. On ReadyForQuery it applies the pool mode's
// release rule, after the message has been flushed to the client.
func (c *client) fromServer(s *server, typ byte, n int) error {
	c.mu.Lock()
	if c.server != s { // unlinked meanwhile: the client is gone
		c.mu.Unlock()
		_, err := s.r.Discard(n)
		return err
	}
	ps := c.px.psOn
	if typ != 'Z' {
		var err error
		if ps && c.psResponse(s, typ, n) {
			_, err = s.r.Discard(n) // the response to a request the proxy made
		} else {
			err = forward(c.w, s.r, n)
			c.st.sent += int64(n)
		}
		if ps {
			c.psFakes(s)
		}
		if err == nil && !wholeMessageBuffered(s.r) {
			_ = c.w.Flush()
		}
		c.mu.Unlock()
		return err
	}
	b, err := s.r.Peek(n)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if n != 6 {
		c.mu.Unlock()
		return errProtocol
	}
	status := poolmode.TxStatus(b[5])
	if ps {
		c.psReady(s)
	}
	now := time.Now()
	st := &c.st
	st.queries++
	if c.outstanding > 0 {
		c.outstanding--
		if c.outstanding == 0 {
			st.queryTime += now.Sub(c.queryStart).Microseconds()
		}
	}
	if status == poolmode.Idle && !c.xactStart.IsZero() {
		st.xacts++
		st.xactTime += now.Sub(c.xactStart).Microseconds()
		c.xactStart = time.Time{}
	}
	c.txStatus = status
	pending := c.outstanding
	if c.pendingExt {
		pending++
	}
	d := c.px.cfg.Mode.AfterReady(status, pending)
	if d == poolmode.Refuse {
		_, _ = s.r.Discard(n)
		c.unlinkLocked(s)
		sendFatal(c.w, poolerError(poolmode.ErrTxBlockNotAllowed))
		c.mu.Unlock()
		c.pool.closeServer(s, poolmode.ErrTxBlockNotAllowed)
		_ = c.conn.Close()
		return nil
	}
	_, _ = c.w.Write(b)
	_, _ = s.r.Discard(n)
	if ps {
		c.psFakes(s)
	}
	_ = c.w.Flush()
	st.sent += int64(n)
	release := false
	if d == poolmode.Release {
		if c.sending {
			c.releaseAfterSend = true
		} else {
			c.unlinkLocked(s)
			release = true
		}
	}
	stop := c.px.stoppingNow() && c.cleanLocked()
	c.mu.Unlock()
	if release {
		c.pool.release(s)
	}
	if stop {
		_ = c.conn.Close() // graceful shutdown: the client is between transactions
	}
	return nil
}

// unlinkLocked breaks the link to s. c.mu is held.
func (c *client) unlinkLocked(s *server) {
	c.server = nil
	s.client.Store(nil)
}

// cleanLocked reports whether the client is between requests and outside a
// transaction block, so its server could be reused. c.mu is held.
func (c *client) cleanLocked() bool {
	if c.sending || c.outstanding != 0 || c.pendingExt || c.txStatus != poolmode.Idle {
		return false
	}
	if s := c.server; s != nil && c.px.psOn {
		s.ps.mu.Lock()
		defer s.ps.mu.Unlock()
		return s.ps.pending() == 0
	}
	return true
}

// finish ends the client: its server is reset, released or closed as
// ClientGone decides. partial is true when the client left in the middle of
// a message (the server may hold part of it).
func (c *client) finish(partial bool) {
	c.mu.Lock()
	s := c.server
	clean := !partial && c.cleanLocked()
	if s != nil {
		c.unlinkLocked(s)
	}
	queued := c.queued
	c.queued, c.gone = false, true
	c.forgetStmts()
	c.mu.Unlock()
	if queued {
		c.pool.dequeue(&c.wait)
		c.waiting.Store(0)
	}
	_ = c.conn.Close()
	c.px.removeClient(c)
	if s == nil {
		return
	}
	switch c.px.cfg.Mode.ClientGone(clean) {
	case poolmode.Reset:
		if err := s.w.Flush(); err != nil {
			c.pool.closeServer(s, "write: "+err.Error())
		} else if q := c.px.cfg.ServerResetQuery; q != "" {
			s.reset(q)
		} else {
			c.pool.release(s)
		}
	case poolmode.Release:
		if err := s.w.Flush(); err != nil {
			c.pool.closeServer(s, "write: "+err.Error())
		} else {
			c.pool.release(s)
		}
	default:
		c.pool.closeServer(s, "client disconnected while server was not ready")
	}
}

// serverLost tells the client its server connection broke, as PgBouncer
// does, and closes the client.
func (c *client) serverLost(s *server) {
	c.mu.Lock()
	c.failed = true
	if c.server == s {
		c.unlinkLocked(s)
		sendFatal(c.w, poolerError("server conn crashed?"))
	}
	c.mu.Unlock()
	_ = c.conn.Close()
}

// fatal sends a FATAL error to the client.
func (c *client) fatal(e *pgproto3.ErrorResponse) {
	c.mu.Lock()
	sendFatal(c.w, e)
	c.mu.Unlock()
}

// link makes s the client's server; c.mu is held.
func (c *client) link(s *server) {
	c.server = s
	c.txStatus = poolmode.Idle
	s.client.Store(c)
}

// queue puts the client in its pool's wait queue. The complete messages
// already buffered, starting with the current one of n bytes, are moved to
// c.pending and counted as sent, so the goroutine can read on (queued is
// true). If the current message is not complete or too large, nothing is
// moved and the caller must wait for the link before forwarding it. A
// server that became idle meanwhile is linked and returned at once.
func (c *client) queue(n int, now time.Time) (s *server, queued bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outstanding, c.pendingExt, c.txStatus = 0, false, poolmode.Idle
	c.pending = c.pending[:0]
	k := 0
	// With prepared statements tracked, nothing is queued: messages are
	// rewritten for the server they go to, once it is linked.
	if n <= maxPending && !c.px.psOn {
		k = c.completeBuffered(maxPending)
	}
	if k > 0 {
		b, _ := c.r.Peek(k)
		c.pending = append(c.pending, b...)
		_, _ = c.r.Discard(k)
		for off := 0; off < k; {
			typ := c.pending[off]
			l := int(binary.BigEndian.Uint32(c.pending[off+1:]))
			c.count(typ, now)
			c.st.received += int64(l + 1)
			off += l + 1
		}
	}
	select { // drop a stale wake-up from an earlier wait
	case <-c.wake:
	default:
	}
	c.queued = true
	s, err = c.pool.enqueue(c, now)
	if err != nil {
		c.queued = false
		return nil, false, err
	}
	if s != nil { // idle after all: link it here
		c.queued = false
		c.pool.assigned(c, now)
		c.link(s)
		if err := c.writePending(s); err != nil {
			return nil, false, err
		}
		return s, k > 0, nil
	}
	return nil, k > 0, nil
}

// completeBuffered is the length of the run of complete, well-formed
// messages at the head of the read buffer that a waiting client may queue:
// at most max bytes, stopping before a Terminate or anything unexpected.
func (c *client) completeBuffered(max int) int {
	avail := c.r.Buffered()
	b, _ := c.r.Peek(avail)
	k := 0
	for k+5 <= len(b) {
		typ := b[k]
		l := int(int32(binary.BigEndian.Uint32(b[k+1:])))
		if l < 4 || !frontendTypes[typ] || typ == 'X' || k+l+1 > len(b) || k+l+1 > max {
			break
		}
		k += l + 1
	}
	return k
}

// count records the effect of a message sent to the server; c.mu is held.
func (c *client) count(typ byte, now time.Time) {
	switch typ {
	case 'Q', 'F':
		c.request(now)
	case 'S':
		c.request(now)
		c.pendingExt = false
	case 'P', 'B', 'E', 'D', 'C':
		c.pendingExt = true
	}
}

// readMsg reads the next whole message of n bytes into c.msg. Beyond 1 MB
// the buffer grows with the bytes that arrive, not with the length the
// client claims.
func (c *client) readMsg(n int) ([]byte, error) {
	if n > 1<<20 {
		buf := bytes.NewBuffer(c.msg[:0])
		if _, err := io.CopyN(buf, c.r, int64(n)); err != nil {
			return nil, err
		}
		c.msg = buf.Bytes()
		return c.msg, nil
	}
	if cap(c.msg) < n {
		c.msg = make([]byte, n)
	}
	b := c.msg[:n]
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// keepSmall returns b emptied, or nil when it has grown large, so that an
// idle client keeps no large buffer.
func keepSmall(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}

// writePending writes the queued messages to the newly linked server;
// c.mu is held.
func (c *client) writePending(s *server) error {
	if len(c.pending) == 0 {
		return nil
	}
	_, _ = s.w.Write(c.pending)
	c.pending = c.pending[:0]
	if cap(c.pending) > 8<<10 {
		c.pending = nil // keep no large buffer for an idle client
	}
	return s.w.Flush()
}

// handOver links a released server to this waiting client and sends what
// it queued. It runs on the releasing goroutine; false means the client is
// no longer waiting and the server must go elsewhere.
func (c *client) handOver(s *server, since time.Time) bool {
	c.mu.Lock()
	if !c.queued || c.gone {
		c.mu.Unlock()
		return false
	}
	c.queued = false
	c.waiting.Store(0)
	if c.waitTimer != nil {
		c.waitTimer.Stop()
	}
	c.pool.assigned(c, since)
	c.link(s)
	err := c.writePending(s)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if err != nil {
		c.pool.closeServer(s, "write: "+err.Error())
		c.serverLost(s)
	}
	return true
}

// failWait ends a waiting client with e (query_wait_timeout, a failed
// server login, shutdown). The pool has already taken it off the queue.
func (c *client) failWait(e *pgproto3.ErrorResponse) {
	c.mu.Lock()
	if !c.queued || c.gone {
		c.mu.Unlock()
		return
	}
	c.queued, c.failed = false, true
	c.waiting.Store(0)
	sendFatal(c.w, e)
	c.mu.Unlock()
	_ = c.conn.Close()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// armWaitTimer starts query_wait_timeout for the current wait.
func (c *client) armWaitTimer(d time.Duration) {
	if c.waitTimer == nil {
		c.waitTimer = time.AfterFunc(d, c.waitTimedOut)
		return
	}
	c.waitTimer.Reset(d)
}

func (c *client) waitTimedOut() {
	// A late run of an earlier wait's timer must not end a newer wait.
	if c.pool.dequeueOlder(&c.wait, c.px.cfg.QueryWaitTimeout-time.Millisecond) {
		c.px.stats.waitTimeouts.Add(1)
		c.failWait(poolerError(poolmode.ErrQueryWaitTimeout))
	}
}
