package pooler

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// adminDB is the virtual database of the admin console.
const adminDB = "pgbouncer"

// loginBufs are the buffered reader and writer a connection uses while it
// logs in (and for the console), PktBuf bytes each, reused across logins so
// that a storm of logins leaves no garbage the size of its buffers.
type loginBufs struct {
	r *bufio.Reader
	w *bufio.Writer
}

func newClient(p *Proxy, conn net.Conn) *client {
	_, unix := conn.(*net.UnixConn)
	return &client{
		id:          clientIDs.Add(1),
		px:          p,
		lg:          &loginIO{conn: conn},
		connectTime: stampOf(time.Now()),
		txStatus:    poolmode.Idle,
		unix:        unix,
		peerUID:     -1,
	}
}

// addrPort is a TCP address without an allocation per client; zero for
// other addresses.
func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	return netip.AddrPort{}
}

// authFailureText is what a client whose authentication failed is told:
// the failure itself, or PgBouncer's "bad packet" for a message that broke
// the exchange (never a Go error's text).
func authFailureText(err error) string {
	if errors.Is(err, errProtocol) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isClosed(err) {
		return "bad packet"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "bad packet"
	}
	return err.Error()
}

// refuseLogin ends a login with a FATAL error, logged as PgBouncer logs
// it ("pooler error: REASON") and the client it closes ("closing because:
// REASON (age=Ns)").
func (p *Proxy) refuseLogin(c *client, e *pgproto3.ErrorResponse) {
	p.clientLogf(c, "pooler error: %s", e.Message) // log_pooler_errors
	p.clientLogf(c, "closing because: %s (age=%ds)", e.Message, int64(time.Since(c.connectTime.time()).Seconds()))
	sendFatal(c.lg.w, e)
}

// errLoginTimeout is client_login_timeout firing.
var errLoginTimeout = errors.New("client_login_timeout")

// loginTimeoutError is what a client whose login timed out is told.
type loginTimeoutError string

func (e loginTimeoutError) Error() string { return string(e) }

// handle runs one accepted connection: start-up, then a cancel request, the
// admin console or a pooled client session. consoleOnly is set for a
// connection past the descriptor limit: only the console may take it.
func (p *Proxy) handle(c *client, consoleOnly bool) {
	defer p.wg.Done()
	conn := c.lg.conn
	handed := false // the loop owns the client (and its connection's place)
	defer func() {
		if !handed { // once handed, detach has closed conn or bridges it (TLS)
			_ = conn.Close()
			p.connClosed(c)
			p.fds.released()
		}
	}()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if c.unix {
		if uid, pid, ok := peerCred(conn); ok {
			c.peerUID, c.peerPID = int32(uid), int32(pid)
		}
	}
	var deadline time.Time
	if d := p.conf().ClientLoginTimeout; d > 0 {
		deadline = c.connectTime.time().Add(d)
	}
	_ = conn.SetDeadline(deadline)
	// A connection accepted just as shutdown starts is closed by its owner
	// here rather than leaked past Serve.
	// It closes the accepted socket (raw), which ends a TLS connection built
	// on it too; conn itself is reassigned below.
	raw := conn
	stop := context.AfterFunc(p.base, func() { _ = raw.Close() })
	defer stop()

	bufs, _ := p.login.Get().(*loginBufs)
	if bufs == nil {
		bufs = &loginBufs{r: bufio.NewReaderSize(nil, p.conf().PktBuf), w: bufio.NewWriterSize(nil, p.conf().PktBuf)}
	}
	bufs.r.Reset(conn)
	bufs.w.Reset(conn)
	c.lg.r, c.lg.w = bufs.r, bufs.w
	lg := c.lg
	defer func() {
		if lg.r != nil { // not handed to the loop, which drops them
			bufs.r.Reset(nil)
			bufs.w.Reset(nil)
			p.login.Put(bufs)
		}
	}()
	// timedOut answers a read that hit client_login_timeout, as PgBouncer's
	// janitor does, and reports whether it did.
	timedOut := func(err error) bool {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return false
		}
		p.stats.loginTimeouts.Add(1)
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		sendFatal(c.lg.w, poolerError("client_login_timeout"))
		return true
	}

	startup, ok := p.startup(c, timedOut)
	conn = c.lg.conn // a TLS connection after an accepted SSLRequest
	if !ok {
		return
	}
	if consoleOnly {
		p.identified(c)
	}
	user, db := startup["user"], startup["database"]
	if user == "" {
		sendFatal(c.lg.w, fatal("28000", "no PostgreSQL user name specified in startup packet"))
		return
	}
	if db == "" {
		db = user
	}
	if p.conf().ApplicationNameAddHost && db != adminDB {
		startup["application_name"] = appNameWithHost(startup["application_name"], conn.RemoteAddr())
	}
	c.lg.appName = startup["application_name"]
	c.lg.db, c.lg.user = db, user
	p.mu.Lock()
	ignore := p.ignore
	p.mu.Unlock()
	want, extra, refuse := parseStartup(startup, ignore)
	if refuse != "" {
		p.refuseLogin(c, poolerError(string(refuse)))
		return
	}
	c.remote, c.local = addrPort(conn.RemoteAddr()), p.locals.intern(addrPort(conn.LocalAddr()))
	if db == adminDB {
		p.enterConsole(c)
	} else if consoleOnly && !p.waitForFD() { // admission.go
		p.stats.refusedFDLimit.Add(1)
		p.refuseLogin(c, poolerError(errFDLimit))
		return
	} else if p.overMaxClientConn() {
		p.stats.refusedMaxClient.Add(1)
		p.refuseLogin(c, poolerError(poolmode.ErrMaxClientConn))
		return
	}
	if p.ownConsoleUser(c, db, user) { // peer.go: "pgbouncer" over the Unix socket
		p.consoleAsOwnUser(c, user)
		return
	}
	lu, refused := p.loginUserFor(c, db, user) // auth_file, auth_query (authquery.go)
	if refused != nil {
		p.refuseLogin(c, refused)
		return
	}
	if err := p.authenticate(c, db, lu); err != nil {
		if !timedOut(err) {
			p.refuseLogin(c, poolerError(authFailureText(err))) // 08P01, as PgBouncer sends it
		}
		return
	}
	p.newCancelKey(c) // with peer_id, PgBouncer 1.19's layout (peering.go)

	if db == adminDB {
		role := p.consoleRole(user)
		if role == roleNone {
			// PgBouncer's admin_post_login: after authentication.
			p.refuseLogin(c, poolerError("not allowed"))
			return
		}
		p.admin(c, consoleUser{name: user, role: role})
		return
	}
	if p.stoppingNow() {
		p.refuseLogin(c, poolerError("pgbouncer is shutting down"))
		return
	}
	if p.dbDisabled(db) {
		p.refuseLogin(c, poolerError(errDisabled(db)))
		return
	}
	p.findOrRegisterDB(db) // logs "registered new auto-database" as PgBouncer's login does
	pl, err := p.getPool(db, user)
	if err != nil {
		if !errors.Is(err, errNoSuchDatabase) {
			p.logf("client %d: %v", c.id, err)
		}
		p.refuseLogin(c, poolerError("no such database: "+db))
		return
	}
	c.pool = pl
	p.addClient(c)

	wait, why := welcomeWait(p.conf(), time.Now(), deadline) // janitor.go
	waitCtx, cancelWait := context.WithCancel(p.base)
	stopWatch := watchHangup(conn, c.lg.r, deadline, cancelWait) // hangup.go
	params, err := pl.awaitWelcome(waitCtx, wait)
	hungUp := stopWatch()
	cancelWait()
	if hungUp {
		p.clientLogf(c, "closing because: %s (age=%ds)", reasonClientEOF, int64(time.Since(c.connectTime.time()).Seconds()))
		p.dropClient(c)
		return
	}
	if err != nil {
		if errors.Is(err, errLoginTimeout) {
			// PgBouncer's janitor: the pool never got a server to take its
			// welcome from. The cause is in the proxy's log.
			if why == reasonLoginServerDown {
				p.stats.loginTimeouts.Add(1)
			}
			err = loginTimeoutError(why)
		}
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second)) // the login deadline may have passed
		p.refuseLogin(c, serverErrorResponse(err))
		p.dropClient(c)
		return
	}
	// The client's tracked settings: what it asked for, else the server's.
	own := varsFrom(params)
	for i, v := range want {
		if v != "" {
			own[i] = v
		}
	}
	c.want = &own // the loop's adopt puts the proxy's shared copy in its place
	if len(extra) > 0 {
		c.extra = &extra
	}
	ps := pl.welcomeFor(params, c.want, extra)
	b := make([]byte, 0, 9+len(ps)+13+6) // AuthenticationOk, ParameterStatus set, BackendKeyData, ReadyForQuery
	b, _ = (&pgproto3.AuthenticationOk{}).Encode(b)
	b = append(b, ps...)
	b, _ = (&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: binary.BigEndian.AppendUint32(nil, c.secret)}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: byte(poolmode.Idle)}).Encode(b)
	// Settings the client asked for are tried on a server before its login
	// completes (startup_check.go): the loop sends the rest of the login.
	var welcome []byte
	if key := startupKey(want, extra, params); key != "" {
		c.check = &startupCheck{key: key}
		welcome = b
	} else {
		_, _ = c.lg.w.Write(b)
		if err := c.lg.w.Flush(); err != nil {
			p.dropClient(c)
			return
		}
	}
	// The loop takes the connection over, with anything the client sent
	// past its login.
	_ = conn.SetDeadline(time.Time{})
	buffered, _ := c.lg.r.Peek(c.lg.r.Buffered())
	buffered = append([]byte(nil), buffered...)
	bufs.r.Reset(nil)
	bufs.w.Reset(nil)
	p.login.Put(bufs)
	lg.r, lg.w = nil, nil
	fd, err := p.detach(conn)
	c.lg = nil // the connection is closed by detach (or bridged): the loop has fd
	if err != nil {
		p.logf("client %d: take over connection: %v", c.id, err)
		if outOfFDs(err) { // told, not closed without a word (conn is still open)
			p.stats.refusedFDLimit.Add(1)
			p.clientLogf(c, "pooler error: %s", errFDLimit)
			p.clientLogf(c, "closing because: %s (age=%ds)", errFDLimit, int64(time.Since(c.connectTime.time()).Seconds()))
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write(encodeError(poolerError(errFDLimit)))
		}
		p.dropClient(c)
		return
	}
	if !p.loop.post(func() { c.adopt(fd, buffered, welcome) }) {
		_ = sysClose(fd)
		p.dropClient(c)
		return
	}
	handed = true
}

// startup reads the start-up packets: SSLRequest and GSSENCRequest are
// declined with 'N', a CancelRequest is carried out, a StartupMessage
// returns its parameters.
func (p *Proxy) startup(c *client, timedOut func(error) bool) (map[string]string, bool) {
	for range 3 {
		buf, err := readStartup(c.lg.r)
		if err != nil {
			var he headerError
			switch {
			case timedOut(err):
			case errors.As(err, &he):
				// PgBouncer's text, with the bytes it read in hex.
				sendFatal(c.lg.w, poolerError(fmt.Sprintf("bad packet header: '%x'", he.head)))
			}
			return nil, false
		}
		code := binary.BigEndian.Uint32(buf)
		switch {
		case code == codeSSLRequest || code == codeGSSENCRequest:
			if len(buf) != 4 || c.lg.r.Buffered() > 0 {
				return nil, false // no bytes may follow before our answer
			}
			if code == codeSSLRequest && c.tlsVersion != 0 {
				return nil, false // PgBouncer: "SSL req inside SSL", closed without a message
			}
			if tc := p.tls.Load(); code == codeSSLRequest && tc != nil && !c.unix { // PgBouncer: no TLS over the Unix socket
				if err := p.acceptTLS(c, tc); err != nil {
					p.logf("client %d: failed to accept SSL: %v", c.id, err)
					return nil, false
				}
				continue
			}
			if _, err := c.lg.conn.Write([]byte{encryptionDeclined}); err != nil {
				return nil, false
			}
		case code == codeCancelRequest:
			var cr pgproto3.CancelRequest
			if cr.Decode(buf) == nil && len(cr.SecretKey) == 4 {
				p.cancel(c, cr.ProcessID, binary.BigEndian.Uint32(cr.SecretKey))
			}
			return nil, false
		case code>>16 == 3:
			if c.tlsVersion == 0 && p.conf().requiresTLS() && !c.unix {
				sendFatal(c.lg.w, poolerError("SSL required"))
				return nil, false
			}
			params, opts, bad := decodeStartup(buf)
			if bad != "" {
				sendFatal(c.lg.w, poolerError(bad))
				return nil, false
			}
			// Minor versions above 3.0 and _pq_ options are declined, so the
			// client speaks 3.0 with us, as with the server behind us
			// (negotiate.go).
			if npv := negotiation(code, opts); npv != nil {
				_ = send(c.lg.w, npv)
			}
			return params, true
		default:
			sendRefusal(c.lg.w, code, unsupportedProtocol(code))
			return nil, false
		}
	}
	return nil, false
}

// headerError is a start-up packet whose length is out of bounds; head is
// what was read of it (up to 8 bytes, as PgBouncer prints).
type headerError struct{ head []byte }

func (e headerError) Error() string {
	return fmt.Sprintf("%v: start-up packet header %x", errProtocol, e.head)
}

// readStartup reads one untyped start-up packet and returns its body. A
// length outside 8..MAX_STARTUP_PACKET_LENGTH is a headerError, found
// before anything is allocated for the body.
func readStartup(r *bufio.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(h[:]))) - 4
	if n < 4 || n > maxStartupLen {
		more, _ := r.Peek(min(4, r.Buffered()))
		return nil, headerError{head: append(h[:], more...)}
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// serverErrorResponse turns a server login error into what the client sees:
// the server's own message (e.g. "sorry, too many clients already") as a
// FATAL 08P01, as PgBouncer 1.18 sends it, or PgBouncer's text naming the
// setting or state that fired.
// Nothing of the upstream (its address, the driver's error text) reaches
// the client: that detail is in the proxy's log.
func serverErrorResponse(err error) *pgproto3.ErrorResponse {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// PgBouncer's kill_pool_logins: the server's message, as a pooler
		// error (08P01).
		return poolerError(pe.Message)
	}
	var le loginTimeoutError
	switch {
	case errors.As(err, &le):
		return poolerError(string(le))
	case errors.Is(err, errServerLoginFailing):
		return poolerError(poolmode.ErrServerLoginFailing)
	case errors.Is(err, errQueryWaitTimeout):
		return poolerError(poolmode.ErrQueryWaitTimeout)
	case errors.Is(err, errShuttingDown) || errors.Is(err, context.Canceled):
		return poolerError("pgbouncer is shutting down")
	}
	return poolerError("server login failed")
}
