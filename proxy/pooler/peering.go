package pooler

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolconf"
)

// Peering, as PgBouncer 1.19 has it (PgBouncer 1.18 has none): poolers
// that share a listening port (so_reuseport, or a load balancer in front)
// each have a peer_id, and [peers] says where each id listens. A client's
// cancel request comes on a new connection, which may reach any of them;
// the cancel key says whose client it is, so the pooler that gets it
// forwards it to the right one.
//
// The key (BackendKeyData, 8 bytes: process id then secret, big-endian)
// is laid out as 1.19 lays it out, so that the proxy and PgBouncer 1.19
// can be peers of each other: byte 0 and byte 1 hold the peer id (low
// byte first), and the two low bits of byte 7 a time-to-live, 3 when the
// key is given out and decremented at each forwarding, so that a request
// that finds no end (peers whose [peers] sections disagree) is dropped
// after three hops. The other 46 bits are random. A pooler with peer_id 0
// gives out fully random keys and forwards nothing.
//
// Forwarding happens on the cancel connection's own goroutine, once per
// cancel request: nothing is added to the data plane.

// cancelTTLMask is the time-to-live bits of a cancel key's last byte
// (PgBouncer's CANCELLATION_TTL_MASK).
const cancelTTLMask = 0x03

// newCancelKey gives client c its cancel key: random, the process id kept
// positive; with peer_id set, the peer id and a full time-to-live in their
// bits (1.19's layout, whose process id may then be negative, as 1.19's).
func (p *Proxy) newCancelKey(c *client) {
	var key [8]byte
	_, _ = rand.Read(key[:])
	key[0] &^= 0x80
	if id := p.conf().PeerID; id > 0 {
		key[0], key[1] = byte(id), byte(id>>8)
		key[7] |= cancelTTLMask
	}
	c.pid = binary.BigEndian.Uint32(key[:4])
	c.secret = binary.BigEndian.Uint32(key[4:])
}

// keyPeerID is the peer id a cancel key's process id carries.
func keyPeerID(pid uint32) int { return int(pid>>24) | int(pid>>16&0xff)<<8 }

// forwardCancel sends a cancel request whose key names peer to instead of
// this proxy on to that peer, with its time-to-live one less, as PgBouncer
// 1.19's accept_cancel_request_for_peer. At most the peer's pool_size
// requests (default_pool_size when not given) are in flight to one peer;
// the others wait. The whole forwarding is bounded by cancelTimeout
// (PgBouncer 1.19's cancel_wait_timeout default), the connection to the
// peer by server_connect_timeout. A request that cannot go on closes with
// PgBouncer's reason.
func (p *Proxy) forwardCancel(c *client, to int, pid, secret uint32) {
	conf := p.conf()
	if lg := c.lg; lg != nil && lg.conn != nil { // for the log line, as a login has them
		c.remote, c.local = addrPort(lg.conn.RemoteAddr()), p.locals.intern(addrPort(lg.conn.LocalAddr()))
	}
	closing := func(reason string) {
		p.clientLogf(c, "closing because: %s (age=%ds)", reason, int64(time.Since(c.connectTime.time()).Seconds()))
	}
	if secret&cancelTTLMask == 0 {
		closing("failed to forward cancel request because its TTL was exhausted")
		return
	}
	secret-- // the TTL is the low bits
	i := slices.IndexFunc(conf.Peers, func(pe poolconf.Peer) bool { return pe.ID == to })
	if i < 0 {
		closing("could not find peer to forward request to")
		return
	}
	peer := conf.Peers[i]
	size := peer.PoolSize
	if size == poolconf.Unset {
		size = conf.DefaultPoolSize
	}
	p.debugf("forwarding cancellation request to peer %d", to)
	ctx, stop := context.WithTimeout(p.base, cancelTimeout)
	defer stop()
	pp := p.peerPools.get(to)
	defer context.AfterFunc(pp.removed, stop)() // RELOAD without the peer ends it
	var err error
	if pp.acquire(ctx, size) {
		if err = sendPeerCancel(ctx, conf.ServerConnectTimeout, peer, pid, secret, pp); err == nil {
			return
		}
	}
	switch {
	case pp.removed.Err() != nil:
		closing("peer removed")
	case ctx.Err() != nil:
		closing("cancel_wait_timeout")
	default:
		p.logf("WARNING: forwarding cancel request to peer %d (%s): %v", to, peerAddr(peer), err)
		closing("failed to send cancel request")
	}
}

// peerNetAddr is the network and address of a peer: a host that starts with
// "/" or "@" is a Unix socket directory, as in [databases].
func peerNetAddr(pe poolconf.Peer) (network, address string) {
	if strings.HasPrefix(pe.Host, "/") || strings.HasPrefix(pe.Host, "@") {
		return "unix", UnixSocketPath(pe.Host, pe.Port)
	}
	return "tcp", net.JoinHostPort(pe.Host, strconv.Itoa(pe.Port))
}

func peerAddr(pe poolconf.Peer) string { _, a := peerNetAddr(pe); return a }

// sendPeerCancel connects to the peer, sends the CancelRequest and waits
// until the peer closes the connection, which it does once it has passed
// the cancel on (to PostgreSQL, or to a further peer). pp holds the slot
// acquire took and is given it back.
func sendPeerCancel(ctx context.Context, connectTimeout time.Duration, pe poolconf.Peer, pid, secret uint32, pp *peerPool) error {
	active := false
	defer func() { pp.release(active) }()
	network, address := peerNetAddr(pe)
	d := net.Dialer{Timeout: connectTimeout}
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	b, err := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: binary.BigEndian.AppendUint32(nil, secret)}).Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(b); err != nil {
		return err
	}
	pp.sent()
	active = true
	_, _ = io.Copy(io.Discard, conn)
	return ctx.Err() // the peer closed, or the time limit (or a reload) closed it
}

// peerPools is the cancel requests in flight to each peer, by peer id:
// PgBouncer 1.19's peer pools, which SHOW PEER_POOLS lists. A peer's pool
// is made by the first request forwarded to it.
type peerPools struct {
	mu    sync.Mutex
	pools map[int]*peerPool
}

// peerPool counts one peer's cancel requests: waiting for a slot,
// connecting to the peer (login) and sent, waiting for the peer to close
// (active).
type peerPool struct {
	mu                     sync.Mutex
	waiting, login, active int
	wake                   chan struct{} // closed, and replaced, when a slot frees
	// removed ends when a reload drops the peer from [peers]: its
	// requests close ("peer removed"), as PgBouncer 1.19's kill_peer_pool.
	removed context.Context
	remove  context.CancelFunc
}

func (pp *peerPools) get(id int) *peerPool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.pools == nil {
		pp.pools = map[int]*peerPool{}
	}
	pl := pp.pools[id]
	if pl == nil {
		pl = &peerPool{wake: make(chan struct{})}
		pl.removed, pl.remove = context.WithCancel(context.Background())
		pp.pools[id] = pl
	}
	return pl
}

// dropRemovedPeers is a reload's part (PgBouncer 1.19's kill_peer): each peer
// of old that is not in next is logged as dropped, and the requests in
// flight to it end.
func (p *Proxy) dropRemovedPeers(old, next []poolconf.Peer) {
	pp := &p.peerPools
	for _, pe := range old {
		if slices.ContainsFunc(next, func(n poolconf.Peer) bool { return n.ID == pe.ID }) {
			continue
		}
		p.logf("WARNING: dropping peer %d as it does not exist anymore", pe.ID)
		pp.mu.Lock()
		if pl := pp.pools[pe.ID]; pl != nil {
			pl.remove()
			delete(pp.pools, pe.ID)
		}
		pp.mu.Unlock()
	}
}

// acquire waits for one of size slots; false when ctx ends first.
func (pl *peerPool) acquire(ctx context.Context, size int) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.waiting++
	defer func() { pl.waiting-- }()
	for pl.login+pl.active >= size {
		w := pl.wake
		pl.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			pl.mu.Lock()
			return false
		}
		pl.mu.Lock()
	}
	pl.login++
	return true
}

// sent moves a request from login to active.
func (pl *peerPool) sent() {
	pl.mu.Lock()
	pl.login--
	pl.active++
	pl.mu.Unlock()
}

// release gives a slot back.
func (pl *peerPool) release(active bool) {
	pl.mu.Lock()
	if active {
		pl.active--
	} else {
		pl.login--
	}
	close(pl.wake)
	pl.wake = make(chan struct{})
	pl.mu.Unlock()
}

// showPeers is SHOW PEERS (PgBouncer 1.19): each [peers] entry, its
// pool_size as in force (default_pool_size when not given).
func (p *Proxy) showPeers() *table {
	t := newTable("isii", "peer_id", "host", "port", "pool_size")
	c := p.conf()
	for _, pe := range c.Peers {
		size := pe.PoolSize
		if size == poolconf.Unset {
			size = c.DefaultPoolSize
		}
		t.row(pe.ID, pe.Host, pe.Port, size)
	}
	return t
}

// showPeerPools is SHOW PEER_POOLS (PgBouncer 1.19): the cancel requests
// in flight to each peer a request has been forwarded to. A request is
// waiting (cl_waiting_cancel_req) until it has been sent to the peer, and
// the peer's connection in login (sv_login) while it connects; once sent,
// the request and its connection are active until the peer closes it.
func (p *Proxy) showPeerPools() *table {
	t := newTable("iiiii", "peer_id", "cl_active_cancel_req", "cl_waiting_cancel_req", "sv_active_cancel", "sv_login")
	peers := p.conf().Peers
	pp := &p.peerPools
	pp.mu.Lock()
	ids := make([]int, 0, len(pp.pools))
	for id, pl := range pp.pools {
		pl.mu.Lock()
		idle := pl.waiting+pl.login+pl.active == 0
		pl.mu.Unlock()
		if idle && !slices.ContainsFunc(peers, func(pe poolconf.Peer) bool { return pe.ID == id }) {
			pl.remove()
			delete(pp.pools, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		pl := pp.pools[id]
		pl.mu.Lock()
		t.row(id, pl.active, pl.waiting+pl.login, pl.active, pl.login)
		pl.mu.Unlock()
	}
	pp.mu.Unlock()
	return t
}
