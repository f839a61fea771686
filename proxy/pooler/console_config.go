package pooler

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"reflect"
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
	"max_packet_size": otherInt("max_packet_size", func(c *Config) *int { return &c.MaxPacketSize }),
	"auth_file": {
		get: func(c *Config) any { return orNull(c.AuthFile) },
		put: func(c *Config, s *poolconf.Settings) { c.AuthFile = s.AuthFile },
	},
	"auth_type": {
		get: func(c *Config) any { return c.AuthType },
		put: func(c *Config, s *poolconf.Settings) { c.AuthType = s.AuthType },
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
	for _, key := range appliedPooling {
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

// configKeys is SHOW CONFIG's rows: PgBouncer 1.18's keys and
// max_prepared_statements, in name order.
func configKeys() []poolconf.Key {
	keys := append([]poolconf.Key(nil), poolconf.Keys18...)
	keys = append(keys, poolconf.MaxPreparedStatementsKey)
	sortBy(keys, func(k poolconf.Key) string { return k.Name })
	return keys
}

// configValue is a key's value as SHOW CONFIG shows it.
func configValue(c *Config, k poolconf.Key) any {
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
// console's SET key = value does: a key the proxy applies takes the value
// as a reload would (Reload); a key it does not apply is only recorded (SHOW
// CONFIG shows it) and a key that cannot change while running (listen_addr,
// listen_port, pkt_buf, ...) is not changed. notices say so. A bad key or
// value is ErrSetFailed, with the reason wrapped.
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
	cfg := *p.conf()
	f, applied := configFields[key]
	switch {
	case !k.Changeable:
		return []string{fmt.Sprintf("%s cannot change while the proxy runs; it keeps %v", key, configValue(&cfg, k))}, nil
	case !applied || f.put == nil:
		cfg.Unapplied = maps.Clone(cfg.Unapplied)
		if cfg.Unapplied == nil {
			cfg.Unapplied = map[string]string{}
		}
		cfg.Unapplied[key] = value
		notices = append(notices, fmt.Sprintf("%s has no effect in poolsim proxy", key))
	default:
		f.put(&cfg, &s)
	}
	if _, kept, err := p.Reload(cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSetFailed, err)
	} else {
		notices = append(notices, kept...)
	}
	return notices, nil
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
