package system

import (
	"reflect"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

func closed(mode poolmode.Mode, clients, txns, stmts int, query, think sim.Time) Config {
	c := Default()
	c.Workload = Workload{Clients: clients, TxnsPerSession: txns, StmtsPerTxn: stmts,
		Query: sim.ConstDist(query), Think: sim.ConstDist(think), TimeWait: 60 * sim.Second}
	c.Pooler.PoolMode = mode
	c.Pooler.MaxClientConn = 10_000
	return c
}

func TestMaxClientConnRefuses(t *testing.T) {
	c := closed(poolmode.Transaction, 150, 1, 1, sim.Millisecond, 0)
	c.Pooler.MaxClientConn = 100 // PgBouncer's default
	m := Run(c).Metrics
	if m.ConnRefused != 50 || m.OKTxns != 100 {
		t.Errorf("150 clients, max_client_conn 100: refused %d ok %d, want 50 and 100", m.ConnRefused, m.OKTxns)
	}
}

func TestQueryWaitTimeoutDisconnects(t *testing.T) {
	// One server, 10 ms statements, 5 clients at once, 25 ms timeout: the
	// clients served at 0, 10 and 20 ms finish; those that would start at
	// 30 and 40 ms are disconnected at 25 ms.
	c := closed(poolmode.Transaction, 5, 1, 1, 10*sim.Millisecond, 0)
	c.Pooler.DefaultPoolSize = 1
	c.Pooler.QueryWaitTimeout = 25 * time.Millisecond
	c.Pooler.TimeoutCheck = 0 // at the exact instant
	m := Run(c).Metrics
	if m.OKTxns != 3 || m.WaitTimeouts != 2 || m.TimedOutTxns != 2 {
		t.Errorf("ok %d timeouts %d timed-out txns %d, want 3, 2, 2", m.OKTxns, m.WaitTimeouts, m.TimedOutTxns)
	}
	// All five wait at t=0: even the first waits for the pool's first
	// (instant) login, as servers open only on demand.
	if m.WaitMaxLen != 5 {
		t.Errorf("longest queue %d, want 5", m.WaitMaxLen)
	}
	checkLittle(t, m)
	checkConservation(t, m)
}

func TestQueryWaitTimeoutJanitor(t *testing.T) {
	// PgBouncer checks query_wait_timeout every 1/3 s: a waiter is
	// disconnected at the first check after its timeout has passed. One
	// server, two clients, 50 ms timeout: a 200 ms statement ahead is done
	// before the first check (333.333 ms), so the second client is served;
	// a 400 ms one is not, and the second client goes at the check.
	for _, tt := range []struct {
		hold     sim.Time
		timeouts int64
		wantEnd  float64 // wall_ms
	}{
		{200 * sim.Millisecond, 0, 400},
		{400 * sim.Millisecond, 1, 400},
	} {
		c := closed(poolmode.Transaction, 2, 1, 1, tt.hold, 0)
		c.Pooler.DefaultPoolSize = 1
		c.Pooler.QueryWaitTimeout = 50 * time.Millisecond
		m := Run(c).Metrics
		if m.WaitTimeouts != tt.timeouts || m.WallMs != tt.wantEnd {
			t.Errorf("hold %v: %d timeouts, wall %v ms; want %d and %v", tt.hold, m.WaitTimeouts, m.WallMs, tt.timeouts, tt.wantEnd)
		}
		if tt.timeouts == 1 && m.WaitMeanMs != 0 {
			// The timed-out waiter left at the check, 333.333 ms in; it is
			// counted in the queue's accounts, not in the assignment waits.
			t.Errorf("assignment waits mean %v ms, want 0 (only the first client was served)", m.WaitMeanMs)
		}
		if tt.timeouts == 1 {
			within(t, "wait_W with the janitor (s)", m.WaitW, (0+0.333333)/2, 1e-6)
		}
	}
}

func TestSessionModeHoldsTheServerForTheSession(t *testing.T) {
	// One server; two clients each run 2 transactions of 1 statement (1 ms)
	// with 1 ms think. Session mode: the second client waits for the whole
	// first session (1+1+1 = 3 ms); transaction mode: only for a statement.
	sess := closed(poolmode.Session, 2, 2, 1, sim.Millisecond, sim.Millisecond)
	sess.Pooler.DefaultPoolSize = 1
	tx := sess
	tx.Pooler.PoolMode = poolmode.Transaction
	ms, mt := Run(sess).Metrics, Run(tx).Metrics
	if ms.WaitP99Ms != 3 || ms.Assignments != 2 {
		t.Errorf("session: wait p99 %v ms over %d assignments, want 3 ms over 2", ms.WaitP99Ms, ms.Assignments)
	}
	if mt.WaitP99Ms != 1 || mt.Assignments != 4 {
		t.Errorf("transaction: wait p99 %v ms over %d assignments, want 1 ms over 4", mt.WaitP99Ms, mt.Assignments)
	}
}

func TestStatementModeReleasesEveryStatement(t *testing.T) {
	c := closed(poolmode.Statement, 4, 1, 5, sim.Millisecond, sim.Millisecond)
	c.Pooler.DefaultPoolSize = 2
	m := Run(c).Metrics
	if m.Assignments != 20 {
		t.Errorf("statement mode: %d assignments, want one per statement (20)", m.Assignments)
	}
}

func TestOneLoginAtATime(t *testing.T) {
	// 4 clients need servers at once, each login costs 5 ms: servers come
	// one after another, at 5, 10, 15 and 20 ms, and each goes to the
	// oldest waiter, so the waits are 5, 10, 15 and 20 ms.
	c := closed(poolmode.Transaction, 4, 1, 1, 100*sim.Millisecond, 0)
	c.Server.Connect = sim.ConstDist(5 * sim.Millisecond)
	r := Run(c)
	m := r.Metrics
	if m.WaitP50Ms != 10 || m.WaitP99Ms != 20 || m.ServerConns != 4 {
		t.Errorf("wait p50 %v p99 %v ms, %d servers; want 10, 20, 4", m.WaitP50Ms, m.WaitP99Ms, m.ServerConns)
	}
}

func TestServersOpenAtStart(t *testing.T) {
	// As TestOneLoginAtATime, with 2 servers open before time zero (a
	// machine's Host.OpenServers): two
	// clients get one at once, the others the logins at 5 and 10 ms; 4
	// servers in all. Capped by the pool size (3: the fourth client waits
	// for a server back) and by max_connections (2: none is launched).
	c := closed(poolmode.Transaction, 4, 1, 1, 100*sim.Millisecond, 0)
	c.Server.Connect = sim.ConstDist(5 * sim.Millisecond)
	c.Machine = opens(2)
	m := Run(c).Metrics
	if m.WaitP50Ms != 0 || m.WaitP99Ms != 10 || m.ServerConns != 4 {
		t.Errorf("2 open: wait p50 %v p99 %v ms, %d servers; want 0, 10, 4", m.WaitP50Ms, m.WaitP99Ms, m.ServerConns)
	}
	c.Machine, c.Pooler.DefaultPoolSize = opens(5), 3
	m = Run(c).Metrics
	if m.WaitP99Ms != 100 || m.ServerConns != 3 || m.WaitProb != 0.25 {
		t.Errorf("5 open, pool 3: wait p99 %v ms, %d servers, wait probability %v; want 100, 3, 0.25", m.WaitP99Ms, m.ServerConns, m.WaitProb)
	}
	c.Pooler.DefaultPoolSize, c.Server.MaxConnections, c.Server.SuperuserReserved = 20, 2, 0
	m = Run(c).Metrics
	if m.ServerConns != 2 || m.LoginsRefused != 0 || m.OKTxns != 4 {
		t.Errorf("5 open, max_connections 2: %d servers, %d logins refused, %d ok; want 2, 0, 4", m.ServerConns, m.LoginsRefused, m.OKTxns)
	}
	c.Pooler.PoolMode = poolmode.Direct
	if m := Run(c).Metrics; m.ConnRefused != 2 {
		t.Errorf("direct with servers_open: %d refused, want 2 (no pool: every slot is the clients')", m.ConnRefused)
	}
}

func TestLIFOIdleServers(t *testing.T) {
	// Two servers open; after they are idle, a lone client keeps getting
	// the same (most recently released) one, so only 2 are ever opened and
	// the pool does not grow for sequential work.
	c := closed(poolmode.Transaction, 2, 20, 1, sim.Millisecond, 5*sim.Millisecond)
	m := Run(c).Metrics
	if m.ServerConns != 2 {
		t.Errorf("%d server connections, want 2", m.ServerConns)
	}
}

func TestSlowConnectSpreadsTheStorm(t *testing.T) {
	// Direct, 40 clients, 20 slots, 200 ms sessions. With instant connects
	// 20 are refused; with 20 ms connects one at a time the early sessions
	// end before the late clients start, so far fewer are refused.
	c := closed(poolmode.Direct, 40, 1, 1, 200*sim.Millisecond, 0)
	c.Server.MaxConnections = 20
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	if m := Run(c).Metrics; m.ConnRefused != 20 {
		t.Errorf("instant connect: %d refused, want 20", m.ConnRefused)
	}
	c.Server.Connect = sim.ConstDist(20 * sim.Millisecond)
	m := Run(c).Metrics
	if m.ConnRefused >= 5 {
		t.Errorf("20 ms connect: %d refused, want far fewer than 20", m.ConnRefused)
	}
	checkConservation(t, m)
}

func TestOpenWorkloadReusesClientSlots(t *testing.T) {
	c := Default()
	c.Workload = Workload{ArrivalRate: 1000, Duration: 10 * sim.Second, TxnsPerSession: 2, StmtsPerTxn: 2,
		Query: sim.ExpDist(100 * sim.Microsecond), Think: sim.ExpDist(100 * sim.Microsecond)}
	c.Pooler.PoolMode = poolmode.Transaction
	c.Pooler.MaxClientConn = 100_000
	m := Run(c).Metrics
	if m.Sessions < 9000 || m.OKTxns != 2*m.Sessions {
		t.Errorf("sessions %d ok %d, want about 10000 sessions of 2 transactions each", m.Sessions, m.OKTxns)
	}
	checkLittle(t, m)
	checkConservation(t, m)
}

func TestRunIsDeterministic(t *testing.T) {
	c := closed(poolmode.Transaction, 300, 4, 3, 0, 0)
	c.Workload.Query = sim.ExpDist(300 * sim.Microsecond)
	c.Workload.Think = sim.Dist{Kind: sim.Lognormal, Mean: sim.Millisecond, Sigma: 0.8}
	c.Pooler.QueryWaitTimeout = 8 * time.Millisecond
	if a, b := Run(c), Run(c); !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ:\n%+v\n%+v", a.Metrics, b.Metrics)
	}
}

func TestValidate(t *testing.T) {
	c := Default()
	c.Workload.Clients = 0
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted a workload with no clients and no arrivals")
	}
	c = Default()
	c.Workload.ArrivalRate = 5
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted both clients and arrival_rate")
	}
}

// The request level on a constant-time case computed by hand: a session of
// two requests, each of 3 transactions of 2 statements (1 ms each); 2 ms
// of application time between the statements of a transaction and between
// the transactions of a request; 10 ms of think between the requests.
// A transaction takes 1 + 2 + 1 = 4 ms; a request 3 x 4 + 2 x 2 = 16 ms;
// the session 16 + 10 + 16 = 42 ms.
func TestRequestLevelByHand(t *testing.T) {
	c := closed(poolmode.Transaction, 1, 1, 2, sim.Millisecond, 10*sim.Millisecond)
	c.Pooler.Hop = 0
	c.Workload.RequestsPerSession = 2
	c.Workload.TxnsPerRequest = sim.ConstInt(3)
	c.Workload.App, c.Workload.AppSet = sim.ConstDist(2*sim.Millisecond), true
	m := Run(c).Metrics
	if m.OKTxns != 6 || m.OKReqs != 2 || m.P50Ms != 4 || m.P99Ms != 4 || m.ReqP50Ms != 16 || m.ReqP99Ms != 16 || m.WallMs != 42 {
		t.Errorf("ok %d txns %d requests, txn p50/p99 %v/%v ms, request p50/p99 %v/%v ms, wall %v ms; want 6, 2, 4/4, 16/16, 42",
			m.OKTxns, m.OKReqs, m.P50Ms, m.P99Ms, m.ReqP50Ms, m.ReqP99Ms, m.WallMs)
	}
	if m.AttemptedTxns != 6 || m.DecThinkP50Ms != 2 {
		t.Errorf("attempted %d, think inside a transaction %v ms; want 6 and 2 (the app time)", m.AttemptedTxns, m.DecThinkP50Ms)
	}
	// Without the request keys the same workload is 6 one-transaction
	// requests with think (10 ms) after every statement but the last.
	old := closed(poolmode.Transaction, 1, 6, 2, sim.Millisecond, 10*sim.Millisecond)
	old.Pooler.Hop = 0
	o := Run(old).Metrics
	if o.OKReqs != 6 || o.ReqP50Ms != o.P50Ms || o.P50Ms != 12 || o.WallMs != 6*12+5*10 {
		t.Errorf("no request level: %d requests, request p50 %v, txn p50 %v, wall %v; want 6, 12, 12, 122", o.OKReqs, o.ReqP50Ms, o.P50Ms, o.WallMs)
	}
}

// Transactions per request drawn from a distribution: every session's
// total is what its requests drew, and the accounts add up.
func TestTxnsPerRequestDistribution(t *testing.T) {
	c := closed(poolmode.Transaction, 50, 1, 2, sim.Millisecond, sim.Millisecond)
	c.Workload.RequestsPerSession = 4
	d, err := sim.UniformInt(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	c.Workload.TxnsPerRequest = d
	c.Workload.Query = sim.ExpDist(sim.Millisecond)
	m := Run(c).Metrics
	if m.OKReqs != 200 || m.OKTxns < 200 || m.OKTxns > 600 || m.AttemptedTxns != m.OKTxns {
		t.Errorf("%d requests, %d of %d transactions: want 200 requests of 1 to 3 transactions, all completed", m.OKReqs, m.OKTxns, m.AttemptedTxns)
	}
	mean := float64(m.OKTxns) / 200
	if mean < 1.7 || mean > 2.3 {
		t.Errorf("%.2f transactions per request on average, want about 2", mean)
	}
	checkConservation(t, m)
}

// min_pool_size: a pool opens its servers at time zero, one login at a
// time, up to min_pool_size or its size, whether anyone waits or not, and
// a client arriving later finds them open.
func TestMinPoolSizeOpensAtStart(t *testing.T) {
	c := Default()
	c.Workload = Workload{ArrivalRate: 10, Duration: 2 * sim.Second, TxnsPerSession: 1, StmtsPerTxn: 1, Query: sim.ConstDist(sim.Millisecond), Statements: 1, Warmup: sim.Second}
	c.Pooler.PoolMode, c.Pooler.DefaultPoolSize = poolmode.Transaction, 5
	c.Server.Connect = sim.ConstDist(5 * sim.Millisecond)
	cold := Run(c).Metrics
	c.Pooler.MinPoolSize = 50
	warm := Run(c).Metrics
	if warm.ServerConns != 5 || warm.ConnsOpened != cold.ConnsOpened {
		t.Fatalf("min_pool_size 50, pool 5: %d servers at peak, want the pool's 5", warm.ServerConns)
	}
	if warm.WaitMaxMs != 0 || cold.WaitMaxMs == 0 {
		t.Errorf("longest wait for a server %v ms with the pool open from the start, %v ms cold: want none, and the cold pool's logins waited for", warm.WaitMaxMs, cold.WaitMaxMs)
	}
	if cold.ServerConns >= 5 {
		t.Errorf("a cold pool opened %d servers for 10 light clients/s: servers open on demand", cold.ServerConns)
	}
}
