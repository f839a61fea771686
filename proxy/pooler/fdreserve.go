package pooler

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Descriptor exhaustion. When the process reaches RLIMIT_NOFILE, accept,
// socket and dup fail with EMFILE (ENFILE: the system's table is full).
// PgBouncer 1.18 then logs "accept() failed: Too many open files", stops
// accepting for five seconds (the clients wait in the kernel's backlog) and
// a server connect fails with "sbuf_connect failed: ..."; no client is
// told anything. The proxy keeps descriptors in reserve instead, the
// classic trick: fdSpares descriptors of /dev/null, opened at Serve and
// again whenever a descriptor frees. A spare is closed to make room for
//
//   - a server connection (a dial that failed with EMFILE is tried again),
//     so clients never starve the servers they need;
//   - the duplicate that hands an accepted connection to the event loop;
//   - a connection waiting in the backlog while accept fails: it is
//     accepted past the limit, as a connection that the console may take,
//     and any other login waits there for a descriptor to free (until
//     fdWait after the exhaustion began) and is then served - or refused
//     with a FATAL "no more connections allowed (file descriptor limit)",
//     never closed without a word.
//
// A client accepted while the reserve cannot be filled holds a spare's
// place: it is past the limit too. Accepting after EMFILE waits for a
// descriptor to free, not a fixed pause (no client waits five seconds
// for descriptors already free), with the accept loop's backoff as the
// bound when none does, so a listener that keeps failing is never spun on.

// fdSpares is how many descriptors are held in reserve; the accept path
// takes them only down to fdKeep, which stay for server connections and
// hand-overs to the loop.
const (
	fdSpares = 4
	fdKeep   = 2
)

// fdWait is how long a login accepted past the descriptor limit waits, from
// the start of the exhaustion, for a descriptor to free before it is
// refused.
const fdWait = time.Second

// fdReserve holds the spare descriptors.
type fdReserve struct {
	mu     sync.Mutex
	spares []*os.File
	on     bool          // Serve set it up; off: no reserve (tests, or no /dev/null)
	since  time.Time     // when the current exhaustion began (a spare taken or not refilled); zero when none
	freed  chan struct{} // closed (and replaced) when a descriptor frees, if waited on
	waited bool          // wake has handed out freed
}

// start opens the reserve; it runs once, at Serve.
func (r *fdReserve) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = true
	r.freed = make(chan struct{})
	r.refillLocked()
}

// refillLocked opens spares until the reserve is full or no descriptor is
// left; it reports whether the reserve is full. The exhaustion ends only
// when a descriptor is free beyond a full reserve (one more is opened and
// closed to see): a refused login's descriptor going back to the reserve
// does not end it, so the next login past the limit is not given a fresh
// fdWait. r.mu is held.
func (r *fdReserve) refillLocked() bool {
	for r.on && len(r.spares) < fdSpares {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if r.since.IsZero() {
				r.since = time.Now()
			}
			return false
		}
		r.spares = append(r.spares, f)
	}
	if !r.since.IsZero() {
		if f, err := os.Open(os.DevNull); err == nil {
			_ = f.Close()
			r.since = time.Time{}
		}
	}
	return true
}

// full tries to fill the reserve and reports whether it is full: false
// means the process is at its descriptor limit (a connection it holds
// is in a spare's place).
func (r *fdReserve) full() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.on || r.refillLocked()
}

// take closes a spare to make room for one descriptor, as long as more
// than keep are left; it reports whether it did.
func (r *fdReserve) take(keep int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spares) <= keep {
		return false
	}
	f := r.spares[len(r.spares)-1]
	r.spares = r.spares[:len(r.spares)-1]
	_ = f.Close()
	if r.since.IsZero() {
		r.since = time.Now()
	}
	return true
}

// released is called when the proxy has closed a descriptor: the reserve
// takes it back first, then whoever waits for one is woken.
func (r *fdReserve) released() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on {
		return
	}
	if len(r.spares) < fdSpares {
		r.refillLocked()
	}
	if r.waited { // every login and close passes here: no channel unless one waits
		close(r.freed)
		r.freed, r.waited = make(chan struct{}), false
	}
}

// wake is a channel closed when a descriptor next frees (nil: never).
func (r *fdReserve) wake() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waited = r.freed != nil
	return r.freed
}

// exhaustedSince is when the reserve was first found short in the current
// exhaustion; zero if it is full.
func (r *fdReserve) exhaustedSince() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.since
}

// close closes the spares; Serve's end.
func (r *fdReserve) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.spares {
		_ = f.Close()
	}
	r.spares, r.on = nil, false
}

// outOfFDs reports whether err is the process (EMFILE) or the system
// (ENFILE) being out of descriptors.
func outOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// strerror is the C library's text of an errno, as PgBouncer logs it
// ("Too many open files"); Go's has a lower-case first letter.
func strerror(err error) string {
	var en syscall.Errno
	if !errors.As(err, &en) {
		return err.Error()
	}
	s := en.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// withSpare runs op, which opens one descriptor; when it fails for lack of
// descriptors, a spare (down to keep) is given up and op tried once more.
func (p *Proxy) withSpare(keep int, op func() error) error {
	err := op()
	if err != nil && outOfFDs(err) && p.fds.take(keep) {
		err = op()
	}
	return err
}

// expectedFDs is PgBouncer's "max expected fd use": max_client_conn + 10
// and, per database, its pool size, times the users known unless it
// forces a user. As PgBouncer counts them, the databases are the
// [databases] entries but "*" and the console's "pgbouncer" (pool size 2,
// forced user), the users those of auth_file and [users] and the
// console's "pgbouncer".
func (c *Config) expectedFDs(authUsers map[string]string) int {
	users := map[string]bool{adminDB: true}
	for u := range authUsers {
		users[u] = true
	}
	for _, u := range c.Users {
		users[u.Name] = true
	}
	n := c.MaxClientConn + 10 + 2
	for _, d := range c.Databases {
		if d.Name == "*" {
			continue
		}
		size := c.DefaultPoolSize
		if d.PoolSize >= 0 {
			size = d.PoolSize
		}
		if d.User != "" {
			n += size
		} else {
			n += size * len(users)
		}
	}
	return n
}

// spareDial wraps a server connection's dial: out of descriptors, a spare
// makes room for it (clients never starve the servers they wait for), and
// when none is left it fails with PgBouncer's log line, "sbuf_connect
// failed: Too many open files" (the pool then retries after
// server_login_retry, as PgBouncer's does).
func (p *Proxy) spareDial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := p.withSpare(0, func() error {
			var err error
			conn, err = dial(ctx, network, addr)
			return err
		})
		if err != nil && outOfFDs(err) {
			p.logf("WARNING: sbuf_connect failed: %s", strerror(err))
		}
		return conn, err
	}
}
