//go:build linux

package pooler

import (
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
)

// TestTLSUpstream runs the proxy in front of a PostgreSQL that speaks TLS,
// with sslmode=require: the loop reaches those server connections through
// the socket-pair bridge. Queries, a 1 MB reply and several clients in
// transaction mode (with prepared statements tracked) go through, and the
// server sees TLS.
func TestTLSUpstream(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	f := writeTLSFiles(t) // a server certificate for 127.0.0.1, the key owned by postgres
	cert, key := f.cert, f.key
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 20, ExtraConf: map[string]string{
		"ssl": "on", "ssl_cert_file": cert, "ssl_key_file": key}})
	if err != nil {
		t.Fatalf("start a TLS cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	upstream := strings.Replace(c.UserDSN(), "sslmode=disable", "sslmode=require", 1)
	tp := startProxy(t, func(cfg *Config) {
		cfg.Upstream = upstream
		cfg.DefaultPoolSize = 2
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
