package pooler

import (
	"fmt"
	"net"
)

// PgBouncer's log lines name the connection they are about: "C-0x..:" for
// a client, "S-0x..:" for a server, then "db/user@addr", then what
// happened - "closing because: REASON (age=Ns)", "new connection to
// server (from ADDR)", .... Tools (and PgBouncer's own test suite) grep
// the text after the prefix; the proxy writes the same words through
// these helpers so that every line reads as PgBouncer's does.

// clientLogf logs one line about client c. db and user are the pool's,
// else "(nodb)"/"(nouser)" as PgBouncer writes them before login.
func (p *Proxy) clientLogf(c *client, format string, args ...any) {
	if p.conf().Logf == nil {
		return
	}
	db, user := "(nodb)", "(nouser)"
	if c.pool != nil {
		db, user = c.pool.key.db, c.pool.key.user
	} else if lg := c.lg; lg != nil && lg.user != "" {
		db, user = lg.db, lg.user // logging in, as PgBouncer names it then
	}
	addr := "unix"
	switch {
	case c.remote.IsValid():
		addr = c.remote.String()
	case c.unix && c.peerPID > 0:
		// PgBouncer's prefix for a Unix socket client: unix(PID):PORT.
		addr = fmt.Sprintf("unix(%d):%d", c.peerPID, p.conf().listenPort())
	case c.unix:
		addr = fmt.Sprintf("unix:%d", p.conf().listenPort())
	}
	p.logf("C-%#x: %s/%s@%s %s", c.id, db, user, addr, fmt.Sprintf(format, args...))
}

// serverLogf logs one line about server s.
func (p *Proxy) serverLogf(s *server, format string, args ...any) {
	if p.conf().Logf == nil {
		return
	}
	db, user := "(nodb)", "(nouser)"
	if s.pool != nil {
		db, user = s.pool.key.db, s.pool.key.user
	}
	p.logf("S-%#x: %s/%s@%s %s", s.id, db, user, addrText(s.remote), fmt.Sprintf(format, args...))
}

// addrText is an address as PgBouncer logs it ("unix" for a Unix socket).
func addrText(a net.Addr) string {
	if a == nil {
		return "unix"
	}
	if u, ok := a.(*net.UnixAddr); ok {
		return "unix:" + u.Name
	}
	return a.String()
}
