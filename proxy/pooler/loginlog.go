package pooler

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// logLoginFailure logs a server login that got no answer from PostgreSQL
// with PgBouncer's words, on a line of its own server connection: "closing
// because: connect timeout (age=2s)" when server_connect_timeout fired,
// "closing because: connect failed (age=0s)" when the connection was
// refused or broke (its tools and test suite grep these). A login
// PostgreSQL answered with an error is logged as before. It runs on the
// loop.
func (p *pool) logLoginFailure(err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) || p.px.base.Err() != nil {
		return
	}
	reason := "connect failed"
	if errors.Is(err, context.DeadlineExceeded) {
		reason = "connect timeout"
	}
	addr := "unix"
	if p.conf != nil && p.conf.Host != "" && p.conf.Host[0] != '/' {
		addr = net.JoinHostPort(p.conf.Host, strconv.Itoa(int(p.conf.Port)))
	}
	p.px.logf("S-%#x: %s/%s@%s closing because: %s (age=%ds)", serverIDs.Add(1), p.key.db, p.key.user, addr,
		reason, ageSecs(p.px.loop.now, p.lastLaunch))
}
