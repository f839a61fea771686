package pooler

import (
	"bufio"
	"errors"
	"net"
	"time"
)

// A client whose login waits for its pool's first server (awaitWelcome:
// a database whose server login is failing waits out server_login_retry)
// reads nothing from its connection meanwhile, so a client that gave up
// and closed its side stayed open until the wait ended - up to
// client_login_timeout. PgBouncer 1.18 holds such clients too. The login
// watches the connection while it waits (watchHangup): at the client's
// EOF, or a reset, the wait ends and the client is closed at once, logged
// as PgBouncer logs a client's EOF ("closing because: client unexpected
// eof"). Bytes the client sends meanwhile stay in the login's reader for
// the session.

// reasonClientEOF is PgBouncer's reason for closing a client that closed
// its side (client.c, SBUF_EV_RECV_FAILED).
const reasonClientEOF = "client unexpected eof"

// watchHangup watches conn, read through r, until the returned stop is
// called; cancel is called if the client closes its side or resets the
// connection first. stop ends the watch, restores the read deadline to
// deadline (the login's) and reports whether the client hung up. Nothing
// else may read r until stop has returned.
func watchHangup(conn net.Conn, r *bufio.Reader, deadline time.Time, cancel func()) (stop func() bool) {
	done := make(chan struct{})
	hungUp := false
	go func() {
		defer close(done)
		// Peek takes nothing from r: what the client sends next (its first
		// query) is read by the session. It returns at the first byte, at
		// EOF or a reset, or when stop moves the read deadline.
		_, err := r.Peek(1)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			hungUp = true
			cancel()
		}
	}()
	return func() bool {
		_ = conn.SetReadDeadline(time.Now()) // wakes a waiting Peek
		<-done
		_ = conn.SetReadDeadline(deadline)
		return hungUp
	}
}
