package system

import (
	"context"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/queueing"
	"github.com/poolsim/poolsim/sim"
)

// replicate runs reps replications of c as a study does: the warm-up
// resolved once on the pilots, then replication i with ReplicationSeed.
func replicate(c Config, reps int) Replicated {
	rc, atLimit, _ := Resolved(context.Background(), c)
	out := make(Replicated, reps)
	for i := range out {
		x := rc
		x.Seed = ReplicationSeed(c.Seed, i)
		out[i] = Run(x).Metrics
		if atLimit {
			out[i].WarmupAtLimit = 1
		}
	}
	return out
}

// A 60-second run of an M/M/10 at ρ = 0.8 starts empty, and its cold start
// is a visible share of it. With the automatic warm-up and 10
// replications, the 95 % interval of Wq covers Erlang C's value for at
// least 18 of 20 seeds (a perfect interval misses one in twenty), and the
// replications' means are not biased.
func TestErlangCIntervalCoverage(t *testing.T) {
	const c, rate, s = 10, 80.0, 0.1
	_, wq, _ := queueing.ErlangC(c, rate, s)
	wf, _ := FieldByName("wait_W")
	covered := 0
	var bias, cut float64
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := openPool(rate, c, sim.ExpDist(100*sim.Millisecond), 60*sim.Second)
		cfg.Seed = seed
		cfg.Workload.WarmupAuto = true
		reps := replicate(cfg, 10)
		mean, half := reps.Stat(wf)
		if mean-half <= wq && wq <= mean+half {
			covered++
		} else {
			t.Logf("seed %d: Wq %.2f ± %.2f ms misses %.3f ms", seed, mean*1000, half*1000, wq*1000)
		}
		bias += (mean/wq - 1) / 20
		w := reps[0].WarmupMs
		if w < 0 || w > 30_000 || (w == 30_000) != (reps[0].WarmupAtLimit == 1) {
			t.Errorf("seed %d: warm-up %v ms (at limit %d), want at most half the run, flagged when it is half", seed, w, reps[0].WarmupAtLimit)
		}
		cut += w / 20
	}
	if covered < 18 {
		t.Errorf("the Wq interval covers Erlang C (%.3f ms) for %d of 20 seeds, want at least 18", wq*1000, covered)
	}
	// The queue fills within about a second; MSER-5 on 5 pilots of noisy
	// 60-second runs cuts more than that on average, but not half the run.
	if cut < 500 || cut > 15_000 {
		t.Errorf("mean warm-up %.0f ms over 20 seeds, want 0.5 to 15 s", cut)
	}
	if bias < -0.03 || bias > 0.03 {
		t.Errorf("mean relative bias of Wq over 20 seeds %+.1f%%, want within 3%%", bias*100)
	}
}

// The steady throughput of a closed workload: the machine repairman
// M/M/4//20 (think 1 s, S = 0.2 s, exponential) with 200 transactions per
// client. ok/wall counts the ragged end, when clients drop out one by one;
// tps_steady stops at the first client's last transaction and is within
// 1 % of the exact X over 10 replications.
func TestRepairmanSteadyThroughput(t *testing.T) {
	const exact = 15.82305173
	cfg := Default()
	cfg.Workload = Workload{Clients: 20, TxnsPerSession: 200, StmtsPerTxn: 1,
		Query: sim.ExpDist(200 * sim.Millisecond), Think: sim.ExpDist(sim.Second)}
	cfg.Pooler.PoolMode = poolmode.Transaction
	cfg.Pooler.DefaultPoolSize = 4
	cfg.Pooler.QueryWaitTimeout = 0
	reps := replicate(cfg, 10)
	steady, _ := FieldByName("tps_steady")
	whole, _ := FieldByName("tps")
	ms, hs := reps.Stat(steady)
	mw, _ := reps.Stat(whole)
	t.Logf("tps_steady %.3f ± %.3f, ok/wall %.3f, exact %.3f", ms, hs, mw, exact)
	within(t, "tps_steady (1/s)", ms, exact, 0.01)
	if mw > exact*0.99 {
		t.Errorf("ok/wall %.3f: want it visibly below the exact %.3f (the ragged end)", mw, exact)
	}
}

// Common random numbers: a client's statement times are keyed by its
// session and position, so a pooler or server setting leaves every
// client's sequence of query times as it was.
func TestPoolSizeKeepsEveryClientsDraws(t *testing.T) {
	base := Default()
	base.Workload = Workload{Clients: 30, TxnsPerSession: 20, StmtsPerTxn: 3,
		Query: sim.ExpDist(2 * sim.Millisecond), CPU: sim.ExpDist(500 * sim.Microsecond), Think: sim.ExpDist(sim.Millisecond)}
	base.Pooler.PoolMode = poolmode.Transaction
	base.Server.Cores = 2
	seqs := func(c Config) map[uint64][]sim.Time {
		m, _ := simulateWith(c, options{trace: true})
		return m.trace
	}
	small := base
	small.Pooler.DefaultPoolSize = 8
	big := base
	big.Pooler.DefaultPoolSize = 10
	a, b := seqs(small), seqs(big)
	if len(a) != 30 {
		t.Fatalf("traced %d clients, want 30", len(a))
	}
	for u, qa := range a {
		qb := b[u]
		if len(qa) != 60 || len(qb) != 60 {
			t.Fatalf("client %d: %d and %d statements, want 60", u, len(qa), len(qb))
		}
		for i := range qa {
			if qa[i] != qb[i] {
				t.Fatalf("client %d statement %d: query time %v with pool 8, %v with pool 10", u, i, qa[i], qb[i])
			}
		}
	}
	// The runs themselves differ: the pool size changed the waits.
	if Run(small).Metrics.WaitMeanMs == Run(big).Metrics.WaitMeanMs {
		t.Error("pool 8 and pool 10 gave the same mean wait: the test compares nothing")
	}
}
