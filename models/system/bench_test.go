package system

import (
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// BenchmarkMillionTransactions runs 1,000,000 one-statement transactions
// through a transaction pooler (open M/M/10 at ρ = 0.8).
func BenchmarkMillionTransactions(b *testing.B) {
	cfg := openPool(80, 10, sim.ExpDist(100*sim.Millisecond), 12_500*sim.Second)
	var m Metrics
	for b.Loop() {
		m = Run(cfg).Metrics
	}
	b.ReportMetric(float64(m.OKTxns), "txns")
	b.ReportMetric(float64(m.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkClosedSixStatements is the seed-001 shape at 2,000 clients
// (360,000 statements) in transaction mode.
func BenchmarkClosedSixStatements(b *testing.B) {
	cfg := Default()
	cfg.Workload = Workload{Clients: 2000, TxnsPerSession: 30, StmtsPerTxn: 6,
		Query: sim.ExpDist(300 * sim.Microsecond), Think: sim.ExpDist(800 * sim.Microsecond)}
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Pooler.Hop = 25 * sim.Microsecond
	cfg.Pooler.MaxClientConn = 10_000
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	var m Metrics
	for b.Loop() {
		m = Run(cfg).Metrics
	}
	b.ReportMetric(float64(m.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// speedConfig is bench/model-speed.yaml: 200 clients x 500 transactions x
// 6 statements (100,000 transactions) through a transaction pooler with
// 20 servers, constant times.
func speedConfig() Config {
	cfg := Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Workload.StmtsPerTxn = 200, 500, 6
	cfg.Workload.Query, cfg.Workload.Think = sim.ConstDist(300*sim.Microsecond), sim.ConstDist(800*sim.Microsecond)
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Pooler.Hop = 25 * sim.Microsecond
	cfg.Pooler.MaxClientConn = 1000
	cfg.Pooler.MaxPreparedStatements = 0
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	return cfg
}

// BenchmarkSpeedScenario is bench/model-speed.yaml in process.
func BenchmarkSpeedScenario(b *testing.B) {
	cfg := speedConfig()
	var m Metrics
	b.ReportAllocs()
	for b.Loop() {
		m = Run(cfg).Metrics
	}
	b.ReportMetric(float64(m.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkTinyRun is one client running one one-statement transaction
// (a handful of events): the cost of a run's setup and results.
func BenchmarkTinyRun(b *testing.B) {
	cfg := Default()
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Workload.Query = sim.ConstDist(sim.Millisecond)
	var m Metrics
	b.ReportAllocs()
	for b.Loop() {
		m = Run(cfg).Metrics
	}
	b.ReportMetric(float64(m.Events), "events")
}

// BenchmarkCPUBound is bench/model-speed.yaml's shape with its statements'
// time as CPU on 4 shared cores (processor sharing, USL contention): the
// built-in CPU's path, which a run without a Machine takes.
func BenchmarkCPUBound(b *testing.B) {
	cfg := speedConfig()
	cfg.Workload.Query, cfg.Workload.CPU = sim.ConstDist(0), sim.ExpDist(300*sim.Microsecond)
	cfg.Server.Cores, cfg.Server.Contention = 4, 0.02
	var m Metrics
	b.ReportAllocs()
	for b.Loop() {
		m = Run(cfg).Metrics
	}
	b.ReportMetric(float64(m.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// What a study keeps of each replication for its pooled percentiles
// (Metrics.Dists, every percentile's distribution over the window and its
// second half) against what keeping the samples would take (8 bytes each,
// as sim.Samples does below its exact limit), and the time to read a
// pooled p99 with its jackknife over 200 replications. The M/M/10 of
// scenarios/builtin/erlang-c.yaml at 200 s (16,000 transactions a run),
// the web application of web-app.yaml (20 s, 10,000), and the M/M/10 at
// 12,500 s (a million transactions, past the recorders' exact limit).
func BenchmarkReplicationDists(b *testing.B) {
	webApp := func() Config {
		q, _ := sim.LognormalP99(sim.Millisecond, 8*sim.Millisecond)
		cpu, _ := sim.LognormalP99(1500*sim.Microsecond, 12*sim.Millisecond)
		c := Default()
		c.Workload = Workload{ArrivalRate: 250, Duration: 20 * sim.Second, TxnsPerSession: 2, StmtsPerTxn: 4,
			Query: q, CPU: cpu, Think: sim.ExpDist(500 * sim.Microsecond), Warmup: sim.Second}
		c.Pooler.PoolMode = poolmode.Transaction
		c.Pooler.Hop = 100 * sim.Microsecond
		c.Pooler.MaxClientConn = 10_000
		c.Server.Cores, c.Server.Connect, c.Server.Contention = 8, sim.ConstDist(3*sim.Millisecond), 0.002
		return c
	}
	erlang := openPool(80, 10, sim.ExpDist(100*sim.Millisecond), 200*sim.Second)
	erlang.Workload.Warmup = 15 * sim.Second
	million := openPool(80, 10, sim.ExpDist(100*sim.Millisecond), 12_500*sim.Second)
	million.Workload.Warmup = 100 * sim.Second
	for _, tc := range []struct {
		name string
		c    Config
	}{{"erlang-c-200s", erlang}, {"web-app-20s", webApp()}, {"million-txns", million}} {
		m := Run(tc.c).Metrics
		b.Run(tc.name+"/keep", func(b *testing.B) {
			for b.Loop() {
				m = Run(tc.c).Metrics
			}
			b.ReportMetric(float64(len(m.Dists.code)), "dists-B/run")
			var samples float64 // nonzero samples of the distributions
			for k := range nDists {
				h := m.Dists.hist(k, false)
				samples += float64(h.Count())
			}
			b.ReportMetric(8*samples, "samples-B/run")
		})
		rs := make(Replicated, 200)
		for i := range rs {
			rs[i] = m
		}
		f, _ := FieldByName("wait_p99_ms")
		b.Run(tc.name+"/stat200", func(b *testing.B) {
			for b.Loop() {
				rs.Stat(f)
			}
		})
	}
}
