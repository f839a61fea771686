package pooler

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// needTool skips (or fails in CI) when a client program is missing.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is required: %v", name, err)
		}
		t.Skipf("skipping: %s not installed", name)
	}
	return path
}

// pgEnv points libpq programs at the proxy.
func (tp *testProxy) pgEnv() []string {
	host, port, _ := net.SplitHostPort(tp.Addr().String())
	return append(os.Environ(), "PGHOST="+host, "PGPORT="+port, "PGUSER=poolsim", "PGPASSWORD=poolsim",
		"PGDATABASE=poolsim", "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
}

func runTool(ctx context.Context, t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, needTool(t, name), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPsql(t *testing.T) {
	tp := startProxy(t, nil)
	ctx := testCtx(t, 30*time.Second)
	out := runTool(ctx, t, tp.pgEnv(), "psql", "-X", "-A", "-t", "-c", "select 40 + 2")
	if strings.TrimSpace(out) != "42" {
		t.Errorf("psql -c 'select 40 + 2' = %q, want 42", out)
	}
	out = runTool(ctx, t, tp.pgEnv(), "psql", "-X", "-A", "-t", "-d", "pgbouncer", "-c", "SHOW POOLS")
	if !strings.Contains(out, "poolsim|poolsim|") {
		t.Errorf("psql SHOW POOLS = %q, want a poolsim|poolsim row", out)
	}
}

var failedRe = regexp.MustCompile(`number of failed transactions: (\d+)`)
var processedRe = regexp.MustCompile(`number of transactions actually processed: (\d+)`)

// TestPgbench runs pgbench -i, then the TPC-B-like script in simple and
// extended protocol through the proxy in transaction mode: no transaction
// may fail.
func TestPgbench(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Transaction; c.DefaultPoolSize = 5 })
	ctx := testCtx(t, 60*time.Second)
	env := tp.pgEnv()
	runTool(ctx, t, env, "pgbench", "-i", "-q", "-s", "1", "--partitions=0")
	for _, m := range []string{"simple", "extended"} {
		out := runTool(ctx, t, env, "pgbench", "-M", m, "-c", "10", "-j", "2", "-t", "100", "-n")
		if f := failedRe.FindStringSubmatch(out); f != nil && f[1] != "0" {
			t.Errorf("pgbench -M %s: %s failed transactions\n%s", m, f[1], out)
		}
		p := processedRe.FindStringSubmatch(out)
		if p == nil || p[1] != "1000" {
			t.Errorf("pgbench -M %s: processed %v, want 1000\n%s", m, p, out)
		}
	}
}

// TestBenchVsPgBouncer compares pgbench -S TPS through the proxy and
// through a real PgBouncer, interleaved. It is a measurement, not a check:
// it runs only with POOLSIM_BENCH=1 (seconds per run in POOLSIM_BENCH_T).
func TestBenchVsPgBouncer(t *testing.T) {
	if os.Getenv("POOLSIM_BENCH") != "1" {
		t.Skip("set POOLSIM_BENCH=1 to measure")
	}
	secs := os.Getenv("POOLSIM_BENCH_T")
	if secs == "" {
		secs = "10"
	}
	tp := startProxy(t, func(c *Config) { c.PoolMode = poolmode.Transaction; c.DefaultPoolSize = 20; c.Logf = nil })
	ctx := testCtx(t, 10*time.Minute)
	env := tp.pgEnv()
	runTool(ctx, t, env, "pgbench", "-i", "-q", "-s", "10")
	bouncerEnv, bouncerPid := startBouncer(ctx, t)
	tpsRe := regexp.MustCompile(`tps = ([0-9.]+)`)
	latRe := regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	var mu sync.Mutex
	sum := map[string][]float64{}
	for round := range 2 {
		for _, target := range []struct {
			name string
			env  []string
			pid  int
		}{{"proxy", env, 0}, {"pgbouncer", bouncerEnv, bouncerPid}} {
			cpu0 := cpuTime(target.pid)
			out := runTool(ctx, t, target.env, "pgbench", "-S", "-c", "50", "-j", "2", "-T", secs, "-n")
			cpu := cpuTime(target.pid) - cpu0
			tps, _ := strconv.ParseFloat(tpsRe.FindStringSubmatch(out)[1], 64)
			lat, _ := strconv.ParseFloat(latRe.FindStringSubmatch(out)[1], 64)
			n, _ := strconv.ParseFloat(processedRe.FindStringSubmatch(out)[1], 64)
			t.Logf("round %d %-9s tps %8.0f latency %.3f ms, pooler CPU %.1f us/txn", round, target.name, tps, lat,
				float64(cpu.Microseconds())/n)
			mu.Lock()
			sum[target.name] = append(sum[target.name], tps)
			mu.Unlock()
		}
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	t.Logf("%s", fmt.Sprintf("mean tps: proxy %.0f, pgbouncer %.0f, ratio %.2f",
		mean(sum["proxy"]), mean(sum["pgbouncer"]), mean(sum["proxy"])/mean(sum["pgbouncer"])))
}
