package proxy

import (
	"bufio"
	"context"
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

// server is one upstream PostgreSQL connection. Its goroutine (run) is the
// only reader of conn; whoever holds the server (the linked client, or the
// pool while resetting) is the only writer.
type server struct {
	id          uint64
	pool        *pool
	conn        net.Conn
	r           *bufio.Reader
	w           *bufio.Writer
	pid         uint32
	secret      []byte
	connectTime time.Time

	// client is the linked client, nil when unlinked. It is set and cleared
	// under the client's mu.
	client atomic.Pointer[client]
	// resetting is set while server_reset_query runs on an unlinked server.
	resetting   atomic.Bool
	resetFailed bool // owned by run

	// Guarded by pool.mu.
	state     serverState
	idleSince time.Time
	closed    bool
	cancels   int  // cancel requests in flight
	held      bool // released while cancels were in flight

	// ps is the server's prepared statements and expected responses
	// (Proxy.psOn only).
	ps psServer
}

var serverIDs atomic.Uint64

// resetWriteTimeout bounds writing server_reset_query.
const resetWriteTimeout = 5 * time.Second

// dialServer logs in to PostgreSQL with pgconn, so every auth method and TLS
// work, then takes over the raw connection.
func dialServer(ctx context.Context, p *pool) (*server, map[string]string, error) {
	pc, err := pgconn.ConnectConfig(ctx, p.conf)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to server: %w", err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		pc.Close(ctx)
		return nil, nil, fmt.Errorf("hijack server connection: %w", err)
	}
	s := &server{
		id:          serverIDs.Add(1),
		pool:        p,
		conn:        hj.Conn,
		r:           bufio.NewReaderSize(hj.Conn, readBufSize),
		w:           bufio.NewWriterSize(hj.Conn, writeBufSize),
		pid:         hj.PID,
		secret:      hj.SecretKey,
		connectTime: time.Now(),
		state:       stateLogin,
	}
	return s, hj.ParameterStatuses, nil
}

// run reads everything the server sends, for the server's whole life: while
// linked it forwards to the client; while unlinked it consumes the replies
// to server_reset_query and notices, and closes the server on anything else.
func (s *server) run() {
	defer s.pool.px.wg.Done()
	defer s.ps.release(&s.pool.px.ps) // the connection is closed: its statements are gone
	var scratch []byte
	for {
		typ, n, err := header(s.r)
		if err != nil {
			s.lost(err)
			return
		}
		c := s.client.Load()
		if c == nil {
			if err := s.unlinked(typ, n, &scratch); err != nil {
				s.lost(err)
				return
			}
			continue
		}
		if err := c.fromServer(s, typ, n); err != nil {
			s.lost(err)
			return
		}
	}
}

// lost handles a broken or closed server connection.
func (s *server) lost(err error) {
	s.pool.closeServer(s, fmt.Sprintf("read: %v", err))
	if c := s.client.Load(); c != nil {
		c.serverLost(s)
	}
}

// unlinked handles a message from a server no client is linked to.
func (s *server) unlinked(typ byte, n int, scratch *[]byte) error {
	b, err := body(s.r, n, scratch)
	if err != nil {
		return err
	}
	if s.resetting.Load() {
		switch typ {
		case 'E':
			s.resetFailed = true
		case 'Z':
			s.resetting.Store(false)
			if s.resetFailed || len(b) != 1 || poolmode.TxStatus(b[0]) != poolmode.Idle {
				s.resetFailed = false
				s.pool.closeServer(s, "server_reset_query failed")
				return nil
			}
			s.pool.release(s)
		}
		return nil
	}
	switch typ {
	case 'S', 'N', 'A': // ParameterStatus, NoticeResponse, NotificationResponse
		return nil
	case 'E':
		var e pgproto3.ErrorResponse
		_ = e.Decode(b)
		return fmt.Errorf("idle server sent error: %s", e.Message)
	default:
		return fmt.Errorf("%w: idle server sent message %q", errProtocol, typ)
	}
}

// reset runs server_reset_query on an unlinked server; its goroutine
// releases the server when ReadyForQuery 'I' comes back.
func (s *server) reset(query string) {
	b, _ := (&pgproto3.Query{String: query}).Encode(nil)
	// The write happens under pool.mu so that it happens before the next
	// owner's writes, which follow the release under the same lock.
	s.pool.mu.Lock()
	s.state = stateTested
	s.resetting.Store(true)
	// An idle server takes a few bytes at once; the deadline only guards
	// the pool's lock against a server that stopped reading.
	_ = s.conn.SetWriteDeadline(time.Now().Add(resetWriteTimeout))
	_, _ = s.w.Write(b)
	err := s.w.Flush()
	_ = s.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		s.resetting.Store(false)
	}
	s.pool.mu.Unlock()
	if err != nil {
		s.pool.closeServer(s, "server_reset_query: "+err.Error())
	}
}
