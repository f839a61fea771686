package pooler

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// Auth types a client can be asked for.
const (
	AuthTrust = "trust"         // no password; a user not in auth_file (when one is given) is refused
	AuthAny   = "any"           // no password, any user
	AuthPlain = "plain"         // clear-text password against auth_file
	AuthMD5   = "md5"           // MD5 challenge against a plain or md5 secret in auth_file
	AuthSCRAM = "scram-sha-256" // SCRAM-SHA-256 against a plain or SCRAM secret in auth_file
)

// Config holds the proxy's settings. Field names follow PgBouncer's
// settings; DefaultConfig gives PgBouncer's defaults.
type Config struct {
	// Listen is the TCP address clients connect to (listen_addr:listen_port).
	// It must be a loopback address unless AuthType asks clients for a
	// password.
	Listen string
	// ListenMore holds further TCP addresses ("host:port") listened on
	// besides Listen: the other entries of listen_addr's comma-separated
	// list ("*" is 0.0.0.0 and ::). Listen "" and no ListenMore listen on
	// the Unix socket only (listen_addr empty, as PgBouncer).
	ListenMore []string
	// ListenPort is listen_port: the port in the Unix socket's name and
	// the one SHOW CLIENTS gives its clients; 0 takes Listen's.
	ListenPort int
	// UnixSocketDir is unix_socket_dir: the proxy also listens on
	// UnixSocketDir/.s.PGSQL.<ListenPort> ("" = no Unix socket; a leading
	// "@" is Linux's abstract namespace), with permissions UnixSocketMode
	// (unix_socket_mode, PgBouncer's 0777) and group UnixSocketGroup
	// (unix_socket_group, "" keeps the proxy's). Listen opens it.
	UnixSocketDir   string
	UnixSocketMode  os.FileMode
	UnixSocketGroup string
	// SOReuseport is so_reuseport: SO_REUSEPORT on the TCP listeners, so
	// that several proxies listen on one port side by side.
	SOReuseport bool
	// PeerID is peer_id and Peers the [peers] section (PgBouncer 1.19+):
	// with PeerID > 0 every cancel key the proxy gives out carries PeerID,
	// and a cancel request carrying another peer's id - so_reuseport or a
	// load balancer sent it to the wrong process - is forwarded to that
	// peer's address (peering.go). 0 (the default) is 1.18's behaviour.
	PeerID int
	Peers  []poolconf.Peer
	// Upstream is the PostgreSQL server as a pgconn connection string (URL or
	// keyword/value). It supplies host, port, password and TLS settings; the
	// database and user always come from the client's StartupMessage. It is
	// the fallback for every database name that Databases does not list
	// (PgBouncer's "* = ..." entry, which it replaces); it may be empty
	// when Databases is not.
	Upstream string
	// Databases is pgbouncer.ini's [databases]: per database name, the
	// server (host, port, dbname), a forced user and password, and pool
	// settings that override the global ones. An entry named "*" serves
	// every name not listed, unless Upstream is set.
	Databases []poolconf.Database
	// Users is pgbouncer.ini's [users]: per user, pool_mode and
	// max_user_connections.
	Users []poolconf.User
	// IgnoreStartupParameters is ignore_startup_parameters: startup
	// parameters dropped without an error. Every other parameter a client
	// sends is applied to its session (startup.go) or refused.
	IgnoreStartupParameters []string
	// Pooling is how the pools behave, with PgBouncer's names and
	// meanings (models/poolconf): pool_mode, default_pool_size,
	// max_client_conn (the admin console excluded), max_db_connections and
	// max_user_connections (0 = unlimited), query_wait_timeout (0 waits
	// forever), server_idle_timeout and server_lifetime (0 disables them),
	// server_reset_query (run in session mode when a client leaves, before
	// its server is reused; "" disables it) and max_prepared_statements (in
	// transaction and statement mode, with N > 0, the proxy tracks
	// protocol-level named prepared statements as PgBouncer 1.21+ does and
	// keeps at most N on each server, least recently used closed first; 0
	// passes them through untouched, as PgBouncer before 1.21, and is
	// DefaultConfig's value: the behaviour of the PgBouncer 1.18 poolsim
	// validates against). min_pool_size, reserve_pool_size and
	// reserve_pool_timeout shape the pools as PgBouncer's do (shaping.go);
	// query_timeout, client_idle_timeout and idle_transaction_timeout are
	// the janitor's guards (janitor.go). The one Pooling key the proxy does
	// not apply, server_reset_query_always, is logged when set
	// (Unapplied).
	poolconf.Pooling
	// ServerConnectTimeout is server_connect_timeout: the limit on one server
	// login.
	ServerConnectTimeout time.Duration
	// ServerLoginRetry is server_login_retry: after a failed server login
	// no new one starts for this long, and while the pool has no server a
	// client that needs one is refused at once ("server login has been
	// failing, try again later"); 0 retries at once.
	ServerLoginRetry time.Duration
	// AuthType is auth_type: AuthTrust, AuthAny, AuthPlain, AuthMD5,
	// AuthSCRAM, AuthCert or AuthHBA (PgBouncer's names).
	AuthType string
	// AuthFile is auth_file, PgBouncer's userlist.txt format: "user"
	// "secret" per line, the secret a plain password, an md5 hash or a
	// SCRAM-SHA-256 secret (one file may mix them: each login checks what
	// its user's secret can serve, authfile.go). Server logins without a
	// password in their [databases] entry use these secrets too
	// (serverauth.go).
	AuthFile string
	// AuthUser is auth_user: a user not in AuthFile is looked up with
	// AuthQuery, run as this user (whose secret is in AuthFile) on the
	// server of the client's database, or of AuthDBName's; a [databases]
	// entry's auth_user and auth_dbname win over these. AuthQuery is
	// auth_query (PgBouncer's default when empty); AuthDBName is auth_dbname
	// (PgBouncer 1.19+).
	AuthUser, AuthQuery, AuthDBName string
	// AuthHBAFile is auth_hba_file: with AuthType hba, the method of each
	// connection comes from its first matching line (hba.go).
	AuthHBAFile string
	// ClientTLSSSLMode is client_tls_sslmode: disable (""), allow, prefer,
	// require, verify-ca or verify-full, as PgBouncer has them
	// (clienttls.go). ClientTLSCertFile and ClientTLSKeyFile are the
	// proxy's certificate and key (PEM), needed by every mode but disable;
	// ClientTLSCAFile the CA that signs client certificates (verify-ca,
	// verify-full).
	ClientTLSSSLMode, ClientTLSCertFile, ClientTLSKeyFile, ClientTLSCAFile string
	// ServerTLSSSLMode is server_tls_sslmode: how server connections are
	// encrypted, with PgBouncer's modes (servertls.go); "" (DefaultConfig)
	// leaves Upstream's own TLS settings in force and connects [databases]
	// entries without TLS, as PgBouncer 1.18's default disable does.
	// ServerTLSCAFile is the CA that signs the servers' certificates
	// (verify-ca, verify-full; "" = the system's), ServerTLSCertFile and
	// ServerTLSKeyFile a client certificate for PostgreSQL's cert
	// authentication, ServerTLSProtocols and ServerTLSCiphers the TLS
	// versions and cipher suites offered (PgBouncer's keywords; "" =
	// secure and fast).
	ServerTLSSSLMode, ServerTLSCAFile, ServerTLSCertFile, ServerTLSKeyFile string
	ServerTLSProtocols, ServerTLSCiphers                                   string
	// ServerCheckQuery is server_check_query: run on a server that has
	// been idle longer than ServerCheckDelay (server_check_delay) before a
	// client gets it; a server it fails on is closed. "" turns the check
	// off.
	ServerCheckQuery string
	ServerCheckDelay time.Duration
	// ApplicationNameAddHost is application_name_add_host: a client's
	// application_name gets " - host:port" of its address appended.
	ApplicationNameAddHost bool
	// ServerFastClose is server_fast_close: a server that must close
	// (RECONNECT, a changed database) is closed at the end of its
	// transaction, with its session-mode client, instead of when the
	// client leaves.
	ServerFastClose bool
	// ServerRoundRobin is server_round_robin: idle servers are reused in
	// turn, the one released longest ago first, instead of last in, first
	// out.
	ServerRoundRobin bool
	// ClientLoginTimeout is client_login_timeout: a client that has not
	// finished logging in this long after it connected is closed (FATAL
	// "client_login_timeout"); 0 disables it.
	ClientLoginTimeout time.Duration
	// AutodbIdleTimeout is autodb_idle_timeout: a database whose pools have
	// had no client and no server connection this long is dropped with its
	// pools (every pool of the proxy is auto-created, as with PgBouncer's
	// "* =" entry); 0 keeps them forever.
	AutodbIdleTimeout time.Duration
	// AdminUsers is admin_users: users who may use the admin console and run
	// its commands. StatsUsers is stats_users: users who may log in to the
	// console and run SHOW commands only. A user in neither is refused the
	// console (FATAL "not allowed"). Both empty (the default) close the
	// console to everyone, as PgBouncer does over TCP.
	AdminUsers, StatsUsers []string
	// PktBuf is pkt_buf: the most a message that the proxy must hold whole
	// may take on the admin console (larger ones end the connection with
	// "incomplete pkt", as in PgBouncer). It also sizes the buffers of
	// connections that are logging in.
	PktBuf int
	// MaxPacketSize is max_packet_size: a message whose header claims more
	// ends its connection (a client gets "bad packet header"), on every
	// path, before anything is allocated for it.
	MaxPacketSize int
	// StatsPeriod is stats_period: how often SHOW STATS' averages are
	// refreshed (they cover the period before the last refresh).
	StatsPeriod time.Duration
	// ConfFile is the pgbouncer.ini the settings were read from (SHOW
	// CONFIG's conffile); "" for none.
	ConfFile string
	// Unapplied holds pgbouncer.ini [pgbouncer] settings the proxy reads but
	// does not apply, by PgBouncer's key, as written (FromSettings lists
	// them): SHOW CONFIG shows them and the console's SET records them;
	// nothing else reads them.
	Unapplied map[string]string
	// Source, when set, builds the settings again for the console's RELOAD
	// (poolsim proxy reads its config file and flags again, as on SIGHUP);
	// without it RELOAD keeps the settings and reads the auth file again.
	Source func() (Config, error)
	// ShutdownTimeout bounds graceful shutdown: how long linked clients may
	// finish their transactions (session clients their sessions) before
	// everything is closed; 0 (the default) waits for them all, as
	// PgBouncer's safe shutdown does.
	ShutdownTimeout time.Duration
	// Observer, if set, watches the proxy's server assignments and its
	// event loop (a caller that measures the proxy); set once, at New.
	Observer Observer
	// PlainIO makes the event loop read and write each socket with a
	// system call of its own. By default, where the kernel allows io_uring,
	// the reads of one turn of the loop go to the kernel in one system call
	// and its writes in another (package uring).
	PlainIO bool
	// Logf, if set, receives the proxy's log lines (server login failures,
	// every server connection opened and closed with PgBouncer's words:
	// "new connection to server", "closing because: REASON (age=Ns)").
	Logf    func(format string, args ...any)
	Verbose bool

	// LogFile, PidFile and User are logfile, pidfile and user (PgBouncer's
	// names): the command, poolsim proxy, appends its log to LogFile,
	// writes its pid to PidFile and switches to the OS user User after it
	// has bound its sockets; the pooler itself only carries them. The
	// command writes each Logf message as PgBouncer's log line, at level
	// WARNING or ERROR when the message starts with "WARNING: " or
	// "ERROR: ", else LOG.
	LogFile, PidFile, User string
}

// DefaultConfig returns PgBouncer 1.18's defaults (poolconf.Defaults):
// session pooling, 20 servers per pool, 100 clients, on 127.0.0.1:6432,
// MaxPreparedStatements 0 (PgBouncer 1.24+ has 200; with 0, as in the
// PgBouncer 1.18 the validator compares against, protocol-level prepared
// statements break in transaction pooling unless the setting is given;
// models/compat reads the same setting). One default differs: AuthType is
// trust, since PgBouncer's md5 needs an auth_file; FromSettings (a
// pgbouncer.ini) keeps md5.
func DefaultConfig() Config {
	d := poolconf.Defaults()
	return Config{
		Listen:               net.JoinHostPort("127.0.0.1", strconv.Itoa(d.ListenPort)),
		Pooling:              d.Pooling,
		ServerConnectTimeout: d.ServerConnectTimeout,
		ServerLoginRetry:     d.ServerLoginRetry,
		AuthType:             AuthTrust, // PgBouncer's md5 needs an auth_file; --config uses md5
		ClientLoginTimeout:   d.ClientLoginTimeout,
		ClientTLSSSLMode:     d.ClientTLSSSLMode,
		ServerTLSProtocols:   d.ServerTLSProtocols,
		ServerTLSCiphers:     d.ServerTLSCiphers,
		ServerCheckQuery:     d.ServerCheckQuery,
		ServerCheckDelay:     d.ServerCheckDelay,
		AutodbIdleTimeout:    d.AutodbIdleTimeout,
		PktBuf:               4096,
		MaxPacketSize:        math.MaxInt32,
		StatsPeriod:          d.StatsPeriod,
		ShutdownTimeout:      0, // wait for every transaction, as PgBouncer's SIGINT
		UnixSocketMode:       DefaultUnixSocketMode,
	}
}

// Validate checks every setting and names the first bad one.
func (c Config) Validate() error {
	if c.Upstream == "" && len(c.Databases) == 0 {
		return errors.New("upstream: required (a PostgreSQL URL such as postgres://user:pw@127.0.0.1:5432/db), or a [databases] section")
	}
	if c.Upstream != "" {
		if _, err := pgconn.ParseConfig(c.Upstream); err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
	}
	s := c.settings()
	if err := s.Validate(); err != nil {
		return err
	}
	switch c.PoolMode {
	case poolmode.Session, poolmode.Transaction, poolmode.Statement:
	default:
		return fmt.Errorf("pool_mode: %v is not a pooling mode: want session, transaction or statement", c.PoolMode)
	}
	if c.DefaultPoolSize < 1 {
		return fmt.Errorf("default_pool_size: %d: want at least 1", c.DefaultPoolSize)
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
		{"client_login_timeout", c.ClientLoginTimeout},
		{"autodb_idle_timeout", c.AutodbIdleTimeout},
		{"server_check_delay", c.ServerCheckDelay},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s: %v: want 0 or more", d.name, d.v)
		}
	}
	// PgBouncer's own bounds: pkt_buf at least 256 bytes, max_packet_size
	// fits a protocol length field.
	if c.PktBuf < 256 || c.PktBuf > 1<<30 {
		return fmt.Errorf("pkt_buf: %d: want 256 to %d bytes", c.PktBuf, 1<<30)
	}
	if c.MaxPacketSize < c.PktBuf || c.MaxPacketSize > math.MaxInt32 {
		return fmt.Errorf("max_packet_size: %d: want pkt_buf (%d) to %d bytes", c.MaxPacketSize, c.PktBuf, math.MaxInt32)
	}
	for _, l := range []struct {
		name  string
		users []string
	}{{"admin_users", c.AdminUsers}, {"stats_users", c.StatsUsers}} {
		for _, u := range l.users {
			if u == "" || strings.ContainsAny(u, ", \t\n\x00") {
				return fmt.Errorf("%s: %q is not a user name (names are separated by commas)", l.name, u)
			}
		}
	}
	if c.StatsPeriod <= 0 {
		return fmt.Errorf("stats_period: %v: want more than 0", c.StatsPeriod)
	}
	if c.ServerConnectTimeout <= 0 {
		return fmt.Errorf("server_connect_timeout: %v: want more than 0", c.ServerConnectTimeout)
	}
	switch c.AuthType {
	case AuthTrust, AuthAny, AuthPeer, AuthCert:
	case AuthSCRAM, AuthMD5, AuthPlain:
		if c.AuthFile == "" && c.AuthUser == "" {
			return fmt.Errorf("auth_file: required with auth_type %s", c.AuthType)
		}
	case AuthHBA:
		if c.AuthHBAFile == "" {
			return errors.New("auth_hba_file: required with auth_type hba")
		}
		if _, _, err := loadHBA(c.AuthHBAFile); err != nil {
			return fmt.Errorf("auth_hba_file: %w", err)
		}
	default:
		return fmt.Errorf("auth_type: %q: want trust, any, plain, md5, scram-sha-256, cert, hba or peer", c.AuthType)
	}
	if c.AuthFile != "" {
		// Which users auth_type can check is decided at each login, and
		// broken lines are logged (setConfig): only an unreadable file is
		// refused.
		if _, _, err := loadAuthFile(c.AuthFile); err != nil {
			return fmt.Errorf("auth_file: %w", err)
		}
	}
	if err := c.checkClientTLS(); err != nil {
		return err
	}
	if _, err := c.serverTLSConfig(); err != nil {
		return err
	}
	for _, a := range c.tcpAddrs() {
		if err := checkListen(a, c.AuthType); err != nil {
			return err
		}
	}
	if err := c.checkUnixSocket(); err != nil {
		return err
	}
	return nil
}

// checkListen refuses a non-loopback address for trust authentication: an
// open pooler would let anyone on the network in as any user. A Unix
// socket is local and always allowed.
func checkListen(addr, authType string) error {
	if strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "@") {
		return nil // a Unix socket's path
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen: %q: %w", addr, err)
	}
	if authType != AuthTrust && authType != AuthAny {
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

// upstreamHost marks the database entry that stands for Upstream.
const upstreamHost = "\x00upstream"

// settings is the part of c that poolconf works pools out from.
func (c *Config) settings() poolconf.Settings {
	s := poolconf.Defaults()
	s.Pooling = c.Pooling
	s.AuthType = "trust" // checked on its own below
	s.Databases, s.Users = c.Databases, c.Users
	s.PeerID, s.Peers = c.PeerID, c.Peers
	return s
}

// poolFor finds the database entry that serves database db for user and
// works out the pool's settings; false when no entry serves db. An entry
// with a forced user takes the [users] settings (pool_mode,
// max_user_connections) of that user, whoever logs in, as PgBouncer's pool
// of the forced user does.
func (c *Config) poolFor(db, user string) (poolconf.Database, poolconf.Pool, bool) {
	s := c.settings()
	var ent poolconf.Database
	found := false
	for _, d := range c.Databases {
		if d.Name == db {
			ent, found = d, true
		}
	}
	if !found && c.Upstream != "" {
		ent, found = poolconf.NewDatabase(db), true
		ent.Host = upstreamHost
	}
	if !found {
		if ent, found = s.Database(db); !found {
			return poolconf.Database{}, poolconf.Pool{}, false
		}
	}
	if ent.User != "" {
		user = ent.User
	}
	return ent, s.PoolFor(ent, s.User(user)), true
}

// FromSettings builds a Config from pgbouncer.ini settings (ShutdownTimeout,
// Observer and Logf keep DefaultConfig's). It also returns each setting
// given a value other than PgBouncer's default that the proxy does not
// apply, as "key = value (why)", so a caller can say so instead of dropping
// it silently.
func FromSettings(s poolconf.Settings) (Config, []string) {
	c := DefaultConfig()
	var notApplied []string
	skip := func(key, value, why string) {
		notApplied = append(notApplied, fmt.Sprintf("%s = %s (%s)", key, value, why))
	}
	c.applyListen(s, skip)
	c.Pooling = s.Pooling
	c.ServerConnectTimeout, c.ServerLoginRetry = s.ServerConnectTimeout, s.ServerLoginRetry
	c.AuthType, c.AuthFile = s.AuthType, s.AuthFile
	c.AuthUser, c.AuthQuery, c.AuthDBName = s.Other["auth_user"], s.Other["auth_query"], s.Other["auth_dbname"]
	c.AuthHBAFile = s.Other["auth_hba_file"]
	c.ClientTLSSSLMode, c.ClientTLSCertFile, c.ClientTLSKeyFile, c.ClientTLSCAFile = s.ClientTLSSSLMode, s.ClientTLSCertFile, s.ClientTLSKeyFile, s.ClientTLSCAFile
	c.ServerTLSSSLMode, c.ServerTLSCAFile, c.ServerTLSCertFile, c.ServerTLSKeyFile = s.ServerTLSSSLMode, s.ServerTLSCAFile, s.ServerTLSCertFile, s.ServerTLSKeyFile
	c.ServerTLSProtocols, c.ServerTLSCiphers = s.ServerTLSProtocols, s.ServerTLSCiphers
	c.ServerCheckQuery, c.ServerCheckDelay = s.ServerCheckQuery, s.ServerCheckDelay
	c.ApplicationNameAddHost, c.ServerFastClose = s.ApplicationNameAddHost, s.ServerFastClose
	c.ServerRoundRobin = s.ServerRoundRobin
	c.IgnoreStartupParameters = s.IgnoreStartupParameters
	c.Databases, c.Users = s.Databases, s.Users
	c.Peers = s.Peers // peer_id: configFields
	c.StatsPeriod = s.StatsPeriod
	if len(s.Files) > 0 {
		c.ConfFile = s.Files[0]
	}
	// Every key the proxy does not apply keeps its value for SHOW CONFIG.
	c.Unapplied = map[string]string{}
	for _, k := range poolconf.Keys18 {
		if _, applied := configFields[k.Name]; !applied {
			if v, ok := s.Text(k.Name); ok && (v != "" || !k.Null) {
				c.Unapplied[k.Name] = v
			}
		}
	}

	// The Pooling keys the proxy does not apply are logged when they are
	// not PgBouncer's default.
	def := poolconf.DefaultPooling()
	for _, key := range poolconf.PoolingKeys() {
		if slices.Contains(appliedPooling, key) || slices.Contains(guardPooling, key) {
			continue
		}
		v, _ := s.Pooling.Text(key)
		if d, _ := def.Text(key); v != d {
			skip(key, v, "not implemented")
		}
	}
	c.AdminUsers, c.StatsUsers = s.AdminUsers, s.StatsUsers
	c.ClientLoginTimeout, c.AutodbIdleTimeout = s.ClientLoginTimeout, s.AutodbIdleTimeout
	for _, f := range []struct {
		key string
		dst *int
	}{{"pkt_buf", &c.PktBuf}, {"max_packet_size", &c.MaxPacketSize}} {
		key, dst := f.key, f.dst
		v, ok := s.Other[key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			skip(key, v, "not a whole number of bytes")
			continue
		}
		*dst = n // Validate checks the range
	}
	notApplied = append(notApplied, applyFields(&c, &s)...)
	keys := make([]string, 0, len(s.Other))
	for k := range s.Other {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "pkt_buf" || k == "max_packet_size" || configFields[k].ptr != nil {
			continue // applied above
		}
		if opsKeys[k] {
			continue // applied by applyListen (listen.go)
		}
		if k == "auth_user" || k == "auth_query" || k == "auth_dbname" || k == "auth_hba_file" {
			continue // applied above (authquery.go)
		}
		skip(k, s.Other[k], "no effect in poolsim proxy")
	}
	return c, notApplied
}

// ParseUserList reads a comma-separated user list as PgBouncer's
// admin_users and stats_users are written ("alice, bob"): names are trimmed,
// empty entries skipped.
func ParseUserList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
