package testbed

import (
	"math"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// rig is a system and the machine it runs on, as the tests build them:
// the system's fields are set as a system.Config's, the machine's as
// Testbed's.
type rig struct {
	system.Config
	Testbed Machine
}

// cfg is the system with its machine.
func (r rig) cfg() system.Config {
	c := r.Config
	c.Machine = r.Testbed
	return c
}

// Validate checks the system on its machine.
func (r rig) Validate() error { return r.cfg().Validate() }

// metrics are a run's metrics and the machine's stats of it.
type metrics struct {
	system.Metrics
	Stats
}

type result struct{ Metrics metrics }

// Run runs r and returns its metrics with the machine's stats.
func Run(r rig) result {
	res := system.Run(r.cfg())
	return result{metrics{res.Metrics, StatsOf(res)}}
}

// closed is a closed workload of clients running txns transactions of
// stmts statements, each query of fixed time and think between them.
func closed(mode poolmode.Mode, clients, txns, stmts int, query, think sim.Time) rig {
	c := system.Default()
	c.Workload = system.Workload{Clients: clients, TxnsPerSession: txns, StmtsPerTxn: stmts,
		Query: sim.ConstDist(query), Think: sim.ConstDist(think), TimeWait: 60 * sim.Second}
	c.Pooler.PoolMode = mode
	c.Pooler.MaxClientConn = 10_000
	return rig{Config: c}
}

// openPool is an open workload of one-statement sessions through a
// transaction pool of c servers.
func openPool(rate float64, c int, query sim.Dist, d sim.Time) rig {
	cfg := system.Default()
	cfg.Workload = system.Workload{ArrivalRate: rate, Duration: d, TxnsPerSession: 1, StmtsPerTxn: 1, Query: query}
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Pooler.DefaultPoolSize = c
	cfg.Pooler.MaxClientConn = 10_000_000
	cfg.Pooler.QueryWaitTimeout = 0
	cfg.Server.MaxConnections = c
	return rig{Config: cfg}
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	t.Logf("%s = %.6g (oracle %.6g, %+.2f%%)", what, got, want, 100*(got-want)/want)
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g within %.1f%%", what, got, want, 100*rel)
	}
}

func checkConservation(t *testing.T, m metrics) {
	t.Helper()
	if sum := m.Outcomes(); sum != m.AttemptedTxns {
		t.Errorf("conservation: ok %d + refused %d + timed out %d + app timeouts %d + prepared errors %d + unfinished %d = %d, want attempted %d",
			m.OKTxns, m.RefusedTxns, m.TimedOutTxns, m.AppTimeoutTxns, m.PreparedErrorTxns, m.UnfinishedTxn, sum, m.AttemptedTxns)
	}
}
