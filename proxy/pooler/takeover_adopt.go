//go:build linux

package pooler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// ServeTakeover is Serve for an online restart (pgbouncer -R): it serves
// on the listening sockets t took over, and before it accepts anyone it
// rebuilds t's clients and servers - each client in its pool with its
// cancel key and settings, each server with its settings, linked pairs
// linked again - and tells the old process to go (SHUTDOWN), waiting for
// it to exit and its pidfile to go away. If the rebuild fails, the old
// process is resumed (RESUME), nothing handed over is touched, and
// ServeTakeover returns the error. Connections it rebuilt are read once the
// old process has gone.
func (p *Proxy) ServeTakeover(ctx context.Context, t *Takeover) error {
	if t == nil || t.done {
		return errors.New("proxy serve: no takeover in progress")
	}
	if len(t.lns) == 0 {
		_ = t.Abort()
		return errors.New("proxy serve: the running process handed over no listening socket")
	}
	return p.serve(ctx, t.lns, t)
}

// takeOver adopts t's clients and servers on the loop, suspended (not read),
// then finishes t (SHUTDOWN) and resumes. It runs on Serve's goroutine
// once the loop runs.
func (p *Proxy) takeOver(ctx context.Context, t *Takeover) error {
	var err error
	p.loop.call(func() {
		p.pause.suspend = true // nothing is read before the old process has gone
		err = p.adoptRows(t.rows)
		if err != nil {
			p.dropHandedOver("takeover failed")
		}
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
		p.loop.call(func() { p.dropHandedOver("takeover cancelled") })
	}
	if err != nil {
		if aerr := t.Abort(); aerr != nil {
			p.logf("ERROR: %v", aerr)
		}
		return err
	}
	t.finish()
	if t.AfterShutdown != nil {
		t.AfterShutdown()
	}
	p.loop.call(p.resumeAll)
	return nil
}

// adoptRows makes a client or a server of each row, linking the pairs. Each
// adopted connection is noted in p.handover until the takeover finishes, so
// that a failure drops them again without a byte written. A row whose
// database the settings no longer serve is closed and logged, as PgBouncer
// skips it. It runs on the loop.
func (p *Proxy) adoptRows(rows []fdRow) error {
	p.loop.now = time.Now()
	servers := map[int]*server{} // by the old process's descriptor
	var clients []*client
	var links []int
	for i := range rows {
		r := &rows[i]
		fd := r.fd
		r.fd = -1 // the loop (or this function) owns it now
		if err := syscall.SetNonblock(fd, true); err != nil {
			_ = syscall.Close(fd)
			return fmt.Errorf("takeover: %s fd %d: %w", r.task, r.oldFD, err)
		}
		user := r.user
		if r.task == "server" && user == "" {
			user = r.db
		}
		pl, err := p.getPool(r.db, user)
		if err != nil {
			p.logf("WARNING: takeover: %s fd %d of %s/%s dropped: %v", r.task, r.oldFD, r.db, r.user, err)
			_ = syscall.Close(fd)
			continue
		}
		if r.task == "server" {
			s, err := p.adoptServer(pl, r, fd)
			if err != nil {
				return err
			}
			servers[r.oldFD] = s
			continue
		}
		p.takeOverAuth(r.db, r.user, r.password, r.scramClient, r.scramServer) // serverauth.go
		c, err := p.adoptClient(pl, r, fd)
		if err != nil {
			return err
		}
		clients = append(clients, c)
		links = append(links, r.linkFD)
	}
	for i, c := range clients {
		if links[i] == 0 {
			continue
		}
		s := servers[links[i]]
		if s == nil || s.pool != c.pool || s.client != nil {
			return fmt.Errorf("takeover: client of %s/%s: no server of its pool with fd %d (failed to find pair)", c.pool.key.db, c.pool.key.user, links[i])
		}
		c.server, s.client = s, c
		s.state = stateActive
		// As PgBouncer's takeover, the server is not ready: until its next
		// ReadyForQuery the client counts as inside a transaction.
		c.txStatus = poolmode.InBlock
	}
	for _, s := range servers {
		if s.client == nil {
			s.pool.release(s)
		}
	}
	return nil
}

// adoptClient makes a logged-in client of row r on descriptor fd.
func (p *Proxy) adoptClient(pl *pool, r *fdRow, fd int) (*client, error) {
	c := &client{id: clientIDs.Add(1), px: p, pool: pl, connectTime: stampOf(time.Now()), txStatus: poolmode.Idle,
		peerUID: -1, pid: uint32(r.key >> 32), secret: uint32(r.key), unix: r.addr == "unix"}
	if !c.unix {
		if a, err := netip.ParseAddr(r.addr); err == nil {
			c.remote = netip.AddrPortFrom(a, uint16(r.port))
		}
	}
	if sa, err := syscall.Getsockname(fd); err == nil {
		c.local = p.locals.intern(addrPort(sockaddrNet(sa)))
	}
	v := varsFrom(r.vars)
	c.want = p.internVars(&v)
	c.requestTime = c.connectTime
	c.counted = true
	p.conns.mu.Lock()
	p.conns.open++
	p.conns.mu.Unlock()
	p.addClient(c) // the old cancel key, unless another client holds it
	c.sk.c = c
	if err := p.loop.add(&c.sk, fd); err != nil {
		_ = syscall.Close(fd)
		p.connClosed(c)
		p.removeClient(c)
		return nil, fmt.Errorf("takeover: client fd %d: %w", r.oldFD, err)
	}
	c.adopted = true
	pl.clients++
	p.handover.socks = append(p.handover.socks, &c.sk)
	return c, nil
}

// adoptServer makes a server of pool pl from row r on descriptor fd.
func (p *Proxy) adoptServer(pl *pool, r *fdRow, fd int) (*server, error) {
	p.mu.Lock()
	pl.refs-- // getPool counted a client
	p.mu.Unlock()
	s := &server{id: serverIDs.Add(1), pool: pl, fd: fd, pid: uint32(r.key >> 32), connectTime: time.Now(), state: stateIdle}
	s.secret = binary.BigEndian.AppendUint32(nil, uint32(r.key))
	if sa, err := syscall.Getpeername(fd); err == nil {
		s.remote = sockaddrNet(sa)
	}
	if sa, err := syscall.Getsockname(fd); err == nil {
		s.local = sockaddrNet(sa)
	}
	s.have = varsFrom(r.vars)
	p.internAll(&s.have)
	// Its prepared statements are not known here: a pool that tracks them
	// closes it when it is next released.
	s.closeNeeded = pl.psOn
	s.sk.s = s
	if err := p.loop.add(&s.sk, fd); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("takeover: server fd %d: %w", r.oldFD, err)
	}
	pl.db.n.Add(1)
	pl.user.n.Add(1)
	p.serverOpened()
	pl.queue.Launch()
	pl.queue.LoginDone()
	pl.servers[s] = struct{}{}
	p.handover.socks = append(p.handover.socks, &s.sk)
	return s, nil
}

// sockaddrNet converts a socket address to a net.Addr (nil if unknown).
func sockaddrNet(sa syscall.Sockaddr) net.Addr {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	case *syscall.SockaddrUnix:
		return &net.UnixAddr{Name: a.Name, Net: "unix"}
	}
	return nil
}
