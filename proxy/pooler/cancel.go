package pooler

import (
	"context"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// cancelTimeout bounds one forwarded cancel request (PgBouncer's
// cancel_wait_timeout is 10 s).
const cancelTimeout = 10 * time.Second

// cancel carries out a client's CancelRequest: when the key is one the proxy
// gave out and that client has a linked server, a CancelRequest with the
// server's real key goes to PostgreSQL over a new connection. The server is
// kept from reuse until the cancel has settled. Unknown keys and idle
// clients are ignored, as PgBouncer does. With peer_id set, a key that
// names another peer is forwarded to it (peering.go). It runs on the
// cancel connection c's own goroutine.
func (p *Proxy) cancel(c *client, pid, secret uint32) {
	if id := p.conf().PeerID; id > 0 {
		if to := keyPeerID(pid); to != id {
			p.forwardCancel(c, to, pid, secret)
			return
		}
		secret |= cancelTTLMask // the keys given out have a full TTL
	}
	p.mu.Lock()
	target := p.keys[cancelKey(pid, secret)]
	p.mu.Unlock()
	if target == nil {
		return
	}
	var s *server
	var conf *pgconn.Config
	p.loop.call(func() {
		if target.gone || target.server == nil || target.server.closed {
			return
		}
		s = target.server
		s.cancels++
		conf = s.pool.conf // a reload may replace it
	})
	if s == nil {
		return
	}
	ctx, stop := context.WithTimeout(p.base, cancelTimeout)
	err := sendCancel(ctx, conf, s)
	stop()
	if err != nil {
		p.debugf("cancel for server %d: %v", s.id, err)
	}
	p.loop.post(func() {
		s.cancels--
		if s.cancels == 0 && s.held && !s.closed {
			s.held = false
			s.pool.release(s)
		}
	})
}

// sendCancel opens a new connection to the server's address and sends a
// CancelRequest with its backend key, then waits for PostgreSQL to close the
// connection, which it does once the cancel has been delivered.
func sendCancel(ctx context.Context, conf *pgconn.Config, s *server) error {
	ra := s.remote
	network, address := ra.Network(), ra.String()
	if network == "unix" {
		network, address = pgconn.NetworkAddress(conf.Host, conf.Port)
	}
	conn, err := conf.DialFunc(ctx, network, address)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	b, err := (&pgproto3.CancelRequest{ProcessID: s.pid, SecretKey: s.secret}).Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(b); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, conn)
	return nil
}
