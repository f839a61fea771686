package pooler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolconf"
)

// loginUserFor finds who a client logs in as (PgBouncer's set_pool): the
// user's auth_file entry; else, when an auth_user applies to the database
// (its [databases] entry's, else the global one), the user auth_query
// finds, run as auth_user on the server of the database or of auth_dbname's
// (PgBouncer 1.19+); else a user with no secret, whom authentication
// refuses as PgBouncer's mock authentication does. A refusal before
// authentication comes with PgBouncer's text: "no such user" (auth_query
// found no row), "bouncer config error" (auth_dbname names no database),
// `authentication database "X" is disabled`, or the server's error when
// auth_user cannot log in.
func (p *Proxy) loginUserFor(c *client, db, user string) (loginUser, *pgproto3.ErrorResponse) {
	cfg := p.conf()
	if s, ok := (*p.secrets.Load())[user]; ok {
		return loginUser{name: user, secret: s, found: true}, nil
	}
	mock := loginUser{name: user}
	if db == adminDB || cfg.AuthType == AuthAny {
		return mock, nil
	}
	ent, _, ok := cfg.poolFor(db, user)
	authUser := ent.AuthUser
	if authUser == "" {
		authUser = cfg.AuthUser
	}
	if !ok || authUser == "" {
		// A database no entry serves is PgBouncer's "fake" one: no
		// auth_query runs, and the login fails as for an unknown user.
		if cfg.AuthFile != "" || authUser != "" {
			p.clientLogf(c, "no such user: %s", user)
		}
		return mock, nil
	}
	return p.queryUser(c, cfg, ent, authUser, user)
}

// queryUser runs auth_query for user as authUser. The query runs on a
// connection of its own, closed after it (PgBouncer borrows a server of
// the pool of auth_user).
func (p *Proxy) queryUser(c *client, cfg *Config, ent poolconf.Database, authUser, user string) (loginUser, *pgproto3.ErrorResponse) {
	authDB := ent.AuthDBName
	if authDB == "" {
		authDB = cfg.AuthDBName
	}
	target := ent
	if authDB != "" {
		found := false
		for _, d := range cfg.Databases {
			if d.Name == authDB {
				target, found = d, true
			}
		}
		if !found {
			p.clientLogf(c, "authentication database %q is not configured.", authDB)
			return loginUser{}, poolerError("bouncer config error")
		}
		if p.dbDisabled(authDB) {
			return loginUser{}, poolerError(fmt.Sprintf("authentication database %q is disabled", authDB))
		}
	}
	// The query runs as auth_user, with auth_user's own secret, whatever
	// user the database entry forces.
	target.User, target.Password = "", ""
	p.mu.Lock()
	conf, err := p.serverConfig(target, authUser)
	p.mu.Unlock()
	if err != nil {
		p.clientLogf(c, "auth_query: %v", err)
		return loginUser{}, poolerError("bouncer config error")
	}
	ctx, cancel := context.WithTimeout(p.base, cfg.ServerConnectTimeout)
	defer cancel()
	q := cfg.AuthQuery
	if q == "" {
		k, _ := poolconf.LookupKey("auth_query")
		q = k.Default
	}
	key := fmt.Sprintf("%s:%d/%s/%s", conf.Host, conf.Port, conf.Database, conf.User)
	var res *pgconn.Result
	for fresh := false; ; fresh = true {
		pc := p.auth.conns.take(key)
		if pc == nil {
			fresh = true
			if pc, err = pgconn.ConnectConfig(ctx, conf); err != nil {
				p.clientLogf(c, "auth_query: server login as %s failed: %v", authUser, err)
				return loginUser{}, serverErrorResponse(err)
			}
		}
		res = pc.ExecParams(ctx, q, [][]byte{[]byte(user)}, nil, nil, nil).Read()
		var pe *pgconn.PgError
		if res.Err == nil || errors.As(res.Err, &pe) {
			p.auth.conns.put(key, pc) // kept for the next lookup, as PgBouncer's pooled server
			break
		}
		pc.Close(ctx)
		if fresh {
			break
		}
		// The idle connection had gone (a server restart): once more on a
		// new one.
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(res.Err, &pe):
		p.clientLogf(c, "error response from auth_query: %s", pe.Message)
		return loginUser{}, poolerError("error response from auth_query")
	case res.Err != nil:
		p.clientLogf(c, "auth_query: %v", res.Err)
		return loginUser{}, serverErrorResponse(res.Err)
	case len(res.Rows) == 0:
		return loginUser{}, poolerError("no such user")
	}
	row := res.Rows[0]
	if len(row) != 2 {
		p.clientLogf(c, "expected 2 columns from auth_query, not %d", len(row))
		return loginUser{}, poolerError("bouncer config error")
	}
	if row[0] == nil {
		p.clientLogf(c, "auth_query response contained null user name")
		return loginUser{}, poolerError("bouncer config error")
	}
	if row[1] == nil {
		// A NULL secret (an expired or password-less role): nothing
		// matches it (PgBouncer stores an impossible md5 secret).
		return loginUser{name: user}, nil
	}
	secret := string(row[1])
	p.keepQueried(ent.Name, user, secret)
	return loginUser{name: user, secret: secret, found: true}, nil
}

// authConns keeps one idle auth_query connection per server login (host,
// port, database, user), so that a lookup does not open a server
// connection each time; Serve closes them when it ends.
type authConns struct {
	mu     sync.Mutex
	idle   map[string]*pgconn.PgConn
	closed bool
}

// take returns the idle connection for key, if any.
func (a *authConns) take(key string) *pgconn.PgConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	pc := a.idle[key]
	delete(a.idle, key)
	return pc
}

// put keeps pc idle for key unless one is kept already or the proxy has
// stopped; otherwise pc is closed.
func (a *authConns) put(key string, pc *pgconn.PgConn) {
	a.mu.Lock()
	if a.closed || a.idle[key] != nil || pc.IsClosed() || pc.TxStatus() != 'I' {
		a.mu.Unlock()
		closeAuthConn(pc)
		return
	}
	if a.idle == nil {
		a.idle = map[string]*pgconn.PgConn{}
	}
	a.idle[key] = pc
	a.mu.Unlock()
}

// closeAll closes the idle connections; later ones are closed when put.
func (a *authConns) closeAll() {
	a.mu.Lock()
	idle := a.idle
	a.idle, a.closed = nil, true
	a.mu.Unlock()
	for _, pc := range idle {
		closeAuthConn(pc)
	}
}

func closeAuthConn(pc *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.Close(ctx)
}
