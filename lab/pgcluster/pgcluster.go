package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

// ErrNoPostgres means no PostgreSQL server binaries (postgres and initdb)
// were found.
var ErrNoPostgres = errors.New("pgcluster: no PostgreSQL server binaries found (looked for postgres and initdb side by side in $PATH, " +
	strings.Join(searchGlobs, ", ") + "); install them: apt-get install postgresql")

// searchGlobs are the folders FindBinDir tries after $PATH, in order.
var searchGlobs = []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin"}

// Role and database created by Start for non-superuser connections.
const (
	UserName     = "poolsim"
	UserPassword = "poolsim"
	UserDatabase = "poolsim"
	// Superuser is the bootstrap superuser (initdb -U postgres).
	Superuser = "postgres"
)

// ReserveNone sets superuser_reserved_connections to 0 (see Options).
const ReserveNone = -1

// Auth methods accepted in Options.Auth.
const (
	AuthTrust    = "trust"
	AuthSCRAM    = "scram-sha-256"
	AuthMD5      = "md5"
	AuthPassword = "password"
)

// DefaultStartTimeout bounds Start when Options.StartTimeout is 0.
const DefaultStartTimeout = 3 * time.Minute

// Options configures a cluster. The zero value is a stock cluster with
// max_connections 100 and trust authentication.
type Options struct {
	// MaxConnections is max_connections; 0 means 100 (PostgreSQL's default).
	MaxConnections int
	// SuperuserReservedConnections is superuser_reserved_connections:
	// 0 means PostgreSQL's default (3); ReserveNone (-1) writes 0, so that
	// every one of MaxConnections slots is usable by the poolsim role, as the
	// model assumes; a positive value is written as is. It must be below
	// MaxConnections.
	SuperuserReservedConnections int
	// Auth is the pg_hba method for TCP connections of every role except the
	// postgres superuser (which is always trust): "" or "trust",
	// "scram-sha-256", "md5" or "password". With "md5" the poolsim password
	// is stored as an MD5 hash so the md5 exchange really happens.
	Auth string
	// ExtraConf holds extra postgresql.conf settings, written sorted by key
	// after the ones above (so they override them). Values are quoted.
	ExtraConf map[string]string
	// BinDir is the folder with postgres and initdb; "" = FindBinDir().
	BinDir string
	// TempDir is the parent of the cluster's folder; "" = os.TempDir(). It
	// must be reachable by the postgres account when running as root.
	TempDir string
	// StartTimeout bounds initdb + start-up + role creation; 0 = 3 min, a
	// guard against a hang (initdb alone took 58 s on a 2-core machine
	// running the proxy's tests beside two CPU burners).
	StartTimeout time.Duration
	// Logf, when set, receives one line per step.
	Logf func(format string, args ...any)
}

// Cluster is a running throwaway PostgreSQL.
type Cluster struct {
	binDir    string
	dir       string
	port      int
	version   string
	versionNo int
	maxConn   int
	reserved  int
	logf      func(string, ...any)
	proc      *childproc.Process

	stopOnce sync.Once
	stopErr  error
}

// FindBinDir returns the folder holding the PostgreSQL server binaries:
// the folder of `postgres` found in $PATH (symlinks resolved) when initdb is
// next to it, else the highest version under /usr/lib/postgresql/*/bin (then
// /usr/pgsql-*/bin, /usr/local/pgsql/bin). It returns an error wrapping
// ErrNoPostgres when there is none.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasServer(dir) {
			return dir, nil
		}
	}
	for _, g := range searchGlobs {
		dirs, _ := filepath.Glob(g)
		// Newest first: 16 before 15 before 9.6.
		sort.Slice(dirs, func(i, j int) bool {
			if c := childproc.CompareVersions(dirs[i], dirs[j]); c != 0 {
				return c > 0
			}
			return dirs[i] > dirs[j]
		})
		for _, d := range dirs {
			if hasServer(d) {
				return d, nil
			}
		}
	}
	return "", ErrNoPostgres
}

func hasServer(dir string) bool {
	for _, b := range []string{"postgres", "initdb"} {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

var confKeyRE = regexp.MustCompile(`^[a-z_][a-z0-9_.]*$`)

func (o Options) validate() (maxConn, reserved int, err error) {
	maxConn = o.MaxConnections
	if maxConn == 0 {
		maxConn = 100
	}
	if maxConn < 1 || maxConn > 262143 {
		return 0, 0, fmt.Errorf("pgcluster: start: MaxConnections %d: expected 1..262143 (0 = 100)", o.MaxConnections)
	}
	switch {
	case o.SuperuserReservedConnections == 0:
		reserved = 3
	case o.SuperuserReservedConnections == ReserveNone:
		reserved = 0
	case o.SuperuserReservedConnections > 0:
		reserved = o.SuperuserReservedConnections
	default:
		return 0, 0, fmt.Errorf("pgcluster: start: SuperuserReservedConnections %d: expected 0 (default 3), ReserveNone (-1) or a positive count", o.SuperuserReservedConnections)
	}
	if reserved >= maxConn {
		return 0, 0, fmt.Errorf("pgcluster: start: superuser_reserved_connections %d must be below max_connections %d (use ReserveNone for 0)", reserved, maxConn)
	}
	switch o.Auth {
	case "", AuthTrust, AuthSCRAM, AuthMD5, AuthPassword:
	default:
		return 0, 0, fmt.Errorf("pgcluster: start: Auth %q: expected trust, scram-sha-256, md5 or password", o.Auth)
	}
	for k := range o.ExtraConf {
		if !confKeyRE.MatchString(k) {
			return 0, 0, fmt.Errorf("pgcluster: start: ExtraConf key %q: expected a PostgreSQL setting name", k)
		}
	}
	if o.StartTimeout < 0 {
		return 0, 0, fmt.Errorf("pgcluster: start: StartTimeout %v: expected >= 0 (0 = 3m)", o.StartTimeout)
	}
	return maxConn, reserved, nil
}

// Start creates and starts a cluster. On error nothing is left behind.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	maxConn, reserved, err := opts.validate()
	if err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, fmt.Errorf("pgcluster: start: %w", err)
		}
	} else if !hasServer(binDir) {
		return nil, fmt.Errorf("pgcluster: start: BinDir %s has no postgres and initdb: %w", binDir, ErrNoPostgres)
	}
	acct, err := childproc.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: start: %w", err)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	sweepStale(opts.TempDir, logf)
	dir, err := os.MkdirTemp(opts.TempDir, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: start: %w", err)
	}
	c := &Cluster{binDir: binDir, dir: dir, maxConn: maxConn, reserved: reserved, logf: logf}
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()
	if err := acct.Chown(dir); err != nil {
		return nil, fmt.Errorf("pgcluster: start: %w", err)
	}

	t0 := time.Now()
	out, err := childproc.Run(ctx, childproc.Spec{
		Path: filepath.Join(binDir, "initdb"),
		Args: []string{"-D", c.DataDir(), "-U", Superuser, "-A", "trust", "-E", "UTF8",
			"--locale=C", "--no-sync"},
		Dir:     dir,
		Account: acct,
	})
	if err != nil {
		hint := ""
		if acct.Switch && errors.Is(err, os.ErrPermission) {
			hint = fmt.Sprintf(" (every folder above %s must be searchable by the %s account)", dir, acct.Name)
		}
		return nil, fmt.Errorf("pgcluster: initdb: %w%s\n%s", err, hint, childproc.LastLines(out, 20))
	}
	logf("pgcluster: initdb %s in %v", c.DataDir(), time.Since(t0).Round(time.Millisecond))

	if err := c.writeConf(opts); err != nil {
		return nil, err
	}
	if err := c.startPostmaster(ctx, acct); err != nil {
		return nil, err
	}
	if err := c.setup(ctx, opts.Auth); err != nil {
		return nil, err
	}
	logf("pgcluster: PostgreSQL %s on 127.0.0.1:%d ready in %v (max_connections %d, superuser_reserved_connections %d)",
		c.version, c.port, time.Since(t0).Round(time.Millisecond), maxConn, reserved)
	ok = true
	return c, nil
}

// dirPrefix starts the name of every cluster folder.
const dirPrefix = "poolsim-pg-"

// staleAge is how old an abandoned cluster folder must be before Start
// removes it.
const staleAge = 15 * time.Minute

// sweepStale removes cluster folders left behind by processes that died
// without Stop (the postmaster itself is gone by then: see Pdeathsig): a
// folder qualifies when it is older than staleAge and has no postmaster.pid
// naming a live process. Errors are ignored; it is housekeeping.
func sweepStale(parent string, logf func(string, ...any)) {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	for _, d := range dirs {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() || time.Since(st.ModTime()) < staleAge {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			line, _, _ := strings.Cut(string(b), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err != nil || !childproc.Exited(pid) {
				continue
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if os.RemoveAll(d) == nil {
			logf("pgcluster: removed abandoned cluster folder %s", d)
		}
	}
}

func quoteConf(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

func (c *Cluster) writeConf(opts Options) error {
	var b strings.Builder
	b.WriteString("\n# written by poolsim pgcluster\n")
	set := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, quoteConf(v)) }
	set("listen_addresses", "127.0.0.1")
	set("unix_socket_directories", c.dir)
	set("max_connections", strconv.Itoa(c.maxConn))
	set("superuser_reserved_connections", strconv.Itoa(c.reserved))
	set("fsync", "off")
	set("synchronous_commit", "off")
	set("full_page_writes", "off")
	set("logging_collector", "off")
	keys := make([]string, 0, len(opts.ExtraConf))
	for k := range opts.ExtraConf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(k, opts.ExtraConf[k])
	}
	conf := filepath.Join(c.DataDir(), "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: write postgresql.conf: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("pgcluster: write postgresql.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgcluster: write postgresql.conf: %w", err)
	}

	auth := opts.Auth
	if auth == "" {
		auth = AuthTrust
	}
	hba := "# written by poolsim pgcluster\n" +
		"local all all trust\n" +
		"host all " + Superuser + " 127.0.0.1/32 trust\n" +
		"host all all 127.0.0.1/32 " + auth + "\n"
	// WriteFile keeps the existing file's owner (the postgres account).
	if err := os.WriteFile(filepath.Join(c.DataDir(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write pg_hba.conf: %w", err)
	}
	return nil
}

func (c *Cluster) startPostmaster(ctx context.Context, acct childproc.Account) error {
	const attempts = 3 // a free port can be taken between FreePort and bind
	for attempt := 1; ; attempt++ {
		port, err := childproc.FreePort()
		if err != nil {
			return fmt.Errorf("pgcluster: start postgres: free port: %w", err)
		}
		err = c.spawn(ctx, acct, port, os.O_TRUNC)
		if err == nil {
			return nil
		}
		log, _ := os.ReadFile(c.LogPath())
		if attempt < attempts && ctx.Err() == nil && bytes.Contains(log, []byte("could not bind")) {
			c.logf("pgcluster: port %d was taken, retrying", port)
			continue
		}
		return fmt.Errorf("%w\n%s", err, childproc.LastLines(log, 20))
	}
}

// spawn starts the postmaster on port, its output to LogPath (opened with
// the extra flag os.O_TRUNC or os.O_APPEND), and waits until it accepts
// connections; on error it is stopped again.
func (c *Cluster) spawn(ctx context.Context, acct childproc.Account, port int, flag int) error {
	logFile, err := os.OpenFile(c.LogPath(), os.O_CREATE|os.O_WRONLY|flag, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	proc, err := childproc.Start(childproc.Spec{
		Path:        filepath.Join(c.binDir, "postgres"),
		Args:        []string{"-D", c.DataDir(), "-p", strconv.Itoa(port)},
		Dir:         c.dir,
		Output:      logFile,
		Account:     acct,
		DeathSignal: int(syscall.SIGQUIT),
	})
	logFile.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	c.proc, c.port = proc, port
	if err := c.waitReady(ctx); err != nil {
		_ = proc.Stop(int(syscall.SIGQUIT), 5*time.Second)
		return err
	}
	return nil
}

// Restart restarts PostgreSQL as `pg_ctl restart -m fast` does: SIGINT to
// the postmaster (fast shutdown: every backend ends and its client reads
// "terminating connection due to administrator command"; meanwhile new
// connections are refused with "the database system is shutting down",
// then not accepted at all), a wait for it to exit (SIGKILL to its group
// after 10 s), and a new postmaster on the same port and data directory,
// returned once it accepts connections. Its log is appended to LogPath.
// Bounded by ctx; it must not run concurrently with Stop.
func (c *Cluster) Restart(ctx context.Context) error {
	acct, err := childproc.ServerAccount()
	if err != nil {
		return fmt.Errorf("pgcluster: restart: %w", err)
	}
	if err := c.proc.Stop(int(syscall.SIGINT), 10*time.Second); err != nil {
		return fmt.Errorf("pgcluster: restart: %w", err)
	}
	if err := c.spawn(ctx, acct, c.port, os.O_APPEND); err != nil {
		log, _ := os.ReadFile(c.LogPath())
		return fmt.Errorf("pgcluster: restart: %w\n%s", err, childproc.LastLines(log, 20))
	}
	c.logf("pgcluster: restarted 127.0.0.1:%d", c.port)
	return nil
}

// waitReady polls until the postmaster accepts a superuser connection.
func (c *Cluster) waitReady(ctx context.Context) error {
	var pid uint32
	err := c.proc.WaitReady(ctx, fmt.Sprintf("postgres on port %d", c.port), 50*time.Millisecond, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := pgconn.Connect(cctx, c.SuperuserDSN("postgres"))
		if err != nil {
			return err
		}
		c.version = conn.ParameterStatus("server_version")
		pid = conn.PID()
		_ = conn.Close(ctx)
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return c.WaitBackendsExit(ctx, pid)
}

// setup creates the poolsim role and database.
func (c *Cluster) setup(ctx context.Context, auth string) error {
	conn, err := pgconn.Connect(ctx, c.SuperuserDSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: setup: %w", err)
	}
	pid := conn.PID()
	defer conn.Close(context.Background())
	stmts := []string{}
	if auth == AuthMD5 {
		stmts = append(stmts, "SET password_encryption = 'md5'")
	}
	stmts = append(stmts,
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", UserName, UserPassword),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", UserDatabase, UserName),
		"SHOW server_version_num")
	for _, s := range stmts {
		res, err := conn.Exec(ctx, s).ReadAll()
		if err != nil {
			return fmt.Errorf("pgcluster: setup: %s: %w", s, err)
		}
		if strings.HasPrefix(s, "SHOW") && len(res) == 1 && len(res[0].Rows) == 1 {
			c.versionNo, _ = strconv.Atoi(string(res[0].Rows[0][0]))
		}
	}
	// Leave every connection slot free for the caller.
	if err := conn.Close(ctx); err != nil {
		return fmt.Errorf("pgcluster: setup: close: %w", err)
	}
	return c.WaitBackendsExit(ctx, pid)
}

// WaitBackendsExit waits until the backends with these process ids (see
// pgconn.PgConn.PID) have exited. PostgreSQL frees a connection slot only
// when the backend process ends, a moment after its client has closed the
// connection; call this after closing connections when the next step
// counts on max_connections slots being free. Bounded by ctx and 10 s.
func (c *Cluster) WaitBackendsExit(ctx context.Context, pids ...uint32) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, pid := range pids {
		for !childproc.Exited(int(pid)) {
			t := time.NewTimer(5 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("pgcluster: wait for backend %d to exit: %w", pid, ctx.Err())
			case <-t.C:
			}
		}
	}
	return nil
}

// auxiliaryTitles are the process titles (after "postgres: ") of the
// postmaster's children that serve no client connection and take no
// max_connections slot (PostgreSQL 12 to 17).
var auxiliaryTitles = []string{"checkpointer", "background writer", "walwriter", "autovacuum launcher",
	"autovacuum worker", "logical replication launcher", "logical replication worker",
	"logical replication apply worker", "logical replication tablesync worker", "stats collector",
	"archiver", "startup", "walreceiver", "walsender", "walsummarizer", "parallel worker", "io worker"}

// WaitClientBackendsExit waits until no child of the postmaster serves a
// client connection but the backends in except: every connection closed
// before the call has its backend gone and its max_connections slot free.
// pg_stat_activity is not enough for that: a backend leaves it before it
// frees its slot, and on a busy machine a row's closed connections can
// still hold every slot after it shows none. A child is taken as a
// client's backend unless its title names an auxiliary process (one just
// forked, still titled as the postmaster, counts). It reads /proc: on
// other systems it returns an error that is errors.ErrUnsupported.
// Bounded by ctx and 10 s.
func (c *Cluster) WaitClientBackendsExit(ctx context.Context, except ...uint32) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		kids, err := childproc.Children(c.Pid())
		if err != nil {
			return fmt.Errorf("pgcluster: wait for client backends to exit: %w", err)
		}
		busy := 0
		for pid, title := range kids {
			if !slices.Contains(except, uint32(pid)) && !auxiliary(title) {
				busy = pid
				break
			}
		}
		if busy == 0 {
			return nil
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("pgcluster: wait for client backends to exit (%d is still up): %w", busy, ctx.Err())
		case <-t.C:
		}
	}
}

// auxiliary reports whether a postmaster child's title names an
// auxiliary process.
func auxiliary(title string) bool {
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return false
	}
	for _, a := range auxiliaryTitles {
		if rest == a || strings.HasPrefix(rest, a+" ") {
			return true
		}
	}
	return false
}

// Port is the TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Host is the listen address, always "127.0.0.1".
func (c *Cluster) Host() string { return "127.0.0.1" }

// SocketDir is the folder holding the Unix socket (.s.PGSQL.<port>).
func (c *Cluster) SocketDir() string { return c.dir }

// Dir is the cluster's temporary folder, removed by Stop.
func (c *Cluster) Dir() string { return c.dir }

// DataDir is the data directory (PGDATA).
func (c *Cluster) DataDir() string { return filepath.Join(c.dir, "data") }

// LogPath is the postmaster's log file (its stderr).
func (c *Cluster) LogPath() string { return filepath.Join(c.dir, "postgres.log") }

// BinDir is the folder of the binaries in use (pgbench and psql are
// usually there too).
func (c *Cluster) BinDir() string { return c.binDir }

// Pid is the postmaster's process id (and process group id).
func (c *Cluster) Pid() int { return c.proc.Pid() }

// MaxConnections is the max_connections in force.
func (c *Cluster) MaxConnections() int { return c.maxConn }

// SuperuserReservedConnections is the superuser_reserved_connections in force.
func (c *Cluster) SuperuserReservedConnections() int { return c.reserved }

// Version is the server_version string, e.g. "15.8 (Debian 15.8-0+deb12u1)".
func (c *Cluster) Version() string { return c.version }

// VersionNum is server_version_num, e.g. 150008.
func (c *Cluster) VersionNum() int { return c.versionNo }

// SuperuserDSN is a URL for the postgres superuser and database db
// (trust, no password).
func (c *Cluster) SuperuserDSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, c.port, url.PathEscape(db))
}

// UserDSN is a URL for the non-superuser role poolsim and its database
// poolsim, with its password. superuser_reserved_connections slots are not
// available to it, as in the model.
func (c *Cluster) UserDSN() string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", UserName, UserPassword, c.port, UserDatabase)
}

// Stop shuts the cluster down — SIGQUIT to the postmaster (immediate
// shutdown, as `pg_ctl stop -m immediate`), SIGKILL to its process group
// after 10 s — and removes the temporary folder. It is idempotent: later
// calls return the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if err := childproc.StopAndRemove(c.proc, int(syscall.SIGQUIT), 10*time.Second, c.dir); err != nil {
			c.stopErr = fmt.Errorf("pgcluster: stop: %w", err)
		}
		c.logf("pgcluster: stopped 127.0.0.1:%d, removed %s", c.port, c.dir)
	})
	return c.stopErr
}
