//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

var (
	cluster    *pgcluster.Cluster
	poolsimBin string
	full       = os.Getenv("POOLSIM_CHAOS") == "full"
	figs       figures
)

func TestMain(m *testing.M) {
	// Many idle clients need many descriptors in this process too.
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	code := 0
	// The binary's folder is removed before each os.Exit: a deferred
	// RemoveAll would never run, and every run would leave a build behind.
	dir, err := os.MkdirTemp("", "poolsim-chaos-")
	if err == nil {
		poolsimBin, err = buildPoolsim(dir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		os.Exit(1)
	}
	code = pgclustertest.RunMain(m, pgcluster.Options{
		MaxConnections:               120,
		SuperuserReservedConnections: pgcluster.ReserveNone,
		// Acknowledged commits must survive a crash-restart: with
		// synchronous_commit off a commit is acknowledged before its WAL
		// leaves PostgreSQL's shared memory, and a crash-restart loses it
		// whatever the pooler does. (fsync stays off: the operating system
		// keeps what was written.)
		ExtraConf: map[string]string{"synchronous_commit": "on"},
	}, &cluster)
	if err := figs.write(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: figures: %v\n", err)
		code = 1
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildPoolsim builds cmd/poolsim into dir, unless POOLSIM_BIN names a
// binary to use.
func buildPoolsim(dir string) (string, error) {
	if b := os.Getenv("POOLSIM_BIN"); b != "" {
		return b, nil
	}
	bin := filepath.Join(dir, "poolsim")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/poolsim/poolsim/cmd/poolsim").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/poolsim: %w\n%s", err, out)
	}
	return bin, nil
}

// settings are the pooler settings a scenario gives both targets.
type settings struct {
	// Each 0 below is PgBouncer's default, for both targets.
	upstreamPort         int // 0 = the cluster
	poolSize             int
	maxClientConn        int
	clientLoginTimeout   time.Duration
	serverConnectTimeout time.Duration
	serverLoginRetry     time.Duration
	queryWaitTimeout     time.Duration
	nofile               int   // RLIMIT_NOFILE, 0 = unchanged
	addressSpace         int64 // RLIMIT_AS in bytes, 0 = unchanged
}

// target is a running pooler: the proxy or PgBouncer.
type target struct {
	name  string // "proxy" or "pgbouncer"
	port  int
	pid   int
	pprof string // proxy: address of its runtime profiles
	log   func() string
	alive func() bool
	stop  func()
}

func (tg *target) addr() string { return fmt.Sprintf("127.0.0.1:%d", tg.port) }

// dsn is a URL through the target: the poolsim role on database poolsim,
// or user on the console.
func (tg *target) dsn() string {
	return fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/poolsim?sslmode=disable&connect_timeout=10", tg.port)
}

func (tg *target) adminDSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pgbouncer?sslmode=disable&connect_timeout=10", tg.port)
}

// targets starts the proxy and PgBouncer with s, one after the other as
// the scenario asks for them: each is stopped when the test ends.
func eachTarget(t *testing.T, s settings, run func(t *testing.T, tg *target)) {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	if s.upstreamPort == 0 {
		s.upstreamPort = c.Port()
	}
	for _, start := range []func(*testing.T, settings) *target{startProxy, startBouncer} {
		tg := start(t, s)
		t.Run(tg.name, func(t *testing.T) { run(t, tg) })
		tg.stop()
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// startProxy runs `poolsim proxy` with s, under the limits s asks for.
func startProxy(t *testing.T, s settings) *target {
	t.Helper()
	port, pprofPort := freePort(t), freePort(t)
	args := []string{"proxy", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--upstream", fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/poolsim?sslmode=disable", s.upstreamPort),
		"--mode", "transaction", "--admin-users", "postgres",
		"--pprof-listen", fmt.Sprintf("127.0.0.1:%d", pprofPort)}
	if s.poolSize > 0 {
		args = append(args, "--pool-size", strconv.Itoa(s.poolSize))
	}
	if s.maxClientConn > 0 {
		args = append(args, "--max-client-conn", strconv.Itoa(s.maxClientConn))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--client-login-timeout", s.clientLoginTimeout}, {"--server-connect-timeout", s.serverConnectTimeout},
		{"--server-login-retry", s.serverLoginRetry}, {"--query-wait-timeout", s.queryWaitTimeout}} {
		if d.v > 0 {
			args = append(args, d.flag, d.v.String())
		}
	}
	// The limits are set by the shell before exec, so the proxy sees them
	// from its start, as `ulimit` in a service script would.
	var limits []string
	if s.nofile > 0 {
		limits = append(limits, fmt.Sprintf("ulimit -n %d", s.nofile))
	}
	if s.addressSpace > 0 {
		limits = append(limits, fmt.Sprintf("ulimit -v %d", s.addressSpace/1024))
	}
	cmd := exec.Command(poolsimBin, args...)
	if len(limits) > 0 {
		cmd = exec.Command("/bin/sh", append([]string{"-c", strings.Join(limits, " && ") + ` && exec "$0" "$@"`, poolsimBin}, args...)...)
	}
	// The test's own PG* variables must not reach the proxy.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start poolsim proxy: %v", err)
	}
	exited := make(chan struct{})
	go func() { // owner: the target; ends when the process does
		_ = cmd.Wait()
		close(exited)
	}()
	tg := &target{name: "proxy", port: port, pid: cmd.Process.Pid, pprof: fmt.Sprintf("127.0.0.1:%d", pprofPort), log: out.String}
	tg.alive = func() bool {
		select {
		case <-exited:
			return false
		default:
			return true
		}
	}
	var once sync.Once
	tg.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
	}
	t.Cleanup(tg.stop)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "listening on") {
		if !tg.alive() || time.Now().After(deadline) {
			t.Fatalf("poolsim proxy did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return tg
}

// startBouncer runs PgBouncer with s, under the limits s asks for.
func startBouncer(t *testing.T, s settings) *target {
	t.Helper()
	extra := map[string]string{}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"client_login_timeout", s.clientLoginTimeout}, {"server_connect_timeout", s.serverConnectTimeout},
		{"server_login_retry", s.serverLoginRetry}} {
		if d.v > 0 {
			extra[d.key] = secs(d.v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Limits are set by a wrapper script before exec, as for the proxy
	// (prlimit on another account's process needs CAP_SYS_RESOURCE).
	var path string
	if s.nofile > 0 || s.addressSpace > 0 {
		real, err := pgbouncer.Find()
		if err != nil {
			if pgclustertest.InCI() {
				t.Fatalf("pgbouncer: %v", err)
			}
			t.Skipf("pgbouncer: %v", err)
		}
		script := "#!/bin/sh\n"
		if s.nofile > 0 {
			script += fmt.Sprintf("ulimit -n %d || exit 1\n", s.nofile)
		}
		if s.addressSpace > 0 {
			script += fmt.Sprintf("ulimit -v %d || exit 1\n", s.addressSpace/1024)
		}
		script += fmt.Sprintf("exec %s \"$@\"\n", real)
		f, err := os.CreateTemp("", "pgbouncer-limits-*.sh")
		if err != nil {
			t.Fatal(err)
		}
		path = f.Name()
		t.Cleanup(func() { os.Remove(path) })
		if _, err := f.WriteString(script); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Chmod(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: s.upstreamPort, Path: path, Extra: extra,
		Pooling: pgbouncer.Pool(poolmode.Transaction, cmp.Or(s.poolSize, 20), func(p *poolconf.Pooling) {
			p.MaxClientConn = cmp.Or(s.maxClientConn, p.MaxClientConn)
			p.QueryWaitTimeout = cmp.Or(s.queryWaitTimeout, p.QueryWaitTimeout)
		})})
	if err != nil {
		if pgclustertest.InCI() || !errors.Is(err, pgbouncer.ErrNoPgBouncer) {
			t.Fatalf("pgbouncer: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	tg := &target{name: "pgbouncer", port: b.Port(), pid: b.Pid()}
	tg.log = func() string { l, _ := os.ReadFile(b.LogPath()); return string(l) }
	tg.alive = func() bool {
		err := syscall.Kill(tg.pid, 0)
		return (err == nil || errors.Is(err, syscall.EPERM)) && !isZombie(tg.pid)
	}
	tg.stop = func() { _ = b.Stop() }
	t.Cleanup(tg.stop)
	return tg
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// procStatus reads one kB or count field of /proc/pid/status.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}

// rss is the process's resident set in bytes.
func rss(pid int) int64 { return procStatus(pid, "VmRSS") * 1024 }

// fds counts the process's open descriptors.
func fds(pid int) int {
	e, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(e)
}

var goroutinesRE = regexp.MustCompile(`goroutine profile: total (\d+)`)

// goroutines asks the proxy's runtime profiles for its goroutine count;
// -1 for PgBouncer (one thread, no goroutines) or on failure.
func (tg *target) goroutines() int {
	if tg.pprof == "" {
		return -1
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + tg.pprof + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	m := goroutinesRE.FindSubmatch(b)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// settledRSS waits until the process's RSS has moved by less than 1 %
// over the last settleWindow (at most most), and returns the last sample.
func settledRSS(pid int, most time.Duration) int64 {
	deadline := time.Now().Add(most)
	n := int(settleWindow / time.Second)
	var win []int64
	for {
		win = append(win, rss(pid))
		if len(win) > n {
			win = win[1:]
		}
		if len(win) == n {
			lo, hi := win[0], win[0]
			for _, v := range win {
				lo, hi = min(lo, v), max(hi, v)
			}
			if hi-lo < hi/100 || time.Now().After(deadline) {
				return win[len(win)-1]
			}
		}
		time.Sleep(time.Second)
	}
}

// settleWindow is how long the RSS must hold still to count as settled.
// The proxy gives free heap back at a check every 5 s (proxy/pooler's
// memoryCheck), and counts a login storm's garbage only at a check with
// no collection since the one before: up to two checks, 10 s, after the
// storm. An eight-second window could close before that, and did once in
// CI (2026-12-01: RSS right after 2,000 logins and "settled" both
// 25.2 MB, 1.55 KB per idle client; 0.74-0.91 KB in three runs here with
// the release inside the window).
const settleWindow = 15 * time.Second

// loginRaw logs in as poolsim on database poolsim over a raw connection
// and returns it once ReadyForQuery came (or an error).
func loginRaw(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "poolsim", "database": "poolsim"}}).Encode(nil)
	if _, err := conn.Write(b); err != nil {
		conn.Close()
		return nil, err
	}
	fe := pgproto3.NewFrontend(bufio.NewReaderSize(conn, 512), conn)
	for {
		m, err := fe.Receive()
		if err != nil {
			conn.Close()
			return nil, err
		}
		switch m := m.(type) {
		case *pgproto3.AuthenticationCleartextPassword, *pgproto3.AuthenticationMD5Password:
			// PgBouncer's auth_type trust never asks; nothing else is used.
			conn.Close()
			return nil, fmt.Errorf("login asked for a password")
		case *pgproto3.ErrorResponse:
			conn.Close()
			return nil, fmt.Errorf("login: %s %s", m.Code, m.Message)
		case *pgproto3.ReadyForQuery:
			_ = conn.SetDeadline(time.Time{})
			return conn, nil
		}
	}
}

// figures is the table the suite prints and writes (POOLSIM_CHAOS_OUT).
type figures struct {
	mu   sync.Mutex
	rows []figure
}

type figure struct{ scenario, metric, target, value string }

func (f *figures) add(scenario, metric, target, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows = append(f.rows, figure{scenario, metric, target, fmt.Sprintf(format, args...)})
}

// write prints the figures as a markdown table, proxy beside PgBouncer,
// and writes them to POOLSIM_CHAOS_OUT when it is set.
func (f *figures) write() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rows) == 0 {
		return nil
	}
	type key struct{ scenario, metric string }
	var order []key
	vals := map[key]map[string]string{}
	for _, r := range f.rows {
		k := key{r.scenario, r.metric}
		if vals[k] == nil {
			vals[k] = map[string]string{}
			order = append(order, k)
		}
		vals[k][r.target] = r.value
	}
	var b strings.Builder
	mode := "short (CI)"
	if full {
		mode = "full"
	}
	fmt.Fprintf(&b, "Chaos suite, %s run, %s.\n\n", mode, time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| scenario | measure | poolsim proxy | PgBouncer 1.18 |\n|---|---|---|---|\n")
	for _, k := range order {
		v := vals[k]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", k.scenario, k.metric, or(v["proxy"], "-"), or(v["pgbouncer"], "-"))
	}
	fmt.Print("\n" + b.String())
	if out := os.Getenv("POOLSIM_CHAOS_OUT"); out != "" {
		return os.WriteFile(out, []byte(b.String()), 0o644)
	}
	return nil
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// peerBugs are PgBouncer 1.18's known crashes, fixed in later releases:
// when the peer dies of one, it is the peer's finding, recorded in the
// table, not a failure of the suite. Any other death fails.
var peerBugs = []struct{ fatal, about string }{
	// A server connection being cancelled (SV_BEING_CANCELED) gets a
	// packet from PostgreSQL: pgbouncer/pgbouncer#822, fixed by #927 in 1.20.1.
	{"server_proto: server in bad state: 11", "pgbouncer#822, fixed in 1.20.1"},
	// The same for a cancel request's own connection (SV_ACTIVE_CANCEL):
	// pgbouncer/pgbouncer#847, fixed by #849 in 1.19.1.
	{"server_proto: server in bad state: 14", "pgbouncer#847, fixed in 1.19.1"},
}

// mustLive fails the test if tg has died, unless tg is PgBouncer and its
// log holds one of peerBugs: then the crash goes into the table under
// scenario and the test goes on. The fault scenarios call it after their
// figures; they are the ones whose cancel requests meet those bugs.
func (tg *target) mustLive(t *testing.T, scenario string) {
	t.Helper()
	if tg.alive() {
		return
	}
	log := tg.log()
	if tg.name == "pgbouncer" {
		for _, b := range peerBugs {
			if strings.Contains(log, b.fatal) {
				figs.add(scenario, "pooler crashed", tg.name, "FATAL %s (%s)", b.fatal, b.about)
				t.Logf("PgBouncer crashed of a known bug (%s):\n%s", b.about, tail(log, 5))
				return
			}
		}
	}
	t.Fatalf("%s died:\n%s", tg.name, tail(log, 15))
}
