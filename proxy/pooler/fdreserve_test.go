//go:build unix

package pooler

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

var fdLimitLine = regexp.MustCompile(`kernel file descriptor limit: (\d+) \(hard: (\d+)\); max_client_conn: (\d+), max expected fd use: (\d+)`)

// TestFDLimitLogLine: at start each pooler logs its descriptor limit beside
// what its settings may need, in PgBouncer's words - max_client_conn + 10
// and each database's pool size, times the users unless the database
// forces one (PgBouncer 1.18's main.c check_limits) - and the same figure
// for the same settings: max_client_conn 100, default_pool_size 3, a
// database with pool_size 5, one forcing a user with pool_size 4, the
// users postgres and poolsim.
func TestFDLimitLogLine(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	lines := []string{
		fmt.Sprintf("fdsized = host=127.0.0.1 port=%d dbname=poolsim pool_size=5", cluster.Port()),
		fmt.Sprintf("fdforced = host=127.0.0.1 port=%d dbname=poolsim user=poolsim password=poolsim pool_size=4", cluster.Port()),
	}
	authFile := filepath.Join(t.TempDir(), "users.txt")
	if err := os.WriteFile(authFile, []byte("\"postgres\" \"\"\n\"poolsim\" \"poolsim\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	figures := map[string]int{}
	for _, tg := range guardTargets(ctx, t, poolmode.Transaction, lines, nil, func(c *Config) {
		c.MaxClientConn, c.DefaultPoolSize, c.AuthFile = 100, 3, authFile
		sized := poolconf.NewDatabase("fdsized")
		sized.Host, sized.Port, sized.DBName, sized.PoolSize = "127.0.0.1", cluster.Port(), "poolsim", 5
		forced := forcedEntry()
		forced.Name, forced.PoolSize = "fdforced", 4
		c.Databases = append(c.Databases, sized, forced)
	}) {
		t.Run(tg.name, func(t *testing.T) {
			waitLog(ctx, t, tg, "max expected fd use: ")
			m := fdLimitLine.FindStringSubmatch(tg.log())
			if m == nil {
				t.Fatalf("no line in PgBouncer's words; the log says:\n%s", tg.log())
			}
			if m[1] != strconv.FormatUint(rl.Cur, 10) || m[2] != strconv.FormatUint(rl.Max, 10) || m[3] != "100" {
				t.Errorf("line %q: want limit %d (hard: %d) and max_client_conn 100", m[0], rl.Cur, rl.Max)
			}
			figures[tg.name], _ = strconv.Atoi(m[4])
		})
	}
	if b, p := figures["pgbouncer"], figures["proxy"]; b != 0 && b != p {
		t.Errorf("max expected fd use: proxy %d, PgBouncer %d for the same settings", p, b)
	}
}

// TestFDLimitWarning: when max_client_conn and the pools may need more
// descriptors than RLIMIT_NOFILE allows, the start-up line is a WARNING.
func TestFDLimitWarning(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	lg := &logLines{t: t}
	startProxy(t, func(c *Config) { c.MaxClientConn, c.Logf = int(rl.Cur), lg.logf })
	want := fmt.Sprintf("WARNING: kernel file descriptor limit: %d (hard: %d); max_client_conn: %d, max expected fd use: %d",
		rl.Cur, rl.Max, rl.Cur, rl.Cur+12)
	if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(lg.text()) {
		t.Errorf("log lacks %q:\n%s", want, lg.text())
	}
}

// TestFDReserve: the reserve holds fdSpares descriptors; take gives one up
// down to keep; a released descriptor refills it and wakes who waits; a
// dial that fails with EMFILE is tried again once a spare made room, and
// its error reads as PgBouncer's strerror.
func TestFDReserve(t *testing.T) {
	var r fdReserve
	r.start()
	defer r.close()
	if len(r.spares) != fdSpares || !r.full() {
		t.Fatalf("%d spares after start, want %d", len(r.spares), fdSpares)
	}
	for i := 0; i < fdSpares-fdKeep; i++ {
		if !r.take(fdKeep) {
			t.Fatalf("take %d: refused with %d spares", i, len(r.spares))
		}
	}
	if r.take(fdKeep) {
		t.Errorf("take went below keep %d", fdKeep)
	}
	if r.exhaustedSince().IsZero() {
		t.Error("a short reserve has no exhaustion time")
	}
	wake := r.wake()
	r.released()
	select {
	case <-wake:
	default:
		t.Error("released woke no one")
	}
	if len(r.spares) != fdSpares || !r.exhaustedSince().IsZero() {
		t.Errorf("after released: %d spares (want %d), exhausted since %v (want zero)", len(r.spares), fdSpares, r.exhaustedSince())
	}

	p := &Proxy{}
	p.fds.start()
	defer p.fds.close()
	tries := 0
	err := p.withSpare(0, func() error {
		tries++
		if tries == 1 {
			return &os.SyscallError{Syscall: "socket", Err: syscall.EMFILE}
		}
		return nil
	})
	if err != nil || tries != 2 || len(p.fds.spares) != fdSpares-1 {
		t.Errorf("withSpare: err %v after %d tries, %d spares left; want nil, 2, %d", err, tries, len(p.fds.spares), fdSpares-1)
	}
	if got := strerror(&os.SyscallError{Syscall: "accept4", Err: syscall.EMFILE}); got != "Too many open files" {
		t.Errorf("strerror(EMFILE) = %q, want PgBouncer's %q", got, "Too many open files")
	}
}
