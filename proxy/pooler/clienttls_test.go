//go:build linux

package pooler

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"github.com/poolsim/poolsim/models/poolmode"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
)

// tlsFiles are a CA, a server certificate for 127.0.0.1 and a client
// certificate for user poolsim, both signed by the CA, as PEM files the
// postgres account (PgBouncer's) can read.
type tlsFiles struct {
	ca, cert, key, clientCert, clientKey string
}

func writeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir, err := os.MkdirTemp("", "poolsim-ctls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "EC PRIVATE KEY", der, 0o600)
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "poolsim test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	sign := func(serial int64, cn string, usage x509.ExtKeyUsage, k *ecdsa.PrivateKey) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	sk, ck := newKey(), newKey()
	f := tlsFiles{
		ca:         write("ca.crt", "CERTIFICATE", caDER, 0o644),
		cert:       write("server.crt", "CERTIFICATE", sign(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, sk), 0o644),
		key:        writeKey("server.key", sk),
		clientCert: write("client.crt", "CERTIFICATE", sign(3, "poolsim", x509.ExtKeyUsageClientAuth, ck), 0o644),
		clientKey:  writeKey("client.key", ck),
	}
	if os.Geteuid() == 0 { // PgBouncer runs as postgres; libpq wants the client key private
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root without a postgres account: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{f.cert, f.key} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// tlsTarget is a pooler listening with client TLS: a PgBouncer or the
// proxy, reached at addr.
type tlsTarget struct {
	name, addr string
}

// psqlTLS runs psql through target with the given libpq sslmode (and
// extra connection keywords) and returns its output and error.
func psqlTLS(ctx context.Context, t *testing.T, tg tlsTarget, db, sslmode, extra, query string) (string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(tg.addr)
	conninfo := fmt.Sprintf("host=%s port=%s dbname=%s user=poolsim password=poolsim sslmode=%s connect_timeout=10 %s",
		host, port, db, sslmode, extra)
	cmd := exec.CommandContext(ctx, needTool(t, "psql"), "-X", "-A", "-t", "-c", query, conninfo)
	cmd.Env = append(os.Environ(), "PGSSLMODE=", "PGSSLCERT=/nonexistent", "PGSSLKEY=/nonexistent")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// startTLSTargets starts a PgBouncer and a proxy with the same client TLS
// settings.
func startTLSTargets(ctx context.Context, t *testing.T, f tlsFiles, mode string) []tlsTarget {
	t.Helper()
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20),
		AdminUsers: []string{"poolsim"}, Extra: map[string]string{
			"client_tls_sslmode": mode, "client_tls_cert_file": f.cert, "client_tls_key_file": f.key,
			"client_tls_ca_file": f.ca}})
	tp := startProxy(t, func(c *Config) {
		c.ClientTLSSSLMode, c.ClientTLSCertFile, c.ClientTLSKeyFile, c.ClientTLSCAFile = mode, f.cert, f.key, f.ca
	})
	return []tlsTarget{
		{name: "pgbouncer", addr: net.JoinHostPort(b.Host(), strconv.Itoa(b.Port()))},
		{name: "proxy", addr: tp.Addr().String()},
	}
}

// TestClientTLS: `psql sslmode=require` through PgBouncer 1.18 and the
// proxy, each with client_tls_sslmode require, then prefer, disable and
// verify-ca and a certificate the test generates: both give the same
// outcome for every client sslmode (refused with the same text where one
// refuses), and SHOW CLIENTS' tls column names the TLS version on both.
func TestClientTLS(t *testing.T) {
	needTool(t, "psql")
	f := writeTLSFiles(t)
	ctx := testCtx(t, 120*time.Second)
	verifyCA := "sslrootcert=" + f.ca
	clientCert := fmt.Sprintf("sslcert=%s sslkey=%s", f.clientCert, f.clientKey)
	for _, tc := range []struct {
		mode   string
		client []struct{ sslmode, extra, want string }
	}{
		{SSLRequire, []struct{ sslmode, extra, want string }{
			{"require", "", "t"},
			{"verify-full", verifyCA, "t"},
			{"disable", "", "FATAL:  SSL required"},
			{"allow", "", "t"}, // libpq tries plain first, is refused, retries with TLS
		}},
		{SSLPrefer, []struct{ sslmode, extra, want string }{
			{"require", "", "t"},
			{"disable", "", "f"},
		}},
		{SSLDisable, []struct{ sslmode, extra, want string }{
			{"require", "", "server does not support SSL, but SSL was required"},
			{"prefer", "", "f"},
		}},
		{SSLVerifyCA, []struct{ sslmode, extra, want string }{
			{"require", clientCert, "t"},
			{"require", "", "connection to server"}, // the handshake fails without a client certificate
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			for _, tg := range startTLSTargets(ctx, t, f, tc.mode) {
				for _, cl := range tc.client {
					// pg_stat_ssl is about the server connection; whether the
					// client's own connection is TLS is what the console says.
					out, err := psqlTLS(ctx, t, tg, "pgbouncer", cl.sslmode, cl.extra, "SHOW CLIENTS")
					got := out
					if err == nil {
						got = "f"
						if strings.Contains(out, "|TLSv1.") {
							got = "t"
						}
					}
					if !strings.Contains(got, cl.want) {
						t.Errorf("%s, client_tls_sslmode=%s, psql sslmode=%s %s: %q (%v), want %q",
							tg.name, tc.mode, cl.sslmode, cl.extra, out, err, cl.want)
					}
				}
				// A pooled query over TLS.
				sslmode, extra := "require", ""
				if tc.mode == SSLVerifyCA {
					extra = clientCert
				}
				if tc.mode == SSLDisable {
					sslmode = "disable"
				}
				if out, err := psqlTLS(ctx, t, tg, "poolsim", sslmode, extra, "select 40 + 2"); err != nil || out != "42" {
					t.Errorf("%s, client_tls_sslmode=%s: psql sslmode=%s select 40 + 2 = %q, %v", tg.name, tc.mode, sslmode, out, err)
				}
			}
		})
	}
}

// TestClientTLSConfig: the settings PgBouncer refuses at start are refused
// with its reasons; a bad file is named.
func TestClientTLSConfig(t *testing.T) {
	f := writeTLSFiles(t)
	for _, tc := range []struct {
		mode, cert, key, ca string
		want                string
	}{
		{"sometimes", "", "", "", `client_tls_sslmode: "sometimes": want one of`},
		{SSLRequire, "", f.key, "", "client_tls_key_file and client_tls_cert_file must be set"},
		{SSLVerifyFull, f.cert, f.key, "", "verify-full requires client_tls_ca_file"},
		{SSLRequire, f.cert, f.cert, "", "client_tls_cert_file/client_tls_key_file"},
		{SSLVerifyCA, f.cert, f.key, f.key, "client_tls_ca_file"},
	} {
		cfg := DefaultConfig()
		cfg.Upstream = "postgres://u@127.0.0.1:5432/db"
		cfg.ClientTLSSSLMode, cfg.ClientTLSCertFile, cfg.ClientTLSKeyFile, cfg.ClientTLSCAFile = tc.mode, tc.cert, tc.key, tc.ca
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mode %s cert %q key %q ca %q: %v, want %q", tc.mode, tc.cert, tc.key, tc.ca, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Upstream = "postgres://u@127.0.0.1:5432/db"
	cfg.ClientTLSSSLMode, cfg.ClientTLSCertFile, cfg.ClientTLSKeyFile = SSLRequire, f.cert, f.key
	if _, err := New(cfg); err != nil {
		t.Errorf("require with a certificate and key: %v", err)
	}
}
