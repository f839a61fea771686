package pooler

import (
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Startup settings are checked at login. The settings a client asks for
// in its StartupMessage - "options" (-c name=value), other run-time
// parameters, and the tracked client_encoding, DateStyle, TimeZone and
// standard_conforming_strings - are applied to each server it is linked to
// (startup.go, varcache.go). A setting PostgreSQL refuses (an unknown name,
// a bad value) would only fail at the client's first statement; so before
// its login completes, the client is linked to a server of its pool (in
// turn, as for a query) and its settings are applied there. If PostgreSQL
// refuses them the client's login fails with PostgreSQL's error, as a
// FATAL, as if it had connected to PostgreSQL itself; else the login
// completes (AuthenticationOk, the ParameterStatus set, BackendKeyData,
// ReadyForQuery) and, in transaction and statement mode, the server goes
// back to the pool (a session-mode client keeps it, as after its first
// query). Each pool remembers the settings it has checked and the answer,
// so a client asking for the same settings as one before it logs in at
// once. PgBouncer 1.18 refuses the "options" parameter at login altogether
// ("unsupported startup parameter: options"); the proxy applies it.

// maxChecked bounds a pool's memory of checked settings (clients choose
// them): past it the memory starts again.
const maxChecked = 1024

// startupKey is the settings a client asked for, as the pool's memory of
// checked settings names them; "" when there is nothing to check. A
// tracked setting the pool's servers already have (params, the first
// server's ParameterStatus set), as most clients' client_encoding, is left
// out, and so is application_name: PostgreSQL takes any value.
func startupKey(want vars, extra settings, params map[string]string) string {
	var b strings.Builder
	for i, v := range want {
		if v != "" && trackedParams[i] != "application_name" && v != params[trackedParams[i]] {
			b.WriteString(trackedParams[i])
			b.WriteByte(0)
			b.WriteString(v)
			b.WriteByte(0)
		}
	}
	for _, s := range extra {
		b.WriteString(s.name)
		b.WriteByte(0)
		b.WriteString(s.value)
		b.WriteByte(0)
	}
	return b.String()
}

// startupCheck is what a client's startup settings' check needs: the
// settings as the pool's memory of checked settings names them, and the
// rest of the login to send when they pass. A client holds one only until
// its check is over.
type startupCheck struct {
	key     string
	welcome []byte
}

// checkStartup starts the check of a newly adopted client's startup
// settings (c.check); welcome is the rest of its login. It runs on the
// loop.
func (c *client) checkStartup(welcome []byte) {
	l := c.px.loop
	if e, seen := c.pool.checked[c.check.key]; seen {
		c.check = nil
		if e != nil {
			c.fatalClose(e)
			return
		}
		l.send(&c.sk, welcome)
		return
	}
	c.checking, c.check.welcome = true, welcome
	if c.pool.failingFast() {
		c.fatalClose(poolerError(poolmode.ErrServerLoginFailing))
		return
	}
	now := l.now
	s, err := c.pool.arrive(c, stampOf(now))
	if err != nil {
		c.fatalClose(serverErrorResponse(err))
		return
	}
	if s == nil {
		c.waiting(now) // handOver links it, input finishes the check
		return
	}
	c.pool.assigned(c, now)
	c.link(s)
}

// startupChecked completes the login of a client whose settings server s
// took.
func (c *client) startupChecked(s *server) {
	l := c.px.loop
	c.pool.noteChecked(c.check.key, nil)
	c.checking = false
	l.send(&c.sk, c.check.welcome)
	c.check = nil
	if c.pool.mode != poolmode.Session {
		c.unlink(s)
		c.pool.release(s)
	}
	l.resume = append(l.resume, c) // what the client sent meanwhile
}

// noteChecked remembers the answer to the check of settings key: nil when
// PostgreSQL took them, else its error.
func (p *pool) noteChecked(key string, e *pgproto3.ErrorResponse) {
	if p.checked == nil || len(p.checked) >= maxChecked {
		p.checked = map[string]*pgproto3.ErrorResponse{}
	}
	p.checked[key] = e
}
