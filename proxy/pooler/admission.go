package pooler

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// Admission: who gets a connection, and what stops a flood of them from
// taking the proxy down.
//
//   - accept errors (EMFILE, ENFILE, ENOBUFS, ENOMEM, ECONNABORTED, ...) are
//     logged at most once a second with a count of the ones not logged
//     (PgBouncer's "accept() failed: Too many open files"); the accept
//     loop pauses (5 ms, doubling to 1 s while errors go on, cut short
//     when a descriptor frees) and goes on. Only a closed listener ends it.
//   - out of descriptors, the reserve of fdreserve.go takes over: a
//     connection waiting in the backlog is accepted past the limit; the
//     console may take it (up to fdConsoleReserve such connections; a
//     newcomer past them takes the place of the oldest that has not sent
//     its start-up packet, which is told FATAL "no more connections
//     allowed (file descriptor limit)" and closed), and any other login
//     waits for a descriptor to free, then is served or refused with that
//     FATAL.
//   - every client connection, from accept on, counts against
//     max_client_conn, as PgBouncer counts its client objects; the check
//     runs when the start-up packet names the database (the console is
//     exempt), and a connection that does not finish its login within
//     client_login_timeout is closed.

// fdConsoleReserve is how many connections accepted past the descriptor
// limit may wait at once for their start-up packet.
const fdConsoleReserve = 2

// errFDLimit is the text a client refused for lack of descriptors gets.
const errFDLimit = "no more connections allowed (file descriptor limit)"

// conns counts the client connections the proxy holds.
type conns struct {
	mu       sync.Mutex
	open     int // every client connection, from accept to close
	consoles int // of which admin console connections
	servers  int // server connections, open or logging in
	// pending are the connections accepted past the descriptor limit that
	// have not yet said which database they want, oldest first: when no
	// spare is left, a newcomer takes the place of the oldest once it has
	// been silent for fdSilent, so idle connections cannot keep the
	// console out.
	pending []overLimit
}

// overLimit is a connection accepted past the descriptor limit, with the
// socket it was accepted on (its login goroutine may replace c.lg.conn
// with a TLS connection).
type overLimit struct {
	c    *client
	conn net.Conn
}

// serverOpened and serverClosed count server connections for the
// descriptor budget.
func (p *Proxy) serverOpened() {
	p.conns.mu.Lock()
	p.conns.servers++
	p.conns.mu.Unlock()
}

func (p *Proxy) serverClosed() {
	p.conns.mu.Lock()
	p.conns.servers--
	p.conns.mu.Unlock()
}

// admit registers an accepted connection. pastLimit marks one accepted
// past the descriptor limit: it joins the connections waiting there for
// their start-up packet (the oldest of which acceptPastLimit may refuse to
// make room).
func (p *Proxy) admit(c *client, pastLimit bool) {
	cs := &p.conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.open++
	c.counted = true
	if pastLimit {
		cs.pending = append(cs.pending, overLimit{c, c.lg.conn})
	}
}

// identified takes c off the pending list once its start-up packet named a
// database.
func (p *Proxy) identified(c *client) {
	cs := &p.conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if i := slices.IndexFunc(cs.pending, func(w overLimit) bool { return w.c == c }); i >= 0 {
		cs.pending = slices.Delete(cs.pending, i, i+1)
	}
}

// enterConsole marks an admitted connection as a console connection.
func (p *Proxy) enterConsole(c *client) {
	cs := &p.conns
	cs.mu.Lock()
	cs.consoles++
	cs.mu.Unlock()
	c.console = true
}

// overMaxClientConn reports whether the pooled client connections,
// counting c and those still logging in, exceed max_client_conn
// (PgBouncer's check when the start-up packet arrives).
func (p *Proxy) overMaxClientConn() bool {
	cs := &p.conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.open-cs.consoles > p.conf().MaxClientConn
}

// connClosed gives back an admitted connection's place. It is called once,
// by whoever owns the client when its connection closes.
func (p *Proxy) connClosed(c *client) {
	if !c.counted {
		return
	}
	c.counted = false
	cs := &p.conns
	cs.mu.Lock()
	if i := slices.IndexFunc(cs.pending, func(w overLimit) bool { return w.c == c }); i >= 0 {
		cs.pending = slices.Delete(cs.pending, i, i+1)
	}
	cs.open--
	if c.console {
		cs.consoles--
	}
	cs.mu.Unlock()
}

// acceptBackoff bounds the pause after an accept error.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// accept runs the accept loop until the listener is closed. Errors other
// than a closed listener are logged (rate-limited) and followed by a pause;
// out of descriptors, a connection waiting in the backlog is accepted past
// the limit with a spare (acceptPastLimit) and the pause ends as soon as a
// descriptor frees.
func (p *Proxy) accept(ln net.Listener) error {
	var backoff time.Duration
	var lastLog time.Time
	var unlogged int
	for {
		conn, err := ln.Accept()
		if err != nil {
			if p.stoppingNow() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if p.acceptHeld(err) { // SUSPEND (takeover_old.go)
				continue
			}
			text := err.Error()
			if outOfFDs(err) {
				text = strerror(err) // PgBouncer's words: "accept() failed: Too many open files"
			}
			if now := time.Now(); now.Sub(lastLog) >= time.Second {
				if unlogged > 0 {
					p.logf("ERROR: accept() failed: %s (and %d more accept errors since the last report)", text, unlogged)
				} else {
					p.logf("ERROR: accept() failed: %s", text)
				}
				lastLog, unlogged = now, 0
			} else {
				unlogged++
			}
			p.stats.acceptErrors.Add(1)
			var freed <-chan struct{}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			if outOfFDs(err) {
				freed = p.fds.wake() // before a refusal frees one
				ok, soon := p.acceptPastLimit(ln)
				if ok {
					continue
				}
				if soon > 0 {
					backoff = soon
				}
			}
			select {
			case <-time.After(backoff):
			case <-freed:
			case <-p.stopping:
				return nil
			}
			continue
		}
		backoff = 0
		// A descriptor freed goes to the reserve first: a client accepted
		// while it cannot be refilled holds a spare's place.
		p.serveConn(conn, !p.fds.full())
	}
}

// serveConn admits an accepted connection and starts its login.
func (p *Proxy) serveConn(conn net.Conn, pastLimit bool) {
	c := newClient(p, conn)
	p.admit(c, pastLimit)
	p.wg.Add(1)
	go p.handle(c, pastLimit)
}

// acceptPastLimit accepts one connection waiting in ln's backlog while the
// process is out of descriptors, giving up a spare for it. Without a spare
// it refuses the oldest connection waiting past the limit for its
// start-up packet, once that has been silent for fdSilent, to make room;
// it then reports false and how soon to try again at the latest (0: the
// accept loop's backoff), if no descriptor frees before.
func (p *Proxy) acceptPastLimit(ln net.Listener) (bool, time.Duration) {
	if !p.fds.take(fdKeep) {
		cs := &p.conns
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if len(cs.pending) < fdConsoleReserve {
			return false, 0
		}
		// A login just accepted may not have been read yet.
		if age := time.Since(cs.pending[0].c.connectTime.time()); age < fdSilent {
			return false, fdSilent - age
		}
		old := cs.pending[0]
		cs.pending = cs.pending[1:]
		cs.mu.Unlock()
		p.refuseNow(old)
		cs.mu.Lock()
		return false, acceptBackoffMin // its descriptor frees as its goroutine ends
	}
	conn, err := ln.Accept()
	if err != nil {
		p.stats.acceptErrors.Add(1)
		p.fds.released()
		return false, 0
	}
	p.serveConn(conn, true)
	return true, 0
}

// fdSilent is how long a connection accepted past the descriptor limit may
// stay silent (no start-up packet) before a newcomer takes its place.
const fdSilent = 100 * time.Millisecond

// waitForFD waits, for a login accepted past the descriptor limit, until a
// descriptor frees for the reserve (true) or fdWait has passed since the
// exhaustion began (false).
func (p *Proxy) waitForFD() bool {
	for {
		freed := p.fds.wake() // before the check: a descriptor freed after it wakes us
		if p.fds.full() {
			return true
		}
		since := p.fds.exhaustedSince()
		left := time.Until(since.Add(fdWait))
		if since.IsZero() || left <= 0 {
			return p.fds.full()
		}
		t := time.NewTimer(left)
		select {
		case <-freed:
		case <-t.C:
		case <-p.base.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// refuseNow tells a connection waiting past the descriptor limit for its
// start-up packet FATAL "no more connections allowed (file descriptor
// limit)" with one short write, logged as PgBouncer logs a refusal, and
// closes it from a goroutine that does not own it (its own then ends and
// gives its place back).
func (p *Proxy) refuseNow(w overLimit) {
	p.stats.refusedFDLimit.Add(1)
	c, conn := w.c, w.conn
	// Not clientLogf: its login goroutine may be writing the fields that reads.
	who := fmt.Sprintf("C-%#x: (nodb)/(nouser)@%s", c.id, conn.RemoteAddr())
	p.logf("%s pooler error: %s", who, errFDLimit)
	p.logf("%s closing because: %s (age=%ds)", who, errFDLimit, int64(time.Since(c.connectTime.time()).Seconds()))
	_ = conn.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, _ = conn.Write(encodeError(poolerError(errFDLimit)))
	_ = conn.Close()
}
