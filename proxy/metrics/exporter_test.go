package metrics

import (
	"context"
	"github.com/poolsim/poolsim/models/poolmode"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// exporterModule is the pgbouncer_exporter the test builds: the current
// release, which reads SHOW STATS_TOTALS, POOLS, DATABASES, LISTS, CONFIG,
// CLIENTS and VERSION.
const exporterModule, exporterVersion = "github.com/prometheus-community/pgbouncer_exporter", "v0.12.1"

// exporterBinary returns pgbouncer_exporter, built once from the Go module
// proxy into the user's cache folder. Without a cached build it builds only
// when CI=true or POOLSIM_EXPORTER=1 (a build from cold caches takes
// minutes) and skips otherwise.
func exporterBinary(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache folder for the exporter build: %v", err)
	}
	dir := filepath.Join(cache, "poolsim", "pgbouncer_exporter-"+exporterVersion)
	bin := filepath.Join(dir, "pgbouncer_exporter")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if !pgclustertest.InCI() && os.Getenv("POOLSIM_EXPORTER") != "1" {
		t.Skipf("skipping: no pgbouncer_exporter %s built in %s; POOLSIM_EXPORTER=1 builds it (minutes, once)", exporterVersion, dir)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building pgbouncer_exporter needs the go command: %v", err)
	}
	// `go install module@version` asks the module proxy for the module's
	// version list (for deprecations), which it refuses here; a throwaway
	// module that requires the release builds the same binary.
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module exporterbuild\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	tmp := filepath.Join(work, "pgbouncer_exporter")
	for _, args := range [][]string{
		{"get", exporterModule + "@" + exporterVersion},
		{"build", "-o", tmp, exporterModule},
	} {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built pgbouncer_exporter %s in %v (cached in %s)", exporterVersion, time.Since(start).Round(time.Second), dir)
	return bin
}

// runExporter runs pgbouncer_exporter against a console and returns the
// metric families it serves once its first scrape of the console is done.
func runExporter(ctx context.Context, t *testing.T, bin, consoleDSN string) map[string]bool {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--pgBouncer.connectionString="+consoleDSN, "--web.listen-address="+addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("pgbouncer_exporter output:\n%s", out.String())
		}
	}()
	url := "http://" + addr + "/metrics"
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("pgbouncer_exporter exited:\n%s", out.String())
		case <-ctx.Done():
			t.Fatalf("pgbouncer_exporter not serving %s: %v", url, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	fams := scrape(ctx, t, url)
	if up := value(series(fams, "pgbouncer_up", nil)); up != 1 {
		t.Errorf("pgbouncer_up = %v against %s, want 1", up, consoleDSN)
	}
	names := map[string]bool{}
	for n := range fams {
		if strings.HasPrefix(n, "pgbouncer_") {
			names[n] = true
		}
	}
	return names
}

// TestPgbouncerExporter runs the current pgbouncer_exporter against a
// real PgBouncer 1.18 and against the proxy, each with one pool that has
// served a query: both report pgbouncer_up 1 and the same metric families.
func TestPgbouncerExporter(t *testing.T) {
	bin := exporterBinary(t)
	c := pgclustertest.Need(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 2),
		AdminUsers: []string{"poolsim"}})
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and pgbouncer is required: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	tp := startProxy(t, 2)
	families := map[string]map[string]bool{}
	for _, tg := range []struct{ name, dsn, admin string }{
		{"pgbouncer", b.DSN("poolsim", "poolsim"), b.AdminDSN()},
		{"proxy", tp.dsn, tp.admin},
	} {
		conn, err := pgconn.Connect(ctx, tg.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
		families[tg.name] = runExporter(ctx, t, bin, tg.admin)
		conn.Close(ctx)
	}
	var missing, extra []string
	for n := range families["pgbouncer"] {
		if !families["proxy"][n] {
			missing = append(missing, n)
		}
	}
	for n := range families["proxy"] {
		if !families["pgbouncer"][n] {
			extra = append(extra, n)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("metric families against the proxy differ from PgBouncer's: missing %v, extra %v", missing, extra)
	}
	if len(families["pgbouncer"]) < 20 {
		t.Errorf("only %d families against PgBouncer: %v", len(families["pgbouncer"]), families["pgbouncer"])
	}
	t.Logf("%d metric families on both", len(families["proxy"]))
}
