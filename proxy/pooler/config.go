package pooler

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Auth types a client can be asked for.
const (
	AuthTrust = "trust"
	AuthSCRAM = "scram-sha-256"
)

// Config holds the proxy's settings. Field names follow PgBouncer's
// settings; DefaultConfig gives PgBouncer's defaults.
type Config struct {
	// Listen is the TCP address clients connect to (listen_addr:listen_port).
	// It must be a loopback address unless AuthType asks clients for a
	// password.
	Listen string
	// Upstream is the PostgreSQL server as a pgconn connection string (URL or
	// keyword/value). It supplies host, port, password and TLS settings; the
	// database and user always come from the client's StartupMessage.
	Upstream string
	// Mode is pool_mode: Session, Transaction or Statement.
	Mode poolmode.Mode
	// PoolSize is default_pool_size: server connections per (database, user).
	PoolSize int
	// MaxClientConn is max_client_conn: client connections in all, the
	// admin console excluded.
	MaxClientConn int
	// MaxDBConnections is max_db_connections: server connections per
	// database across users; 0 means unlimited.
	MaxDBConnections int
	// QueryWaitTimeout is query_wait_timeout: how long a client may wait for
	// a server; 0 waits forever.
	QueryWaitTimeout time.Duration
	// ServerConnectTimeout is server_connect_timeout: the limit on one server
	// login.
	ServerConnectTimeout time.Duration
	// ServerIdleTimeout is server_idle_timeout: idle servers older than this
	// are closed; 0 disables it.
	ServerIdleTimeout time.Duration
	// ServerLoginRetry is server_login_retry: after a failed server login
	// no new one starts for this long, and while the pool has no server a
	// client that needs one is refused at once ("server login has been
	// failing, try again later"); 0 retries at once.
	ServerLoginRetry time.Duration
	// ServerLifetime is server_lifetime: a server older than this is closed
	// when it is released; 0 disables it.
	ServerLifetime time.Duration
	// MaxPreparedStatements is max_prepared_statements: in transaction and
	// statement mode, with N > 0, the proxy tracks protocol-level named
	// prepared statements (PgBouncer 1.21+) and keeps at most N prepared on
	// each server connection, least recently used closed first; 0 turns
	// tracking off and named statements pass through untouched, as in
	// PgBouncer before 1.21. PgBouncer's default has been 200 since 1.24;
	// DefaultConfig keeps 0, the behaviour of the PgBouncer 1.18 poolsim
	// validates against (see DefaultConfig).
	MaxPreparedStatements int
	// ServerResetQuery is server_reset_query, run in session mode when a
	// client leaves before its server is reused; empty disables it.
	ServerResetQuery string
	// AuthType is auth_type: AuthTrust or AuthSCRAM.
	AuthType string
	// AuthFile is auth_file, PgBouncer's userlist.txt format:
	// "user" "password-or-SCRAM-secret" per line. Needed for AuthSCRAM.
	AuthFile string
	// ShutdownTimeout bounds graceful shutdown: how long linked clients may
	// finish their transactions (session clients their sessions) before
	// everything is closed.
	ShutdownTimeout time.Duration
	// WaitLog bounds the number of Wait records kept for Waits; older records
	// are dropped first. 0 means DefaultWaitLog; a negative value keeps
	// none (for a proxy whose Waits nobody reads).
	WaitLog int
	// Logf, if set, receives the proxy's log lines (server login failures;
	// with Verbose also every server close and its reason).
	Logf    func(format string, args ...any)
	Verbose bool
}

// DefaultWaitLog is the default bound on kept Wait records.
const DefaultWaitLog = 1 << 20

// DefaultConfig returns PgBouncer's defaults: session pooling, 20 servers
// per pool, 100 clients, trust authentication on 127.0.0.1:6432. One
// default differs: MaxPreparedStatements is 0 (PgBouncer 1.24+ has 200),
// so that, like the PgBouncer 1.18 the validator compares against,
// protocol-level prepared statements break in transaction pooling unless
// the setting is given; models/compat reads the same setting.
func DefaultConfig() Config {
	return Config{
		Listen:               "127.0.0.1:6432",
		Mode:                 poolmode.Session,
		PoolSize:             20,
		MaxClientConn:        100,
		MaxDBConnections:     0,
		QueryWaitTimeout:     120 * time.Second,
		ServerConnectTimeout: 15 * time.Second,
		ServerIdleTimeout:    600 * time.Second,
		ServerLifetime:       3600 * time.Second,
		ServerLoginRetry:     15 * time.Second,
		ServerResetQuery:     "DISCARD ALL",
		AuthType:             AuthTrust,
		ShutdownTimeout:      10 * time.Second,
		WaitLog:              DefaultWaitLog,
	}
}

// Validate checks every setting and names the first bad one.
func (c Config) Validate() error {
	if c.Upstream == "" {
		return errors.New("upstream: required (a PostgreSQL URL such as postgres://user:pw@127.0.0.1:5432/db)")
	}
	if _, err := pgconn.ParseConfig(c.Upstream); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	switch c.Mode {
	case poolmode.Session, poolmode.Transaction, poolmode.Statement:
	default:
		return fmt.Errorf("pool_mode: %v is not a pooling mode: want session, transaction or statement", c.Mode)
	}
	if c.PoolSize < 1 {
		return fmt.Errorf("default_pool_size: %d: want at least 1", c.PoolSize)
	}
	if c.MaxClientConn < 1 {
		return fmt.Errorf("max_client_conn: %d: want at least 1", c.MaxClientConn)
	}
	if c.MaxPreparedStatements < 0 {
		return fmt.Errorf("max_prepared_statements: %d: want 0 (off) or more", c.MaxPreparedStatements)
	}
	if c.MaxDBConnections < 0 {
		return fmt.Errorf("max_db_connections: %d: want 0 (unlimited) or more", c.MaxDBConnections)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"query_wait_timeout", c.QueryWaitTimeout},
		{"server_idle_timeout", c.ServerIdleTimeout},
		{"server_lifetime", c.ServerLifetime},
		{"server_login_retry", c.ServerLoginRetry},
		{"shutdown_timeout", c.ShutdownTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s: %v: want 0 or more", d.name, d.v)
		}
	}
	if c.ServerConnectTimeout <= 0 {
		return fmt.Errorf("server_connect_timeout: %v: want more than 0", c.ServerConnectTimeout)
	}
	switch c.AuthType {
	case AuthTrust:
	case AuthSCRAM:
		if c.AuthFile == "" {
			return errors.New("auth_file: required with auth_type scram-sha-256")
		}
		if _, err := loadAuthFile(c.AuthFile); err != nil {
			return fmt.Errorf("auth_file: %w", err)
		}
	default:
		return fmt.Errorf("auth_type: %q: want trust or scram-sha-256", c.AuthType)
	}
	if err := checkListen(c.Listen, c.AuthType); err != nil {
		return err
	}
	return nil
}

// checkListen refuses a non-loopback address for trust authentication: an
// open pooler would let anyone on the network in as any user.
func checkListen(addr, authType string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen: %q: %w", addr, err)
	}
	if authType != AuthTrust {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen: %q is not a loopback address: with auth_type trust the proxy listens on 127.0.0.1 or ::1 only (use --auth-type scram-sha-256 to listen wider)", addr)
	}
	return nil
}
