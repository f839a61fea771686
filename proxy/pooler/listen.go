package pooler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
)

// Where the proxy listens, as PgBouncer 1.18's pooler.c: every address of
// listen_addr (a comma-separated list; "*" is every IPv4 and IPv6 address)
// on listen_port, and a Unix socket .s.PGSQL.<listen_port> in
// unix_socket_dir (PgBouncer's default /tmp; empty: none), with
// unix_socket_mode and unix_socket_group. listen_addr empty listens on the
// Unix socket only.

// DefaultUnixSocketMode is unix_socket_mode's default: PgBouncer's 0777.
const DefaultUnixSocketMode os.FileMode = 0o777

// UnixSocketPath is the path of the proxy's Unix socket for a directory and
// port, as PgBouncer and libpq name it (dir/.s.PGSQL.port).
func UnixSocketPath(dir string, port int) string {
	return fmt.Sprintf("%s/.s.PGSQL.%d", dir, port)
}

// listenPort is the port of the Unix socket's name and of the clients that
// come over it (SHOW CLIENTS' port): ListenPort, else Listen's port.
func (c *Config) listenPort() int {
	if c.ListenPort > 0 {
		return c.ListenPort
	}
	for _, a := range append([]string{c.Listen}, c.ListenMore...) {
		if _, port, err := net.SplitHostPort(a); err == nil {
			if n, err := strconv.Atoi(port); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// tcpAddrs is every TCP address the proxy listens on.
func (c *Config) tcpAddrs() []string {
	var out []string
	if c.Listen != "" {
		out = append(out, c.Listen)
	}
	return append(out, c.ListenMore...)
}

// ListenAddrs turns listen_addr (PgBouncer's comma-separated list, "*" for
// every address, "" for none) and listen_port into TCP addresses: the
// first goes to Config.Listen, the others to Config.ListenMore.
func ListenAddrs(listenAddr string, port int) ([]string, error) {
	var out []string
	p := strconv.Itoa(port)
	for _, f := range strings.Split(listenAddr, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "*":
			out = append(out, net.JoinHostPort("0.0.0.0", p), net.JoinHostPort("::", p))
		case strings.ContainsAny(f, " \t/"):
			return nil, fmt.Errorf("listen_addr: %q is not a host name or address (want a comma-separated list, or *)", f)
		default:
			out = append(out, net.JoinHostPort(strings.Trim(f, "[]"), p))
		}
	}
	return out, nil
}

// checkUnixSocket checks the Unix socket settings.
func (c *Config) checkUnixSocket() error {
	if c.UnixSocketDir == "" {
		if len(c.tcpAddrs()) == 0 {
			return errors.New("listen_addr: empty and no unix_socket_dir: nowhere to listen on")
		}
		return nil
	}
	if c.listenPort() <= 0 {
		return fmt.Errorf("listen_port: %d: the Unix socket's name needs a port from 1 to 65535", c.ListenPort)
	}
	if c.UnixSocketMode&^os.ModePerm != 0 {
		return fmt.Errorf("unix_socket_mode: %#o: want permission bits (0 to 0777)", uint32(c.UnixSocketMode))
	}
	if c.UnixSocketDir[0] != '@' {
		if st, err := os.Stat(c.UnixSocketDir); err != nil {
			return fmt.Errorf("unix_socket_dir: %w", err)
		} else if !st.IsDir() {
			return fmt.Errorf("unix_socket_dir: %s is not a directory", c.UnixSocketDir)
		}
	}
	if c.UnixSocketGroup != "" {
		if _, err := lookupGroup(c.UnixSocketGroup); err != nil {
			return fmt.Errorf("unix_socket_group: %w", err)
		}
	}
	return nil
}

// lookupGroup is a group's id, by name or number.
func lookupGroup(name string) (int, error) {
	if g, err := user.LookupGroup(name); err == nil {
		return strconv.Atoi(g.Gid)
	}
	if g, err := user.LookupGroupId(name); err == nil {
		return strconv.Atoi(g.Gid)
	}
	return 0, fmt.Errorf("%q: no such group", name)
}

// Listen opens every listener cfg names: each TCP address (Listen, then
// ListenMore), then the Unix socket in UnixSocketDir. Serve takes them all.
// A Unix socket another process still answers on is refused (PgBouncer's
// "unix socket is in use, cannot continue"), so two proxies never take one
// another's socket; a stale socket file (nobody answers) is removed. The
// socket file is removed again when its listener is closed. On an error
// every listener opened so far is closed.
func Listen(cfg *Config) ([]net.Listener, error) {
	var lns []net.Listener
	fail := func(err error) ([]net.Listener, error) {
		for _, ln := range lns {
			_ = ln.Close()
		}
		return nil, err
	}
	lc := net.ListenConfig{Control: listenControl(cfg)}
	for _, a := range cfg.tcpAddrs() {
		// An IPv6 address listens on IPv6 only (PgBouncer's IPV6_V6ONLY),
		// so "*" (0.0.0.0 and ::) takes both families side by side. A host
		// name listens on each of its addresses, as PgBouncer's
		// getaddrinfo loop; one its machine cannot bind (IPv6 missing) is
		// skipped, as PgBouncer warns and goes on.
		host, port, _ := net.SplitHostPort(a)
		ips := []string{host}
		optional := host == "::"
		if net.ParseIP(host) == nil {
			var err error
			if ips, err = net.DefaultResolver.LookupHost(context.Background(), host); err != nil {
				return fail(fmt.Errorf("listen: listen_addr %s: %w", host, err))
			}
			optional = len(ips) > 1
		}
		bound := 0
		for _, h := range ips {
			network := "tcp6"
			if ip := net.ParseIP(h); ip != nil && ip.To4() != nil {
				network = "tcp4"
			}
			ln, err := lc.Listen(context.Background(), network, net.JoinHostPort(h, port))
			if err != nil {
				if optional && (errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL)) {
					continue
				}
				return fail(fmt.Errorf("listen: %w", err))
			}
			lns = append(lns, ln)
			bound++
		}
		if bound == 0 && host != "::" {
			return fail(fmt.Errorf("listen: listen_addr %s: no address of it can be bound", host))
		}
	}
	if cfg.UnixSocketDir != "" {
		ln, err := listenUnix(cfg)
		if err != nil {
			return fail(err)
		}
		lns = append(lns, ln)
	}
	if len(lns) == 0 {
		return nil, errors.New("listen: nowhere to listen on")
	}
	return lns, nil
}

// listenUnix opens the Unix socket, as PgBouncer's create_unix_socket
// after its check_old_process_unix.
func listenUnix(cfg *Config) (net.Listener, error) {
	port := cfg.listenPort()
	path := UnixSocketPath(cfg.UnixSocketDir, port)
	abstract := cfg.UnixSocketDir[0] == '@'
	if !abstract {
		if _, err := os.Lstat(path + ".lock"); err == nil {
			return nil, fmt.Errorf("listen: unix port %d is in use (%s.lock exists)", port, path)
		}
		if UnixSocketInUse(path) {
			return nil, fmt.Errorf("listen: unix socket is in use, cannot continue: %s answers (another pooler on port %d?)", path, port)
		}
		// Nobody answers: a socket left by a pooler that did not exit
		// cleanly. PgBouncer removes it too.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("listen: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if abstract {
		return ln, nil
	}
	mode := cfg.UnixSocketMode
	if err := os.Chmod(path, mode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listen: unix_socket_mode: chmod %s %#o: %w", path, uint32(mode), err)
	}
	if cfg.UnixSocketGroup != "" {
		gid, err := lookupGroup(cfg.UnixSocketGroup)
		if err == nil {
			err = os.Chown(path, -1, gid)
		}
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("listen: unix_socket_group: %w", err)
		}
	}
	return ln, nil
}

// UnixSocketInUse reports whether a process answers on the Unix socket at
// path (PgBouncer's check_old_process_unix: a connect that succeeds).
func UnixSocketInUse(path string) bool {
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// isUnixListener reports whether ln is a Unix socket.
func isUnixListener(ln net.Listener) bool { return ln.Addr().Network() == "unix" }

// opsKeys are the [pgbouncer] keys of s.Other that FromSettings applies
// through applyListen (and the command's own keys it reads there), so its
// list of settings with no effect leaves them out.
var opsKeys = map[string]bool{
	"unix_socket_dir": true, "unix_socket_mode": true, "unix_socket_group": true, "so_reuseport": true,
	"logfile": true, "pidfile": true, "user": true,
}

// applyListen reads the listening keys of s into c: listen_addr and
// listen_port, unix_socket_dir/_mode/_group and so_reuseport; and the
// command's own logfile, pidfile and user. skip records a value that
// cannot be applied.
func (c *Config) applyListen(s poolconf.Settings, skip func(key, value, why string)) {
	addrs, err := ListenAddrs(s.ListenAddr, s.ListenPort)
	if err != nil {
		// Validate refuses it, naming the value.
		addrs = []string{net.JoinHostPort(s.ListenAddr, "")}
	}
	c.Listen, c.ListenMore, c.ListenPort = "", nil, s.ListenPort
	if len(addrs) > 0 {
		c.Listen, c.ListenMore = addrs[0], addrs[1:]
	}
	c.UnixSocketDir, _ = s.Text("unix_socket_dir")
	c.UnixSocketDir = strings.TrimRight(c.UnixSocketDir, "/")
	if v, _ := s.Text("unix_socket_dir"); v == "/" {
		c.UnixSocketDir = "/"
	}
	c.UnixSocketGroup, _ = s.Text("unix_socket_group")
	c.LogFile, c.PidFile, c.User = s.Other["logfile"], s.Other["pidfile"], s.Other["user"]
	if v, ok := s.Other["unix_socket_mode"]; ok {
		// PgBouncer reads it with strtol(..., 0): 0777 is octal.
		n, err := strconv.ParseUint(strings.TrimSpace(v), 0, 32)
		if err != nil {
			n = 1 << 31 // Validate refuses it
		}
		c.UnixSocketMode = os.FileMode(n)
	}
	if v, ok := s.Other["so_reuseport"]; ok {
		b, err := iniBool(v)
		if err != nil {
			skip("so_reuseport", v, "want 0 or 1")
		}
		c.SOReuseport = b
	}
}

// iniBool reads a pgbouncer.ini boolean as PgBouncer does.
func iniBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "on", "yes", "true":
		return true, nil
	case "0", "off", "no", "false", "":
		return false, nil
	}
	return false, fmt.Errorf("%q: want 0 or 1", v)
}

// keepListeners puts old's listening settings back into cfg (they change
// only with a restart, as PgBouncer's) and names each that differed.
func keepListeners(old *Config, cfg *Config) []string {
	var kept []string
	note := func(key string, was, now any) {
		kept = append(kept, fmt.Sprintf("%s: %v (changing it needs a restart; new value %v)", key, was, now))
	}
	if !slices.Equal(cfg.ListenMore, old.ListenMore) || cfg.ListenPort != old.ListenPort {
		note("listen_addr/listen_port", append([]string{old.Listen}, old.ListenMore...), append([]string{cfg.Listen}, cfg.ListenMore...))
	}
	if cfg.UnixSocketDir != old.UnixSocketDir {
		note("unix_socket_dir", old.UnixSocketDir, cfg.UnixSocketDir)
	}
	if cfg.UnixSocketMode != old.UnixSocketMode {
		note("unix_socket_mode", fmt.Sprintf("%#o", uint32(old.UnixSocketMode)), fmt.Sprintf("%#o", uint32(cfg.UnixSocketMode)))
	}
	if cfg.UnixSocketGroup != old.UnixSocketGroup {
		note("unix_socket_group", old.UnixSocketGroup, cfg.UnixSocketGroup)
	}
	if cfg.SOReuseport != old.SOReuseport {
		note("so_reuseport", old.SOReuseport, cfg.SOReuseport)
	}
	cfg.ListenMore, cfg.ListenPort = old.ListenMore, old.ListenPort
	cfg.UnixSocketDir, cfg.UnixSocketMode, cfg.UnixSocketGroup = old.UnixSocketDir, old.UnixSocketMode, old.UnixSocketGroup
	cfg.SOReuseport = old.SOReuseport
	return kept
}
