package system

import (
	"math"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Tests of the application pool, connection cost and footprint, and the
// CPU-bound server.

func TestPartsAddUpToLatency(t *testing.T) {
	for _, app := range []AppPoolMode{NoAppPool, QueuePool, NullPool} {
		for _, mode := range poolmode.Modes {
			c := closed(mode, 40, 4, 3, 0, 0)
			c.Workload.Query = sim.ExpDist(200 * sim.Microsecond)
			c.Workload.CPU = sim.ExpDist(300 * sim.Microsecond)
			c.Workload.Think = sim.ExpDist(500 * sim.Microsecond)
			c.Pooler.Hop = 30 * sim.Microsecond
			c.Pooler.DefaultPoolSize = 6
			c.Server.Cores = 2
			c.Server.Contention = 0.03
			c.Server.Coherency = 0.001
			c.Server.MaxConnections = 30
			c.Server.SuperuserReserved = 0 // every slot serves the clients
			c.Server.Connect = sim.ExpDist(2 * sim.Millisecond)
			c.AppPool = AppPool{Mode: app, Size: 8, MaxOverflow: 2, Timeout: 5 * sim.Millisecond}
			c.Pooler.Processes = 3
			c.Pooler.CPUPerMsg = 5 * sim.Microsecond
			c.Pooler.ConnOverhead = 0.01
			c.Pooler.Wakeup = 20 * sim.Microsecond
			m, s := simulate(c)
			if m.results.partsOff != 0 {
				t.Errorf("app pool %v, %v: %d of %d transactions' parts do not add up to their latency", app, mode, m.results.partsOff, m.results.m.OKTxns)
			}
			mt := m.result(s).Metrics
			checkConservation(t, mt)
			if mt.OKTxns == 0 {
				t.Errorf("app pool %v, %v: no transaction completed", app, mode)
			}
		}
	}
}

func TestAppPoolExhaustionSeed003(t *testing.T) {
	// Seed 003 case A: 10 users × 5 requests, each holding its connection
	// for 1 s, QueuePool size 3, no overflow, 3 s timeout. Measured: 45
	// succeed, 5 fail with pool exhausted, successes average 1.85 s.
	c := closed(poolmode.Direct, 10, 5, 1, sim.Second, 0)
	c.AppPool = AppPool{Mode: QueuePool, Size: 3, MaxOverflow: 0, Timeout: 3 * sim.Second}
	m := Run(c).Metrics
	t.Logf("ok %d, app timeouts %d, mean %.0f ms", m.OKTxns, m.AppTimeouts, m.MeanMs)
	if m.OKTxns+m.AppTimeoutTxns != 50 || m.AppTimeouts != m.AppTimeoutTxns {
		t.Errorf("ok %d + app timeouts %d, want 50 in all", m.OKTxns, m.AppTimeoutTxns)
	}
	if m.AppTimeouts < 3 || m.AppTimeouts > 8 {
		t.Errorf("%d pool-exhausted failures, the seed measured 5", m.AppTimeouts)
	}
	if m.ServerConns != 3 {
		t.Errorf("%d server connections, want the pool's 3", m.ServerConns)
	}
	checkLittle(t, m)
	checkConservation(t, m)
}

func TestNullPoolLeavesTimeWait(t *testing.T) {
	// 50 users × 10 requests with a new connection each: 500 connections
	// opened and closed, all still in TIME_WAIT (60 s) when the run ends;
	// each request pays the connection cost.
	c := closed(poolmode.Direct, 50, 10, 1, 200*sim.Microsecond, 0)
	c.Server.Connect = sim.ConstDist(5 * sim.Millisecond)
	c.Server.ConnectConcurrency = 4
	c.AppPool = AppPool{Mode: NullPool}
	n := Run(c).Metrics
	if n.ConnsOpened != 500 || n.TimeWaitEnd != 500 || n.TimeWaitPeak != 500 {
		t.Errorf("null pool: opened %d, TIME_WAIT at end %d, peak %d; want 500 each", n.ConnsOpened, n.TimeWaitEnd, n.TimeWaitPeak)
	}
	c.AppPool = AppPool{Mode: QueuePool, Size: 10, MaxOverflow: 0, Timeout: 30 * sim.Second}
	q := Run(c).Metrics
	if q.ConnsOpened != 10 || q.TimeWaitEnd != 0 {
		t.Errorf("queue pool: opened %d, TIME_WAIT %d; want 10 and 0", q.ConnsOpened, q.TimeWaitEnd)
	}
	if !(q.TPS > 1.5*n.TPS) {
		t.Errorf("queue pool %.0f tps vs null pool %.0f: want the pool well ahead when connecting costs 25x the query", q.TPS, n.TPS)
	}
}

func TestServerMemoryIsLinearInConnections(t *testing.T) {
	for _, n := range []int{10, 25, 50, 100} {
		c := closed(poolmode.Direct, n, 1, 1, sim.Millisecond, 0)
		c.Server.MaxConnections = 200
		c.Server.SuperuserReserved = 0 // every slot serves the clients
		m := Run(c).Metrics
		if want := float64(n) * 1.5; m.ServerMemPeakMB != want {
			t.Errorf("%d idle-ish connections: %.2f MB, want %.2f (1.5 MB each)", n, m.ServerMemPeakMB, want)
		}
	}
}

func TestProcessorSharingMM1(t *testing.T) {
	// One core shared by Poisson arrivals of exponential CPU work: M/M/1-PS
	// has the same mean response as FCFS, 1/(μ−λ) = 20 ms at λ = 50/s,
	// S = 10 ms. The pooler's pool is large enough never to queue.
	c := openPool(50, 200, sim.ConstDist(0), 4000*sim.Second)
	c.Workload.CPU = sim.ExpDist(10 * sim.Millisecond)
	c.Server.Cores = 1
	c.Server.MaxConnections = 200
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	m := Run(c).Metrics
	within(t, "M/M/1-PS mean response (ms)", m.MeanMs, 20, 0.03)
	within(t, "CPU utilisation", m.CPUUtil, 0.5, 0.02)
	within(t, "statements on the CPU (L)", m.CPUJobsL, 1.0, 0.05) // ρ/(1−ρ)
}

func TestProcessorSharingRepairman(t *testing.T) {
	// 6 clients, exponential think 20 ms, one core with exponential 2 ms
	// CPU work: the repairman M/M/1//6 (= MVA) gives X = 0.2577425482/ms
	// and R = 3.279043537 ms.
	c := closed(poolmode.Direct, 6, 40_000, 1, 0, 0)
	c.Workload.CPU = sim.ExpDist(2 * sim.Millisecond)
	c.Workload.Think = sim.ExpDist(20 * sim.Millisecond)
	c.Server.Cores = 1
	m := Run(c).Metrics
	within(t, "throughput (1/s)", m.TPS, 257.7425482, 0.02)
	within(t, "response time (ms)", m.MeanMs, 3.279043537, 0.02)
}

func TestUSLThroughput(t *testing.T) {
	// N clients with no think time on enough cores, constant 10 ms CPU
	// work slowed by σ = 0.05, κ = 0.001: throughput is exactly the USL's
	// X(N) = λN / (1 + σ(N−1) + κN(N−1)) with λ = 100/s (§2.7 synthetic).
	want := map[int]float64{1: 100, 4: 344.234079, 16: 804.020101, 32: 903.444382, 64: 782.204840}
	for n, x := range want {
		c := closed(poolmode.Direct, n, 400, 1, 0, 0)
		c.Workload.CPU = sim.ConstDist(10 * sim.Millisecond)
		c.Server.Cores = 64
		c.Server.Contention = 0.05
		c.Server.Coherency = 0.001
		m := Run(c).Metrics
		if math.Abs(m.TPS-x) > 1e-3*x {
			t.Errorf("N=%d: %.3f tps, want USL %.3f", n, m.TPS, x)
		}
	}
}

func TestAppPoolOracles(t *testing.T) {
	// Finite source: 20 clients thinking 1 s (exp) share an application
	// pool of 4 direct connections, service 200 ms (exp): M/M/4//20 gives
	// X = 15.82305173/s and W = 0.2639786776 s.
	c := closed(poolmode.Direct, 20, 20_000, 1, 0, 0)
	c.Workload.Query = sim.ExpDist(200 * sim.Millisecond)
	c.Workload.Think = sim.ExpDist(sim.Second)
	c.AppPool = AppPool{Mode: QueuePool, Size: 4}
	m := Run(c).Metrics
	within(t, "throughput (1/s)", m.TPS, 15.82305173, 0.02)
	within(t, "response time (ms)", m.MeanMs, 263.9786776, 0.02)

	// Poisson arrivals at an application pool of 10 with a 100 ms acquire
	// timeout, S = 100 ms (exp), ρ = 1.2: M/M/c+D gives P(timeout) = 0.17742357.
	o := Default()
	o.Workload = Workload{ArrivalRate: 120, Duration: 8000 * sim.Second, TxnsPerSession: 1, StmtsPerTxn: 1,
		Query: sim.ExpDist(100 * sim.Millisecond), TimeWait: 60 * sim.Second}
	o.Pooler.PoolMode = poolmode.Direct
	o.Server.MaxConnections = 100
	o.Server.SuperuserReserved = 0 // every slot serves the clients
	o.AppPool = AppPool{Mode: QueuePool, Size: 10, Timeout: 100 * sim.Millisecond}
	om := Run(o).Metrics
	within(t, "P(app-pool timeout)", float64(om.AppTimeouts)/float64(om.Sessions), 0.17742357, 0.03)
	if la, lw := om.AppWaitL, om.AppWaitLambda*om.AppWaitW; math.Abs(la-lw) > 0.01*la {
		t.Errorf("Little's law on the app pool: L %.5g, λW %.5g", la, lw)
	}
	checkConservation(t, om)
}
