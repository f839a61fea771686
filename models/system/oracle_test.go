package system

import (
	"math"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// The oracle values below come from docs/queueing-oracles.md (computed
// from the formulas at 30 digits).

// openPool is an open workload on a transaction pooler with no hop: each
// Poisson arrival runs one one-statement transaction, so the wait for a
// server is the queue of an M/G/c system with c = pool size.
func openPool(rate float64, c int, query sim.Dist, d sim.Time) Config {
	cfg := Default()
	cfg.Workload = Workload{ArrivalRate: rate, Duration: d, TxnsPerSession: 1, StmtsPerTxn: 1, Query: query}
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Pooler.DefaultPoolSize = c
	cfg.Pooler.MaxClientConn = 10_000_000
	cfg.Pooler.QueryWaitTimeout = 0
	cfg.Server.MaxConnections = c
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	return cfg
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	t.Logf("%s = %.6g (oracle %.6g, %+.2f%%)", what, got, want, 100*(got-want)/want)
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g within %.1f%%", what, got, want, 100*rel)
	}
}

// erlangC is P(wait) and Wq of M/M/c (for checking the table values used).
func erlangC(c int, lambda, s float64) (pWait, wq float64) {
	a := lambda * s
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	rho := a / float64(c)
	pWait = b / (1 - rho*(1-b))
	return pWait, pWait * s / (float64(c) - a)
}

func TestErlangC(t *testing.T) {
	// c = 10, λ = 80/s, S = 100 ms: P(wait) = 0.4091801508, Wq = 20.45900754 ms.
	const wantP, wantWq = 0.4091801508, 0.02045900754
	if p, wq := erlangC(10, 80, 0.1); math.Abs(p-wantP) > 1e-9 || math.Abs(wq-wantWq) > 1e-11 {
		t.Fatalf("erlangC(10, 80, 0.1) = %v, %v; the reference says %v, %v", p, wq, wantP, wantWq)
	}
	r := Run(openPool(80, 10, sim.ExpDist(100*sim.Millisecond), 10_000*sim.Second))
	m := r.Metrics
	within(t, "mean wait (s)", m.WaitW, wantWq, 0.03)
	if math.Abs(m.WaitProb-wantP) > 0.01 {
		t.Errorf("P(wait) = %.4f, want %.4f within 0.01", m.WaitProb, wantP)
	}
	within(t, "server busy", m.ServerBusy, 0.8, 0.01)
	checkLittle(t, m)
	checkConservation(t, m)
}

func TestMMcTimeout(t *testing.T) {
	// M/M/c+D (§2.4): c = 10, μ = 10/s, τ fixed; P(timeout) and the mean
	// wait of the requests that were served.
	tests := []struct {
		rate            float64
		tau             sim.Time
		wantP, wantWait float64
	}{
		{80, 50 * sim.Millisecond, 0.034227588, 0.0063640911},
		{120, 100 * sim.Millisecond, 0.17742357, 0.061220829}, // overload, ρ = 1.2
	}
	for _, tt := range tests {
		cfg := openPool(tt.rate, 10, sim.ExpDist(100*sim.Millisecond), 8000*sim.Second)
		cfg.Pooler.QueryWaitTimeout = time.Duration(tt.tau)
		cfg.Pooler.TimeoutCheck = 0 // the formula's exact patience
		m := Run(cfg).Metrics
		within(t, "P(timeout)", float64(m.WaitTimeouts)/float64(m.Sessions), tt.wantP, 0.03)
		within(t, "mean wait of served requests (s)", m.WaitMeanMs/1000, tt.wantWait, 0.05)
		if m.TimedOutTxns != m.WaitTimeouts {
			t.Errorf("timed-out transactions %d, want one per timeout (%d)", m.TimedOutTxns, m.WaitTimeouts)
		}
		checkLittle(t, m)
		checkConservation(t, m)
	}
}

func TestMD1(t *testing.T) {
	// Pollaczek–Khinchine, M/D/1 with λ = 50/s, S = 10 ms: Wq = 5 ms.
	m := Run(openPool(50, 1, sim.ConstDist(10*sim.Millisecond), 20_000*sim.Second)).Metrics
	within(t, "M/D/1 Wq (s)", m.WaitW, 0.005, 0.03)
	within(t, "M/D/1 W (ms)", m.MeanMs, 15, 0.02)
	// M/M/1 at the same load waits twice as long (C_s² = 1).
	e := Run(openPool(50, 1, sim.ExpDist(10*sim.Millisecond), 20_000*sim.Second)).Metrics
	within(t, "M/M/1 Wq (s)", e.WaitW, 0.010, 0.04)
}

func TestFiniteSource(t *testing.T) {
	// N = 20 clients thinking Z = 1 s (exponential) between one-statement
	// transactions, c = 4 servers, S = 0.2 s exponential: the
	// machine-repairman M/M/4//20 gives X = 15.82305173/s and W = 0.2639786776 s.
	cfg := Default()
	cfg.Workload = Workload{Clients: 20, TxnsPerSession: 20_000, StmtsPerTxn: 1,
		Query: sim.ExpDist(200 * sim.Millisecond), Think: sim.ExpDist(sim.Second)}
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Pooler.DefaultPoolSize = 4
	cfg.Pooler.QueryWaitTimeout = 0
	m := Run(cfg).Metrics
	within(t, "throughput (1/s)", m.TPS, 15.82305173, 0.02)
	within(t, "response time (ms)", m.MeanMs, 263.9786776, 0.02)
	checkLittle(t, m)
	checkConservation(t, m)
}

func checkLittle(t *testing.T, m Metrics) {
	t.Helper()
	if lw := m.WaitLambda * m.WaitW; math.Abs(m.WaitL-lw) > 0.01*m.WaitL+1e-12 {
		t.Errorf("Little's law: wait_L = %.6g but wait_lambda × wait_W = %.6g", m.WaitL, lw)
	}
}

func checkConservation(t *testing.T, m Metrics) {
	t.Helper()
	if sum := m.Outcomes(); sum != m.AttemptedTxns {
		t.Errorf("conservation: ok %d + refused %d + timed out %d + app timeouts %d + prepared errors %d + unfinished %d = %d, want attempted %d",
			m.OKTxns, m.RefusedTxns, m.TimedOutTxns, m.AppTimeoutTxns, m.PreparedErrorTxns, m.UnfinishedTxn, sum, m.AttemptedTxns)
	}
}
