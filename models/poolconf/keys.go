package poolconf

import (
	"fmt"
)

// Key is one [pgbouncer] setting as PgBouncer 1.18.0's SHOW CONFIG lists it:
// its name, the text of its default (Null when PgBouncer shows NULL) and
// whether a running PgBouncer may change it (RELOAD or the console's SET).
type Key struct {
	Name       string
	Default    string
	Null       bool // the default is NULL, not Default
	Changeable bool
}

// Keys18 is every [pgbouncer] key of PgBouncer 1.18.0 in SHOW CONFIG's
// order, read from a real PgBouncer 1.18.0 (SHOW CONFIG's key, default and
// changeable columns).
var Keys18 = []Key{
	{"admin_users", "", false, true},
	{"application_name_add_host", "0", false, true},
	{"auth_file", "", true, true},
	{"auth_hba_file", "", false, true},
	{"auth_query", "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM pg_authid WHERE rolname=$1 AND rolcanlogin", false, true},
	{"auth_type", "md5", false, true},
	{"auth_user", "", true, true},
	{"autodb_idle_timeout", "3600", false, true},
	{"client_idle_timeout", "0", false, true},
	{"client_login_timeout", "60", false, true},
	{"client_tls_ca_file", "", false, true},
	{"client_tls_cert_file", "", false, true},
	{"client_tls_ciphers", "fast", false, true},
	{"client_tls_dheparams", "auto", false, true},
	{"client_tls_ecdhcurve", "auto", false, true},
	{"client_tls_key_file", "", false, true},
	{"client_tls_protocols", "secure", false, true},
	{"client_tls_sslmode", "disable", false, true},
	{"conffile", "", true, true},
	{"default_pool_size", "20", false, true},
	{"disable_pqexec", "0", false, false},
	{"dns_max_ttl", "15", false, true},
	{"dns_nxdomain_ttl", "15", false, true},
	{"dns_zone_check_period", "0", false, true},
	{"idle_transaction_timeout", "0", false, true},
	{"ignore_startup_parameters", "", false, true},
	{"job_name", "pgbouncer", false, false},
	{"listen_addr", "", false, false},
	{"listen_backlog", "128", false, false},
	{"listen_port", "6432", false, false},
	{"log_connections", "1", false, true},
	{"log_disconnections", "1", false, true},
	{"log_pooler_errors", "1", false, true},
	{"log_stats", "1", false, true},
	{"logfile", "", false, true},
	{"max_client_conn", "100", false, true},
	{"max_db_connections", "0", false, true},
	{"max_packet_size", "2147483647", false, true},
	{"max_user_connections", "0", false, true},
	{"min_pool_size", "0", false, true},
	{"pidfile", "", false, false},
	{"pkt_buf", "4096", false, false},
	{"pool_mode", "session", false, true},
	{"query_timeout", "0", false, true},
	{"query_wait_timeout", "120", false, true},
	{"reserve_pool_size", "0", false, true},
	{"reserve_pool_timeout", "5", false, true},
	{"resolv_conf", "", false, false},
	{"sbuf_loopcnt", "5", false, true},
	{"server_check_delay", "30", false, true},
	{"server_check_query", "select 1", false, true},
	{"server_connect_timeout", "15", false, true},
	{"server_fast_close", "0", false, true},
	{"server_idle_timeout", "600", false, true},
	{"server_lifetime", "3600", false, true},
	{"server_login_retry", "15", false, true},
	{"server_reset_query", "DISCARD ALL", false, true},
	{"server_reset_query_always", "0", false, true},
	{"server_round_robin", "0", false, true},
	{"server_tls_ca_file", "", false, true},
	{"server_tls_cert_file", "", false, true},
	{"server_tls_ciphers", "fast", false, true},
	{"server_tls_key_file", "", false, true},
	{"server_tls_protocols", "secure", false, true},
	{"server_tls_sslmode", "disable", false, true},
	{"so_reuseport", "0", false, false},
	{"stats_period", "60", false, true},
	{"stats_users", "", false, true},
	{"suspend_timeout", "10", false, true},
	{"syslog", "0", false, true},
	{"syslog_facility", "daemon", false, true},
	{"syslog_ident", "pgbouncer", false, true},
	{"tcp_defer_accept", "1", false, true},
	{"tcp_keepalive", "1", false, true},
	{"tcp_keepcnt", "0", false, true},
	{"tcp_keepidle", "0", false, true},
	{"tcp_keepintvl", "0", false, true},
	{"tcp_socket_buffer", "0", false, true},
	{"tcp_user_timeout", "0", false, true},
	{"unix_socket_dir", "/tmp", false, false},
	{"unix_socket_group", "", false, false},
	{"unix_socket_mode", "0777", false, false},
	{"user", "", true, false},
	{"verbose", "", true, true},
}

// MaxPreparedStatementsKey is the one key poolsim reads that PgBouncer 1.18
// lacks (max_prepared_statements, PgBouncer 1.21+), with 1.18's behaviour
// (0, not tracked) as its default.
var MaxPreparedStatementsKey = Key{Name: "max_prepared_statements", Default: "0", Changeable: true}

// AuthDBNameKey is auth_dbname (PgBouncer 1.19+): the database whose server
// runs auth_query; NULL by default (the client's own database).
var AuthDBNameKey = Key{Name: "auth_dbname", Null: true, Changeable: true}

// PeerIDKey is peer_id (PgBouncer 1.19+): this process's id in a group
// of peered poolers ([peers]); 0, peering off, by default. 1.19 lists it
// in SHOW CONFIG as a setting that can change.
var PeerIDKey = Key{Name: "peer_id", Default: "0", Changeable: true}

// LookupKey finds a [pgbouncer] key poolsim knows (case-sensitive, as
// PgBouncer's names are lower case).
func LookupKey(name string) (Key, bool) {
	if name == MaxPreparedStatementsKey.Name {
		return MaxPreparedStatementsKey, true
	}
	if name == AuthDBNameKey.Name {
		return AuthDBNameKey, true
	}
	if name == PeerIDKey.Name {
		return PeerIDKey, true
	}
	for _, k := range Keys18 {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Set stores one [pgbouncer] key as the file would (the console's SET
// key = value): an unknown key or a value that does not parse is an error.
// Keys without a Settings field go to Other.
func (s *Settings) Set(key, value string) error {
	if err := s.set(key, value); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// Text is key's value in s as PgBouncer's SHOW CONFIG writes it (seconds
// for durations, 0 and 1 for booleans, lists comma-separated); ok is false
// for a key poolsim does not know. A key with no field and not in Other
// gives its default ("" for a NULL default).
func (s *Settings) Text(key string) (v string, ok bool) {
	k, ok := LookupKey(key)
	if !ok {
		return "", false
	}
	if ptr, ok := s.Field(key); ok {
		return format(ptr), true
	}
	if v, ok := s.Other[key]; ok {
		return v, true
	}
	return k.Default, true
}
