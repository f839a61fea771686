package pooler

import (
	"context"
	"github.com/poolsim/poolsim/models/poolmode"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
)

// startBouncer starts a real PgBouncer (transaction mode, pool 20) in front
// of the shared cluster and returns libpq environment pointing at it.
func startBouncer(ctx context.Context, t *testing.T) ([]string, int) {
	t.Helper()
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{
		UpstreamPort: cluster.Port(),
		Pooling:      pgbouncer.Pool(poolmode.Transaction, 20),
	})
	if err != nil {
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return append(os.Environ(), "PGHOST="+b.Host(), "PGPORT="+strconv.Itoa(b.Port()), "PGUSER=poolsim",
		"PGPASSWORD=poolsim", "PGDATABASE=poolsim", "PGSSLMODE=disable"), b.Pid()
}

// cpuTime is the CPU time (user + system) used so far by this process
// (pid 0) or by another process.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}
