package pooler

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// clientLoginTimeout bounds a client's start-up and authentication
// (PgBouncer's client_login_timeout).
const clientLoginTimeout = 60 * time.Second

// adminDB is the virtual database of the admin console.
const adminDB = "pgbouncer"

// handle runs one accepted connection: start-up, then a cancel request, the
// admin console or a pooled client session.
func (p *Proxy) handle(conn net.Conn) {
	defer p.wg.Done()
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = conn.SetDeadline(time.Now().Add(clientLoginTimeout))
	// A connection accepted just as shutdown starts is closed by its owner
	// here rather than leaked past Serve.
	stop := context.AfterFunc(p.base, func() { _ = conn.Close() })
	defer stop()

	c := &client{
		id:          clientIDs.Add(1),
		px:          p,
		conn:        conn,
		r:           bufio.NewReaderSize(conn, readBufSize),
		w:           bufio.NewWriterSize(conn, writeBufSize),
		connectTime: time.Now(),
		remote:      conn.RemoteAddr(),
		local:       conn.LocalAddr(),
		txStatus:    poolmode.Idle,
	}
	startup, ok := p.startup(c)
	if !ok {
		return
	}
	user, db := startup["user"], startup["database"]
	if user == "" {
		sendFatal(c.w, fatal("28000", "no PostgreSQL user name specified in startup packet"))
		return
	}
	if db == "" {
		db = user
	}
	c.appName = startup["application_name"]
	p.mu.Lock()
	ignore := p.ignore
	p.mu.Unlock()
	want, extra, refuse := parseStartup(startup, ignore)
	if refuse != "" {
		sendFatal(c.w, poolerError(string(refuse)))
		return
	}
	if err := p.authenticate(c, user); err != nil {
		sendFatal(c.w, poolerError(err.Error())) // 08P01, as PgBouncer sends it
		return
	}
	var key [8]byte
	_, _ = rand.Read(key[:])
	c.pid = binary.BigEndian.Uint32(key[:4]) &^ (1 << 31)
	c.secret = binary.BigEndian.Uint32(key[4:])

	if db == adminDB {
		p.admin(c, user, db)
		return
	}
	if p.stoppingNow() {
		sendFatal(c.w, poolerError("pgbouncer is shutting down"))
		return
	}
	c.st.logins = 1
	if !p.addClient(c, true) {
		sendFatal(c.w, poolerError(poolmode.ErrMaxClientConn))
		return
	}
	pl, err := p.getPool(db, user)
	if err != nil {
		if !errors.Is(err, errNoSuchDatabase) {
			p.logf("client %d: %v", c.id, err)
		}
		sendFatal(c.w, poolerError("no such database: "+db))
		p.dropClient(c)
		return
	}
	c.pool = pl

	ctx := p.base
	if d := p.conf().QueryWaitTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d+p.conf().ServerConnectTimeout)
		defer cancel()
	}
	params, err := pl.awaitWelcome(ctx)
	if err != nil {
		sendFatal(c.w, serverErrorResponse(err))
		p.dropClient(c)
		return
	}
	var b []byte
	b, _ = (&pgproto3.AuthenticationOk{}).Encode(b)
	// The client's tracked settings: what it asked for, else the server's.
	c.want = varsFrom(params)
	for i, v := range want {
		if v != "" {
			c.want[i] = v
		}
	}
	c.extra = extra
	b = append(b, welcomeFor(params, &c.want, c.extra)...)
	b, _ = (&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: binary.BigEndian.AppendUint32(nil, c.secret)}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: byte(poolmode.Idle)}).Encode(b)
	_, _ = c.w.Write(b)
	if err := c.w.Flush(); err != nil {
		p.dropClient(c)
		return
	}
	// The loop takes the connection over, with anything the client sent
	// past its login.
	_ = conn.SetDeadline(time.Time{})
	buffered, _ := c.r.Peek(c.r.Buffered())
	buffered = append([]byte(nil), buffered...)
	c.r, c.w = nil, nil
	fd, err := p.detach(conn)
	if err != nil {
		p.logf("client %d: take over connection: %v", c.id, err)
		p.dropClient(c)
		return
	}
	if !p.loop.post(func() { c.adopt(fd, buffered) }) {
		_ = sysClose(fd)
		p.dropClient(c)
	}
}

// startup reads the start-up packets: SSLRequest and GSSENCRequest are
// declined with 'N', a CancelRequest is carried out, a StartupMessage
// returns its parameters.
func (p *Proxy) startup(c *client) (map[string]string, bool) {
	for range 3 {
		buf, err := readStartup(c.r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isClosed(err) {
				sendFatal(c.w, poolerError("bad packet header"))
			}
			return nil, false
		}
		code := binary.BigEndian.Uint32(buf)
		switch {
		case code == codeSSLRequest || code == codeGSSENCRequest:
			if len(buf) != 4 || c.r.Buffered() > 0 {
				return nil, false // no bytes may follow before our answer
			}
			if _, err := c.conn.Write([]byte{encryptionDeclined}); err != nil {
				return nil, false
			}
		case code == codeCancelRequest:
			var cr pgproto3.CancelRequest
			if cr.Decode(buf) == nil && len(cr.SecretKey) == 4 {
				p.cancel(cr.ProcessID, binary.BigEndian.Uint32(cr.SecretKey))
			}
			return nil, false
		case code>>16 == 3:
			var sm pgproto3.StartupMessage
			if err := sm.Decode(buf); err != nil {
				sendFatal(c.w, poolerError("bad startup packet"))
				return nil, false
			}
			// Minor versions above 3.0 and _pq_ options are declined, so the
			// client speaks 3.0 with us, as with the server behind us.
			var unknown []string
			for k := range sm.Parameters {
				if strings.HasPrefix(k, "_pq_.") {
					unknown = append(unknown, k)
				}
			}
			if code != protocol30 || len(unknown) > 0 {
				_ = send(c.w, &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
			}
			return sm.Parameters, true
		default:
			sendFatal(c.w, poolerError("unsupported startup parameter or protocol version"))
			return nil, false
		}
	}
	return nil, false
}

// readStartup reads one untyped start-up packet and returns its body.
func readStartup(r *bufio.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(h[:]))) - 4
	if n < 4 || n > maxStartupLen {
		return nil, fmt.Errorf("%w: start-up packet length %d", errProtocol, n+4)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// serverErrorResponse turns a server login error into what the client sees:
// the server's own ErrorResponse (e.g. 53300 sorry, too many clients
// already), or a pooler error naming the failure.
func serverErrorResponse(err error) *pgproto3.ErrorResponse {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fatal(pe.Code, pe.Message)
	}
	if errors.Is(err, errServerLoginFailing) {
		return poolerError(poolmode.ErrServerLoginFailing)
	}
	if errors.Is(err, errQueryWaitTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return poolerError("query_wait_timeout")
	}
	if errors.Is(err, errShuttingDown) || errors.Is(err, context.Canceled) {
		return poolerError("pgbouncer is shutting down")
	}
	return poolerError(err.Error())
}
