package pooler

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// serverState is a server connection's state as SHOW SERVERS names it.
type serverState uint8

const (
	stateLogin serverState = iota
	stateActive
	stateIdle
	stateTested // running server_reset_query
	stateBeingCanceled
)

var serverStateNames = [...]string{stateLogin: "new", stateActive: "active", stateIdle: "idle", stateTested: "tested", stateBeingCanceled: "being_canceled"}

func (s serverState) String() string { return serverStateNames[s] }

// server is one upstream PostgreSQL connection. After login it belongs to
// the loop, which reads everything the server sends: while linked it goes
// to the client; while unlinked the replies to server_reset_query and
// notices are consumed, anything else closes the server.
type server struct {
	id          uint64
	pool        *pool
	sk          sock
	fd          int // the descriptor handed to the loop
	remote      net.Addr
	local       net.Addr
	pid         uint32
	secret      []byte
	connectTime time.Time
	bridged     bool // TLS to the server: the loop has a socket pair's end, not the connection (SHOW FDS skips it)

	client      *client  // the linked client, nil when unlinked
	have        vars     // the server's tracked settings (varcache.go)
	extra       settings // the client settings last applied (startup.go)
	setting     bool     // replies to the SET of the client's settings are due
	setError    []byte   // the ErrorResponse that SET got
	resetting   bool     // server_reset_query runs on the unlinked server
	resetFailed bool
	fwdLeft     int  // bytes of a large message still to pass to the client
	fwdDrop     bool // ... or to drop
	stalled     bool // the client's output is full: not read until it drains

	// checking: the query running on the unlinked server is
	// server_check_query, not server_reset_query (shaping.go).
	checking bool
	// tlsVersion and tlsSuite are the TLS the connection uses (0: none).
	tlsVersion, tlsSuite uint16

	state     serverState
	idleSince time.Time
	closed    bool
	// closeNeeded closes the server when it is next released (RECONNECT,
	// or a reload that changed its database's connection settings).
	closeNeeded bool
	cancels     int  // cancel requests in flight
	held        bool // released while cancels were in flight

	// ps is the server's prepared statements and expected responses
	// (pool.psOn only).
	ps psServer
}

var serverIDs atomic.Uint64

// dialServer logs in to PostgreSQL with pgconn, so every auth method and TLS
// work, runs connectQuery (the database's connect_query; an error is
// logged and ignored, as PgBouncer does), then takes over the raw
// connection for the loop.
func dialServer(ctx context.Context, p *pool, conf *pgconn.Config, connectQuery string) (*server, map[string]string, error) {
	pc, err := pgconn.ConnectConfig(ctx, conf)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to server: %w", err)
	}
	if connectQuery != "" {
		if _, err := pc.Exec(ctx, connectQuery).ReadAll(); err != nil {
			if pc.IsClosed() {
				return nil, nil, fmt.Errorf("connect_query: %w", err)
			}
			p.px.logf("%s/%s S: error while executing exec_on_query: %v", p.key.db, p.key.user, err)
		}
	}
	hj, err := pc.Hijack()
	if err != nil {
		pc.Close(ctx)
		return nil, nil, fmt.Errorf("hijack server connection: %w", err)
	}
	conn, err := serverConnOf(hj.Conn) // the proxy did the login (serverauth.go)
	if err != nil {
		_ = hj.Conn.Close()
		return nil, nil, err
	}
	hj.Conn = conn
	s := &server{
		id:          serverIDs.Add(1),
		pool:        p,
		remote:      hj.Conn.RemoteAddr(),
		local:       hj.Conn.LocalAddr(),
		pid:         hj.PID,
		secret:      hj.SecretKey,
		connectTime: time.Now(),
		state:       stateLogin,
		bridged:     !isPlain(hj.Conn),
	}
	s.sk.s = s
	if tc, ok := hj.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := tc.ConnectionState()
		s.tlsVersion, s.tlsSuite = st.Version, st.CipherSuite
	}
	if s.fd, err = p.px.detach(hj.Conn); err != nil {
		_ = hj.Conn.Close()
		return nil, nil, fmt.Errorf("take over server connection: %w", err)
	}
	return s, hj.ParameterStatuses, nil
}

// input handles what the server sent, as far as the client can take it.
func (s *server) input() {
	l := s.pool.px.loop
	for !s.closed && !s.stalled {
		need := s.step()
		if need == 0 {
			continue
		}
		if need < 0 {
			return
		}
		if !s.sk.more {
			if s.sk.eof {
				s.lost(fmt.Errorf("server closed the connection"))
			}
			return
		}
		l.fill(&s.sk, need)
	}
}

// step handles the next server message, or part of a large one. It returns
// 0 when it made progress, the number of buffered bytes it needs to go on,
// or -1 when the server must not be read now.
func (s *server) step() int {
	sk := &s.sk
	l := s.pool.px.loop
	avail := sk.w - sk.r
	c := s.client
	if c != nil && l.full(&c.sk) {
		s.stalled = true
		return -1
	}
	if s.fwdLeft > 0 {
		if avail == 0 {
			return 1
		}
		if c == nil || s.fwdDrop {
			l.pass(sk, &s.fwdLeft, nil)
		} else {
			c.pool.counts.sent += int64(l.pass(sk, &s.fwdLeft, &c.sk))
		}
		return 0
	}
	if avail < 5 {
		return 5
	}
	typ, ln := sk.header()
	if ln < 4 || ln+1 > s.pool.px.conf().MaxPacketSize {
		s.lost(fmt.Errorf("%w: server message %q with length %d", errProtocol, typ, ln))
		return -1
	}
	n := ln + 1
	if c == nil {
		if avail < n {
			return n
		}
		msg := sk.buf[sk.r : sk.r+n]
		sk.r += n
		if err := s.unlinked(typ, msg[5:]); err != nil {
			s.lost(err)
			return -1
		}
		return 0
	}
	whole := avail >= n
	if s.setting {
		if !whole {
			return n
		}
		msg := sk.buf[sk.r : sk.r+n]
		sk.r += n
		s.setReply(c, typ, msg)
		return 0
	}
	if typ == msgParameterStatus && whole { // the client changed a setting
		s.have.noteParameterStatus(s.pool.px, sk.buf[sk.r+5:sk.r+n])
		c.noteParameterStatus(sk.buf[sk.r+5 : sk.r+n])
	}
	if typ == msgReadyForQuery {
		if n != 6 {
			s.lost(fmt.Errorf("%w: ReadyForQuery of length %d", errProtocol, n))
			return -1
		}
		if !whole {
			return n
		}
		status := poolmode.TxStatus(sk.buf[sk.r+5])
		msg := sk.buf[sk.r : sk.r+n]
		sk.r += n
		c.ready(s, status, msg)
		return 0
	}
	psOn := s.pool.psOn
	if psOn && typ == msgCommandComplete && !whole && n <= 64 {
		return n // the tag is read for DISCARD ALL and DEALLOCATE ALL
	}
	take := min(n, avail)
	msg := sk.buf[sk.r : sk.r+take]
	skip := psOn && c.psResponse(s, typ, msg)
	if !skip {
		l.send(&c.sk, msg)
		c.pool.counts.sent += int64(take)
	}
	sk.r += take
	if take < n {
		s.fwdLeft, s.fwdDrop = n-take, skip
	}
	if psOn {
		c.psFakes(s)
	}
	return 0
}

// setReply handles one reply to the SET that link sent: the new values
// are noted (as the server spells them, for the client too), the rest is
// swallowed. If the SET failed, the client gets the server's error as a
// FATAL and both connections close.
func (s *server) setReply(c *client, typ byte, msg []byte) {
	switch typ {
	case msgParameterStatus:
		s.have.noteParameterStatus(s.pool.px, msg[5:])
		c.noteParameterStatus(msg[5:])
	case msgErrorResponse:
		s.setError = append(s.setError[:0], msg...)
	case msgReadyForQuery:
		s.setting = false
		if s.setError == nil {
			if c.checking {
				c.startupChecked(s)
			}
			return
		}
		var e pgproto3.ErrorResponse
		_ = e.Decode(s.setError[5:])
		s.setError = nil
		e.Severity, e.SeverityUnlocalized = "FATAL", "FATAL"
		if c.checking {
			c.pool.noteChecked(c.check.key, &e)
		}
		c.unlink(s)
		s.pool.closeServer(s, "SET of client settings failed: "+e.Message)
		c.fatalClose(&e)
	}
}

// lost handles a broken or closed server connection.
func (s *server) lost(err error) {
	if s.closed {
		return
	}
	c := s.client
	s.pool.closeServer(s, fmt.Sprintf("read: %v", err))
	if c != nil {
		c.serverLost(s)
	}
}

// unlinked handles a whole message from a server no client is linked to.
func (s *server) unlinked(typ byte, body []byte) error {
	if s.resetting {
		switch typ {
		case msgErrorResponse:
			s.resetFailed = true
		case msgReadyForQuery:
			s.resetting = false
			checked := s.checking
			if checked {
				s.checking = false
				s.pool.checking--
			}
			if s.resetFailed || len(body) != 1 || poolmode.TxStatus(body[0]) != poolmode.Idle {
				s.resetFailed = false
				reason := "server_reset_query failed"
				if checked {
					reason = "server check query failed"
				}
				s.pool.closeServer(s, reason)
				return nil
			}
			if !checked {
				s.extra = nil // server_reset_query (DISCARD ALL) reset them
			}
			s.pool.release(s)
			if checked {
				s.pool.launch() // clients that came meanwhile may need more servers
			}
		}
		return nil
	}
	switch typ {
	case msgParameterStatus: // server_reset_query resets settings
		s.have.noteParameterStatus(s.pool.px, body)
		return nil
	case msgNoticeResponse, msgNotification:
		return nil
	case msgErrorResponse:
		var e pgproto3.ErrorResponse
		_ = e.Decode(body)
		return fmt.Errorf("idle server sent error: %s", e.Message)
	default:
		return fmt.Errorf("%w: idle server sent message %q", errProtocol, typ)
	}
}

// reset runs server_reset_query on an unlinked server; the server is
// released when ReadyForQuery with status Idle comes back.
func (s *server) reset(query string) {
	b, _ := (&pgproto3.Query{String: query}).Encode(nil)
	s.state = stateTested
	s.resetting = true
	s.pool.px.loop.send(&s.sk, b)
}

// isPlain reports whether conn is a bare socket whose descriptor the loop
// can take over.
func isPlain(conn net.Conn) bool {
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}
