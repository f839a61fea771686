package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"runtime"
	"time"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/proxy/pooler"
)

func init() {
	register(command{name: "proxy", short: "run the PgBouncer-style pooling proxy", run: runProxy})
}

const proxyUsage = `Usage:
  poolsim proxy --upstream URL [--listen ADDR] [--mode session|transaction|statement] [settings]

Runs a PostgreSQL pooling proxy that behaves like PgBouncer: clients log in to
the proxy, which links them to a pooled server connection only when a
statement needs one and releases it by the pool mode's rule. Settings are
PgBouncer's, in kebab-case, with PgBouncer's defaults. The console database
"pgbouncer" answers SHOW POOLS, STATS, CLIENTS, SERVERS, DATABASES, LISTS, CONFIG.
SIGINT or SIGTERM stop accepting clients, let transactions finish for up to
--shutdown-timeout, then close everything.

The upstream URL supplies host, port, password and TLS settings; database and
user come from each client's login, and each (database, user) is one pool.

Prepared statements: with --max-prepared-statements N > 0, transaction and
statement pooling track protocol-level named prepared statements as PgBouncer
1.21+ does: each client's names map to proxy-wide statements (PGBOUNCER_<id>),
a server lacking one gets a Parse first, and each server keeps at most N (least
recently used closed). pgbench -M prepared and drivers' statement caches (pgx,
JDBC) then work. The default is 0, not PgBouncer 1.24's 200: it matches the
PgBouncer 1.18 poolsim validates against, where named statements pass through
and fail on another server ("prepared statement ... does not exist"). SHOW
STATS counts total_client_parse_count, total_server_parse_count and
total_bind_count only while statements are tracked. Session mode never tracks.

Examples:
  poolsim proxy --upstream postgres://app:secret@127.0.0.1:5432/app --mode transaction
  poolsim proxy --upstream 'host=/var/run/postgresql' --pool-size 10 --max-client-conn 500
  poolsim proxy --upstream postgres://app@127.0.0.1:5432/app --mode transaction --max-prepared-statements 200
  poolsim proxy --listen 0.0.0.0:6432 --auth-type scram-sha-256 --auth-file userlist.txt \
      --upstream postgres://127.0.0.1:5432/app
  psql 'postgres://app@127.0.0.1:6432/pgbouncer' -c 'SHOW POOLS'

Flags:
%s
Exit status: 0 after a clean shutdown, 1 failure, 2 usage error (bad flags or settings).
`

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := pooler.DefaultConfig()
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, proxyUsage, fs.FlagUsages()) }
	cfg := def
	mode := fs.String("mode", def.Mode.String(), "pool_mode: session, transaction or statement")
	fs.StringVar(&cfg.Listen, "listen", def.Listen, "listen address; must be loopback with --auth-type trust")
	fs.StringVar(&cfg.Upstream, "upstream", "", "PostgreSQL server URL or keyword/value string (required)")
	fs.IntVar(&cfg.PoolSize, "pool-size", def.PoolSize, "default_pool_size: server connections per (database, user)")
	fs.IntVar(&cfg.MaxClientConn, "max-client-conn", def.MaxClientConn, "max_client_conn: client connections in all")
	fs.IntVar(&cfg.MaxDBConnections, "max-db-connections", def.MaxDBConnections, "max_db_connections: server connections per database, 0 = unlimited")
	fs.DurationVar(&cfg.QueryWaitTimeout, "query-wait-timeout", def.QueryWaitTimeout, "query_wait_timeout: longest wait for a server, 0 = forever")
	fs.DurationVar(&cfg.ServerConnectTimeout, "server-connect-timeout", def.ServerConnectTimeout, "server_connect_timeout: limit on one server login")
	fs.DurationVar(&cfg.ServerIdleTimeout, "server-idle-timeout", def.ServerIdleTimeout, "server_idle_timeout: close servers idle this long, 0 = never")
	fs.DurationVar(&cfg.ServerLifetime, "server-lifetime", def.ServerLifetime, "server_lifetime: close servers this old at release, 0 = never")
	fs.DurationVar(&cfg.ServerLoginRetry, "server-login-retry", def.ServerLoginRetry, "server_login_retry: after a failed server login, wait this long before the next; meanwhile clients of a pool with no server are refused")
	fs.IntVar(&cfg.MaxPreparedStatements, "max-prepared-statements", def.MaxPreparedStatements,
		"max_prepared_statements: named prepared statements kept per server connection in transaction/statement mode; 0 = off, as in PgBouncer 1.18 (1.24+ defaults to 200)")
	fs.StringVar(&cfg.ServerResetQuery, "server-reset-query", def.ServerResetQuery, "server_reset_query: run in session mode before a server is reused")
	fs.StringVar(&cfg.AuthType, "auth-type", def.AuthType, "auth_type: trust or scram-sha-256")
	fs.StringVar(&cfg.AuthFile, "auth-file", "", "auth_file: PgBouncer userlist.txt (\"user\" \"password or SCRAM secret\")")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", def.ShutdownTimeout, "how long transactions may finish after SIGINT/SIGTERM")
	threads := fs.Int("threads", 0, "threads for Go's scheduler (GOMAXPROCS): 0 = one per core; the data plane is always one event loop, this bounds logins, cancels and the console")
	verbose := fs.BoolP("verbose", "v", false, "log every server close and its reason")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	m, err := poolmode.Parse(*mode)
	if err != nil || !m.Pooled() {
		return usagef("--mode %q: want session, transaction or statement", *mode)
	}
	cfg.Mode = m
	if err := cfg.Validate(); err != nil {
		return usage(err)
	}
	if *threads < 0 {
		return usagef("--threads %d: want 0 (one per core) or more", *threads)
	}
	if *threads > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*threads))
	}
	logger := log.New(stderr, "poolsim proxy: ", log.LstdFlags)
	cfg.Logf = logger.Printf
	cfg.Verbose = *verbose
	cfg.WaitLog = -1 // the per-assignment log is for the validator; nobody reads it here
	p, err := pooler.New(cfg)
	if err != nil {
		return usage(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	prepared := ""
	if cfg.MaxPreparedStatements > 0 && cfg.Mode != poolmode.Session {
		prepared = fmt.Sprintf(", max %d prepared statements per server", cfg.MaxPreparedStatements)
	}
	fmt.Fprintf(stdout, "poolsim proxy: listening on %s, %s pooling, pool size %d%s, upstream %s\n",
		ln.Addr(), cfg.Mode, cfg.PoolSize, prepared, redact(cfg.Upstream))
	start := time.Now()
	if err := p.Serve(ctx, ln); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "poolsim proxy: stopped after %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// redact hides the password of a URL for printing.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
