package load

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStatementText(t *testing.T) {
	tests := []struct {
		s    Statement
		q    time.Duration
		want string
	}{
		{Statement{Kind: KindSleep}, 3 * time.Millisecond, "SELECT pg_sleep(0.003)"},
		{Statement{Kind: KindSleep}, 0, "SELECT pg_sleep(0)"},
		{Statement{Kind: KindCPU, RowNs: 50}, time.Millisecond, "SELECT count(*) FROM generate_series(1, 20000)"},
		{Statement{Kind: KindSQL, SQL: " SELECT 1; "}, time.Second, "SELECT 1"},
	}
	for _, tt := range tests {
		if got := tt.s.Text(tt.q); got != tt.want {
			t.Errorf("%+v.Text(%v) = %q, want %q", tt.s, tt.q, got, tt.want)
		}
	}
	for _, bad := range []Statement{{Kind: "x"}, {Kind: KindCPU}, {Kind: KindSQL}} {
		if bad.Validate() == nil {
			t.Errorf("%+v.Validate() = nil, want an error", bad)
		}
	}
}

func TestPreparedText(t *testing.T) {
	cpu := Statement{Kind: KindCPU, RowNs: 50, Joins: 2}
	if got, want := cpu.PreparedText(4), "SELECT count(*) FROM generate_series(1, $1::int8) g, generate_series(1, 1) j1, generate_series(1, 1) j2 /* poolsim statement 5 */"; got != want {
		t.Errorf("PreparedText = %q, want %q", got, want)
	}
	if got := cpu.Param(time.Millisecond); got != "20000" {
		t.Errorf("cpu Param(1ms) = %q, want 20000", got)
	}
	if got := cpu.Text(time.Millisecond); got != "SELECT count(*) FROM generate_series(1, 20000) g, generate_series(1, 1) j1, generate_series(1, 1) j2" {
		t.Errorf("cpu Text with joins = %q", got)
	}
	sl := Statement{Kind: KindSleep}
	if got, want := sl.PreparedText(0), "SELECT pg_sleep($1::float8) /* poolsim statement 1 */"; got != want || sl.Param(3*time.Millisecond) != "0.003" {
		t.Errorf("sleep PreparedText = %q, Param = %q", got, sl.Param(3*time.Millisecond))
	}
	if cpu.PreparedText(0) == cpu.PreparedText(1) {
		t.Error("two statements share a text: they would be one prepared statement")
	}
	cdf := zipfCDF(3, 1)
	if len(cdf) != 3 || cdf[2] != 1 || cdf[0] < 0.54 || cdf[0] > 0.55 {
		t.Errorf("zipfCDF(3, 1) = %v, want 1/H3 = 0.545 first and 1 last", cdf)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want outcome
	}{
		{&pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}, refused},
		{fmt.Errorf("connect: %w", &pgconn.PgError{Code: "08P01", Message: "no more connections allowed (max_client_conn)"}), refused},
		{&pgconn.PgError{Code: "08P01", Message: "query_wait_timeout"}, waitTimeout},
		{&pgconn.PgError{Code: "08P01", Message: "transaction blocks not allowed in statement pooling mode"}, failed},
		{errors.New("boom"), failed},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func workload(clients, txns, stmts int, query, think time.Duration) system.Workload {
	return system.Workload{Clients: clients, TxnsPerSession: txns, StmtsPerTxn: stmts,
		Query: sim.ConstDist(sim.FromDuration(query)), Think: sim.ConstDist(sim.FromDuration(think))}
}

// TestClosedRefusesBeyondMaxConnections: 5 clients, 3 slots: all connect
// at once before time zero, so exactly 2 are refused.
func TestClosedRefusesBeyondMaxConnections(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 3, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := false
	res, err := Run(ctx, Spec{DSN: c.UserDSN(), Workload: workload(5, 2, 3, time.Millisecond, time.Millisecond),
		Blocks: true, Statement: Statement{Kind: KindSleep}, Started: func() { started = true }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused != 2 || res.OKTxns != 6 || res.Failed != 0 || res.Stmts != 18 || res.Sessions != 3 {
		t.Errorf("refused %d, ok %d, failed %d (%v), statements %d, sessions %d; want 2, 6, 0, 18, 3",
			res.Refused, res.OKTxns, res.Failed, res.Errors, res.Stmts, res.Sessions)
	}
	if !started || res.Latency.Count() != 6 || res.StmtRT.Count() != 12 || res.Think.Count() != 15 {
		t.Errorf("started %v, %d latencies, %d statement times, %d thinks; want true, 6, 12, 15",
			started, res.Latency.Count(), res.StmtRT.Count(), res.Think.Count())
	}
	// A transaction is 3 sleeps of at least 1 ms and 2 thinks of 1 ms.
	if p50 := res.Latency.Percentile(50); p50 < 5*sim.Millisecond {
		t.Errorf("p50 %v, want at least 5ms", p50)
	}
	if res.TPS() <= 0 || res.Wall() <= 0 {
		t.Errorf("tps %v, wall %v; want both above 0", res.TPS(), res.Wall())
	}
}

// TestOpenArrivals runs a short Poisson workload: every arrival is one
// session; the same seed gives the same number of arrivals.
func TestOpenArrivals(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 20, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := system.Workload{ArrivalRate: 100, Duration: 200 * sim.Millisecond, TxnsPerSession: 1, StmtsPerTxn: 1,
		Query: sim.ConstDist(sim.Millisecond)}
	spec := Spec{DSN: c.UserDSN(), Workload: w, Seed: 7, Statement: Statement{Kind: KindSleep}}
	a, err := Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if a.Clients == 0 || a.Clients != b.Clients || a.OKTxns != int64(a.Clients) || a.Failed != 0 {
		t.Errorf("arrivals %d and %d, ok %d, failed %d (%v); want the same count twice, all ok", a.Clients, b.Clients, a.OKTxns, a.Failed, a.Errors)
	}
}

// TestRequestsAndHold: 2 clients of 2 requests of 2 transactions of 2
// statements, straight to PostgreSQL, each request holding a WITH HOLD
// cursor across its transactions: every request completes (the cursor
// survives its COMMITs on the client's own backend), the pauses inside a
// request are app pauses and the ones before and between requests thinks.
func TestRequestsAndHold(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 10, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := workload(2, 0, 2, time.Millisecond, 2*time.Millisecond)
	w.RequestsPerSession, w.TxnsPerRequest = 2, sim.ConstInt(2)
	w.App, w.AppSet = sim.ConstDist(sim.Millisecond), true
	res, err := Run(ctx, Spec{DSN: c.UserDSN(), Workload: w, Blocks: true, Hold: true, Statement: Statement{Kind: KindSleep}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.OKTxns != 8 || res.OKReqs != 4 || res.FailedReqs != 0 || res.ReqLatency.Count() != 4 {
		t.Fatalf("failed %d (%v), ok txns %d, ok requests %d, failed requests %d, request latencies %d; want 0, 8, 4, 0, 4",
			res.Failed, res.Errors, res.OKTxns, res.OKReqs, res.FailedReqs, res.ReqLatency.Count())
	}
	if res.App.Count() != 12 || res.Think.Count() != 4 {
		t.Errorf("%d app pauses, %d thinks; want 12 (3 per request) and 4 (before each request)", res.App.Count(), res.Think.Count())
	}
	// A request is 4 sleeps of at least 1 ms and 3 app pauses of 1 ms.
	if p50 := res.ReqLatency.Percentile(50); p50 < 7*sim.Millisecond || p50 < res.Latency.Percentile(50) {
		t.Errorf("request p50 %v, transaction p50 %v; want at least 7ms and at least the transaction's", p50, res.Latency.Percentile(50))
	}
}

// TestHoldSQL: the request's first statement declares the cursor, the
// first of each later transaction fetches from it, others are left alone.
func TestHoldSQL(t *testing.T) {
	if got := holdSQL("SELECT 1", 0, 3, 0, 2); got != "DECLARE poolsim_hold CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 3) g; SELECT 1" {
		t.Errorf("first statement of the request: %q", got)
	}
	if got := holdSQL("SELECT 1", 1, 3, 0, 2); got != "FETCH NEXT FROM poolsim_hold; SELECT 1" {
		t.Errorf("first statement of a later transaction: %q", got)
	}
	if got := holdSQL("SELECT 1", 1, 3, 1, 2); got != "SELECT 1" {
		t.Errorf("a later statement: %q", got)
	}
}

// TestOpenArrivalsFollowTheModel: with the model's arrival stream the
// driver's Poisson arrivals are the model's - as many sessions as the
// model has.
func TestOpenArrivalsFollowTheModel(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 20, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := system.Default()
	cfg.Seed = 11
	cfg.Pooler.PoolMode = poolmode.Direct
	cfg.Workload = system.Workload{ArrivalRate: 60, Duration: 500 * sim.Millisecond, TxnsPerSession: 1, StmtsPerTxn: 1,
		Query: sim.ConstDist(sim.Millisecond)}
	model := system.Run(cfg).Metrics
	res, err := Run(ctx, Spec{DSN: c.UserDSN(), Workload: cfg.Workload, Seed: cfg.Seed, Statement: Statement{Kind: KindSleep}, ArrivalStream: "arrivals"})
	if err != nil {
		t.Fatal(err)
	}
	if int64(res.Clients) != model.Sessions || model.Sessions == 0 {
		t.Errorf("%d arrivals live, %d sessions in the model; want the same, above 0", res.Clients, model.Sessions)
	}
}

// TestClosedWarmsBeforeTimeZero: Spec.Warm runs on every connection
// before time zero (a 300 ms warm statement is not in a run whose wall is
// a few milliseconds), and a warm statement that fails fails its client
// as a failed login does, with no transaction run.
func TestClosedWarmsBeforeTimeZero(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 4, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := Spec{DSN: c.UserDSN(), Workload: workload(3, 1, 1, time.Millisecond, 0), Blocks: true,
		Statement: Statement{Kind: KindSleep}, Warm: "SELECT pg_sleep(0.3)"}
	res, err := Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.OKTxns != 3 || res.Failed != 0 {
		t.Fatalf("warmed: ok %d, failed %d (%v); want 3, 0", res.OKTxns, res.Failed, res.Errors)
	}
	if w := res.Wall(); w >= 300*time.Millisecond {
		t.Errorf("warmed: wall %v, want under the 300 ms warm statement (it runs before time zero)", w)
	}
	spec.Warm = "SELECT no_such_column"
	res, err = Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.OKTxns != 0 || res.Stmts != 0 || len(res.Errors) == 0 {
		t.Errorf("a failing warm statement: ok %d, statements %d, errors %v; want 0, 0 and the error", res.OKTxns, res.Stmts, res.Errors)
	}
}

// TestClosedKeepsConnsUntilEverySessionEnds: with Spec.KeepConns no
// client's backend goes before the run's last statement - every
// statement, each counting the load role's backends into a table, sees
// all of them, though the sessions end at different times (random
// thinks) - and the connections are closed once the run is over.
func TestClosedKeepsConnsUntilEverySessionEnds(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 8, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgconn.Connect(ctx, c.SuperuserDSN(pgcluster.UserDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(admin)
	if _, err := admin.Exec(ctx, "CREATE TABLE seen (n int); GRANT INSERT ON seen TO PUBLIC").ReadAll(); err != nil {
		t.Fatal(err)
	}
	const clients = 4
	w := workload(clients, 3, 1, 0, 0)
	w.Think = sim.ExpDist(sim.FromDuration(5 * time.Millisecond))
	count := "(SELECT count(*) FROM pg_stat_activity WHERE usename = current_user AND backend_type = 'client backend')"
	res, err := Run(ctx, Spec{DSN: c.UserDSN(), Workload: w, Seed: 3, KeepConns: true,
		Statement: Statement{Kind: KindSQL, SQL: "INSERT INTO seen SELECT " + count}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OKTxns != clients*3 || res.Failed != 0 {
		t.Fatalf("ok %d, failed %d (%v); want %d, 0", res.OKTxns, res.Failed, res.Errors, clients*3)
	}
	rows, err := admin.Exec(ctx, "SELECT count(*), min(n) FROM seen").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s %s", rows[0].Rows[0][0], rows[0].Rows[0][1]); got != fmt.Sprintf("%d %d", clients*3, clients) {
		t.Errorf("statements and the fewest backends one saw: %s; want %d %d", got, clients*3, clients)
	}
	// Closed after the run: the backends exit (waited for, not slept on).
	for {
		rows, err := admin.Exec(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename <> current_user AND backend_type = 'client backend'").ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if string(rows[0].Rows[0][0]) == "0" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the load's %s backends are still there a minute on", rows[0].Rows[0][0])
		case <-time.After(10 * time.Millisecond):
		}
	}
}
