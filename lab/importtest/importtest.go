package importtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// LogConf is the logging and statistics set-up import reads, as a user
// would write it in postgresql.conf.
var LogConf = map[string]string{
	"shared_preload_libraries":   "pg_stat_statements",
	"logging_collector":          "on",
	"log_destination":            "csvlog,jsonlog",
	"log_directory":              "log",
	"log_rotation_size":          "0",
	"log_min_duration_statement": "0",
	"log_connections":            "on",
	"log_disconnections":         "on",
	"log_timezone":               "UTC",
	"lc_messages":                "C",
}

// Lab is a PostgreSQL cluster set up for import.
type Lab struct {
	Cluster *pgcluster.Cluster
}

// Start starts the cluster and creates pg_stat_statements in the poolsim
// database.
func Start(t testing.TB) *Lab {
	t.Helper()
	c := pgclustertest.Start(t, pgcluster.Options{ExtraConf: LogConf})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, c.SuperuserDSN(pgcluster.UserDatabase))
	if err != nil {
		t.Fatalf("connect as the superuser: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements").ReadAll(); err != nil {
		t.Fatalf("create pg_stat_statements: %v", err)
	}
	return &Lab{Cluster: c}
}

// Database creates database name, owned by the poolsim role, with
// pg_stat_statements, and returns the poolsim role's DSN for it.
func (l *Lab) Database(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec := func(db, sql string) {
		conn, err := pgconn.Connect(ctx, l.Cluster.SuperuserDSN(db))
		if err != nil {
			t.Fatalf("connect as the superuser: %v", err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("postgres", fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, pgcluster.UserName))
	exec(name, "CREATE EXTENSION pg_stat_statements")
	return l.UserDSN(name)
}

// UserDSN is the poolsim role's DSN for database db.
func (l *Lab) UserDSN(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", pgcluster.UserName, pgcluster.UserPassword, l.Cluster.Port(), db)
}

// CSVLogs lists the cluster's csvlog files, oldest first.
func (l *Lab) CSVLogs(t testing.TB) []string { return l.logs(t, "*.csv") }

// JSONLogs lists the cluster's jsonlog files, oldest first.
func (l *Lab) JSONLogs(t testing.TB) []string { return l.logs(t, "*.json") }

func (l *Lab) logs(t testing.TB, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(l.Cluster.DataDir(), "log", glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s log in %s (err %v)", glob, filepath.Join(l.Cluster.DataDir(), "log"), err)
	}
	sort.Strings(files) // postgresql-%Y-%m-%d_%H%M%S: names sort by time
	return files
}

// PgBouncer starts a PgBouncer in transaction mode with the given pool
// size in front of the lab.
func (l *Lab) PgBouncer(t testing.TB, poolSize int) *pgbouncer.PgBouncer {
	t.Helper()
	if _, err := pgbouncer.Find(); errors.Is(err, pgbouncer.ErrNoPgBouncer) {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and PgBouncer is required: %v", err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: l.Cluster.Port(), Logf: t.Logf,
		Pooling: pgbouncer.Pool(poolmode.Transaction, poolSize, func(p *poolconf.Pooling) { p.MaxClientConn = 200 })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// PgbenchPath is the lab's pgbench (beside its postgres).
func (l *Lab) PgbenchPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(l.Cluster.BinDir(), "pgbench")
	if _, err := os.Stat(p); err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and pgbench is required: %v", err)
		}
		t.Skipf("no pgbench beside postgres: %v", err)
	}
	return p
}

// Script is a pgbench script of one transaction of stmts round trips,
// each a pg_sleep of query, with a \sleep of think after each (the last
// one after COMMIT, so a client's time between transactions equals its
// time between statements). BEGIN rides with the first round trip and
// COMMIT with the last (pgbench's \; sends them in one query string), so
// every round trip is alike.
func Script(stmts int, query, think time.Duration) string {
	var b strings.Builder
	sleep := fmt.Sprintf("SELECT pg_sleep(%s)", strconv.FormatFloat(query.Seconds(), 'f', -1, 64))
	for i := range stmts {
		line := sleep
		if i == 0 {
			line = "BEGIN \\; " + line
		}
		if i == stmts-1 {
			line += " \\; COMMIT"
		}
		fmt.Fprintf(&b, "%s;\n\\sleep %d us\n", line, think.Microseconds())
	}
	return b.String()
}

// Pgbench is one pgbench run in the background.
type Pgbench struct {
	Args    []string // the command line, for reports
	cmd     *exec.Cmd
	out     bytes.Buffer
	prefix  string
	done    chan struct{}
	waitErr error
}

// StartPgbench runs pgbench against dsn with script for duration with
// clients clients on 2 threads, writing per-transaction logs under dir
// (prefix pgbench_log). It is killed in t.Cleanup if still running.
func (l *Lab) StartPgbench(t testing.TB, dsn, dir, script string, clients int, duration time.Duration) *Pgbench {
	t.Helper()
	path := l.PgbenchPath(t)
	sf := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(sf, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Pgbench{prefix: filepath.Join(dir, "pgbench_log"), done: make(chan struct{})}
	p.Args = []string{path, "-n", "-f", sf, "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(int(duration.Seconds())),
		"-l", "--log-prefix", p.prefix, dsn}
	p.cmd = exec.Command(p.Args[0], p.Args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start pgbench: %v", err)
	}
	go func() { // owner: this Pgbench; ends when pgbench exits
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Wait waits for pgbench to finish (bounded by ctx) and returns its
// output.
func (p *Pgbench) Wait(ctx context.Context) (string, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.out.String(), fmt.Errorf("pgbench did not finish: %w", ctx.Err())
	}
	if p.waitErr != nil {
		return p.out.String(), fmt.Errorf("pgbench: %v\n%s", p.waitErr, p.out.String())
	}
	return p.out.String(), nil
}

// Logs lists pgbench's per-transaction log files (one per thread).
func (p *Pgbench) Logs(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(p.prefix + ".*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no pgbench log %s.* (err %v)", p.prefix, err)
	}
	sort.Strings(files)
	return files
}

// WaitClients polls PgBouncer's SHOW POOLS until n clients of database db
// are connected (cl_active + cl_waiting), or ctx ends.
func WaitClients(ctx context.Context, adminDSN, db string, n int) error {
	return poll(ctx, adminDSN, db, "SHOW POOLS", func(col map[string]int, row [][]byte) int {
		a, _ := strconv.Atoi(string(row[col["cl_active"]]))
		w, _ := strconv.Atoi(string(row[col["cl_waiting"]]))
		return a + w
	}, n, "clients connected")
}

// WaitXacts polls PgBouncer's SHOW STATS until database db has completed
// n transactions, or ctx ends: a warm-up measured in work done.
func WaitXacts(ctx context.Context, adminDSN, db string, n int) error {
	return poll(ctx, adminDSN, db, "SHOW STATS", func(col map[string]int, row [][]byte) int {
		x, _ := strconv.Atoi(string(row[col["total_xact_count"]]))
		return x
	}, n, "transactions completed")
}

// poll runs a console SHOW every 100 ms until value, summed over database
// db's rows, reaches n.
func poll(ctx context.Context, adminDSN, db, show string, value func(map[string]int, [][]byte) int, n int, what string) error {
	conn, err := pgconn.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		res, err := conn.Exec(ctx, show).ReadAll()
		if err != nil {
			return err
		}
		got := 0
		for _, r := range res {
			col := map[string]int{}
			for i, f := range r.FieldDescriptions {
				col[f.Name] = i
			}
			for _, row := range r.Rows {
				if string(row[col["database"]]) == db {
					got += value(col, row)
				}
			}
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d %s: %w", got, n, what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
