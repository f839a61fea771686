package pooler

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// consoleRole is what a console user may do: admin_users run every
// command, stats_users SHOW commands only, anyone else may not log in.
type consoleRole uint8

const (
	roleNone consoleRole = iota
	roleStats
	roleAdmin
)

// consoleUser is the user of one console connection.
type consoleUser struct {
	name string
	role consoleRole
}

// consoleRole looks a user up in admin_users and stats_users.
func (p *Proxy) consoleRole(user string) consoleRole {
	if slices.Contains(p.conf().AdminUsers, user) {
		return roleAdmin
	}
	if slices.Contains(p.conf().StatsUsers, user) {
		return roleStats
	}
	return roleNone
}

// requireAdmin is the one access check of console commands: a command
// that changes anything, or shows more than statistics (PgBouncer 1.18:
// every command but SHOW, and SHOW FDS), calls it first. It answers a
// stats user with PgBouncer's ERROR "admin access needed" and reports
// false; for an admin user it writes nothing and reports true.
func requireAdmin(w io.Writer, u consoleUser) bool {
	if u.role == roleAdmin {
		return true
	}
	writeConsoleError(w, "admin access needed")
	return false
}

// writeConsoleError writes a non-fatal console error (ERROR 08P01) and
// ReadyForQuery, as PgBouncer's admin_error does.
func writeConsoleError(w io.Writer, msg string) {
	_, _ = w.Write(consoleError(nil, msg))
}

// admin serves the console on the virtual database "pgbouncer" to a user
// of admin_users or stats_users: simple query protocol only, one command
// per query (console.go). Every message must fit in pkt_buf, as in
// PgBouncer; a longer one ends the connection with "incomplete pkt" before
// anything is allocated for it.
func (p *Proxy) admin(c *client, u consoleUser) {
	var b []byte
	b, _ = (&pgproto3.AuthenticationOk{}).Encode(b)
	// PgBouncer 1.18's admin welcome, then the client's application_name.
	for _, kv := range [][2]string{{"server_version", "1.18.0/bouncer"}, {"client_encoding", "UTF8"},
		{"server_encoding", "UTF8"}, {"DateStyle", "ISO"}, {"TimeZone", "GMT"},
		{"standard_conforming_strings", "on"}, {"is_superuser", "on"}, {"application_name", c.lg.appName}} {
		b, _ = (&pgproto3.ParameterStatus{Name: kv[0], Value: kv[1]}).Encode(b)
	}
	b, _ = (&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: []byte{byte(c.secret >> 24), byte(c.secret >> 16), byte(c.secret >> 8), byte(c.secret)}}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: byte(poolmode.Idle)}).Encode(b)
	if _, err := c.lg.w.Write(b); err != nil || c.lg.w.Flush() != nil {
		return
	}
	_ = c.lg.conn.SetDeadline(time.Time{})
	cc := &consoleConn{c: c, u: u, since: time.Now()}
	p.consoleOpened(cc)
	defer p.consoleGone()
	defer p.consoleClosed(cc)
	stop := make(chan struct{})
	defer close(stop)
	p.wg.Add(1)
	go func() { // the console is closed at shutdown
		defer p.wg.Done()
		select {
		case <-p.stopping:
			_ = c.lg.conn.Close()
		case <-stop:
		}
	}()
	for {
		typ, n, err := consoleHeader(c.lg.r, p.conf().PktBuf)
		if err != nil {
			if errors.Is(err, errIncompletePkt) {
				sendFatal(c.lg.w, poolerError("incomplete pkt"))
			}
			return
		}
		// The whole message fits in the reader's pkt_buf bytes.
		msg, err := c.lg.r.Peek(n)
		if err != nil {
			return
		}
		body := msg[5:]
		switch typ {
		case msgTerminate:
			return
		case msgQuery:
			var q pgproto3.Query
			if q.Decode(body) != nil {
				sendFatal(c.lg.w, poolerError("incomplete query"))
				return
			}
			query := q.String
			_, _ = c.lg.r.Discard(n)
			r := p.consoleQuery(cc, query)
			if r.pass != nil {
				if !p.passFDs(c.lg, r.pass) {
					return
				}
				continue
			}
			_, _ = c.lg.w.Write(r.b)
			if c.lg.w.Flush() != nil || r.close {
				return
			}
		default:
			// PgBouncer's admin_handle_client: a non-fatal error, then
			// FATAL "bad packet" and the connection closes.
			msg := fmt.Sprintf("unsupported packet type for admin console: %d", typ)
			if typ == msgParse || typ == msgBind || typ == msgExecute {
				msg = "extended query protocol not supported by admin console"
			}
			p.logf("console: %s", msg)
			writeConsoleError(c.lg.w, msg)
			sendFatal(c.lg.w, poolerError("bad packet"))
			return
		}
	}
}

// errIncompletePkt is a console message longer than pkt_buf.
var errIncompletePkt = errors.New("incomplete pkt")

// consoleHeader reads the next console message's header and checks its
// length against pktBuf before the body is read.
func consoleHeader(r *bufio.Reader, pktBuf int) (typ byte, n int, err error) {
	h, err := r.Peek(5)
	if err != nil {
		return 0, 0, err
	}
	l := int(int32(binary.BigEndian.Uint32(h[1:])))
	if l < 4 {
		return 0, 0, fmt.Errorf("%w: console message %q with length %d", errProtocol, h[0], l)
	}
	if l+1 > pktBuf || l+1 > r.Size() {
		return 0, 0, fmt.Errorf("%w: console message %q of %d bytes, pkt_buf is %d", errIncompletePkt, h[0], l+1, pktBuf)
	}
	return h[0], l + 1, nil
}
