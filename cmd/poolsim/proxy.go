package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/proxy/metrics"
	"github.com/poolsim/poolsim/proxy/pooler"
)

func init() {
	register(command{name: "proxy", short: "run the PgBouncer-style pooling proxy", run: runProxy})
}

const proxyUsage = `Usage:
  poolsim proxy --upstream URL [--listen ADDR] [--mode session|transaction|statement] [settings]
  poolsim proxy --config pgbouncer.ini [settings]
  poolsim proxy [-d] [-R] [-q] [-v] [-u USER] [-V] [-h] pgbouncer.ini

The last form is PgBouncer's own command line, so a wrapper script named
pgbouncer (exec poolsim proxy "$@") stands where pgbouncer stood: -d runs in
the background (needs logfile and pidfile), -q writes nothing to stderr, -u
switches to an OS user once the sockets are bound (started as root), -V
prints the version as SHOW VERSION has it; -R (online restart) is not
implemented yet. The proxy listens where pgbouncer.ini says: each address of
listen_addr ("*" for all, empty for none) and the Unix socket
unix_socket_dir/.s.PGSQL.<listen_port> (default /tmp), where user pgbouncer
reaches the console without a password from the proxy's own OS user.
logfile receives PgBouncer's log lines (reopened on SIGHUP, for
logrotate); pidfile holds the pid while the proxy runs.

Runs a PostgreSQL pooling proxy that behaves like PgBouncer: clients log in to
the proxy, which links them to a pooled server connection only when a
statement needs one and releases it by the pool mode's rule. Settings are
PgBouncer's, in kebab-case, with PgBouncer's defaults. The console database
"pgbouncer" is PgBouncer 1.18's: every SHOW view with 1.18's columns, and
PAUSE, RESUME, SUSPEND, RELOAD (reads --config again), RECONNECT, KILL,
DISABLE, ENABLE, WAIT_CLOSE, SET and SHUTDOWN, for the users of --admin-users
and --stats-users (comma-separated, as in pgbouncer.ini); anyone else gets
PgBouncer's FATAL "not allowed", and a stats user gets "admin access needed"
for admin commands. Both empty (the default) close the console, as PgBouncer
does over TCP.

--config reads a pgbouncer.ini as PgBouncer 1.18 does: [pgbouncer] settings
(with PgBouncer's defaults, so auth_type is md5 unless the file says
otherwise), [databases] (host, port, dbname, user, password, pool_size,
pool_mode, max_db_connections, client_encoding, datestyle, timezone; "*" for
any other name), [users] (pool_mode, max_user_connections) and %%include. Each
database and user is one pool. Flags given on the command line override the
file; --upstream serves every database name the file does not list. Settings
the proxy does not apply are logged at start, never dropped silently.

Startup parameters: whatever a client sets at login (options=-c name=value,
PGOPTIONS, asyncpg server_settings, pgjdbc currentSchema) is applied to its
session on whichever server it is linked to; --ignore-startup-parameters drops
the names it lists. A parameter that cannot be applied is refused with a FATAL.

Client TLS, as PgBouncer 1.18: --client-tls-sslmode (client_tls_sslmode)
disable declines a client's SSLRequest; allow and prefer accept it; require
also refuses a login over plain TCP with FATAL "SSL required"; verify-ca and
verify-full also want a client certificate signed by --client-tls-ca-file.
Every mode but disable needs --client-tls-cert-file and --client-tls-key-file.
SHOW CLIENTS' tls column names the TLS version and cipher.

Metrics: --metrics-listen ADDR serves Prometheus' text format at
http://ADDR/metrics: the console's SHOW POOLS, DATABASES and LISTS as
gauges, per-pool counters (transactions, requests, bytes, seconds in
transactions, requests and waits) where SHOW STATS averages per database,
and per-pool histograms of client wait, transaction and request time. The
endpoint has no authentication; pgbouncer_exporter also works against the
console (--stats-users).

Signals, as PgBouncer 1.18: SIGHUP reloads the settings (the config file and
auth file are read again; what can change live changes, the rest is logged);
SIGINT is a safe shutdown (stop accepting, close idle clients, let
transactions finish, for up to --shutdown-timeout when it is not 0);
SIGTERM an immediate one; SIGUSR1 pauses (no client gets a server, servers close as they are released);
SIGUSR2 resumes.

The upstream URL supplies host, port, password and TLS settings; database and
user come from each client's login, and each (database, user) is one pool.
Pools of a database with no client and no server for --autodb-idle-timeout
are dropped. PG* environment variables fill what the URL leaves out, as in
libpq (PGHOST, PGPORT, PGPASSWORD, PGPASSFILE, PGSSLMODE, PGSSLKEY, PGSSLCERT,
PGSSLCERTMODE, PGSSLROOTCERT, PGSSLPASSWORD, PGSSLSNI, PGSSLNEGOTIATION,
PGSERVICE, PGSERVICEFILE, PGTARGETSESSIONATTRS, PGMINPROTOCOLVERSION,
PGMAXPROTOCOLVERSION, PGCHANNELBINDING, PGREQUIREAUTH; the proxy logs those it
uses at start), except four it never takes from the environment, only from
the URL: PGCONNECT_TIMEOUT (server logins are bounded by
--server-connect-timeout), PGOPTIONS, PGTZ and PGAPPNAME.

Under attack: accept errors (out of file descriptors, ...) are logged once a
second and accepting resumes after a pause; clients may use the descriptors
RLIMIT_NOFILE leaves after the server connections, --pool-size more and four
for the console; every connection counts against --max-client-conn from the
moment it is accepted and must log in within --client-login-timeout; a
console message longer than --pkt-buf, or any message longer than
--max-packet-size, ends its connection before anything is allocated for it.
Clients never see the upstream's address or a driver error: PgBouncer's texts
name the setting that fired, and the detail goes to this log.

Prepared statements: with --max-prepared-statements N > 0, transaction and
statement pooling track protocol-level named prepared statements as PgBouncer
1.21+ does: each client's names map to proxy-wide statements (PGBOUNCER_<id>),
a server lacking one gets a Parse first, and each server keeps at most N (least
recently used closed). pgbench -M prepared and drivers' statement caches (pgx,
JDBC) then work. The default is 0, not PgBouncer 1.24's 200: it matches the
PgBouncer 1.18 poolsim validates against, where named statements pass through
and fail on another server ("prepared statement ... does not exist"). Session
mode never tracks. (SHOW STATS has PgBouncer 1.18's columns, which have no
parse or bind counts.)

Examples:
  poolsim proxy --upstream postgres://app:secret@127.0.0.1:5432/app --mode transaction
  poolsim proxy --upstream 'host=/var/run/postgresql' --pool-size 10 --max-client-conn 500
  poolsim proxy --upstream postgres://app@127.0.0.1:5432/app --mode transaction --max-prepared-statements 200
  poolsim proxy --listen 0.0.0.0:6432 --auth-type scram-sha-256 --auth-file userlist.txt \
      --upstream postgres://127.0.0.1:5432/app
  poolsim proxy --config /etc/pgbouncer/pgbouncer.ini --listen 127.0.0.1:6433
  poolsim proxy --upstream postgres://app@127.0.0.1:5432/app --admin-users app --stats-users monitor
  poolsim proxy --upstream postgres://app@127.0.0.1:5432/app --client-tls-sslmode require \
      --client-tls-cert-file server.crt --client-tls-key-file server.key
  psql 'postgres://app@127.0.0.1:6432/pgbouncer' -c 'SHOW POOLS'
  poolsim proxy --upstream postgres://app@127.0.0.1:5432/app --metrics-listen 127.0.0.1:9127

Flags:
%s
Exit status: 0 after a clean shutdown, 1 failure, 2 usage error (bad flags or settings).
`

// proxyOptions are the proxy command's flags: flags holds the settings
// they give (PgBouncer's defaults where not given), the others what is
// not a setting.
type proxyOptions struct {
	fs                                       *pflag.FlagSet
	flags                                    pooler.Config
	configFile, mode, adminUsers, statsUsers *string
	metricsListen, pprofListen               *string
	threads                                  *int
	verbose, plainIO                         *bool
	pgb                                      pgbOptions // PgBouncer's -d -R -q -V -u (proxy_cli.go)
}

// newProxyFlags defines the proxy command's flags.
func newProxyFlags(stderr io.Writer) *proxyOptions {
	def := pooler.DefaultConfig()
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, proxyUsage, fs.FlagUsages()) }
	o := &proxyOptions{fs: fs, flags: def}
	cfg := &o.flags
	o.configFile = fs.String("config", "", "a pgbouncer.ini to read settings, [databases] and [users] from; the flags given override it; SIGHUP reads it again")
	o.mode = fs.String("mode", def.PoolMode.String(), "pool_mode: session, transaction or statement")
	fs.StringVar(&cfg.Listen, "listen", def.Listen, "listen address; must be loopback with --auth-type trust or any")
	fs.StringVar(&cfg.LogFile, "logfile", "", "logfile: append the log (PgBouncer's lines) to this file too; SIGHUP opens it again (logrotate)")
	fs.StringVar(&cfg.PidFile, "pidfile", "", "pidfile: write the pid here; refused if it names a running process; removed at exit")
	fs.StringVar(&cfg.UnixSocketDir, "unix-socket-dir", "", "unix_socket_dir: also listen on DIR/.s.PGSQL.<port> (pgbouncer.ini's default is /tmp; empty = no Unix socket)")
	fs.StringVar(&cfg.Upstream, "upstream", "", "PostgreSQL server URL or keyword/value string (required unless --config has [databases]); serves every database name the config does not list")
	fs.IntVar(&cfg.DefaultPoolSize, "pool-size", def.DefaultPoolSize, "default_pool_size: server connections per (database, user)")
	fs.IntVar(&cfg.MaxClientConn, "max-client-conn", def.MaxClientConn, "max_client_conn: client connections in all")
	fs.IntVar(&cfg.MaxDBConnections, "max-db-connections", def.MaxDBConnections, "max_db_connections: server connections per database, 0 = unlimited")
	fs.IntVar(&cfg.MaxUserConnections, "max-user-connections", def.MaxUserConnections, "max_user_connections: server connections per user, 0 = unlimited")
	fs.DurationVar(&cfg.QueryWaitTimeout, "query-wait-timeout", def.QueryWaitTimeout, "query_wait_timeout: longest wait for a server, 0 = forever")
	fs.DurationVar(&cfg.ServerConnectTimeout, "server-connect-timeout", def.ServerConnectTimeout, "server_connect_timeout: limit on one server login")
	fs.DurationVar(&cfg.ServerIdleTimeout, "server-idle-timeout", def.ServerIdleTimeout, "server_idle_timeout: close servers idle this long, 0 = never")
	fs.DurationVar(&cfg.ServerLifetime, "server-lifetime", def.ServerLifetime, "server_lifetime: close servers this old at release, 0 = never")
	fs.DurationVar(&cfg.ServerLoginRetry, "server-login-retry", def.ServerLoginRetry, "server_login_retry: after a failed server login, wait this long before the next; meanwhile clients of a pool with no server are refused")
	fs.IntVar(&cfg.MaxPreparedStatements, "max-prepared-statements", def.MaxPreparedStatements,
		"max_prepared_statements: named prepared statements kept per server connection in transaction/statement mode; 0 = off, as in PgBouncer 1.18 (1.24+ defaults to 200)")
	fs.StringVar(&cfg.ServerResetQuery, "server-reset-query", def.ServerResetQuery, "server_reset_query: run in session mode before a server is reused")
	fs.StringVar(&cfg.AuthType, "auth-type", def.AuthType, "auth_type: trust, any, plain, md5, scram-sha-256, cert or hba (auth_hba_file from --config)")
	fs.StringVar(&cfg.AuthFile, "auth-file", "", "auth_file: PgBouncer userlist.txt (\"user\" \"password, md5 or SCRAM secret\")")
	fs.StringSliceVar(&cfg.IgnoreStartupParameters, "ignore-startup-parameters", nil, "ignore_startup_parameters: startup parameters to drop; every other one is applied to the client's session")
	fs.DurationVar(&cfg.ClientLoginTimeout, "client-login-timeout", def.ClientLoginTimeout, "client_login_timeout: close a client that has not logged in this long after connecting, 0 = never")
	fs.DurationVar(&cfg.AutodbIdleTimeout, "autodb-idle-timeout", def.AutodbIdleTimeout, "autodb_idle_timeout: drop the pools of a database unused this long, 0 = never")
	fs.StringVar(&cfg.ClientTLSSSLMode, "client-tls-sslmode", def.ClientTLSSSLMode, "client_tls_sslmode: disable, allow, prefer, require, verify-ca or verify-full (TLS for clients, as PgBouncer's)")
	fs.StringVar(&cfg.ClientTLSCertFile, "client-tls-cert-file", "", "client_tls_cert_file: the proxy's certificate (PEM) for client TLS")
	fs.StringVar(&cfg.ClientTLSKeyFile, "client-tls-key-file", "", "client_tls_key_file: its private key (PEM)")
	fs.StringVar(&cfg.ClientTLSCAFile, "client-tls-ca-file", "", "client_tls_ca_file: CA certificates (PEM) that sign client certificates (verify-ca, verify-full)")
	o.adminUsers = fs.String("admin-users", "", "admin_users: users who may use the console, comma-separated")
	o.statsUsers = fs.String("stats-users", "", "stats_users: users who may run SHOW on the console, comma-separated")
	fs.IntVar(&cfg.PktBuf, "pkt-buf", def.PktBuf, "pkt_buf: bytes; a longer console message ends the connection (\"incomplete pkt\")")
	fs.IntVar(&cfg.MaxPacketSize, "max-packet-size", def.MaxPacketSize, "max_packet_size: bytes; a longer message ends its connection")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", def.ShutdownTimeout, "bound on how long transactions may finish after SIGINT; 0 = wait for them all, as PgBouncer")
	o.threads = fs.Int("threads", 0, "threads for Go's scheduler (GOMAXPROCS): 0 = one per core; the data plane is always one event loop, this bounds logins, cancels and the console")
	o.verbose = fs.BoolP("verbose", "v", false, "log every server close and its reason")
	o.pgb = addPgBouncerFlags(fs)
	o.plainIO = fs.Bool("plain-io", false, "one read or sendto system call per socket; by default, where the kernel allows io_uring, the event loop batches a turn's reads into one system call and its writes into another")
	o.metricsListen = fs.String("metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (what the console shows, counters and histograms per pool; no authentication), e.g. 127.0.0.1:9127; empty = off")
	o.pprofListen = fs.String("pprof-listen", "", "serve Go's runtime profiles (net/http/pprof: goroutines, heap) on this loopback address, e.g. 127.0.0.1:6060; empty = off")
	return o
}

// parse reads the command line into o and checks what is not a setting.
func (o *proxyOptions) parse(args []string) error {
	if err := parseFlags(o.fs, args); err != nil {
		return err
	}
	if err := o.configArg(); err != nil { // pgbouncer.ini as PgBouncer takes it
		return err
	}
	m, err := poolmode.Parse(*o.mode)
	if err != nil || !m.Pooled() {
		return usagef("--mode %q: want session, transaction or statement", *o.mode)
	}
	o.flags.PoolMode = m
	o.flags.AdminUsers = pooler.ParseUserList(*o.adminUsers)
	o.flags.StatsUsers = pooler.ParseUserList(*o.statsUsers)
	if *o.threads < 0 {
		return usagef("--threads %d: want 0 (one per core) or more", *o.threads)
	}
	if *o.pprofListen != "" {
		if err := checkLoopback(*o.pprofListen); err != nil {
			return usagef("--pprof-listen: %v", err)
		}
	}
	return nil
}

// builder returns what makes the settings: the config file's, with the
// flags given on the command line over them. SIGHUP and the console's
// RELOAD run it again.
func (o *proxyOptions) builder(logger *log.Logger) func() (pooler.Config, error) {
	return func() (pooler.Config, error) {
		c := o.flags
		if *o.configFile != "" {
			s, err := poolconf.Load(*o.configFile)
			if err != nil {
				return pooler.Config{}, err
			}
			var notApplied []string
			c, notApplied = pooler.FromSettings(s)
			overrideFlags(o.fs, &c, &o.flags)
			for _, n := range notApplied {
				logger.Printf("WARNING: config: not applied: %s", n)
			}
		}
		c.Logf = logger.Printf
		c.Verbose = *o.verbose
		c.PlainIO = *o.plainIO
		return c, c.Validate()
	}
}

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o := newProxyFlags(stderr)
	if err = o.parse(args); err != nil {
		return err
	}
	if *o.pgb.version {
		printVersion(stdout)
		return nil
	}
	// GOGC 25 unless the environment says (proxy_memory.go).
	defer tuneProxyGC()()
	daemon := daemonChild()     // this process is the daemon of -d
	plog := newProxyLog(stderr) // PgBouncer's log lines, to stderr and logfile (proxylog.go)
	if *o.pgb.quiet || daemon != nil {
		plog.Quiet()
	}
	logger := log.New(plog, "", 0)
	build := o.builder(logger)
	cfg, err := build()
	if err != nil {
		tellParent(daemon, err)
		return usage(err)
	}
	if *o.pgb.daemon && daemon == nil {
		return daemonize(args, cfg, stdout)
	}
	served := false
	defer func() {
		if !served {
			tellParent(daemon, err)
		}
	}()
	if err := plog.Open(cfg.LogFile); err != nil {
		return err
	}
	defer plog.Close()
	build = reopening(build, plog, logger)
	cfg.Source = build                                                                 // the console's RELOAD, as SIGHUP
	if err := checkPidFile(cfg.PidFile, logger.Printf); err != nil && !*o.pgb.reboot { // -R: the old process holds it
		return err
	}
	if *o.threads > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*o.threads))
	}
	p, err := pooler.New(cfg)
	if err != nil {
		return usage(err)
	}
	lns, takeover, err := listenOrTakeOver(ctx, &cfg, *o.pgb.reboot)
	if err != nil {
		return err
	}
	closeAll := func() {
		if takeover != nil { // the old process serves on
			_ = takeover.Abort()
			return
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
	}
	user := cfg.User
	if *o.pgb.user != "" {
		user = *o.pgb.user
	}
	var owned []string
	for _, ln := range lns {
		if ln.Addr().Network() == "unix" {
			owned = append(owned, ln.Addr().String())
		}
	}
	if err = switchUser(user, append(owned, cfg.LogFile)); err != nil {
		closeAll()
		return err
	}
	removePid, err := pidFileAfter(takeover, cfg.PidFile, logger)
	if err != nil {
		closeAll()
		return err
	}
	defer func() { removePid() }()
	announceProxy(stdout, logger, cfg, *o.configFile, lns)
	stop, err := o.serveSide(p, stdout, logger)
	if err != nil {
		closeAll()
		return err
	}
	defer stop()
	start := time.Now()
	servedc := make(chan error, 1)
	go func() { servedc <- serveOrTakeOver(context.WithoutCancel(ctx), p, lns, takeover) }()
	served = true
	tellParent(daemon, nil)
	err = handleSignals(ctx, p, servedc, build, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "poolsim proxy: stopped after %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// reopening wraps build so that each reload (SIGHUP, the console's RELOAD)
// also opens the log file again, under the path the settings now name:
// after logrotate moved it away, the log goes to a new file.
func reopening(build func() (pooler.Config, error), plog *proxyLog, logger *log.Logger) func() (pooler.Config, error) {
	return func() (pooler.Config, error) {
		c, err := build()
		if err == nil {
			if rerr := plog.Reopen(c.LogFile); rerr != nil {
				logger.Printf("WARNING: %v (the log goes on to the old file)", rerr)
			}
		}
		return c, err
	}
}

// announceProxy prints where the proxy listens, how it pools and to
// what upstream, and logs the upstream settings it takes from the
// environment.
func announceProxy(stdout io.Writer, logger *log.Logger, cfg pooler.Config, configFile string, lns []net.Listener) {
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	addr := strings.Join(addrs, ", ")
	for _, ln := range lns {
		a := ln.Addr()
		if a.Network() == "unix" {
			logger.Printf("listening on unix:%s", a) // PgBouncer's words
		} else {
			logger.Printf("listening on %s", a)
		}
	}
	logger.Printf("process up: %s", pooler.Version)
	prepared := ""
	if cfg.MaxPreparedStatements > 0 && cfg.PoolMode != poolmode.Session {
		prepared = fmt.Sprintf(", max %d prepared statements per server", cfg.MaxPreparedStatements)
	}
	upstream := redact(cfg.Upstream)
	if configFile != "" {
		upstream = fmt.Sprintf("%d databases from %s", len(cfg.Databases), configFile)
		if cfg.Upstream != "" {
			upstream += ", others to " + redact(cfg.Upstream)
		}
	}
	fmt.Fprintf(stdout, "poolsim proxy: listening on %s, %s pooling, pool size %d%s, upstream %s\n",
		addr, cfg.PoolMode, cfg.DefaultPoolSize, prepared, upstream)
	if env := pooler.UpstreamEnvApplied(cfg.Upstream); cfg.Upstream != "" && len(env) > 0 {
		logger.Printf("upstream: taking %s from the environment (the URL does not set them)", strings.Join(env, ", "))
	}
}

// serveSide starts the metrics and profile servers the flags ask for;
// stop ends them (the profiles' first) and waits for the metrics'.
func (o *proxyOptions) serveSide(p *pooler.Proxy, stdout io.Writer, logger *log.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	if *o.metricsListen != "" {
		mln, err := net.Listen("tcp", *o.metricsListen)
		if err != nil {
			return nil, fmt.Errorf("metrics listen: %w", err)
		}
		mctx, cancel := context.WithCancel(context.Background())
		mdone := make(chan error, 1)
		go func() { mdone <- metrics.Serve(mctx, mln, p) }() // owner: runProxy, which stops and waits for it
		stops = append(stops, func() {
			cancel()
			if err := <-mdone; err != nil {
				logger.Print(err)
			}
		})
		fmt.Fprintf(stdout, "poolsim proxy: metrics on http://%s/metrics\n", mln.Addr())
	}
	if *o.pprofListen != "" {
		stopPprof, err := servePprof(*o.pprofListen)
		if err != nil {
			stop()
			return nil, fmt.Errorf("pprof listen: %w", err)
		}
		stops = append(stops, stopPprof)
	}
	return stop, nil
}

// overrideFlags copies into c the settings whose flags were given on the
// command line (from flags, the parsed values).
func overrideFlags(fs *pflag.FlagSet, c, flags *pooler.Config) {
	set := func(name string, apply func()) {
		if fs.Changed(name) {
			apply()
		}
	}
	set("mode", func() { c.PoolMode = flags.PoolMode })
	set("listen", func() { c.Listen, c.ListenMore, c.ListenPort = flags.Listen, nil, 0 })
	set("unix-socket-dir", func() { c.UnixSocketDir = flags.UnixSocketDir })
	set("logfile", func() { c.LogFile = flags.LogFile })
	set("pidfile", func() { c.PidFile = flags.PidFile })
	set("upstream", func() { c.Upstream = flags.Upstream })
	set("pool-size", func() { c.DefaultPoolSize = flags.DefaultPoolSize })
	set("max-client-conn", func() { c.MaxClientConn = flags.MaxClientConn })
	set("max-db-connections", func() { c.MaxDBConnections = flags.MaxDBConnections })
	set("max-user-connections", func() { c.MaxUserConnections = flags.MaxUserConnections })
	set("query-wait-timeout", func() { c.QueryWaitTimeout = flags.QueryWaitTimeout })
	set("server-connect-timeout", func() { c.ServerConnectTimeout = flags.ServerConnectTimeout })
	set("server-idle-timeout", func() { c.ServerIdleTimeout = flags.ServerIdleTimeout })
	set("server-lifetime", func() { c.ServerLifetime = flags.ServerLifetime })
	set("server-login-retry", func() { c.ServerLoginRetry = flags.ServerLoginRetry })
	set("max-prepared-statements", func() { c.MaxPreparedStatements = flags.MaxPreparedStatements })
	set("server-reset-query", func() { c.ServerResetQuery = flags.ServerResetQuery })
	set("auth-type", func() { c.AuthType = flags.AuthType })
	set("auth-file", func() { c.AuthFile = flags.AuthFile })
	set("ignore-startup-parameters", func() { c.IgnoreStartupParameters = flags.IgnoreStartupParameters })
	set("client-login-timeout", func() { c.ClientLoginTimeout = flags.ClientLoginTimeout })
	set("autodb-idle-timeout", func() { c.AutodbIdleTimeout = flags.AutodbIdleTimeout })
	set("client-tls-sslmode", func() { c.ClientTLSSSLMode = flags.ClientTLSSSLMode })
	set("client-tls-cert-file", func() { c.ClientTLSCertFile = flags.ClientTLSCertFile })
	set("client-tls-key-file", func() { c.ClientTLSKeyFile = flags.ClientTLSKeyFile })
	set("client-tls-ca-file", func() { c.ClientTLSCAFile = flags.ClientTLSCAFile })
	set("admin-users", func() { c.AdminUsers = flags.AdminUsers })
	set("stats-users", func() { c.StatsUsers = flags.StatsUsers })
	set("pkt-buf", func() { c.PktBuf = flags.PktBuf })
	set("max-packet-size", func() { c.MaxPacketSize = flags.MaxPacketSize })
	c.ShutdownTimeout = flags.ShutdownTimeout // the proxy's own setting, not PgBouncer's
}

// handleSignals runs PgBouncer 1.18's signals until Serve returns: SIGHUP
// reloads the settings, SIGINT (or ctx done) is a safe shutdown, SIGTERM an
// immediate one, SIGUSR1 pauses every pool and SIGUSR2 resumes them.
func handleSignals(ctx context.Context, p *pooler.Proxy, served <-chan error, build func() (pooler.Config, error), logger *log.Logger) error {
	sigs := make(chan os.Signal, 4)
	watch := []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM}
	if sigPause != nil {
		watch = append(watch, sigPause, sigResume)
	}
	signal.Notify(sigs, watch...)
	defer signal.Stop(sigs)
	done := ctx.Done()
	quit := make(chan struct{}) // ends the goroutine that reports a completed pause
	defer close(quit)
	for {
		select {
		case err := <-served:
			return err
		case <-done:
			done = nil
			p.Shutdown(pooler.SafeShutdown)
		case sig := <-sigs:
			// The log lines are PgBouncer 1.18's.
			switch sig {
			case syscall.SIGINT:
				logger.Printf("got SIGINT, shutting down")
				p.Shutdown(pooler.SafeShutdown)
			case syscall.SIGTERM:
				logger.Printf("got SIGTERM, fast exit")
				p.Shutdown(pooler.ImmediateShutdown)
			case syscall.SIGHUP:
				logger.Printf("got SIGHUP, re-reading config")
				cfg, err := build()
				if err == nil {
					_, _, err = p.Reload(cfg)
				}
				if err != nil {
					logger.Printf("WARNING: reload failed, the old settings stay: %v", err)
				}
			case sigPause:
				done, err := p.Pause("")
				if err != nil {
					logger.Printf("got SIGUSR1: %v", err)
					continue
				}
				logger.Printf("got SIGUSR1, pausing all activity")
				go func() {
					select {
					case <-done:
						logger.Printf("paused: every server connection closed")
					case <-quit:
					}
				}()
			case sigResume:
				if err := p.Resume(""); err != nil {
					logger.Printf("got SIGUSR2: %v", err)
				} else {
					logger.Printf("got SIGUSR2, continuing from PAUSE")
				}
			}
		}
	}
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

// checkLoopback refuses an address that is not on the loopback interface:
// profiles show the process's internals.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q is not a loopback address", addr)
	}
	return nil
}

// servePprof serves net/http/pprof's handlers on addr until stop is called.
func servePprof(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // owner: runProxy, through stop
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
