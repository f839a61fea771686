package pooler

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"time"
)

// Admission: who gets a connection, and what stops a flood of them from
// taking the proxy down.
//
//   - accept errors (EMFILE, ENFILE, ENOBUFS, ENOMEM, ECONNABORTED, ...) are
//     logged at most once a second with a count of the ones not logged; the
//     accept loop sleeps (5 ms, doubling to 1 s while errors go on) and goes
//     on. Only a closed listener ends it. PgBouncer also stops accepting for
//     a while after such an error.
//   - a reserve of descriptors is kept for server connections and the
//     console: client connections (logging in or logged in, the console
//     included) may hold RLIMIT_NOFILE less the descriptors the process had
//     when it started serving, less the server connections open and
//     default_pool_size more, less fdConsoleReserve. A connection accepted past that
//     limit may still log in to the console (up to fdConsoleReserve of
//     them); any other gets FATAL "no more connections allowed (file
//     descriptor limit)"; beyond the console's reserve it takes the place
//     of the oldest reserve connection that has not sent its start-up
//     packet (closed), or is closed at once if there is none.
//   - every client connection, from accept on, counts against
//     max_client_conn, as PgBouncer counts its client objects; the check
//     runs when the start-up packet names the database (the console is
//     exempt), and a connection that does not finish its login within
//     client_login_timeout is closed.

// fdConsoleReserve is how many console connections may be opened past the
// client descriptor limit.
const fdConsoleReserve = 4

// errFDLimit is the text a client refused for lack of descriptors gets.
const errFDLimit = "no more connections allowed (file descriptor limit)"

// conns counts the client connections the proxy holds.
type conns struct {
	mu       sync.Mutex
	open     int // every client connection, from accept to close
	consoles int // of which admin console connections
	servers  int // server connections, open or logging in
	// pending are the connections admitted past the client limit into the
	// console's reserve that have not yet said which database they want,
	// oldest first: a newcomer past the reserve takes the oldest one's
	// place, so idle connections cannot keep the console out.
	pending []*client
	// fdCap is the descriptors left for client and server connections
	// (RLIMIT_NOFILE less what was open at Serve and fdConsoleReserve);
	// 0 = no limit.
	fdCap int
}

// clientCap is how many client connections the descriptors allow now:
// what is left after the open server connections and default_pool_size
// more. 0 means no limit. cs.mu is held.
func (p *Proxy) clientCap() int {
	cs := &p.conns
	if cs.fdCap == 0 {
		return 0
	}
	return max(cs.fdCap-cs.servers-p.conf().DefaultPoolSize, 1)
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

// openFDs counts the process's open descriptors (Linux /proc; 16 when it
// cannot be read).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 16
	}
	return len(ents)
}

// admit registers an accepted connection. It reports whether the
// connection may log in at all, and whether only the console may take it
// (past the descriptor limit, within the console's reserve).
func (p *Proxy) admit(c *client) (ok, consoleOnly bool) {
	cs := &p.conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	limit := p.clientCap()
	if limit > 0 && cs.open >= limit+fdConsoleReserve {
		if len(cs.pending) == 0 {
			return false, false
		}
		old := cs.pending[0]
		cs.pending = cs.pending[1:]
		_ = old.lg.conn.Close() // its goroutine ends and gives its place back
	}
	consoleOnly = limit > 0 && cs.open >= limit
	cs.open++
	c.counted = true
	if consoleOnly {
		cs.pending = append(cs.pending, c)
	}
	return true, consoleOnly
}

// identified takes c off the pending list once its start-up packet named a
// database.
func (p *Proxy) identified(c *client) {
	cs := &p.conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if i := slices.Index(cs.pending, c); i >= 0 {
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
	if i := slices.Index(cs.pending, c); i >= 0 {
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
// than a closed listener are logged (rate-limited) and followed by a pause.
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
			if now := time.Now(); now.Sub(lastLog) >= time.Second {
				if unlogged > 0 {
					p.logf("ERROR: accept() failed: %v (and %d more accept errors since the last report)", err, unlogged)
				} else {
					p.logf("ERROR: accept() failed: %v", err)
				}
				lastLog, unlogged = now, 0
			} else {
				unlogged++
			}
			p.stats.acceptErrors.Add(1)
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			select {
			case <-time.After(backoff):
			case <-p.stopping:
				return nil
			}
			continue
		}
		backoff = 0
		c := newClient(p, conn)
		ok, consoleOnly := p.admit(c)
		if !ok {
			p.refuseNow(conn)
			continue
		}
		p.wg.Add(1)
		go p.handle(c, consoleOnly)
	}
}

// refuseNow closes a connection accepted past every limit without a
// goroutine: one non-blocking attempt to write the FATAL, then close.
func (p *Proxy) refuseNow(conn net.Conn) {
	p.stats.refusedFDLimit.Add(1)
	_ = conn.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, _ = conn.Write(encodeError(poolerError(errFDLimit)))
	_ = conn.Close()
}
