//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// --emit writes a pgbouncer.ini that PgBouncer and poolsim proxy --config
// both load, with each pool's mode and size.
func TestAdviseEmitLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PgBouncer and a proxy process")
	}
	dir, err := os.MkdirTemp("", "poolsim-emit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	code, _, errOut := runCmd("advise", "web-and-report", "--set", "classes.web.workload.requests_per_session=4", "--slo-p99", "web=150ms",
		"--features", "report=with_hold", "--modes", "session,transaction", "--replications", "2", "--emit", ini, "-q")
	if code != 0 {
		t.Fatalf("advise --emit: exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(ini)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.Contains(text, "pool_mode=transaction") || !strings.Contains(text, "report = pool_mode=session") || !strings.Contains(text, ";;   web -> pool web: 300") {
		t.Fatalf("emitted ini lacks the pools or the application side:\n%s", text)
	}
	// Test-only overrides (later keys win in PgBouncer and the proxy): a
	// free port, no Unix socket, the console for user poolsim.
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(`"poolsim" "poolsim"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	extra := "listen_port = " + strconv.Itoa(port) + "\nunix_socket_dir =\nauth_type = md5\nauth_file = " + filepath.Join(dir, "users.txt") + "\nadmin_users = poolsim\n"
	if err := os.WriteFile(ini, []byte(strings.Replace(text, "max_prepared_statements = 200\n", "", 1)+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := pgbouncer.StartINI(ctx, ini, port, "poolsim", map[string]string{"poolsim": "poolsim"})
	if err != nil {
		if pgclustertest.InCI() || !errors.Is(err, pgbouncer.ErrNoPgBouncer) {
			t.Fatalf("pgbouncer on the emitted ini: %v\n%s", err, text)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	pp := startProxyProcess(t, "--config", ini)
	a := adviseJSON(t, "web-and-report", "--set", "classes.web.workload.requests_per_session=4", "--slo-p99", "web=150ms",
		"--features", "report=with_hold", "--modes", "session,transaction", "--replications", "2")
	webSize := ""
	for _, p := range a.Pools {
		if p.Name == "web" {
			webSize = strconv.Itoa(p.Size)
		}
	}
	for _, tg := range []struct {
		name string
		port int
	}{{"pgbouncer", port}, {"proxy", pp.port}} {
		if got := dbPoolSize(ctx, t, tg.port, "app"); got != webSize {
			t.Errorf("%s: SHOW DATABASES app pool_size = %q, want web's %s", tg.name, got, webSize)
		}
		if got := consoleCell(ctx, t, tg.port, "SHOW DATABASES", "name", "app", "pool_mode"); got != "transaction" {
			t.Errorf("%s: SHOW DATABASES app pool_mode = %q, want transaction", tg.name, got)
		}
	}
}
