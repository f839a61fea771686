//go:build linux

package pooler

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// unixTarget is a pooler with a Unix socket: where it is and how to reach
// its console over TCP.
type unixTarget struct {
	name     string
	dir      string // unix_socket_dir
	port     int    // listen_port: the socket is dir/.s.PGSQL.port
	adminDSN string // the console over TCP, as an admin user
	uid      int    // the pooler's own uid
}

// unixDSN is a client URL over the target's Unix socket.
func (u unixTarget) unixDSN(user, db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s password=%s sslmode=disable", u.dir, u.port, user, db, user)
}

// startUnixProxy starts a proxy that listens on TCP (127.0.0.1:0) and on a
// Unix socket in a fresh folder that every account can reach.
func startUnixProxy(t *testing.T, edit func(*Config)) (*testProxy, unixTarget) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tp := startProxy(t, func(c *Config) {
		c.UnixSocketDir = dir
		c.ListenPort = 40000 + os.Getpid()%20000 // names the socket only: dir is this test's own
		if edit != nil {
			edit(c)
		}
	})
	return tp, unixTarget{name: "proxy", dir: dir, port: tp.conf().ListenPort, adminDSN: tp.adminDSN(), uid: os.Getuid()}
}

// startUnixBouncer starts PgBouncer 1.18, whose Unix socket is in its
// instance folder.
func startUnixBouncer(t *testing.T, extra map[string]string) (*pgbouncer.PgBouncer, unixTarget) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{
		UpstreamPort: cluster.Port(),
		Pooling:      pgbouncer.Pool(poolmode.Transaction, 20),
		Extra:        extra,
	})
	if err != nil {
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	st, err := os.Stat(b.Dir())
	if err != nil {
		t.Fatal(err)
	}
	return b, unixTarget{name: "pgbouncer", dir: b.Dir(), port: b.Port(), adminDSN: b.AdminDSN(), uid: fileUID(st)}
}

// TestUnixSocketLogin: a client logs in over the Unix socket and runs a
// statement; SHOW CLIENTS shows it as PgBouncer does (addr and local_addr
// "unix", both ports the listen port, remote_pid the client's pid), on
// both targets.
func TestUnixSocketLogin(t *testing.T) {
	targets := map[string]func(t *testing.T) unixTarget{
		"proxy":     func(t *testing.T) unixTarget { _, u := startUnixProxy(t, nil); return u },
		"pgbouncer": func(t *testing.T) unixTarget { _, u := startUnixBouncer(t, nil); return u },
	}
	for _, name := range []string{"proxy", "pgbouncer"} {
		t.Run(name, func(t *testing.T) {
			u := targets[name](t)
			ctx := testCtx(t, 20*time.Second)
			conn := connect(ctx, t, u.unixDSN("poolsim", "poolsim"))
			var n int
			if err := conn.QueryRow(ctx, "select 41 + 1").Scan(&n); err != nil || n != 42 {
				t.Fatalf("select over the Unix socket: %d, %v", n, err)
			}
			admin := connect(ctx, t, u.adminDSN)
			_, rows := show(ctx, t, admin, "SHOW CLIENTS")
			var row map[string]string
			for _, r := range rows {
				if r["database"] == "poolsim" && r["addr"] == "unix" {
					row = r
				}
			}
			if row == nil {
				t.Fatalf("SHOW CLIENTS has no unix client: %v", rows)
			}
			port := strconv.Itoa(u.port)
			if row["port"] != port || row["local_addr"] != "unix" || row["local_port"] != port || row["remote_pid"] != strconv.Itoa(os.Getpid()) {
				t.Errorf("unix client row: %v; want port and local_port %s, local_addr unix, remote_pid %d", row, port, os.Getpid())
			}
		})
	}
}

// TestUnixSocketFile: the socket file has unix_socket_mode; a second
// proxy on the same socket is refused while the first answers; a stale
// socket file (nobody answers) is replaced; the file is gone when the
// proxy stops.
func TestUnixSocketFile(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Listen = ""
	cfg.UnixSocketDir, cfg.ListenPort, cfg.UnixSocketMode = dir, 6432, 0o770
	path := UnixSocketPath(dir, 6432)

	// A stale file: a socket nobody listens on.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	_ = stale.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left: %v", err)
	}

	lns, err := Listen(&cfg)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if len(lns) != 1 || !isUnixListener(lns[0]) {
		t.Fatalf("listeners: %v, want the Unix socket only (listen_addr empty)", lns)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o770 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v %v, want a socket with mode 0770", path, st.Mode(), err)
	}
	// It answers: a second listener is refused and leaves it in place.
	if _, err := Listen(&cfg); err == nil || !strings.Contains(err.Error(), "unix socket is in use") {
		t.Fatalf("second Listen: %v, want \"unix socket is in use\"", err)
	}
	if !UnixSocketInUse(path) {
		t.Fatal("the first listener's socket no longer answers")
	}
	_ = lns[0].Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file after close: %v, want it removed", err)
	}
	// PgBouncer's lock file refuses the port too.
	if err := os.WriteFile(path+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(&cfg); err == nil || !strings.Contains(err.Error(), "unix port 6432 is in use") {
		t.Fatalf("Listen with a lock file: %v", err)
	}
}

// TestListenAddrs: listen_addr's list and "*" become TCP listeners, each
// of which serves; "" with no unix_socket_dir is refused; a Unix socket
// is local, so trust may listen on it.
func TestListenAddrs(t *testing.T) {
	addrs, err := ListenAddrs(" 127.0.0.1, ::1 ,localhost", 7000)
	if err != nil || strings.Join(addrs, " ") != "127.0.0.1:7000 [::1]:7000 localhost:7000" {
		t.Fatalf("ListenAddrs: %v %v", addrs, err)
	}
	if addrs, _ := ListenAddrs("*", 7000); strings.Join(addrs, " ") != "0.0.0.0:7000 [::]:7000" {
		t.Fatalf("ListenAddrs(*): %v", addrs)
	}
	if addrs, _ := ListenAddrs("", 7000); len(addrs) != 0 {
		t.Fatalf("ListenAddrs(\"\"): %v", addrs)
	}
	s := poolconf.Defaults()
	s.ListenAddr, s.ListenPort = "", 6543
	s.Other = map[string]string{"unix_socket_dir": ""}
	c, _ := FromSettings(s)
	c.Upstream, c.AuthType = "postgres://x@127.0.0.1/x", AuthTrust
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "nowhere to listen") {
		t.Fatalf("no listen_addr, no unix_socket_dir: %v", err)
	}
	s.Other = map[string]string{"unix_socket_mode": "0700", "unix_socket_group": "", "syslog": "1", "logfile": "/var/log/x.log", "pidfile": "/run/x.pid", "user": "postgres"}
	c, notApplied := FromSettings(s)
	if c.LogFile != "/var/log/x.log" || c.PidFile != "/run/x.pid" || c.User != "postgres" {
		t.Errorf("FromSettings: logfile %q pidfile %q user %q", c.LogFile, c.PidFile, c.User)
	}
	// syslog is read and said to have no effect, never dropped silently.
	if !slices.ContainsFunc(notApplied, func(n string) bool { return strings.HasPrefix(n, "syslog = 1") }) {
		t.Errorf("not applied: %q, want syslog = 1 listed", notApplied)
	}
	if c.UnixSocketDir != "/tmp" || c.UnixSocketMode != 0o700 || c.Listen != "" || c.ListenPort != 6543 {
		t.Fatalf("FromSettings: dir %q mode %o listen %q port %d", c.UnixSocketDir, c.UnixSocketMode, c.Listen, c.ListenPort)
	}
	for _, n := range notApplied {
		if strings.Contains(n, "unix_socket") || strings.Contains(n, "listen_addr") || strings.HasPrefix(n, "logfile") || strings.HasPrefix(n, "pidfile") || strings.HasPrefix(n, "user") {
			t.Errorf("not applied: %s", n)
		}
	}
	s.Other = map[string]string{"unix_socket_mode": "777"} // decimal 777, as PgBouncer reads it: not permission bits
	c, _ = FromSettings(s)
	c.Upstream, c.AuthType = "postgres://x@127.0.0.1/x", AuthTrust
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "unix_socket_mode") {
		t.Fatalf("unix_socket_mode 777: %v", err)
	}

	// Two addresses, each serving: 127.0.0.1 and ::1 where the machine has IPv6.
	tp := startProxy(t, func(c *Config) { c.ListenMore = []string{"[::1]:0"} })
	ctx := testCtx(t, 20*time.Second)
	for _, ln := range tp.lns {
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		dsn := fmt.Sprintf("postgres://poolsim:poolsim@%s/poolsim?sslmode=disable", net.JoinHostPort(host, port))
		var one int
		if err := connect(ctx, t, dsn).QueryRow(ctx, "select 1").Scan(&one); err != nil {
			t.Fatalf("through %s: %v", ln.Addr(), err)
		}
	}
	if err := checkListen(filepath.Join(t.TempDir(), ".s.PGSQL.1"), AuthTrust); err != nil {
		t.Fatalf("checkListen of a Unix socket: %v", err)
	}
}

// fileUID is a file's owner.
func fileUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// psqlAs runs one statement with psql as OS user account (runuser), over
// the target's Unix socket as user pgbouncer on the console.
func psqlAs(ctx context.Context, t *testing.T, account string, u unixTarget, q string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skipf("psql: %v", err)
	}
	dsn := fmt.Sprintf("host=%s port=%d user=pgbouncer dbname=pgbouncer sslmode=disable connect_timeout=5", u.dir, u.port)
	out, err := exec.CommandContext(ctx, "runuser", "-u", account, "--", "psql", "-XAtc", q, dsn).CombinedOutput()
	return string(out), err
}

// TestPeerConsoleLogin: user "pgbouncer" gets the console, admin commands
// included, over the Unix socket without a password when its process runs
// as the pooler's own OS user - even with admin_users empty - and is
// refused from another OS user and over TCP; on both targets (PgBouncer
// runs as postgres, the proxy as the test).
func TestPeerConsoleLogin(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the test runs psql as another OS user")
	}
	pgAcct, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres account: %v", err)
	}
	targets := map[string]func(t *testing.T) unixTarget{
		"proxy": func(t *testing.T) unixTarget {
			_, u := startUnixProxy(t, func(c *Config) { c.AdminUsers, c.StatsUsers = nil, nil })
			return u
		},
		"pgbouncer": func(t *testing.T) unixTarget {
			_, u := startUnixBouncer(t, map[string]string{"admin_users": "", "stats_users": ""})
			return u
		},
	}
	for _, name := range []string{"proxy", "pgbouncer"} {
		t.Run(name, func(t *testing.T) {
			u := targets[name](t)
			ctx := testCtx(t, 30*time.Second)
			same, other := "root", pgAcct.Username
			if strconv.Itoa(u.uid) == pgAcct.Uid {
				same, other = other, same
			}
			out, err := psqlAs(ctx, t, same, u, "SHOW FDS")
			if err != nil || !strings.Contains(out, "pooler") {
				t.Fatalf("console as pgbouncer from OS user %s (the pooler's): %v\n%s", same, err, out)
			}
			if out, err := psqlAs(ctx, t, other, u, "SHOW VERSION"); err == nil {
				t.Fatalf("console as pgbouncer from OS user %s (not the pooler's) let in:\n%s", other, out)
			}
			tcp := strings.Replace(u.adminDSN, "//"+adminUserOf(u.adminDSN)+":", "//pgbouncer:", 1)
			if conn, err := connectErr(ctx, tcp); err == nil {
				conn.Close(ctx)
				t.Fatalf("console as pgbouncer over TCP (%s) let in", tcp)
			}
		})
	}
}

// TestPeerAuth: with auth_type peer a client logs in over the Unix socket
// as its own OS user only; another user name, or TCP, is refused with
// PgBouncer's "unix socket login rejected".
func TestPeerAuth(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	tp, u := startUnixProxy(t, func(c *Config) { c.AuthType = AuthPeer })
	ctx := testCtx(t, 20*time.Second)
	// The login user is the OS user; the server login is the upstream's.
	if conn, err := connectErr(ctx, u.unixDSN(me.Username, "poolsim")); err != nil {
		if !strings.Contains(err.Error(), "server login") && !strings.Contains(err.Error(), "role") && !strings.Contains(err.Error(), "password") {
			t.Fatalf("peer login as %s: %v", me.Username, err)
		}
	} else {
		conn.Close(ctx)
	}
	for _, dsn := range []string{u.unixDSN("poolsim", "poolsim"), tp.dsn} {
		_, err := connectErr(ctx, dsn)
		if err == nil || !strings.Contains(err.Error(), "unix socket login rejected") {
			t.Errorf("peer login %s: %v, want \"unix socket login rejected\"", dsn, err)
		}
	}
}

// connectErr connects without failing the test.
func connectErr(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// adminUserOf is the user of a postgres:// URL.
func adminUserOf(dsn string) string {
	rest := dsn[strings.Index(dsn, "//")+2:]
	return rest[:strings.IndexAny(rest, ":@")]
}

// TestSOReuseport: with so_reuseport two poolers listen on one TCP port
// side by side and each serves; without it the second is refused. Two
// PgBouncers likewise.
func TestSOReuseport(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	first := startProxy(t, func(c *Config) { c.SOReuseport = true })
	addr := first.Addr().String()
	plain := DefaultConfig()
	plain.Listen = addr
	if lns, err := Listen(&plain); err == nil {
		for _, ln := range lns {
			_ = ln.Close()
		}
		t.Fatalf("a second listener on %s without so_reuseport was let in", addr)
	}
	second := startProxy(t, func(c *Config) { c.SOReuseport = true; c.Listen = addr })
	for _, tp := range []*testProxy{first, second} {
		var one int
		if err := connect(ctx, t, tp.dsn).QueryRow(ctx, "select 1").Scan(&one); err != nil {
			t.Fatalf("through %s: %v", tp.Addr(), err)
		}
	}

	b1, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: cluster.Port(), SoReuseport: true})
	if err != nil {
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b1.Stop() })
	b2, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: cluster.Port(), SoReuseport: true, ListenPort: b1.Port()})
	if err != nil {
		t.Fatalf("second pgbouncer on port %d with so_reuseport: %v", b1.Port(), err)
	}
	t.Cleanup(func() { _ = b2.Stop() })
}

// TestListenHostName: a host name in listen_addr listens on each of its
// addresses (localhost: 127.0.0.1, and ::1 where it resolves).
func TestListenHostName(t *testing.T) {
	ips, err := net.LookupHost("localhost")
	if err != nil {
		t.Skip(err)
	}
	cfg := DefaultConfig()
	cfg.Listen = "localhost:0"
	lns, err := Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	var got []string
	for _, ln := range lns {
		h, _, _ := net.SplitHostPort(ln.Addr().String())
		got = append(got, h)
	}
	if len(got) == 0 || len(got) > len(ips) || !slices.Contains(got, "127.0.0.1") {
		t.Fatalf("localhost listens on %v; it resolves to %v", got, ips)
	}
}

// TestUnixSocketNoTLS: with client_tls_sslmode require, a client over the
// Unix socket logs in without TLS (PgBouncer has no TLS on the Unix
// socket and requires none there); on both targets. (Drivers send no
// SSLRequest over a Unix socket, so the decline of one is not reached.)
func TestUnixSocketNoTLS(t *testing.T) {
	f := writeTLSFiles(t)
	targets := map[string]func(t *testing.T) unixTarget{
		"proxy": func(t *testing.T) unixTarget {
			_, u := startUnixProxy(t, func(c *Config) {
				c.ClientTLSSSLMode, c.ClientTLSCertFile, c.ClientTLSKeyFile = "require", f.cert, f.key
			})
			return u
		},
		"pgbouncer": func(t *testing.T) unixTarget {
			_, u := startUnixBouncer(t, map[string]string{"client_tls_sslmode": "require", "client_tls_cert_file": f.cert, "client_tls_key_file": f.key})
			return u
		},
	}
	for _, name := range []string{"proxy", "pgbouncer"} {
		t.Run(name, func(t *testing.T) {
			u := targets[name](t)
			ctx := testCtx(t, 20*time.Second)
			var one int
			if err := connect(ctx, t, u.unixDSN("poolsim", "poolsim")).QueryRow(ctx, "select 1").Scan(&one); err != nil {
				t.Fatalf("plain login over the Unix socket with sslmode require: %v", err)
			}
		})
	}
}
