//go:build linux

package pooler

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/proxy/pgcluster"
)

// TestTLSUpstream runs the proxy in front of a PostgreSQL that speaks TLS,
// with sslmode=require: the loop reaches those server connections through
// the socket-pair bridge. Queries, a 1 MB reply and several clients in
// transaction mode (with prepared statements tracked) go through, and the
// server sees TLS.
func TestTLSUpstream(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	cert, key := writeSelfSigned(t)
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 20, ExtraConf: map[string]string{
		"ssl": "on", "ssl_cert_file": cert, "ssl_key_file": key}})
	if err != nil {
		t.Fatalf("start a TLS cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	upstream := strings.Replace(c.UserDSN(), "sslmode=disable", "sslmode=require", 1)
	tp := startProxy(t, func(cfg *Config) {
		cfg.Upstream = upstream
		cfg.PoolSize = 2
		cfg.MaxPreparedStatements = 10 // pgx's statement cache works across servers
	})
	conn := connect(ctx, t, tp.dsn)
	var ssl bool
	if err := conn.QueryRow(ctx, "select ssl from pg_stat_ssl where pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Fatalf("server connection TLS = %v, %v; want true", ssl, err)
	}
	var s string
	if err := conn.QueryRow(ctx, "select repeat('t', 1000000)").Scan(&s); err != nil || len(s) != 1000000 {
		t.Fatalf("1 MB reply: %d bytes, %v", len(s), err)
	}
	runAdders(ctx, t, tp.dsn, 5, 20)
}

// writeSelfSigned writes a self-signed certificate and key for 127.0.0.1
// where the postgres account can read them (it owns them when running as
// root, as PostgreSQL requires of a key file).
func writeSelfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "poolsim-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root without a postgres account: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, f := range []string{certFile, keyFile} {
			if err := os.Chown(f, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return certFile, keyFile
}
