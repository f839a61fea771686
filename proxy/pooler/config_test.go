package pooler

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

func TestDefaultConfigIsPgBouncers(t *testing.T) {
	c := DefaultConfig()
	if c.PoolMode != poolmode.Session || c.DefaultPoolSize != 20 || c.MaxClientConn != 100 || c.MaxDBConnections != 0 ||
		c.QueryWaitTimeout != 120*time.Second || c.ServerConnectTimeout != 15*time.Second ||
		c.ServerIdleTimeout != 600*time.Second || c.ServerLifetime != 3600*time.Second ||
		c.ServerResetQuery != "DISCARD ALL" || c.AuthType != AuthTrust || c.Listen != "127.0.0.1:6432" ||
		c.MaxPreparedStatements != 0 { // PgBouncer 1.18's behaviour; 1.24+ defaults to 200
		t.Errorf("DefaultConfig() = %+v, want PgBouncer's defaults", c)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(authFile, []byte(`"poolsim" "poolsim"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := DefaultConfig()
	ok.Upstream = "postgres://u:p@127.0.0.1:5432/db"
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string // a word the error must contain; "" = valid
	}{
		{"defaults with upstream", func(*Config) {}, ""},
		{"no upstream", func(c *Config) { c.Upstream = "" }, "upstream"},
		{"direct mode", func(c *Config) { c.PoolMode = poolmode.Direct }, "pool_mode"},
		{"pool size 0", func(c *Config) { c.DefaultPoolSize = 0 }, "default_pool_size"},
		{"max_client_conn 0", func(c *Config) { c.MaxClientConn = 0 }, "max_client_conn"},
		{"negative max_db_connections", func(c *Config) { c.MaxDBConnections = -1 }, "max_db_connections"},
		{"negative max_prepared_statements", func(c *Config) { c.MaxPreparedStatements = -1 }, "max_prepared_statements"},
		{"max_prepared_statements 200", func(c *Config) { c.MaxPreparedStatements = 200 }, ""},
		{"negative query_wait_timeout", func(c *Config) { c.QueryWaitTimeout = -time.Second }, "query_wait_timeout"},
		{"zero server_connect_timeout", func(c *Config) { c.ServerConnectTimeout = 0 }, "server_connect_timeout"},
		{"bad auth_type", func(c *Config) { c.AuthType = "md5" }, "auth_type"},
		{"scram without auth_file", func(c *Config) { c.AuthType = AuthSCRAM }, "auth_file"},
		{"trust on all interfaces", func(c *Config) { c.Listen = "0.0.0.0:6432" }, "loopback"},
		{"trust on a LAN address", func(c *Config) { c.Listen = "192.168.1.5:6432" }, "loopback"},
		{"trust on ::1", func(c *Config) { c.Listen = "[::1]:6432" }, ""},
		{"scram on all interfaces", func(c *Config) { c.Listen = "0.0.0.0:6432"; c.AuthType = AuthSCRAM; c.AuthFile = authFile }, ""},
		{"missing auth_file", func(c *Config) { c.AuthType = AuthSCRAM; c.AuthFile = filepath.Join(dir, "none") }, "auth_file"},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want an error naming %s", tc.name, err, tc.wantErr)
		}
	}
}

func TestLoadAuthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "userlist.txt")
	content := `;; comment
"plain" "secret"
"quo""ted" "pa""ss"
"scram" "SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0$9V3I8qS9gB8jZC4wfo4q3Dw0xJxKdrM2uDdI3cM4v2A=:6QHNb6CXT6XMDD2nbOqu7Q9XQb3qNWPW2r4aQvvXGeg="
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := loadAuthFile(path)
	if err != nil || len(bad) != 0 {
		t.Fatal(err, bad)
	}
	want := map[string]string{"plain": "secret", `quo"ted`: `pa"ss`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("loadAuthFile: %q = %q, want %q", k, got[k], v)
		}
	}
	if !strings.HasPrefix(got["scram"], "SCRAM-SHA-256$") {
		t.Errorf("loadAuthFile: scram secret = %q", got["scram"])
	}
}

// TestFromSettingsAdmission: the pgbouncer.ini settings of issue 15 reach
// the Config: admin_users, stats_users, client_login_timeout,
// autodb_idle_timeout, pkt_buf and max_packet_size; a pkt_buf that is not
// a number is reported, not dropped silently.
func TestFromSettingsAdmission(t *testing.T) {
	s := poolconf.Defaults()
	s.AdminUsers, s.StatsUsers = []string{"alice"}, []string{"bob", "carol"}
	s.ClientLoginTimeout, s.AutodbIdleTimeout = 5*time.Second, 7*time.Second
	s.Other = map[string]string{"pkt_buf": "8192", "max_packet_size": "100000"}
	c, notApplied := FromSettings(s)
	if !slices.Equal(c.AdminUsers, []string{"alice"}) || !slices.Equal(c.StatsUsers, []string{"bob", "carol"}) ||
		c.ClientLoginTimeout != 5*time.Second || c.AutodbIdleTimeout != 7*time.Second || c.PktBuf != 8192 || c.MaxPacketSize != 100000 {
		t.Errorf("FromSettings: admin %v stats %v login %v autodb %v pkt_buf %d max_packet_size %d", c.AdminUsers, c.StatsUsers,
			c.ClientLoginTimeout, c.AutodbIdleTimeout, c.PktBuf, c.MaxPacketSize)
	}
	for _, n := range notApplied {
		if strings.Contains(n, "pkt_buf") || strings.Contains(n, "admin_users") || strings.Contains(n, "max_packet_size") {
			t.Errorf("reported as not applied: %s", n)
		}
	}
	s.Other = map[string]string{"pkt_buf": "big"}
	if _, notApplied := FromSettings(s); !slices.ContainsFunc(notApplied, func(n string) bool { return strings.HasPrefix(n, "pkt_buf = big") }) {
		t.Errorf("pkt_buf = big not reported: %v", notApplied)
	}
}

// TestFromSettingsClientTLS: client_tls_sslmode and its files reach the
// Config from pgbouncer.ini; the TLS keys the proxy does not apply
// (client_tls_ciphers, ...) are reported, not dropped silently.
func TestFromSettingsClientTLS(t *testing.T) {
	s, err := poolconf.Parse("pgbouncer.ini", []byte("[databases]\n* = host=127.0.0.1\n[pgbouncer]\n"+
		"client_tls_sslmode = verify-ca\nclient_tls_cert_file = /c.pem\nclient_tls_key_file = /k.pem\n"+
		"client_tls_ca_file = /ca.pem\nclient_tls_ciphers = secure\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, notApplied := FromSettings(s)
	if c.ClientTLSSSLMode != SSLVerifyCA || c.ClientTLSCertFile != "/c.pem" || c.ClientTLSKeyFile != "/k.pem" || c.ClientTLSCAFile != "/ca.pem" {
		t.Errorf("FromSettings: sslmode %q cert %q key %q ca %q", c.ClientTLSSSLMode, c.ClientTLSCertFile, c.ClientTLSKeyFile, c.ClientTLSCAFile)
	}
	joined := strings.Join(notApplied, "\n")
	if strings.Contains(joined, "client_tls_sslmode") || !strings.Contains(joined, "client_tls_ciphers = secure") {
		t.Errorf("not applied: %q; want client_tls_ciphers and not client_tls_sslmode", notApplied)
	}
}
