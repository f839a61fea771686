//go:build linux

package pooler

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/models/poolmode"
)

// writeOtherCA writes a CA certificate that signed nothing the test
// uses: server_tls_ca_file pointing at it must fail verification.
func writeOtherCA(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "poolsim other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "poolsim-otherca-") // readable by PgBouncer's postgres account
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "other-ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServerTLS: server_tls_sslmode through PgBouncer 1.18 and the proxy,
// in front of a PostgreSQL with ssl=on and a certificate for 127.0.0.1
// signed by a test CA, and of the shared PostgreSQL without TLS. On both:
// verify-full with the right CA encrypts (pg_stat_ssl, SHOW SERVERS' tls
// column); a wrong host name, a server without TLS and, after SET
// server_tls_ca_file to another CA, the right server all fail, the last
// logged as "certificate verify failed"; SET server_tls_sslmode = disable
// reaches the plain server, and require encrypts without checking but
// refuses the plain server.
func TestServerTLS(t *testing.T) {
	ctx := testCtx(t, 240*time.Second)
	f := writeTLSFiles(t)
	other := writeOtherCA(t)
	tc, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 30, ExtraConf: map[string]string{
		"ssl": "on", "ssl_cert_file": f.cert, "ssl_key_file": f.key}})
	if err != nil {
		t.Fatalf("start a TLS cluster: %v", err)
	}
	t.Cleanup(func() { _ = tc.Stop() })
	dbs := []string{
		fmt.Sprintf("tls = host=127.0.0.1 port=%d dbname=poolsim", tc.Port()),
		fmt.Sprintf("tlsname = host=localhost port=%d dbname=poolsim", tc.Port()),
		fmt.Sprintf("plain = host=127.0.0.1 port=%d dbname=poolsim", cluster.Port()),
	}
	const sslQuery = "select ssl::text from pg_stat_ssl where pid = pg_backend_pid()"
	// A refused connection is held waiting (as PgBouncer holds it): no
	// connection within a second is the refusal; a wrong acceptance
	// connects in milliseconds.
	short := time.Second
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 4, map[string]string{
		"server_tls_sslmode": "verify-full", "server_tls_ca_file": f.ca, "server_login_retry": "1"}) {
		want := func(db, what, wantVal string) {
			t.Helper()
			got, err := tg.queryOne(ctx, db, sslQuery, 15*time.Second)
			if err != nil || got != wantVal {
				t.Fatalf("%s: %s: ssl = %q, %v; want %q", tg.name, what, got, err, wantVal)
			}
		}
		fails := func(db, what string) {
			t.Helper()
			if got, err := tg.queryOne(ctx, db, sslQuery, short); err == nil {
				t.Errorf("%s: %s: ssl = %q; want no connection", tg.name, what, got)
			}
		}
		want("tls", "verify-full with the right CA", "true")
		rows := tg.servers(ctx, t, "tls")
		if len(rows) == 0 || !strings.HasPrefix(rows[0]["tls"], "TLSv1.") {
			t.Errorf("%s: SHOW SERVERS for tls: %v; want a tls column naming TLSv1.x", tg.name, rows)
		}
		fails("tlsname", "verify-full with a host name the certificate does not name")
		fails("plain", "verify-full to a server without TLS")

		tg.exec(ctx, t, "SET server_tls_ca_file = '"+other+"'")
		fails("tls", "verify-full with another CA")
		tg.waitLog(ctx, t, "certificate verify failed", 1)

		tg.exec(ctx, t, "SET server_tls_sslmode = disable")
		want("plain", "disable to the plain server", "false")

		tg.exec(ctx, t, "SET server_tls_sslmode = require")
		want("tls", "require with another CA (not checked)", "true")
		fails("plain", "require to a server without TLS")
	}
}

// TestServerTLSConfig: bad server TLS settings are refused with the key
// named; a live SET of a bad one fails and leaves the old one in force.
func TestServerTLSConfig(t *testing.T) {
	f := writeTLSFiles(t)
	for _, tc := range []struct {
		edit func(c *Config)
		want string
	}{
		{func(c *Config) { c.ServerTLSSSLMode = "sometimes" }, `server_tls_sslmode: "sometimes": want one of`},
		{func(c *Config) { c.ServerTLSSSLMode, c.ServerTLSCAFile = SSLVerifyFull, f.key }, "server_tls_ca_file"},
		{func(c *Config) { c.ServerTLSSSLMode, c.ServerTLSCAFile = SSLVerifyFull, "/nonexistent/ca.crt" }, "server_tls_ca_file"},
		{func(c *Config) {
			c.ServerTLSSSLMode, c.ServerTLSCertFile, c.ServerTLSKeyFile = SSLRequire, f.cert, f.cert
		}, "server_tls_cert_file/server_tls_key_file"},
		{func(c *Config) { c.ServerTLSSSLMode, c.ServerTLSProtocols = SSLRequire, "tlsv2.0" }, "server_tls_protocols"},
		{func(c *Config) { c.ServerTLSSSLMode, c.ServerTLSProtocols = SSLRequire, "secure,!tlsv1.2,!tlsv1.3" }, "leaves no TLS version"},
		{func(c *Config) { c.ServerTLSSSLMode, c.ServerTLSCiphers = SSLRequire, "NOT-A-CIPHER" }, "server_tls_ciphers"},
	} {
		cfg := DefaultConfig()
		cfg.Upstream = "postgres://u@127.0.0.1:5432/db"
		tc.edit(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", cfg.ServerTLSSSLMode, err, tc.want)
		}
	}
	tp := startProxy(t, func(c *Config) { c.ServerTLSSSLMode = SSLPrefer })
	// As PgBouncer: a TLS setting that leaves TLS unusable is recorded,
	// with a NOTICE, and the TLS in force stays until a later SET makes the
	// settings usable again.
	notices, err := tp.Set("server_tls_ca_file", "/nonexistent/ca.crt")
	if err != nil || !strings.Contains(strings.Join(notices, "\n"), "TLS settings could not be applied") {
		t.Errorf("SET server_tls_ca_file to a missing file: %v, notices %q; want PgBouncer's NOTICE", err, notices)
	}
	if got := configValue(tp.conf(), mustKey(t, "server_tls_ca_file")); got != "/nonexistent/ca.crt" {
		t.Errorf("SHOW CONFIG server_tls_ca_file = %v, want the value set", got)
	}
	if _, err := tp.Set("server_tls_protocols", "tlsv1.3"); err != nil {
		t.Errorf("SET server_tls_protocols = tlsv1.3: %v", err)
	}
	if got := configValue(tp.conf(), mustKey(t, "server_tls_protocols")); got != "tlsv1.3" {
		t.Errorf("SHOW CONFIG server_tls_protocols = %v, want tlsv1.3", got)
	}
}

// TestServerTLSUpstream: server_tls_sslmode applies to the Upstream
// connection string too, unless the string names its own sslmode, which
// wins (the proxy only: PgBouncer has no Upstream).
func TestServerTLSUpstream(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	f := writeTLSFiles(t)
	other := writeOtherCA(t)
	tc, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 20, ExtraConf: map[string]string{
		"ssl": "on", "ssl_cert_file": f.cert, "ssl_key_file": f.key}})
	if err != nil {
		t.Fatalf("start a TLS cluster: %v", err)
	}
	t.Cleanup(func() { _ = tc.Stop() })
	const sslQuery = "select ssl::text from pg_stat_ssl where pid = pg_backend_pid()"
	for _, c := range []struct {
		what, upstream, mode, ca, want string
	}{
		{"no sslmode in the URL, verify-full with the right CA", strings.Replace(tc.UserDSN(), "sslmode=disable", "", 1), SSLVerifyFull, f.ca, "true"},
		{"no sslmode in the URL, verify-full with another CA", strings.Replace(tc.UserDSN(), "sslmode=disable", "", 1), SSLVerifyFull, other, ""},
		{"sslmode=disable in the URL wins over require", tc.UserDSN(), SSLRequire, "", "false"},
	} {
		tp := startProxy(t, func(cfg *Config) {
			cfg.Upstream = c.upstream
			cfg.ServerTLSSSLMode, cfg.ServerTLSCAFile = c.mode, c.ca
		})
		tg := srvTarget{name: "proxy", dsn: func(string) string { return tp.dsn }}
		got, err := tg.queryOne(ctx, "poolsim", sslQuery, 3*time.Second)
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: ssl = %q; want no connection", c.what, got)
			}
		} else if err != nil || got != c.want {
			t.Errorf("%s: ssl = %q, %v; want %q", c.what, got, err, c.want)
		}
	}
}
