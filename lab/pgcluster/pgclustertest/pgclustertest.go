// Package pgclustertest starts throwaway PostgreSQL clusters for tests.
//
// When the PostgreSQL server binaries are missing, tests are skipped on a
// developer machine but fail when the environment variable CI is "true", so
// a CI machine without PostgreSQL cannot pass silently.
//
// One cluster per test:
//
//	func TestX(t *testing.T) {
//		c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 20})
//		conn, err := pgx.Connect(ctx, c.UserDSN())
//		...
//	}
//
// One cluster for a whole package (start-up costs about a second, initdb
// included), started in TestMain and stopped after the tests, also on
// SIGINT/SIGTERM:
//
//	var cluster *pgcluster.Cluster
//
//	func TestMain(m *testing.M) {
//		os.Exit(pgclustertest.RunMain(m, pgcluster.Options{}, &cluster))
//	}
//
//	func TestY(t *testing.T) {
//		c := pgclustertest.Need(t, cluster) // skips (or fails in CI) when nil
//		...
//	}
//
// Tests sharing a cluster must not depend on each other's server state.
package pgclustertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/poolsim/poolsim/lab/pgcluster"
)

// InCI reports whether the environment variable CI is "true".
func InCI() bool { return os.Getenv("CI") == "true" }

// startTimeout bounds one cluster start in tests: a guard against a hang,
// not a time limit.
const startTimeout = pgcluster.DefaultStartTimeout

// Start starts a cluster for t and stops it in t.Cleanup. Without
// PostgreSQL it skips t, or fails it when CI=true; any other start error
// fails t.
func Start(t testing.TB, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		missing(t, err)
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return c
}

// missing skips t (or fails it in CI) when err says PostgreSQL is missing.
func missing(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, pgcluster.ErrNoPostgres) {
		return
	}
	if InCI() {
		t.Fatalf("CI=true and PostgreSQL is required: %v", err)
	}
	t.Skipf("skipping: %v", err)
}

// RunMain starts one cluster with opts, stores it in *dst, runs the
// package's tests and stops the cluster; it returns the exit code for
// os.Exit. When PostgreSQL is missing, *dst stays nil and the tests run
// anyway (use Need in each test), except with CI=true, where RunMain
// reports the error and returns 1 without running tests. SIGINT and SIGTERM
// during the run stop the cluster before the process exits.
func RunMain(m *testing.M, opts pgcluster.Options, dst **pgcluster.Cluster) int {
	if !flag.Parsed() {
		flag.Parse() // testing.Verbose needs the test flags
	}
	if opts.Logf == nil && testing.Verbose() {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	c, err := pgcluster.Start(ctx, opts)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, pgcluster.ErrNoPostgres) && !InCI():
		fmt.Fprintf(os.Stderr, "pgclustertest: tests needing PostgreSQL will skip: %v\n", err)
		return m.Run()
	default:
		fmt.Fprintf(os.Stderr, "pgclustertest: start PostgreSQL: %v\n", err)
		return 1
	}
	*dst = c

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() { // owner: RunMain; ends when the tests end or on a signal
		defer close(watcherDone)
		select {
		case s := <-sigs:
			_ = c.Stop()
			fmt.Fprintf(os.Stderr, "pgclustertest: %v: stopped PostgreSQL\n", s)
			os.Exit(1)
		case <-done:
		}
	}()

	code := m.Run()
	signal.Stop(sigs)
	close(done)
	<-watcherDone
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgclustertest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Need returns c, or skips t when c is nil (PostgreSQL missing, see
// RunMain); with CI=true it fails t instead.
func Need(t testing.TB, c *pgcluster.Cluster) *pgcluster.Cluster {
	t.Helper()
	if c != nil {
		return c
	}
	if InCI() {
		t.Fatal("CI=true and PostgreSQL is required, but no cluster was started")
	}
	t.Skip("skipping: PostgreSQL is not installed (apt-get install postgresql)")
	return nil
}
