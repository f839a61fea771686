package validate

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/scenarios"
)

// twoClasses is a few-second two-class scenario: web requests of 1-3
// transactions through a transaction pool of 2, and a report client
// holding a WITH HOLD cursor across its request's 2 transactions through
// a session pool of 1, both on the database app as their own users.
const twoClasses = `
name: classes-live
seed: 1
workload:
  query: 2ms
  app: 1ms
  stmts_per_txn: 2
pooler:
  hop: 50us
  max_client_conn: 100
  max_prepared_statements: 0
server:
  max_connections: 8
  superuser_reserved_connections: 0
validate:
  statement: sleep
  with_hold: report
classes:
  web:
    pool: web
    workload:
      clients: 4
      requests_per_session: 2
      txns_per_request: {dist: uniform, min: 1, max: 3}
      think: 5ms
  report:
    pool: report
    workload:
      clients: 1
      requests_per_session: 1
      txns_per_request: 2
      think: 5ms
pools:
  web: {database: app, user: web, mode: transaction, size: 2}
  report: {database: app, user: report, mode: session, size: 1}
`

// needBouncer skips t without pgbouncer, or fails it under CI.
func needBouncer(t *testing.T) {
	t.Helper()
	if _, err := pgbouncer.Find(); err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and pgbouncer is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// TestClassesLive validates the two-class scenario against both targets:
// a row for all classes and one per class, the counts of every class
// equal to the model's (each class ran its own transactions and
// requests), and the report class's WITH HOLD cursors held in its session
// pool (no client failed).
func TestClassesLive(t *testing.T) {
	throughBoth(t, twoClasses, "classes.yaml", 2*time.Minute, func(t *testing.T, rep *Report) {
		want := []string{allClasses, "web", "report"}
		if len(rep.Rows) != len(want) {
			t.Fatalf("%d rows, want %d (all classes, web, report)", len(rep.Rows), len(want))
		}
		var sum int64
		for i, r := range rep.Rows {
			if r.Class != want[i] {
				t.Errorf("row %d is class %q, want %q", i, r.Class, want[i])
			}
			countsPass(t, r, "ok_txns", "conn_refused", "ok_reqs")
			if i > 0 {
				sum += r.Measured.OKTxns
			}
		}
		if all := rep.Rows[0].Measured.OKTxns; all != sum || all == 0 {
			t.Errorf("all classes: %d transactions, the classes' add up to %d; want equal and above 0", all, sum)
		}
		if rep.Rows[1].Pool == "" || rep.Rows[2].Pool == rep.Rows[1].Pool {
			t.Errorf("pools %q and %q: want each class its own", rep.Rows[1].Pool, rep.Rows[2].Pool)
		}
	})
}

// TestClassPools: each pool of the scenario is a pool of its own at both
// targets - SHOW POOLS on the console lists (web, web) in transaction
// mode and (report, report) in session mode after a client of each
// logged in as its pool's user.
func TestClassPools(t *testing.T) {
	needPostgres(t)
	sc, err := scenarios.Parse([]byte(twoClasses), "classes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := sc.Base
	cl := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 10, SuperuserReservedConnections: pgcluster.ReserveNone})
	srv, err := parseServer(cl.UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	vv := &lab{cluster: cl, srv: srv, logf: t.Logf, backendGone: func(ctx context.Context, pid uint32) error { return cl.WaitBackendsExit(ctx, pid) }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := vv.setupPools(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	pools := livePools(cfg)
	for _, target := range []string{TargetProxy, TargetPgBouncer} {
		t.Run(target, func(t *testing.T) {
			if target == TargetPgBouncer {
				needBouncer(t)
			}
			rt, dsns, err := startPools(ctx, target, srv, pools, cfg, bouncerVersion(ctx), t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := rt.stop(); err != nil {
					t.Error(err)
				}
			}()
			for _, p := range pools {
				c, err := pgconn.Connect(ctx, dsns[p.alias])
				if err != nil {
					t.Fatalf("pool %s as %s: %v", p.alias, p.user, err)
				}
				rs, err := c.Exec(ctx, "SELECT current_user, current_database()").ReadAll()
				closeConn(c)
				if err != nil {
					t.Fatal(err)
				}
				if got := string(rs[0].Rows[0][0]) + "@" + string(rs[0].Rows[0][1]); got != p.user+"@"+p.database {
					t.Errorf("pool %s: the server session is %s, want %s@%s", p.alias, got, p.user, p.database)
				}
			}
			admin := srv.as(pools[0].user, "pgbouncer").dsnAt("127.0.0.1", rt.port)
			if rt.bouncer != nil {
				admin = rt.bouncer.AdminDSN()
			}
			c, err := pgconn.Connect(ctx, admin)
			if err != nil {
				t.Fatal(err)
			}
			defer closeConn(c)
			rs, err := c.Exec(ctx, "SHOW POOLS").ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			col := map[string]int{}
			for i, f := range rs[0].FieldDescriptions {
				col[f.Name] = i
			}
			got := map[string]string{}
			for _, r := range rs[0].Rows {
				got[string(r[col["database"]])+"/"+string(r[col["user"]])] = string(r[col["pool_mode"]])
			}
			for _, p := range pools {
				if m := got[p.alias+"/"+p.user]; m != p.mode.String() {
					t.Errorf("SHOW POOLS %s/%s: pool_mode %q, want %q (all: %v)", p.alias, p.user, m, p.mode, got)
				}
			}
		})
	}
}
