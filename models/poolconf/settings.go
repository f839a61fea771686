package poolconf

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Unset marks a per-database or per-user number that was not given: the
// [pgbouncer] value applies.
const Unset = -1

// Settings is a pooler's configuration with PgBouncer's names (the Go name
// of pool_mode is PoolMode, of default_pool_size DefaultPoolSize, ...).
// See the package comment for units and the meaning of 0.
type Settings struct {
	ListenAddr string `ini:"listen_addr"` // "" listens on no TCP address in PgBouncer
	ListenPort int    `ini:"listen_port"`

	AuthType   string   `ini:"auth_type"`   // trust, any, plain, md5, scram-sha-256, hba, cert, pam
	AuthFile   string   `ini:"auth_file"`   // "user" "secret" per line
	AdminUsers []string `ini:"admin_users"` // may run every console command
	StatsUsers []string `ini:"stats_users"` // may run the console's read-only SHOW commands

	// Pooling is how the pools behave: the part of the settings that the
	// model, the proxy and the PgBouncer launcher all read.
	Pooling

	// IgnoreStartupParameters: startup parameters dropped without an error.
	IgnoreStartupParameters []string `ini:"ignore_startup_parameters"`

	ClientLoginTimeout   time.Duration `ini:"client_login_timeout"` // 0 = disabled
	ServerConnectTimeout time.Duration `ini:"server_connect_timeout"`
	ServerLoginRetry     time.Duration `ini:"server_login_retry"`
	AutodbIdleTimeout    time.Duration `ini:"autodb_idle_timeout"`
	SuspendTimeout       time.Duration `ini:"suspend_timeout"`
	StatsPeriod          time.Duration `ini:"stats_period"`

	ClientTLSSSLMode  string `ini:"client_tls_sslmode"` // disable, allow, prefer, require, verify-ca, verify-full
	ClientTLSCertFile string `ini:"client_tls_cert_file"`
	ClientTLSKeyFile  string `ini:"client_tls_key_file"`
	ClientTLSCAFile   string `ini:"client_tls_ca_file"`

	// Server TLS: how the pooler's own connections to PostgreSQL are
	// encrypted (server_tls_sslmode: disable, allow, prefer, require,
	// verify-ca, verify-full), with the CA that signs the server's
	// certificate, the pooler's client certificate and key, and the TLS
	// versions (server_tls_protocols: secure, all, legacy, tlsv1.2, ...)
	// and cipher suites (server_tls_ciphers) offered.
	ServerTLSSSLMode   string `ini:"server_tls_sslmode"`
	ServerTLSCAFile    string `ini:"server_tls_ca_file"`
	ServerTLSCertFile  string `ini:"server_tls_cert_file"`
	ServerTLSKeyFile   string `ini:"server_tls_key_file"`
	ServerTLSProtocols string `ini:"server_tls_protocols"`
	ServerTLSCiphers   string `ini:"server_tls_ciphers"`

	// ServerCheckQuery is run on a server idle longer than
	// ServerCheckDelay before it is used again ("" = never).
	ServerCheckQuery string        `ini:"server_check_query"`
	ServerCheckDelay time.Duration `ini:"server_check_delay"`
	// ApplicationNameAddHost appends " - host:port" of the client to its
	// application_name.
	ApplicationNameAddHost bool `ini:"application_name_add_host"`
	// ServerFastClose closes a server that must close (RECONNECT, a
	// changed database) at the end of its transaction in session mode
	// too, instead of when its client leaves.
	ServerFastClose bool `ini:"server_fast_close"`
	// ServerRoundRobin reuses idle servers in turn instead of the most
	// recently used one first.
	ServerRoundRobin bool `ini:"server_round_robin"`

	// Databases is the [databases] section in file order; the entry named
	// "*" is the fallback for any other database name.
	Databases []Database
	// Users is the [users] section in file order.
	Users []User
	// PeerID is peer_id (PgBouncer 1.19+): this pooler's id among the
	// poolers of Peers, 1..MaxPeerID; 0 turns peering off.
	PeerID int `ini:"peer_id"`
	// Peers is the [peers] section (PgBouncer 1.19+) in id order: where a
	// cancel request carrying another pooler's peer id is forwarded.
	Peers []Peer
	// Other holds the [pgbouncer] keys PgBouncer knows that have no field
	// here (logfile, pidfile, tcp_keepalive, ...), as written.
	Other map[string]string
	// Files lists the files read, the main one first, then each %include.
	Files []string
}

// Pooling is the [pgbouncer] keys that say how the pools behave: what a
// model of the pooler needs as much as a pooler does. Each field's tag is
// its pgbouncer.ini key; Set, Text and the PgBouncer launcher read the tags,
// so a new key is a field here and its default in Defaults. A duration
// or limit of 0 means what it means in pgbouncer.ini (see the package
// comment).
type Pooling struct {
	PoolMode               poolmode.Mode `ini:"pool_mode" doc:"session, transaction or statement"`
	DefaultPoolSize        int           `ini:"default_pool_size" doc:"server connections per pool (database and user)"`
	MinPoolSize            int           `ini:"min_pool_size" doc:"servers a pool keeps open even when idle"`
	ReservePoolSize        int           `ini:"reserve_pool_size" doc:"extra servers a pool may open when a client has waited reserve_pool_timeout"`
	ReservePoolTimeout     time.Duration `ini:"reserve_pool_timeout" doc:"how long a client waits before the reserve pool opens"`
	MaxClientConn          int           `ini:"max_client_conn" doc:"client connections in all"`
	MaxDBConnections       int           `ini:"max_db_connections" doc:"server connections per database across users; 0 = unlimited"`
	MaxUserConnections     int           `ini:"max_user_connections" doc:"server connections per user across databases; 0 = unlimited"`
	MaxPreparedStatements  int           `ini:"max_prepared_statements" doc:"protocol-level prepared statements tracked per server (PgBouncer 1.21+); 0 = not tracked"`
	ServerResetQuery       string        `ini:"server_reset_query" doc:"run on a server when a session-mode client leaves; empty = none"`
	ServerResetQueryAlways bool          `ini:"server_reset_query_always" doc:"run server_reset_query in every pool mode"`
	QueryTimeout           time.Duration `ini:"query_timeout" doc:"longest a query may run before the server is closed; 0 = disabled"`
	QueryWaitTimeout       time.Duration `ini:"query_wait_timeout" doc:"longest a client waits for a server; 0 = disabled"`
	ClientIdleTimeout      time.Duration `ini:"client_idle_timeout" doc:"idle clients older than this are closed; 0 = disabled"`
	IdleTransactionTimeout time.Duration `ini:"idle_transaction_timeout" doc:"a client idle in a transaction this long is closed; 0 = disabled"`
	ServerIdleTimeout      time.Duration `ini:"server_idle_timeout" doc:"idle servers older than this are closed; 0 = disabled"`
	ServerLifetime         time.Duration `ini:"server_lifetime" doc:"a server older than this is closed when released; 0 = disabled"`
}

// Database is one [databases] entry: where a client database name leads.
type Database struct {
	Name     string // the name clients connect to; "*" is the fallback
	Host     string // host; "" = the Unix socket directory (not served by poolsim) or localhost
	Port     int    // port; 5432 when not given
	DBName   string // dbname; "" = Name
	User     string // user: a forced user for every server login; "" = the client's
	Password string // password for User
	AuthUser string // auth_user
	// AuthDBName is auth_dbname (PgBouncer 1.19+): the database whose
	// server runs auth_query for this one; "" = the global one.
	AuthDBName string

	PoolSize         int           // pool_size; Unset = default_pool_size
	MinPoolSize      int           // min_pool_size; Unset = the global one
	ReservePool      int           // reserve_pool; Unset = reserve_pool_size
	MaxDBConnections int           // max_db_connections; Unset = the global one, 0 = unlimited
	PoolMode         poolmode.Mode // pool_mode; poolmode.Direct = the global one
	ConnectQuery     string        // connect_query
	ClientEncoding   string        // client_encoding
	DateStyle        string        // datestyle
	TimeZone         string        // timezone
}

// MaxPeerID is the largest peer_id (PgBouncer 1.19's bound: the id takes
// 14 bits of the cancel key's process id, which stays positive).
const MaxPeerID = 16383

// Peer is one [peers] entry (PgBouncer 1.19+): "ID = host=... port=...
// pool_size=...".
type Peer struct {
	ID   int    // the key: the peer's peer_id, 1..65535 as 1.19 reads it
	Host string // host name, IP address, or a Unix socket directory ("/...", or "@..." in the abstract namespace)
	Port int    // port, 6432 when not given
	// PoolSize is pool_size: the cancel requests in flight to the peer at
	// once; Unset = default_pool_size.
	PoolSize int
}

// User is one [users] entry.
type User struct {
	Name               string
	PoolMode           poolmode.Mode // pool_mode; poolmode.Direct = the database's or global one
	MaxUserConnections int           // max_user_connections; Unset = the global one, 0 = unlimited
}

// Defaults returns PgBouncer 1.18's defaults (SHOW CONFIG's default
// column of PgBouncer 1.18.0), with one addition PgBouncer 1.18 lacks:
// MaxPreparedStatements 0 (tracking off, the 1.18 behaviour).
func Defaults() Settings {
	return Settings{
		ListenPort:           6432,
		AuthType:             "md5",
		Pooling:              DefaultPooling(),
		ClientLoginTimeout:   60 * time.Second,
		ServerConnectTimeout: 15 * time.Second,
		ServerLoginRetry:     15 * time.Second,
		AutodbIdleTimeout:    3600 * time.Second,
		SuspendTimeout:       10 * time.Second,
		StatsPeriod:          60 * time.Second,
		ClientTLSSSLMode:     "disable",
		ServerTLSSSLMode:     "disable",
		ServerTLSProtocols:   "secure",
		ServerTLSCiphers:     "fast",
		ServerCheckQuery:     "select 1",
		ServerCheckDelay:     30 * time.Second,
	}
}

// DefaultPooling is the Pooling part of Defaults.
func DefaultPooling() Pooling {
	return Pooling{
		PoolMode:               poolmode.Session,
		DefaultPoolSize:        20,
		ReservePoolTimeout:     5 * time.Second,
		MaxClientConn:          100,
		ServerResetQuery:       "DISCARD ALL",
		QueryWaitTimeout:       120 * time.Second,
		ServerIdleTimeout:      600 * time.Second,
		ServerLifetime:         3600 * time.Second,
		MaxPreparedStatements:  0,
		ServerResetQueryAlways: false,
	}
}

// NewDatabase returns a [databases] entry for name with nothing
// overridden.
func NewDatabase(name string) Database {
	return Database{Name: name, Port: 5432, PoolSize: Unset, MinPoolSize: Unset, ReservePool: Unset,
		MaxDBConnections: Unset, PoolMode: poolmode.Direct}
}

// NewUser returns a [users] entry for name with nothing overridden.
func NewUser(name string) User {
	return User{Name: name, PoolMode: poolmode.Direct, MaxUserConnections: Unset}
}

// Database returns the [databases] entry a client's database name leads
// to: its own, else "*" with the client's name as dbname; false if
// neither exists.
func (s *Settings) Database(name string) (Database, bool) {
	var star *Database
	for i := range s.Databases {
		switch s.Databases[i].Name {
		case name:
			return s.Databases[i], true
		case "*":
			star = &s.Databases[i]
		}
	}
	if star == nil {
		return Database{}, false
	}
	d := *star
	d.Name = name
	return d, true
}

// User returns the [users] entry of name, or one with nothing overridden.
func (s *Settings) User(name string) User {
	for _, u := range s.Users {
		if u.Name == name {
			return u
		}
	}
	return NewUser(name)
}

// Pool is the effective settings of one pool (a database entry and a
// user): the overrides applied over the [pgbouncer] values.
type Pool struct {
	Mode               poolmode.Mode
	Size               int
	MaxDBConnections   int // 0 = unlimited
	MaxUserConnections int // 0 = unlimited
	// MinPoolSize is min_pool_size, the database's else [pgbouncer]'s;
	// ReservePool is reserve_pool (the database's) else
	// reserve_pool_size.
	MinPoolSize, ReservePool int
}

// PoolFor works out the pool of database d and user u: pool_mode from the
// user, else the database, else [pgbouncer], as PgBouncer does.
func (s *Settings) PoolFor(d Database, u User) Pool {
	p := Pool{Mode: s.PoolMode, Size: s.DefaultPoolSize, MaxDBConnections: s.MaxDBConnections,
		MaxUserConnections: s.MaxUserConnections}
	if d.PoolMode != poolmode.Direct {
		p.Mode = d.PoolMode
	}
	if u.PoolMode != poolmode.Direct {
		p.Mode = u.PoolMode
	}
	if d.PoolSize != Unset {
		p.Size = d.PoolSize
	}
	if d.MaxDBConnections != Unset {
		p.MaxDBConnections = d.MaxDBConnections
	}
	p.MinPoolSize, p.ReservePool = s.MinPoolSize, s.ReservePoolSize
	if d.MinPoolSize != Unset {
		p.MinPoolSize = d.MinPoolSize
	}
	if d.ReservePool != Unset {
		p.ReservePool = d.ReservePool
	}
	if u.MaxUserConnections != Unset {
		p.MaxUserConnections = u.MaxUserConnections
	}
	return p
}

// AuthTypes are the auth_type values PgBouncer 1.18 accepts.
var AuthTypes = []string{"any", "trust", "plain", "md5", "scram-sha-256", "cert", "hba", "pam"}

// SSLModes are the client_tls_sslmode values.
var SSLModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// Validate checks every value of p and names the first bad one by its
// pgbouncer.ini key.
func (p *Pooling) Validate() error {
	switch p.PoolMode {
	case poolmode.Session, poolmode.Transaction, poolmode.Statement:
	default:
		return fmt.Errorf("pool_mode: %v: want session, transaction or statement", p.PoolMode)
	}
	for _, key := range poolingKeys {
		switch v, _ := p.Field(key); v := v.(type) {
		case *int:
			least := 0
			if key == "max_client_conn" {
				least = 1
			}
			if *v < least {
				return fmt.Errorf("%s: %d: want %d or more", key, *v, least)
			}
		case *time.Duration:
			if *v < 0 {
				return fmt.Errorf("%s: %v: want 0 or more", key, *v)
			}
		}
	}
	return nil
}

// Validate checks every value and names the first bad one by its
// pgbouncer.ini key.
func (s *Settings) Validate() error {
	if err := s.Pooling.Validate(); err != nil {
		return err
	}
	if !slices.Contains(AuthTypes, s.AuthType) {
		return fmt.Errorf("auth_type: %q: want one of %s", s.AuthType, strings.Join(AuthTypes, ", "))
	}
	if !slices.Contains(SSLModes, s.ClientTLSSSLMode) {
		return fmt.Errorf("client_tls_sslmode: %q: want one of %s", s.ClientTLSSSLMode, strings.Join(SSLModes, ", "))
	}
	if !slices.Contains(SSLModes, s.ServerTLSSSLMode) {
		return fmt.Errorf("server_tls_sslmode: %q: want one of %s", s.ServerTLSSSLMode, strings.Join(SSLModes, ", "))
	}
	for _, n := range []struct {
		key string
		v   int
		min int
	}{
		{"listen_port", s.ListenPort, 0},
	} {
		if n.v < n.min {
			return fmt.Errorf("%s: %d: want %d or more", n.key, n.v, n.min)
		}
	}
	if s.ListenPort > 65535 {
		return fmt.Errorf("listen_port: %d: want at most 65535", s.ListenPort)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"client_login_timeout", s.ClientLoginTimeout},
		{"server_connect_timeout", s.ServerConnectTimeout}, {"server_login_retry", s.ServerLoginRetry},
		{"autodb_idle_timeout", s.AutodbIdleTimeout}, {"suspend_timeout", s.SuspendTimeout},
		{"stats_period", s.StatsPeriod}, {"server_check_delay", s.ServerCheckDelay},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s: %v: want 0 or more", d.key, d.v)
		}
	}
	for _, d := range s.Databases {
		if d.Port < 1 || d.Port > 65535 {
			return fmt.Errorf("[databases] %s: port %d: want 1..65535", d.Name, d.Port)
		}
		for _, n := range []struct {
			key string
			v   int
		}{{"pool_size", d.PoolSize}, {"min_pool_size", d.MinPoolSize}, {"reserve_pool", d.ReservePool}, {"max_db_connections", d.MaxDBConnections}} {
			if n.v < Unset {
				return fmt.Errorf("[databases] %s: %s %d: want 0 or more", d.Name, n.key, n.v)
			}
		}
	}
	if s.PeerID < 0 || s.PeerID > MaxPeerID {
		return fmt.Errorf("peer_id: %d: want 0 (no peering) to %d", s.PeerID, MaxPeerID)
	}
	for _, p := range s.Peers {
		if p.Port < 1 || p.Port > 65535 {
			return fmt.Errorf("[peers] %d: port %d: want 1..65535", p.ID, p.Port)
		}
		if p.PoolSize < Unset {
			return fmt.Errorf("[peers] %d: pool_size %d: want 0 or more", p.ID, p.PoolSize)
		}
	}
	for _, u := range s.Users {
		if u.MaxUserConnections < Unset {
			return fmt.Errorf("[users] %s: max_user_connections %d: want 0 or more", u.Name, u.MaxUserConnections)
		}
	}
	return nil
}
