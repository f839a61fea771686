//go:build linux

package pooler

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The old process's side of an online restart, as PgBouncer 1.18's
// (src/admin.c admin_show_fds, send_one_fd): over a console connection
// from the Unix socket by a process of the proxy's own OS user, SHOW FDS
// sends each row with its descriptor in SCM_RIGHTS ancillary data - the
// listening sockets, every logged-in client and every server. Sockets with
// TLS (a client's, a server's, or either end of a linked pair) are left
// out, as PgBouncer leaves them: they cannot be handed over and close
// with the old process. SHUTDOWN after such a SHOW FDS, while suspended,
// forgets the connections it passed on without writing a byte to them
// (the kernel keeps them open in the new process) and leaves the Unix
// socket's file in place. RESUME (or the console connection leaving) puts
// everything back as it was.

// handoverState is what SHOW FDS passed on, or what a takeover adopted and
// may have to drop again. It belongs to the loop.
type handoverState struct {
	socks []*sock             // client and server connections whose descriptors are held by the other process
	unix  []*net.UnixListener // Unix listeners whose socket file the other process now serves
}

// acceptGate stops the accept loops while SUSPEND is in force, as
// PgBouncer's suspend_pooler: a client connecting meanwhile waits in the
// listen backlog for whichever process serves next.
type acceptGate struct {
	mu     sync.Mutex
	paused bool
	wake   chan struct{} // closed when accepting resumes
}

// takeoverStep bounds each exchange of an online restart that has no
// timeout of its own (a console reply, a row of SHOW FDS, the old process
// exiting).
const takeoverStep = 10 * time.Second

type deadliner interface{ SetDeadline(time.Time) error }

// pauseAccept makes every accept loop wait (an expired deadline wakes a
// blocked Accept); resumeAccept lets them go on.
func (p *Proxy) pauseAccept() {
	g := &p.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused {
		g.paused, g.wake = true, make(chan struct{})
	}
	for _, ln := range p.lns {
		if d, ok := ln.(deadliner); ok {
			_ = d.SetDeadline(time.Unix(1, 0))
		}
	}
}

func (p *Proxy) resumeAccept() {
	g := &p.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused {
		return
	}
	g.paused = false
	close(g.wake)
	for _, ln := range p.lns {
		if d, ok := ln.(deadliner); ok {
			_ = d.SetDeadline(time.Time{})
		}
	}
}

// acceptHeld answers an accept loop whose Accept failed with err: true
// when the failure is the gate's deadline, after waiting for accepting to
// resume (or the proxy to stop).
func (p *Proxy) acceptHeld(err error) bool {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return false
	}
	g := &p.gate
	g.mu.Lock()
	wake := g.wake
	paused := g.paused
	g.mu.Unlock()
	if paused {
		select {
		case <-wake:
		case <-p.stopping:
		}
	}
	return true
}

// canPassFDs reports whether SHOW FDS on c's console connection sends the
// descriptors: a Unix socket connection, without TLS, from a process of the
// proxy's own OS user (PgBouncer's own_user).
func canPassFDs(c *client) bool {
	if c.lg == nil || c.tlsVersion != 0 || !c.unix || !c.fromOwnUser() {
		return false
	}
	_, ok := c.lg.conn.(*net.UnixConn)
	return ok
}

// fdHandout is SHOW FDS with descriptors: the RowDescription, each DataRow
// with its descriptor (a duplicate, closed once sent), then
// CommandComplete and ReadyForQuery.
type fdHandout struct {
	head []byte
	rows [][]byte
	fds  []int
	tail []byte
}

// close closes the duplicates not sent yet.
func (h *fdHandout) close() {
	for _, fd := range h.fds {
		if fd >= 0 {
			_ = syscall.Close(fd)
		}
	}
	h.fds = nil
}

// fdTable is SHOW FDS: the listening sockets, then every logged-in client
// and every server, TLS ones left out. With pass, each row's descriptor is
// duplicated for sending and the connections are noted as handed over
// (until RESUME).
func (p *Proxy) fdTable(pass bool) (*table, []int, error) {
	t := newTable("issssiqisssssbb", "fd", "task", "user", "database", "addr", "port", "cancel", "link",
		"client_encoding", "std_strings", "datestyle", "timezone", "password", "scram_client_key", "scram_server_key")
	var fds []int
	var derr error
	take := func(fd int) bool {
		if !pass {
			return true
		}
		d, err := dupCloexec(fd)
		if err != nil {
			derr = fmt.Errorf("show fds: %w", err)
			return false
		}
		fds = append(fds, d)
		return true
	}
	var unix []*net.UnixListener
	for _, ln := range p.lns {
		fd := listenerFD(ln)
		if fd < 0 {
			continue
		}
		addr, port := netAddr(ln.Addr())
		if isUnixListener(ln) {
			port = p.conf().listenPort() // PgBouncer: "unix" and listen_port
			if ul, ok := ln.(*net.UnixListener); ok {
				unix = append(unix, ul)
			}
		}
		if !take(fd) {
			break
		}
		t.row(fd, "pooler", nil, nil, addr, port, uint64(0), 0, nil, nil, nil, nil, nil, nil, nil)
	}
	varsRow := func(v *vars) []any {
		return []any{orNull(v.get("client_encoding")), orNull(v.get("standard_conforming_strings")),
			orNull(v.get("DateStyle")), orNull(v.get("TimeZone"))}
	}
	var socks []*sock
	p.loop.call(func() {
		for _, c := range p.clientList() {
			if derr != nil {
				return
			}
			if !c.adopted || c.gone || c.sk.closed || c.tlsVersion != 0 || (c.server != nil && c.server.bridged) {
				continue // TLS: PgBouncer skips it
			}
			addr, port := clientAddr(c, c.remote)
			link := 0
			if c.server != nil {
				link = c.server.sk.fd
			}
			if !take(c.sk.fd) {
				return
			}
			socks = append(socks, &c.sk)
			row := []any{c.sk.fd, "client", c.pool.key.user, c.pool.key.db, addr, port, cancelKey(c.pid, c.secret), link}
			row = append(row, varsRow(c.want)...)
			t.row(append(row, p.fdAuth(c.pool)...)...) // password, scram keys (serverauth.go)
		}
		for _, pl := range p.poolList() {
			for _, s := range pl.allServers() {
				if derr != nil {
					return
				}
				if s.sk.closed || s.bridged || (s.client != nil && s.client.tlsVersion != 0) {
					continue
				}
				addr, port := netAddr(s.remote)
				link := 0
				if s.client != nil {
					link = s.client.sk.fd
				}
				var key uint64
				if len(s.secret) == 4 {
					key = cancelKey(s.pid, uint32(s.secret[0])<<24|uint32(s.secret[1])<<16|uint32(s.secret[2])<<8|uint32(s.secret[3]))
				}
				if !take(s.sk.fd) {
					return
				}
				socks = append(socks, &s.sk)
				row := []any{s.sk.fd, "server", pl.key.user, pl.key.db, addr, port, key, link}
				row = append(row, varsRow(&s.have)...)
				t.row(append(row, p.fdAuth(pl)...)...)
			}
		}
		if pass && derr == nil {
			p.handover = handoverState{socks: socks, unix: unix}
		}
	})
	if derr != nil {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		return nil, nil, derr
	}
	return t, fds, nil
}

// handout builds SHOW FDS with descriptors for a console connection that
// may have them (canPassFDs).
func (p *Proxy) handout() (*fdHandout, error) {
	t, fds, err := p.fdTable(true)
	if err != nil {
		return nil, err
	}
	h := &fdHandout{fds: fds}
	rows := t.rows
	t.rows = nil
	whole := t.encode(nil) // RowDescription, CommandComplete, ReadyForQuery
	n := len(whole) - len(commandReady(nil, "SHOW"))
	h.head, h.tail = whole[:n], whole[n:]
	vals := make([][]byte, len(t.names))
	for _, r := range rows {
		for i, v := range r {
			vals[i] = cellText(v)
		}
		b, _ := (&pgproto3.DataRow{Values: vals}).Encode(nil)
		h.rows = append(h.rows, b)
	}
	return h, nil
}

// passFDs writes h to the console connection lg: each DataRow in one
// sendmsg with its descriptor. Every duplicate is closed, sent or not;
// false means the connection is broken.
func (p *Proxy) passFDs(lg *loginIO, h *fdHandout) bool {
	defer h.close()
	uc := lg.conn.(*net.UnixConn)
	_, _ = lg.w.Write(h.head)
	if lg.w.Flush() != nil {
		return false
	}
	for i, row := range h.rows {
		_ = uc.SetWriteDeadline(time.Now().Add(takeoverStep))
		n, _, err := uc.WriteMsgUnix(row, syscall.UnixRights(h.fds[i]), nil)
		if err == nil && n < len(row) {
			_, err = uc.Write(row[n:]) // the descriptor went with the first part
		}
		_ = syscall.Close(h.fds[i])
		h.fds[i] = -1
		if err != nil {
			p.logf("ERROR: send_one_fd: sendmsg error: %v", err)
			return false
		}
	}
	_ = uc.SetWriteDeadline(time.Time{})
	_, _ = lg.w.Write(h.tail)
	return lg.w.Flush() == nil
}

// dropHandedOver forgets, without writing a byte to them, the connections
// another process now holds (those SHOW FDS passed on, or those a failed
// takeover adopted): each is taken out of the epoll set and closed here
// only. Unix listeners handed over keep their socket file when closed.
// It runs on the loop.
func (p *Proxy) dropHandedOver(why string) {
	h := p.handover
	p.handover = handoverState{}
	for _, ul := range h.unix {
		ul.SetUnlinkOnClose(false)
	}
	l := p.loop
	for _, sk := range h.socks {
		if sk.closed {
			continue
		}
		_ = syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_DEL, sk.fd, nil)
		sk.out, sk.sent = nil, 0 // nothing more is written to it
		switch {
		case sk.c != nil:
			c := sk.c
			if c.gone {
				continue
			}
			c.gone = true
			if s := c.server; s != nil {
				c.unlink(s)
			}
			if c.queued {
				c.pool.queue.Remove(c)
				c.queued = false
			}
			c.forgetStmts()
			l.close(&c.sk)
			p.connClosed(c)
			p.removeClient(c)
		case sk.s != nil:
			s := sk.s
			if c := s.client; c != nil {
				c.unlink(s)
			}
			s.pool.closeServer(s, why)
		}
	}
}
