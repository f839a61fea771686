package pooler

import (
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
)

// TestFieldKey: a key made applied by one field(...) line in configFields
// is parsed by SET with poolconf's rules (a bad value is SET failed), put
// in force, shown by SHOW CONFIG and read from the config file. Two keys
// the proxy does not apply stand in, bound to fields of their types for
// the test's length.
func TestFieldKey(t *testing.T) {
	saved := map[string]configField{}
	for _, k := range []string{"syslog_ident", "dns_max_ttl"} {
		saved[k] = configFields[k] // the zero value when absent
	}
	configFields["syslog_ident"] = field(func(c *Config) any { return &c.ConfFile })
	configFields["dns_max_ttl"] = field(func(c *Config) any { return &c.StatsPeriod })
	t.Cleanup(func() {
		for k, f := range saved {
			if f.get == nil {
				delete(configFields, k)
			} else {
				configFields[k] = f
			}
		}
	})
	tp := startProxy(t, nil)
	if n, err := tp.Set("syslog_ident", "it's me"); err != nil || len(n) != 0 {
		t.Fatalf("SET syslog_ident: %v %v", n, err)
	}
	if n, err := tp.Set("dns_max_ttl", "2.5"); err != nil || len(n) != 0 {
		t.Fatalf("SET dns_max_ttl: %v %v", n, err)
	}
	if c := tp.conf(); c.ConfFile != "it's me" || c.StatsPeriod != 2500*time.Millisecond {
		t.Errorf("in force: %q %v", c.ConfFile, c.StatsPeriod)
	}
	if _, err := tp.Set("dns_max_ttl", "soon"); err == nil {
		t.Error("SET dns_max_ttl = soon: no error")
	}
	show := tp.showConfig()
	for key, want := range map[string]string{"syslog_ident": "it's me", "dns_max_ttl": "2.5"} {
		for _, r := range show.rows {
			if r[0] == key && r[1] != want {
				t.Errorf("SHOW CONFIG %s = %v, want %s", key, r[1], want)
			}
		}
	}
	s, err := poolconf.Parse("x.ini", []byte("[databases]\nx = host=127.0.0.1\n[pgbouncer]\nsyslog_ident = from file\ndns_max_ttl = 7\nquery_timeout = 5\nidle_transaction_timeout = 6\nclient_idle_timeout = 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, notApplied := FromSettings(s)
	if c.ConfFile != "from file" || c.StatsPeriod != 7*time.Second {
		t.Errorf("FromSettings: syslog_ident into %q, dns_max_ttl into %v", c.ConfFile, c.StatsPeriod)
	}
	if c.QueryTimeout != 5*time.Second || c.IdleTransactionTimeout != 6*time.Second || c.ClientIdleTimeout != 8*time.Second {
		t.Errorf("FromSettings: the guards' timeouts %v %v %v", c.QueryTimeout, c.IdleTransactionTimeout, c.ClientIdleTimeout)
	}
	for _, n := range notApplied {
		if strings.Contains(n, "syslog_ident") || strings.Contains(n, "dns_max_ttl") || strings.Contains(n, "timeout") {
			t.Errorf("FromSettings says %q is not applied", n)
		}
	}
}
