package probe_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/proxy/pooler"
)

var cluster *pgcluster.Cluster

func TestMain(m *testing.M) {
	code := pgclustertest.RunMain(m, pgcluster.Options{MaxConnections: 20, SuperuserReservedConnections: pgcluster.ReserveNone}, &cluster)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startProxy serves poolsim's proxy with a pool of two for t.
func startProxy(t *testing.T, c *pgcluster.Cluster, mode poolmode.Mode) string {
	return startProxyPrepared(t, c, mode, 0)
}

func startProxyPrepared(t *testing.T, c *pgcluster.Cluster, mode poolmode.Mode, maxPrepared int) string {
	t.Helper()
	cfg := pooler.DefaultConfig()
	cfg.MaxPreparedStatements = maxPrepared
	cfg.Upstream = c.UserDSN()
	cfg.PoolMode = mode
	cfg.DefaultPoolSize = 2
	cfg.ShutdownTimeout = time.Second
	px, err := pooler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- px.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", pgcluster.UserName, pgcluster.UserPassword, px.Addr(), pgcluster.UserDatabase)
}

// startBouncer starts pgbouncer with a pool of two for t; it skips without
// pgbouncer, or fails under CI.
func startBouncer(t *testing.T, c *pgcluster.Cluster, mode poolmode.Mode) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(mode, 2)})
	if errors.Is(err, pgbouncer.ErrNoPgBouncer) {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and pgbouncer is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("pgbouncer: %v", err)
		}
	})
	return b.DSN(pgcluster.UserDatabase, pgcluster.UserName)
}

// TestProbesAgreeWithCompat probes session and transaction pooling through
// poolsim's proxy and through PgBouncer (1.18 has no
// max_prepared_statements, so protocol-level prepared statements break in
// transaction mode), and straight against PostgreSQL.
func TestProbesAgreeWithCompat(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	targets := []struct {
		name  string
		start func(*testing.T, *pgcluster.Cluster, poolmode.Mode) string
	}{{"proxy", startProxy}, {"pgbouncer", startBouncer}}
	for _, tg := range targets {
		for _, mode := range []poolmode.Mode{poolmode.Session, poolmode.Transaction} {
			t.Run(tg.name+"/"+mode.String(), func(t *testing.T) {
				dsn := tg.start(t, c, mode)
				check(t, probe.Spec{DSN: dsn, NotifyDSN: c.UserDSN(), Mode: mode}, 0)
			})
		}
	}
	// With max_prepared_statements the proxy re-prepares a client's named
	// statement on whichever server it gets, as PgBouncer 1.21+ does.
	t.Run("proxy/transaction/max_prepared_statements=100", func(t *testing.T) {
		dsn := startProxyPrepared(t, c, poolmode.Transaction, 100)
		check(t, probe.Spec{DSN: dsn, NotifyDSN: c.UserDSN(), Mode: poolmode.Transaction}, 100)
	})
	t.Run("direct", func(t *testing.T) {
		check(t, probe.Spec{DSN: c.UserDSN(), Mode: poolmode.Direct}, 0)
	})
}

func check(t *testing.T, spec probe.Spec, maxPrepared int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := probe.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := compat.For(spec.Mode, maxPrepared)
	for _, o := range res.Outcomes {
		if o.OK != want[o.Feature] {
			t.Errorf("%v %v: live %s, compat %s (%s; server changed %v, %d tries)", spec.Mode, o.Feature,
				compat.Word(o.OK), compat.Word(want[o.Feature]), o.Detail, o.Changed, o.Tries)
		}
		if spec.Mode == poolmode.Transaction && o.Feature != compat.Transactions && !o.Changed {
			t.Errorf("%v %v: the server never changed between the two transactions", spec.Mode, o.Feature)
		}
	}
	if got := len(res.Outcomes); got != len(compat.Features) {
		t.Errorf("%d outcomes, want %d", got, len(compat.Features))
	}
}
