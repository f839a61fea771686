package system

import (
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// twoClasses is a batch class that saturates its own pool (20 clients,
// back-to-back 10 ms statements, pool 2) and a web class with one server
// per client in a pool of its own (2 clients, 1 ms statements, 5 ms
// apart), both on database app as users batch and web.
func twoClasses() Config {
	c := closed(poolmode.Transaction, 1, 1, 1, sim.Millisecond, 0)
	c.Pooler.Hop = 0
	batch := closed(poolmode.Transaction, 20, 10, 1, 10*sim.Millisecond, 0).Workload
	web := closed(poolmode.Transaction, 2, 10, 1, sim.Millisecond, 5*sim.Millisecond).Workload
	c.Classes = []Class{
		{Name: "batch", Workload: batch, AppPool: c.AppPool, Pool: "batch"},
		{Name: "web", Workload: web, AppPool: c.AppPool, Pool: "web"},
	}
	c.Pools = []PoolSpec{
		{Name: "batch", Database: "app", User: "batch", Mode: poolmode.Transaction, ModeSet: true, Size: 2},
		{Name: "web", Database: "app", User: "web", Mode: poolmode.Transaction, ModeSet: true, Size: 2},
	}
	return c
}

func classMetrics(t *testing.T, r Result, name string) Metrics {
	t.Helper()
	for _, cl := range r.Classes {
		if cl.Name == name {
			return cl.Metrics
		}
	}
	t.Fatalf("no class %s in %+v", name, r.Classes)
	return Metrics{}
}

// A class that saturates its own pool takes nothing from another class's
// pool: the web class waits for nothing and runs at its statements' speed
// while the batch class queues behind its two servers.
func TestClassIsolation(t *testing.T) {
	c := twoClasses()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := Run(c)
	batch, web := classMetrics(t, r, "batch"), classMetrics(t, r, "web")
	if web.OKTxns != 20 || web.WaitP99Ms != 0 || web.P99Ms != 1 || web.ConnRefused != 0 {
		t.Errorf("web: %d txns, wait p99 %v ms, p99 %v ms, %d refused; want 20, 0, 1 (its statement), 0", web.OKTxns, web.WaitP99Ms, web.P99Ms, web.ConnRefused)
	}
	// 200 statements of 10 ms on 2 servers: 1 s of work, and waits.
	if batch.OKTxns != 200 || batch.WaitP99Ms <= 0 || batch.WallMs != 1000 {
		t.Errorf("batch: %d txns, wait p99 %v ms, wall %v ms; want 200, > 0, 1000", batch.OKTxns, batch.WaitP99Ms, batch.WallMs)
	}
	if r.Metrics.ServerConns != 4 || r.Metrics.ServersEvicted != 0 {
		t.Errorf("%d server connections at peak, %d evicted; want 4 (2 per pool) and 0", r.Metrics.ServerConns, r.Metrics.ServersEvicted)
	}
}

// Under a shared max_db_connections the pools share the database's
// budget as PgBouncer shares it: the saturated batch pool keeps the
// servers it has, and the web pool gets only what is left, so web clients
// now wait - but never more than the budget is open.
func TestClassesShareMaxDBConnections(t *testing.T) {
	c := twoClasses()
	c.Pooler.MaxDBConnections = 3
	r := Run(c)
	batch, web := classMetrics(t, r, "batch"), classMetrics(t, r, "web")
	if r.Metrics.ServerConns > 3 {
		t.Errorf("%d server connections at peak, above max_db_connections 3", r.Metrics.ServerConns)
	}
	if web.OKTxns != 20 || batch.OKTxns != 200 {
		t.Errorf("web %d, batch %d transactions; want 20 and 200", web.OKTxns, batch.OKTxns)
	}
	iso := Run(twoClasses())
	isoWeb := classMetrics(t, iso, "web")
	if web.MeanMs <= isoWeb.MeanMs {
		t.Errorf("web mean latency %v ms under a shared budget of 3, %v ms with 4: want it higher (the budget binds)", web.MeanMs, isoWeb.MeanMs)
	}
	// Each class's accounts add up to the whole run's.
	if batch.OKTxns+web.OKTxns != r.Metrics.OKTxns || batch.Sessions+web.Sessions != r.Metrics.Sessions {
		t.Errorf("classes' transactions %d+%d and sessions %d+%d, run's %d and %d", batch.OKTxns, web.OKTxns, batch.Sessions, web.Sessions, r.Metrics.OKTxns, r.Metrics.Sessions)
	}
}
