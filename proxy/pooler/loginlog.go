package pooler

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// logLoginFailure logs a failed server login with PgBouncer's words, on a
// line of its own server connection: "closing because: connect timeout
// (age=2s)" when server_connect_timeout fired, "closing because: connect
// failed (age=0s)" when the connection was refused or broke, "closing
// because: login failed (age=0s)" when PostgreSQL answered with an error,
// after PgBouncer's line naming that error: "server login failed: FATAL
// msg" before the pool's first login succeeded, "S: login failed: FATAL:
// msg" after (its tools and test suite grep these). It runs on the loop.
func (p *pool) logLoginFailure(err error) {
	if p.px.base.Err() != nil {
		return
	}
	reason := "connect failed"
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		reason = "login failed"
		if p.params == nil {
			p.px.logf("server login failed: %s %s", pe.Severity, pe.Message)
		} else {
			p.px.logf("S: login failed: %s: %s", pe.Severity, pe.Message)
		}
	case errors.Is(err, context.DeadlineExceeded):
		reason = "connect timeout"
	}
	addr := "unix"
	if p.conf != nil && p.conf.Host != "" && p.conf.Host[0] != '/' {
		addr = net.JoinHostPort(p.conf.Host, strconv.Itoa(int(p.conf.Port)))
	}
	p.px.logf("S-%#x: %s/%s@%s closing because: %s (age=%ds)", serverIDs.Add(1), p.key.db, p.key.user, addr,
		reason, ageSecs(p.px.loop.now, p.lastLaunch))
}
