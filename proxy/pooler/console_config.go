package pooler

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
)

// SHOW CONFIG and SET: every [pgbouncer] key of PgBouncer 1.18 with its
// value, 1.18's default and whether it can change while running. The keys
// the proxy applies show the value in force and SET changes them as a
// reload does; the others show the value read from the config file (else
// the default) and have no effect, which SET says in a NOTICE.

// configField is a key the proxy applies: get is the value in force (a
// string, or nil for NULL), put copies the key's value from a Settings
// that parsed it.
type configField struct {
	get func(c *Config) any
	put func(c *Config, s *poolconf.Settings)
	// ptr, for a key kept in one field of Config (field): SET, RELOAD and
	// the config file parse the key's text into it by the field's type.
	ptr func(c *Config) any
}

// field is a key the proxy applies that is one field of Config, of a type
// poolconf.ParseValue reads (string, []string, int, bool, time.Duration in
// seconds, poolmode.Mode): SHOW CONFIG writes it, SET and FromSettings set
// it. Making a [pgbouncer] key applied is a Config field and one line in
// configFields:
//
//	"server_tls_sslmode": field(func(c *Config) any { return &c.ServerTLSSSLMode }),
//
// (a key of poolconf.Pooling goes in appliedPooling instead: Config embeds
// Pooling).
func field(ptr func(c *Config) any) configField {
	return configField{get: func(c *Config) any { return poolconf.FormatValue(ptr(c)) }, ptr: ptr}
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

func durField(get func(c *Config) *time.Duration, from func(s *poolconf.Settings) time.Duration) configField {
	return configField{
		get: func(c *Config) any { return secs(*get(c)) },
		put: func(c *Config, s *poolconf.Settings) { *get(c) = from(s) },
	}
}

func listenPart(c *Config, port bool) string {
	h, pt, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return ""
	}
	if port {
		return pt
	}
	return h
}

// otherInt is a byte count poolconf keeps as text (pkt_buf,
// max_packet_size).
func otherInt(key string, get func(c *Config) *int) configField {
	return configField{
		get: func(c *Config) any { return strconv.Itoa(*get(c)) },
		put: func(c *Config, s *poolconf.Settings) {
			if n, err := strconv.Atoi(strings.TrimSpace(s.Other[key])); err == nil {
				*get(c) = n // Validate checks the range
			} else {
				*get(c) = -1 // refused by Validate
			}
		},
	}
}

// strField is a text key with a Config field.
func strField(get func(c *Config) *string, from func(s *poolconf.Settings) string) configField {
	return configField{
		get: func(c *Config) any { return *get(c) },
		put: func(c *Config, s *poolconf.Settings) { *get(c) = from(s) },
	}
}

// boolField is a 0/1 key with a Config field.
func boolField(get func(c *Config) *bool, from func(s *poolconf.Settings) bool) configField {
	return configField{
		get: func(c *Config) any {
			if *get(c) {
				return "1"
			}
			return "0"
		},
		put: func(c *Config, s *poolconf.Settings) { *get(c) = from(s) },
	}
}

var configFields = map[string]configField{
	"admin_users": {
		get: func(c *Config) any { return strings.Join(c.AdminUsers, ",") },
		put: func(c *Config, s *poolconf.Settings) { c.AdminUsers = s.AdminUsers },
	},
	"stats_users": {
		get: func(c *Config) any { return strings.Join(c.StatsUsers, ",") },
		put: func(c *Config, s *poolconf.Settings) { c.StatsUsers = s.StatsUsers },
	},
	"client_login_timeout": durField(func(c *Config) *time.Duration { return &c.ClientLoginTimeout },
		func(s *poolconf.Settings) time.Duration { return s.ClientLoginTimeout }),
	"autodb_idle_timeout": durField(func(c *Config) *time.Duration { return &c.AutodbIdleTimeout },
		func(s *poolconf.Settings) time.Duration { return s.AutodbIdleTimeout }),
	"pkt_buf":         otherInt("pkt_buf", func(c *Config) *int { return &c.PktBuf }),
	"peer_id":         field(func(c *Config) any { return &c.PeerID }), // PgBouncer 1.19+ (peering.go)
	"max_packet_size": otherInt("max_packet_size", func(c *Config) *int { return &c.MaxPacketSize }),
	"auth_file": {
		get: func(c *Config) any { return orNull(c.AuthFile) },
		put: func(c *Config, s *poolconf.Settings) { c.AuthFile = s.AuthFile },
	},
	"auth_type": {
		get: func(c *Config) any { return c.AuthType },
		put: func(c *Config, s *poolconf.Settings) { c.AuthType = s.AuthType },
	},
	"auth_user": {
		get: func(c *Config) any { return orNull(c.AuthUser) },
		put: func(c *Config, s *poolconf.Settings) { c.AuthUser = s.Other["auth_user"] },
	},
	"auth_query": {
		get: func(c *Config) any {
			if c.AuthQuery == "" {
				k, _ := poolconf.LookupKey("auth_query")
				return k.Default
			}
			return c.AuthQuery
		},
		put: func(c *Config, s *poolconf.Settings) { c.AuthQuery = s.Other["auth_query"] },
	},
	"auth_hba_file": {
		get: func(c *Config) any { return c.AuthHBAFile },
		put: func(c *Config, s *poolconf.Settings) { c.AuthHBAFile = s.Other["auth_hba_file"] },
	},
	"auth_dbname": {
		get: func(c *Config) any { return orNull(c.AuthDBName) },
		put: func(c *Config, s *poolconf.Settings) { c.AuthDBName = s.Other["auth_dbname"] },
	},
	"conffile": {get: func(c *Config) any { return orNull(c.ConfFile) }},
	"client_tls_sslmode": {
		get: func(c *Config) any { return c.clientTLSMode() },
		put: func(c *Config, s *poolconf.Settings) { c.ClientTLSSSLMode = s.ClientTLSSSLMode },
	},
	"client_tls_cert_file": {
		get: func(c *Config) any { return c.ClientTLSCertFile },
		put: func(c *Config, s *poolconf.Settings) { c.ClientTLSCertFile = s.ClientTLSCertFile },
	},
	"client_tls_key_file": {
		get: func(c *Config) any { return c.ClientTLSKeyFile },
		put: func(c *Config, s *poolconf.Settings) { c.ClientTLSKeyFile = s.ClientTLSKeyFile },
	},
	"client_tls_ca_file": {
		get: func(c *Config) any { return c.ClientTLSCAFile },
		put: func(c *Config, s *poolconf.Settings) { c.ClientTLSCAFile = s.ClientTLSCAFile },
	},
	"ignore_startup_parameters": {
		get: func(c *Config) any { return strings.Join(c.IgnoreStartupParameters, ",") },
		put: func(c *Config, s *poolconf.Settings) { c.IgnoreStartupParameters = s.IgnoreStartupParameters },
	},
	"listen_addr": {get: func(c *Config) any { return listenPart(c, false) }},
	"listen_port": {get: func(c *Config) any { return listenPart(c, true) }},
	"server_connect_timeout": durField(func(c *Config) *time.Duration { return &c.ServerConnectTimeout },
		func(s *poolconf.Settings) time.Duration { return s.ServerConnectTimeout }),
	"server_login_retry": durField(func(c *Config) *time.Duration { return &c.ServerLoginRetry },
		func(s *poolconf.Settings) time.Duration { return s.ServerLoginRetry }),
	"stats_period": durField(func(c *Config) *time.Duration { return &c.StatsPeriod },
		func(s *poolconf.Settings) time.Duration { return s.StatsPeriod }),
	"server_tls_sslmode": {
		get: func(c *Config) any {
			if c.ServerTLSSSLMode == "" {
				return SSLDisable
			}
			return c.ServerTLSSSLMode
		},
		put: func(c *Config, s *poolconf.Settings) { c.ServerTLSSSLMode = s.ServerTLSSSLMode },
	},
	"server_tls_ca_file":   strField(func(c *Config) *string { return &c.ServerTLSCAFile }, func(s *poolconf.Settings) string { return s.ServerTLSCAFile }),
	"server_tls_cert_file": strField(func(c *Config) *string { return &c.ServerTLSCertFile }, func(s *poolconf.Settings) string { return s.ServerTLSCertFile }),
	"server_tls_key_file":  strField(func(c *Config) *string { return &c.ServerTLSKeyFile }, func(s *poolconf.Settings) string { return s.ServerTLSKeyFile }),
	"server_tls_protocols": strField(func(c *Config) *string { return &c.ServerTLSProtocols }, func(s *poolconf.Settings) string { return s.ServerTLSProtocols }),
	"server_tls_ciphers":   strField(func(c *Config) *string { return &c.ServerTLSCiphers }, func(s *poolconf.Settings) string { return s.ServerTLSCiphers }),
	"server_check_query":   strField(func(c *Config) *string { return &c.ServerCheckQuery }, func(s *poolconf.Settings) string { return s.ServerCheckQuery }),
	"server_check_delay": durField(func(c *Config) *time.Duration { return &c.ServerCheckDelay },
		func(s *poolconf.Settings) time.Duration { return s.ServerCheckDelay }),
	"application_name_add_host": boolField(func(c *Config) *bool { return &c.ApplicationNameAddHost }, func(s *poolconf.Settings) bool { return s.ApplicationNameAddHost }),
	"server_fast_close":         boolField(func(c *Config) *bool { return &c.ServerFastClose }, func(s *poolconf.Settings) bool { return s.ServerFastClose }),
	"server_round_robin":        boolField(func(c *Config) *bool { return &c.ServerRoundRobin }, func(s *poolconf.Settings) bool { return s.ServerRoundRobin }),
	"verbose": {
		get: func(c *Config) any {
			if c.Verbose {
				return "1"
			}
			return "0"
		},
		put: func(c *Config, s *poolconf.Settings) { c.Verbose = s.Other["verbose"] != "0" },
	},
}

// The Pooling keys the proxy applies (appliedPooling, pool.go) show the
// value in force and SET changes them, by the field poolconf finds for
// each.
func init() {
	for _, key := range slices.Concat(appliedPooling, guardPooling) {
		configFields[key] = configField{
			get: func(c *Config) any { v, _ := c.Pooling.Text(key); return v },
			put: func(c *Config, s *poolconf.Settings) {
				dst, _ := c.Pooling.Field(key)
				src, _ := s.Pooling.Field(key)
				reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
			},
		}
	}
}

// configKeys is SHOW CONFIG's rows: PgBouncer 1.18's keys,
// max_prepared_statements and peer_id (PgBouncer 1.19 lists it), in name
// order.
func configKeys() []poolconf.Key {
	keys := append([]poolconf.Key(nil), poolconf.Keys18...)
	keys = append(keys, poolconf.MaxPreparedStatementsKey, poolconf.PeerIDKey)
	sortBy(keys, func(k poolconf.Key) string { return k.Name })
	return keys
}

// configValue is a key's value as SHOW CONFIG shows it.
func configValue(c *Config, k poolconf.Key) any {
	if v, ok := c.Unapplied[k.Name]; ok && strings.Contains(k.Name, "_tls_") {
		return v // a TLS setting SET recorded but could not apply, as PgBouncer shows it
	}
	if f, ok := configFields[k.Name]; ok {
		return f.get(c)
	}
	if v, ok := c.Unapplied[k.Name]; ok {
		return v
	}
	if k.Null {
		return nil
	}
	return k.Default
}

// showConfig is SHOW CONFIG.
func (p *Proxy) showConfig() *table {
	t := newTable("ssss", "key", "value", "default", "changeable")
	c := p.conf()
	for _, k := range configKeys() {
		var def any = k.Default
		if k.Null {
			def = nil
		}
		ch := "no"
		if k.Changeable {
			ch = "yes"
		}
		t.row(k.Name, configValue(c, k), def, ch)
	}
	return t
}

// ErrSetFailed is the console's "SET failed": an unknown key, a value that
// does not parse or settings that do not validate.
var ErrSetFailed = errors.New("SET failed")

// Set changes one [pgbouncer] setting while the proxy runs, as the
// console's SET key = value does (PgBouncer's set_config_param): the value
// is parsed as pgbouncer.ini writes it (a bad one is ErrSetFailed, with the
// reason wrapped). A key the proxy applies takes the value as a reload
// would (Reload), for what follows: the janitor's next check, the next
// login, the next server. A key no part of the proxy applies is only
// recorded (SHOW CONFIG shows it) and a key that cannot change while
// running (listen_addr, listen_port, pkt_buf, ...) keeps its value, as
// PgBouncer silently keeps it; notices say so. As in PgBouncer, a TLS
// setting (a key with _tls_ in its name) that leaves the TLS settings
// unusable, such as a new key file before its certificate, is recorded
// with the NOTICE "TLS settings could not be applied, still using old
// configuration"; the next TLS setting is tried with it.
func (p *Proxy) Set(key, value string) (notices []string, err error) {
	key = strings.ToLower(key)
	k, ok := poolconf.LookupKey(key)
	if !ok {
		return nil, fmt.Errorf("%w: %s: not a PgBouncer 1.18 setting", ErrSetFailed, key)
	}
	s := poolconf.Defaults()
	if err := s.Set(key, value); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSetFailed, err)
	}
	if err := checkKind(key, value); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSetFailed, err)
	}
	p.setMu.Lock() // one SET at a time: each starts from the last one's settings
	defer p.setMu.Unlock()
	cfg := *p.conf()
	cfg.Unapplied = maps.Clone(cfg.Unapplied)
	if cfg.Unapplied == nil {
		cfg.Unapplied = map[string]string{}
	}
	f, applied := configFields[key]
	tlsKey := strings.Contains(key, "_tls_")
	switch {
	case !k.Changeable:
		return []string{fmt.Sprintf("%s cannot change while the proxy runs; it keeps %v", key, configValue(&cfg, k))}, nil
	case !applied || (f.put == nil && f.ptr == nil):
		cfg.Unapplied[key] = value
		notices = append(notices, fmt.Sprintf("%s has no effect in poolsim proxy", key))
	default:
		if err := putField(&cfg, key, f, &s); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSetFailed, err)
		}
		delete(cfg.Unapplied, key)
		if tlsKey {
			// The TLS settings recorded but not applied are tried again
			// with this one.
			for pk, pv := range cfg.Unapplied {
				if pf, ok := configFields[pk]; ok && strings.Contains(pk, "_tls_") {
					ps := poolconf.Defaults()
					if ps.Set(pk, pv) == nil && putField(&cfg, pk, pf, &ps) == nil {
						delete(cfg.Unapplied, pk)
					}
				}
			}
		}
	}
	_, kept, err := p.Reload(cfg)
	if err != nil && tlsKey && applied {
		// PgBouncer keeps its TLS context and answers with a NOTICE.
		p.logf("console: SET %s: %v; the TLS settings in force stay", key, err)
		old := *p.conf()
		old.Unapplied = maps.Clone(old.Unapplied)
		if old.Unapplied == nil {
			old.Unapplied = map[string]string{}
		}
		old.Unapplied[key] = value
		if _, kept, err = p.Reload(old); err == nil {
			notices = append(notices, "TLS settings could not be applied, still using old configuration")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSetFailed, err)
	}
	return append(notices, kept...), nil
}

// putField puts key's value, parsed in s, into cfg.
func putField(cfg *Config, key string, f configField, s *poolconf.Settings) error {
	if f.ptr == nil {
		f.put(cfg, s)
		return nil
	}
	v, _ := s.Text(key)
	if err := poolconf.ParseValue(f.ptr(cfg), v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// applyFields puts every field key (configFields' entries made by field)
// of s into c, for FromSettings; a value that does not parse keeps c's
// and is returned as "key = value (why)".
func applyFields(c *Config, s *poolconf.Settings) (bad []string) {
	for key, f := range configFields {
		if f.ptr == nil {
			continue
		}
		v, _ := s.Text(key)
		if err := poolconf.ParseValue(f.ptr(c), v); err != nil {
			bad = append(bad, fmt.Sprintf("%s = %s (%v)", key, v, err))
		}
	}
	slices.Sort(bad)
	return bad
}

// Kinds of the [pgbouncer] values that poolconf keeps as text
// (Settings.Other), for PgBouncer's checks of them (cf_set_int,
// cf_set_uint, cf_set_time_usec and the sslmode lookup).
const (
	kindInt    = 'i' // a whole number, as strtol reads it: 0x1f and 0777 too
	kindUint   = 'u'
	kindTime   = 't' // seconds, fractions allowed, not negative
	kindSSLMod = 'm' // disable, allow, prefer, require, verify-ca, verify-full
)

// otherKinds is the kind of each such key that is not a free string.
var otherKinds = map[string]byte{
	"application_name_add_host": kindInt, "disable_pqexec": kindInt, "listen_backlog": kindInt,
	"log_connections": kindInt, "log_disconnections": kindInt, "log_pooler_errors": kindInt,
	"log_stats": kindInt, "pkt_buf": kindInt, "sbuf_loopcnt": kindInt, "server_fast_close": kindInt,
	"server_round_robin": kindInt, "so_reuseport": kindInt, "syslog": kindInt, "tcp_defer_accept": kindInt,
	"tcp_keepalive": kindInt, "tcp_keepcnt": kindInt, "tcp_keepidle": kindInt, "tcp_keepintvl": kindInt,
	"tcp_socket_buffer": kindInt, "tcp_user_timeout": kindInt, "unix_socket_mode": kindInt, "verbose": kindInt,
	"max_packet_size": kindUint,

	"dns_max_ttl": kindTime, "dns_nxdomain_ttl": kindTime, "dns_zone_check_period": kindTime,
	"server_check_delay": kindTime,
	"server_tls_sslmode": kindSSLMod,
}

// checkKind checks a value poolconf keeps as text against its key's kind,
// as PgBouncer's SET does: "SET verbose = x" fails.
func checkKind(key, v string) error {
	var ok bool
	switch otherKinds[key] {
	case kindInt:
		_, err := strconv.ParseInt(v, 0, 64)
		ok = err == nil
	case kindUint:
		_, err := strconv.ParseUint(v, 0, 64)
		ok = err == nil
	case kindTime:
		f, err := strconv.ParseFloat(v, 64)
		ok = err == nil && f >= 0
	case kindSSLMod:
		ok = slices.Contains(poolconf.SSLModes, strings.ToLower(v))
	default:
		return nil
	}
	if !ok {
		want := map[byte]string{kindInt: "a whole number", kindUint: "a whole number, 0 or more",
			kindTime: "seconds, such as 15 or 0.5", kindSSLMod: strings.Join(poolconf.SSLModes, ", ")}[otherKinds[key]]
		return fmt.Errorf("%s: %q: want %s", key, v, want)
	}
	return nil
}

// set is the console's SET key = value.
func (x *consoleCmd) set(key, val string) consoleReply {
	if _, _, ok := fakeParam(key); ok {
		// PgBouncer's fake_set: some drivers SET these on connect.
		return consoleReply{b: commandReady(consoleNotice(nil, "SET ignored", ""), "SET")}
	}
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	notices, err := x.p.Set(key, val)
	if err != nil {
		x.p.logf("console: %v", err)
		return x.fail(ErrSetFailed.Error())
	}
	var b []byte
	for _, n := range notices {
		b = consoleNotice(b, n, "")
	}
	return consoleReply{b: commandReady(b, "SET "+key+"="+val)}
}
