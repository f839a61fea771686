package importer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/importtest"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func superExec(t *testing.T, c *pgcluster.Cluster, db, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, c.SuperuserDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestLiveSourceErrors: each way a live source can be wrong gets an error
// that says what is wrong and what to do, against a real PostgreSQL and a
// real PgBouncer.
func TestLiveSourceErrors(t *testing.T) {
	lab := importtest.Start(t)
	pb := lab.PgBouncer(t, 2)
	superExec(t, lab.Cluster, "postgres", "CREATE DATABASE pgbouncer")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	closed := closedPort(t)
	console := func(dsn string) error {
		_, err := SampleConsole(ctx, dsn, time.Second, time.Second)
		return err
	}
	pg := func(dsn string) error {
		_, err := SamplePG(ctx, dsn, time.Second)
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		is   error
		want string
	}{
		{"console unreachable", console(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pgbouncer?connect_timeout=5", closed)), ErrUnreachable, "is it running"},
		{"console DSN of another database", console(pb.DSN("poolsim", "poolsim")), ErrNotConsole, "the database pgbouncer"},
		{"console user not allowed", console(pb.DSN("pgbouncer", "poolsim")), ErrRefused, "add it to admin_users or stats_users"},
		{"console user unknown", console(pb.DSN("pgbouncer", "nobody")), ErrRefused, "check the user and password"},
		{"PostgreSQL given as the console", console(lab.Cluster.SuperuserDSN("pgbouncer")), ErrNotConsole, "point --pgbouncer at PgBouncer's port"},
		{"console DSN does not parse", console("postgres://[::1"), ErrBadInput, "does not parse"},
		{"pg unreachable", pg(fmt.Sprintf("postgres://poolsim@127.0.0.1:%d/poolsim?connect_timeout=5", closed)), ErrUnreachable, "is it running"},
		{"pg extension not created", pg(lab.Cluster.SuperuserDSN("postgres")), ErrNoPgStatStatements, "run CREATE EXTENSION pg_stat_statements there"},
		{"pg database unknown", pg(lab.Cluster.SuperuserDSN("shop")), ErrRefused, `database "shop" does not exist`},
	} {
		if !errors.Is(tc.err, tc.is) || !strings.Contains(fmt.Sprint(tc.err), tc.want) {
			t.Errorf("%s: %v\nwant %v saying %q", tc.name, tc.err, tc.is, tc.want)
		}
	}

	// A server without the library: with and without the extension created.
	plain := pgclustertest.Start(t, pgcluster.Options{})
	err := pg(plain.SuperuserDSN("postgres"))
	if !errors.Is(err, ErrNoPgStatStatements) || !strings.Contains(err.Error(), "add pg_stat_statements to shared_preload_libraries in postgresql.conf, restart PostgreSQL, then run CREATE EXTENSION") {
		t.Errorf("no library, no extension: %v", err)
	}
	superExec(t, plain, "postgres", "CREATE EXTENSION pg_stat_statements")
	err = pg(plain.SuperuserDSN("postgres"))
	if !errors.Is(err, ErrNoPgStatStatements) || !strings.Contains(err.Error(), "must be loaded via") || !strings.Contains(err.Error(), "shared_preload_libraries") {
		t.Errorf("extension without its library: %v", err)
	}

	// Sampling stops with the context.
	short, stop := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer stop()
	if _, err := SampleConsole(short, pb.AdminDSN(), time.Second, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a console sampling past its context: %v, want the context's error", err)
	}
}
