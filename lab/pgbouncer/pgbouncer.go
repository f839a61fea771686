package pgbouncer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

// ErrNoPgBouncer means no pgbouncer executable was found.
var ErrNoPgBouncer = errors.New("pgbouncer: no pgbouncer executable found (looked in $PATH and " +
	strings.Join(searchPaths, ", ") + "); install it: apt-get install pgbouncer")

var searchPaths = []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer", "/usr/bin/pgbouncer"}

// Find returns the path of the pgbouncer executable: $PATH first, then
// /usr/sbin/pgbouncer and a few other usual places. The error wraps
// ErrNoPgBouncer.
func Find() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range searchPaths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNoPgBouncer
}

// Config describes one PgBouncer. Zero values leave PgBouncer's defaults.
type Config struct {
	// UpstreamHost is the PostgreSQL host; "" = 127.0.0.1.
	UpstreamHost string
	// UpstreamPort is the PostgreSQL port (required).
	UpstreamPort int
	// UpstreamDB, when set, is the upstream database for every client
	// database name; "" keeps the client's database name.
	UpstreamDB string
	// UpstreamUser and UpstreamPassword, when UpstreamUser is set, force
	// every server login to that user (PgBouncer's forced user: then there is
	// one pool per database instead of one per database and user).
	UpstreamUser, UpstreamPassword string
	// Users is the auth_file: user name to password ("" for none). PgBouncer
	// also logs into PostgreSQL with these passwords. nil = postgres (no
	// password) and poolsim (password poolsim), the roles pgcluster creates.
	Users map[string]string
	// AdminUsers may use the admin console; nil = ["postgres"].
	AdminUsers []string
	// AuthType is auth_type for clients; "" = "trust" (the user must still
	// be in Users). Others: "plain", "md5", "scram-sha-256", "any".
	AuthType string

	// Pooling is how the pools behave, with PgBouncer's names and
	// meanings (models/poolconf; 0 is what 0 is in pgbouncer.ini): every
	// key of it is written. nil leaves them all at PgBouncer's defaults.
	// max_prepared_statements, which PgBouncer has from 1.21, is written
	// to an older PgBouncer only if it is not 0 (then it refuses to start).
	Pooling *poolconf.Pooling
	// SoReuseport sets so_reuseport = 1 (several PgBouncers on one port).
	SoReuseport bool
	// ListenPort is the TCP port on 127.0.0.1; 0 = a free port. With
	// SoReuseport it may be the port of a running sibling (start the first
	// with 0, the others with its Port()): Start then waits for this
	// process's own "listening on" log line, since the port already answers.
	ListenPort int
	// Extra holds any other pgbouncer.ini [pgbouncer] settings; they win
	// over the fields above. Written sorted by key.
	Extra map[string]string
	// Databases are [databases] entries written before the "*" one, each
	// a whole line ("web = host=127.0.0.1 port=5432 dbname=app
	// pool_mode=transaction pool_size=4"): pools of their own.
	Databases []string
	// UserLines are [users] entries, each a whole line ("app =
	// pool_mode=session max_user_connections=4").
	UserLines []string

	// Path is the pgbouncer executable; "" = Find().
	Path string
	// TempDir is the parent of the instance folder; "" = os.TempDir().
	TempDir string
	// StartTimeout bounds Start; 0 = 30 s.
	StartTimeout time.Duration
	// Logf, when set, receives one line per step.
	Logf func(format string, args ...any)
}

// Pool is PgBouncer's defaults (poolconf.DefaultPooling) with pool_mode
// mode and default_pool_size size, then each of more applied: a Config's
// Pooling.
func Pool(mode poolmode.Mode, size int, more ...func(*poolconf.Pooling)) *poolconf.Pooling {
	p := poolconf.DefaultPooling()
	p.PoolMode, p.DefaultPoolSize = mode, size
	for _, f := range more {
		f(&p)
	}
	return &p
}

// PgBouncer is a running PgBouncer.
type PgBouncer struct {
	path       string
	dir        string
	port       int
	version    string
	users      map[string]string
	adminUsers []string
	stopSig    syscall.Signal
	proc       *childproc.Process
	logf       func(string, ...any)
	ini        string // the pgbouncer.ini it runs on (Reboot)
	sockDir    string // its unix_socket_dir, "" for none or unknown (StartINI)

	stopOnce sync.Once
	stopErr  error
}

var (
	keyRE     = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	versionRE = regexp.MustCompile(`(?i)pgbouncer\s+(\d+(?:\.\d+)*)`)
)

// settings is the [pgbouncer] section for PgBouncer version ("" when it is
// not known yet: Start checks cfg before it looks).
func (cfg Config) settings(dir string, port int, version string) (map[string]string, error) {
	if cfg.UpstreamPort <= 0 || cfg.UpstreamPort > 65535 {
		return nil, fmt.Errorf("pgbouncer: config: UpstreamPort %d: expected 1..65535", cfg.UpstreamPort)
	}
	s := map[string]string{
		"listen_addr":               "127.0.0.1",
		"listen_port":               strconv.Itoa(port),
		"unix_socket_dir":           dir,
		"auth_type":                 "trust",
		"auth_file":                 filepath.Join(dir, "users.txt"),
		"admin_users":               "postgres",
		"ignore_startup_parameters": "extra_float_digits",
	}
	if cfg.AuthType != "" {
		s["auth_type"] = cfg.AuthType
	}
	if cfg.AdminUsers != nil {
		s["admin_users"] = strings.Join(cfg.AdminUsers, ",")
	}
	if p := cfg.Pooling; p != nil {
		for _, key := range poolconf.PoolingKeys() {
			v, _ := p.Text(key)
			if key == "max_prepared_statements" && v == "0" && (version == "" || !VersionAtLeast(version, 1, 21)) {
				continue // PgBouncer before 1.21 does not know it; 0 is what it does
			}
			s[key] = v
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("pgbouncer: config: %w", err)
		}
	}
	if cfg.SoReuseport {
		s["so_reuseport"] = "1"
	}
	for k, v := range cfg.Extra {
		s[k] = v
	}
	for _, l := range cfg.Databases {
		if strings.ContainsAny(l, "\r\n") || !strings.Contains(l, "=") {
			return nil, fmt.Errorf("pgbouncer: config: entry %q: want one line of name = settings", l)
		}
	}
	for k, v := range s {
		if !keyRE.MatchString(k) {
			return nil, fmt.Errorf("pgbouncer: config: setting name %q: expected lower-case letters, digits and _", k)
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("pgbouncer: config: %s: value must be one line", k)
		}
	}
	return s, nil
}

// connValue quotes a libpq-style connection-string value when needed.
func connValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " '\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func (cfg Config) databaseLine() string {
	var b strings.Builder
	for _, l := range cfg.Databases {
		b.WriteString(l + "\n")
	}
	return b.String() + cfg.fallbackLine()
}

// fallbackLine is the "*" entry: every database name not listed.
func (cfg Config) fallbackLine() string {
	host := cfg.UpstreamHost
	if host == "" {
		host = "127.0.0.1"
	}
	line := "* = host=" + connValue(host) + " port=" + strconv.Itoa(cfg.UpstreamPort)
	if cfg.UpstreamDB != "" {
		line += " dbname=" + connValue(cfg.UpstreamDB)
	}
	if cfg.UpstreamUser != "" {
		line += " user=" + connValue(cfg.UpstreamUser)
		if cfg.UpstreamPassword != "" {
			line += " password=" + connValue(cfg.UpstreamPassword)
		}
	}
	return line
}

func (cfg Config) users() map[string]string {
	if cfg.Users != nil {
		return cfg.Users
	}
	return map[string]string{"postgres": "", "poolsim": "poolsim"}
}

func authFile(users map[string]string) string {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	var b strings.Builder
	for _, u := range names {
		fmt.Fprintf(&b, "%s %s\n", q(u), q(users[u]))
	}
	return b.String()
}

func iniFile(settings map[string]string, dbLine string) string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("; written by poolsim lab/pgbouncer\n[databases]\n")
	b.WriteString(dbLine + "\n\n[pgbouncer]\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, settings[k])
	}
	return b.String()
}

// usersSection is the [users] section of UserLines ("" for none).
func (cfg Config) usersSection() string {
	if len(cfg.UserLines) == 0 {
		return ""
	}
	return "\n[users]\n" + strings.Join(cfg.UserLines, "\n") + "\n"
}

// version runs `pgbouncer --version` and returns the version number,
// e.g. "1.18.0".
func version(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgbouncer: %s --version: %w: %s", path, err, bytes.TrimSpace(out))
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("pgbouncer: %s --version: no version in %q", path, bytes.TrimSpace(out))
	}
	return string(m[1]), nil
}

// InstalledVersion is the version number of the pgbouncer that Find finds,
// e.g. "1.18.0". It wraps ErrNoPgBouncer when there is none.
func InstalledVersion(ctx context.Context) (string, error) {
	path, err := Find()
	if err != nil {
		return "", err
	}
	return version(ctx, path)
}

// VersionAtLeast reports whether PgBouncer version v (e.g. "1.18.0") is
// major.minor or later; a v without a number ("unknown") is not.
func VersionAtLeast(v string, major, minor int) bool {
	return childproc.VersionAtLeast(v, major, minor)
}

// Start writes the configuration, starts pgbouncer and waits until it
// accepts TCP connections. On error nothing is left behind.
func Start(ctx context.Context, cfg Config) (*PgBouncer, error) {
	timeout := cfg.StartTimeout
	if timeout < 0 {
		return nil, fmt.Errorf("pgbouncer: start: StartTimeout %v: expected >= 0 (0 = 30s)", timeout)
	}
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cfg.settings("", 1, ""); err != nil { // validate before touching the disk
		return nil, err
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p, acct, err := newInstance(ctx, cfg.Path, cfg.TempDir, logf)
	if err != nil {
		return nil, err
	}
	p.users = cfg.users()
	p.adminUsers = cfg.AdminUsers
	if p.adminUsers == nil {
		p.adminUsers = []string{"postgres"}
	}
	ok := false
	defer func() {
		if !ok {
			_ = p.Stop()
		}
	}()
	dir := p.dir
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(authFile(p.users)), 0o644); err != nil {
		return nil, fmt.Errorf("pgbouncer: write auth file: %w", err)
	}

	const attempts = 3 // a free port can be taken between choosing and binding
	for attempt := 1; ; attempt++ {
		port := cfg.ListenPort
		if port == 0 {
			if port, err = childproc.FreePort(); err != nil {
				return nil, fmt.Errorf("pgbouncer: start: free port: %w", err)
			}
		}
		settings, err := cfg.settings(dir, port, p.version)
		if err != nil {
			return nil, err
		}
		ini := filepath.Join(dir, "pgbouncer.ini")
		if err := os.WriteFile(ini, []byte(iniFile(settings, cfg.databaseLine())+cfg.usersSection()), 0o644); err != nil {
			return nil, fmt.Errorf("pgbouncer: write pgbouncer.ini: %w", err)
		}
		p.port = port
		p.sockDir = settings["unix_socket_dir"]
		err = p.run(ctx, acct, ini, cfg.SoReuseport && cfg.ListenPort != 0)
		if err == nil {
			break
		}
		_ = p.proc.Stop(int(p.stopSig), 3*time.Second)
		log, _ := os.ReadFile(p.LogPath())
		if cfg.ListenPort == 0 && attempt < attempts && ctx.Err() == nil && bytes.Contains(log, []byte("in use")) {
			logf("pgbouncer: port %d was taken, retrying", port)
			continue
		}
		return nil, fmt.Errorf("%w\n%s", err, childproc.LastLines(log, 20))
	}
	logf("pgbouncer: PgBouncer %s on 127.0.0.1:%d -> %s (%s)", p.version, p.port, strings.ReplaceAll(cfg.databaseLine(), "\n", "; "), p.dir)
	ok = true
	return p, nil
}

// waitReady waits until the port and the Unix socket (when it knows the
// socket's folder) accept connections.
// When shared is set
// (so_reuseport on a port a sibling may already serve) it also waits for
// this process's own "listening on 127.0.0.1:<port>" log line.
func (p *PgBouncer) waitReady(ctx context.Context, shared bool) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	var d net.Dialer
	err := p.proc.WaitReady(ctx, "pgbouncer on port "+strconv.Itoa(p.port), 20*time.Millisecond, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := d.DialContext(cctx, "tcp", addr)
		if err != nil {
			return err
		}
		conn.Close()
		// The Unix socket too: PgBouncer may bind it and listen on it
		// after the TCP port, and a client that dials it in between is
		// refused.
		if p.sockDir != "" {
			sock := filepath.Join(p.sockDir, ".s.PGSQL."+strconv.Itoa(p.port))
			if conn, err = d.DialContext(cctx, "unix", sock); err != nil {
				return err
			}
			conn.Close()
		}
		if !shared {
			return nil
		}
		if log, _ := os.ReadFile(p.LogPath()); bytes.Contains(log, []byte("listening on "+addr)) {
			return nil
		}
		return errors.New(`no "listening on ` + addr + `" in the log yet`)
	})
	if err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	return nil
}

// Port is the TCP port on 127.0.0.1.
func (p *PgBouncer) Port() int { return p.port }

// Host is the listen address, always "127.0.0.1".
func (p *PgBouncer) Host() string { return "127.0.0.1" }

// Dir is the instance folder, removed by Stop.
func (p *PgBouncer) Dir() string { return p.dir }

// LogPath is PgBouncer's log file.
func (p *PgBouncer) LogPath() string { return filepath.Join(p.dir, "pgbouncer.log") }

// ConfigPath is the generated pgbouncer.ini.
func (p *PgBouncer) ConfigPath() string { return filepath.Join(p.dir, "pgbouncer.ini") }

// Pid is the pgbouncer process id.
func (p *PgBouncer) Pid() int { return p.proc.Pid() }

// Version is the PgBouncer version number, e.g. "1.18.0".
func (p *PgBouncer) Version() string { return p.version }

// DSN is a URL for database db as user, with the user's password from the
// auth file when it has one.
func (p *PgBouncer) DSN(db, user string) string {
	u := url.User(user)
	if pw := p.users[user]; pw != "" {
		u = url.UserPassword(user, pw)
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", u.String(), p.port, url.PathEscape(db))
}

// AdminDSN is a URL for the admin console (database "pgbouncer") as the
// first admin user. Use the simple query protocol there.
func (p *PgBouncer) AdminDSN() string { return p.DSN("pgbouncer", p.adminUsers[0]) }

// Stop shuts PgBouncer down (immediate shutdown, SIGKILL to its process
// group after 3 s) and removes the instance folder. It is idempotent: later
// calls return the first call's result.
func (p *PgBouncer) Stop() error {
	p.stopOnce.Do(func() {
		if err := childproc.StopAndRemove(p.proc, int(p.stopSig), 3*time.Second, p.dir); err != nil {
			p.stopErr = fmt.Errorf("pgbouncer: stop: %w", err)
		}
		p.logf("pgbouncer: stopped 127.0.0.1:%d, removed %s", p.port, p.dir)
	})
	return p.stopErr
}

// StartINI starts pgbouncer on an existing pgbouncer.ini (path) that
// listens on 127.0.0.1:port, and waits until the port accepts
// connections. The file and everything it names must be readable by the
// account pgbouncer runs as (postgres when root), and its logfile and
// pidfile, if any, writable; PgBouncer's own output goes to LogPath in a
// fresh instance folder. adminUser is the user AdminDSN logs in as; users
// gives the passwords DSN uses. Stop removes the instance folder, not the
// file.
func StartINI(ctx context.Context, path string, port int, adminUser string, users map[string]string) (*PgBouncer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, acct, err := newInstance(ctx, "", "", func(string, ...any) {})
	if err != nil {
		return nil, err
	}
	p.users, p.adminUsers, p.port = users, []string{adminUser}, port
	if err := p.run(ctx, acct, path, false); err != nil {
		_ = p.Stop()
		log, _ := os.ReadFile(p.LogPath())
		return nil, fmt.Errorf("%w\n%s", err, childproc.LastLines(log, 20))
	}
	return p, nil
}

// newInstance finds pgbouncer (bin, or Find) and its version, and makes
// the instance folder, owned by the account pgbouncer runs as. On error
// nothing is left behind.
func newInstance(ctx context.Context, bin, tempDir string, logf func(string, ...any)) (*PgBouncer, childproc.Account, error) {
	if bin == "" {
		var err error
		if bin, err = Find(); err != nil {
			return nil, childproc.Account{}, fmt.Errorf("pgbouncer: start: %w", err)
		}
	}
	ver, err := version(ctx, bin)
	if err != nil {
		return nil, childproc.Account{}, err
	}
	acct, err := childproc.ServerAccount()
	if err != nil {
		return nil, childproc.Account{}, fmt.Errorf("pgbouncer: start: %w", err)
	}
	dir, err := os.MkdirTemp(tempDir, "poolsim-pgbouncer-")
	if err != nil {
		return nil, childproc.Account{}, fmt.Errorf("pgbouncer: start: %w", err)
	}
	p := &PgBouncer{path: bin, dir: dir, version: ver, logf: logf, stopSig: syscall.SIGTERM}
	if VersionAtLeast(ver, 1, 23) { // SIGTERM became a safe shutdown in 1.23
		p.stopSig = syscall.SIGQUIT
	}
	if err := acct.Chown(dir); err != nil {
		_ = p.Stop()
		return nil, childproc.Account{}, fmt.Errorf("pgbouncer: start: %w", err)
	}
	return p, acct, nil
}

// run starts pgbouncer on ini, its output to LogPath, and waits until
// p.port accepts connections (see waitReady for shared).
func (p *PgBouncer) run(ctx context.Context, acct childproc.Account, ini string, shared bool) error {
	logFile, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pgbouncer: start: %w", err)
	}
	proc, err := childproc.Start(childproc.Spec{Path: p.path, Args: []string{ini}, Dir: p.dir, Output: logFile, Account: acct})
	logFile.Close()
	if err != nil {
		return fmt.Errorf("pgbouncer: start: %w", err)
	}
	p.proc = proc
	p.ini = ini
	return p.waitReady(ctx, shared)
}
