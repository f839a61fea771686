package pooler

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// cluster is the one throwaway PostgreSQL shared by the package's tests.
var cluster *pgcluster.Cluster

func TestMain(m *testing.M) {
	code := pgclustertest.RunMain(m, pgcluster.Options{
		MaxConnections:               60,
		SuperuserReservedConnections: pgcluster.ReserveNone,
	}, &cluster)
	if code == 0 {
		// Every proxy started by a test has returned from Serve, so none of
		// its goroutines may be left.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testProxy is a proxy serving on a free loopback port for one test.
type testProxy struct {
	*Proxy
	dsn string // client URL for the poolsim role through the proxy
}

// startProxy starts a proxy in front of the shared cluster; edit adjusts
// the config. It is stopped, and its Serve must have returned, when the test
// ends.
func startProxy(t testing.TB, edit func(*Config)) *testProxy {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream = c.UserDSN()
	cfg.PoolMode = poolmode.Transaction
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.Logf = t.Logf
	cfg.Verbose = true
	cfg.AdminUsers = []string{"poolsim"} // the tests' console user
	cfg.PlainIO = plainIOFor(t)
	if edit != nil {
		edit(&cfg)
	}
	return serveProxy(t, cfg)
}

func serveProxy(t testing.TB, cfg Config) *testProxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lns, err := Listen(&cfg) // cfg.Listen, then ListenMore and the Unix socket
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, lns[0], lns[1:]...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
			// Every client and server is gone: no statement may be left.
			if n := p.ps.size(); n != 0 {
				t.Errorf("after Serve: %d prepared statements still registered", n)
			}
		case <-time.After(cfg.ShutdownTimeout + 10*time.Second):
			t.Errorf("Serve did not return after shutdown")
		}
	})
	host, port, _ := net.SplitHostPort(p.Addr().String())
	dsn := fmt.Sprintf("postgres://poolsim:poolsim@%s/poolsim?sslmode=disable", net.JoinHostPort(host, port))
	return &testProxy{Proxy: p, dsn: dsn}
}

// plainIOFor says which I/O path a test's proxy takes, so that the suite
// runs both where the kernel has io_uring: POOLSIM_TEST_IO=plain or
// uring for every test, unset for half of them each, chosen by the test's
// name (the same path on every run). A kernel without io_uring takes the
// plain path whatever this says.
func plainIOFor(t testing.TB) bool {
	switch v := os.Getenv("POOLSIM_TEST_IO"); v {
	case "plain":
		return true
	case "uring":
		return false
	case "":
		h := fnv.New32a()
		_, _ = h.Write([]byte(t.Name()))
		return h.Sum32()%2 == 1
	default:
		t.Fatalf("POOLSIM_TEST_IO=%q: want plain, uring or nothing (half the tests each)", v)
		return false
	}
}

// adminDSN is the URL of the proxy's console.
func (tp *testProxy) adminDSN() string {
	return strings.Replace(tp.dsn, "/poolsim?", "/pgbouncer?", 1)
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
