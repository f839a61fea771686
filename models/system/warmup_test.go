package system

import (
	"context"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// webAtTwice is scenarios/builtin/web-app.yaml at twice its arrival rate
// (500 requests/s, 1,000 transactions/s), with server.connect 5 ms, a
// transaction pool of 60 (it carries the load with a wait p99 around a
// millisecond) and application time inside the transactions as a Rails
// request has it (lognormal, mean 10 ms, p99 140 ms): the latencies are
// long-tailed, and the pool's 60 logins, one every 5 ms, leave a queue
// behind them.
func webAtTwice(seed uint64, d sim.Time) Config {
	q, _ := sim.LognormalP99(sim.Millisecond, 8*sim.Millisecond)
	cpu, _ := sim.LognormalP99(1500*sim.Microsecond, 12*sim.Millisecond)
	app, _ := sim.LognormalP99(10*sim.Millisecond, 140*sim.Millisecond)
	c := Default()
	c.Seed = seed
	c.Workload = Workload{ArrivalRate: 500, Duration: d, TxnsPerSession: 2, StmtsPerTxn: 4,
		Query: q, CPU: cpu, Think: app, WarmupAuto: true, Statements: 1}
	c.Pooler.PoolMode = poolmode.Transaction
	c.Pooler.Hop = 100 * sim.Microsecond
	c.Pooler.MaxClientConn = 10_000
	c.Pooler.DefaultPoolSize = 60
	c.Server.MaxConnections = 100
	c.Server.Cores, c.Server.Contention = 8, 0.002
	c.Server.Connect = sim.ConstDist(5 * sim.Millisecond)
	return c
}

// The automatic warm-up covers the pools' fill. On webAtTwice over 10 s,
// MSER-5 on the pilots' latencies cuts nothing (the fill hides in the
// latencies' long tail), and the wait p99 of 10 replications is 26-28 ms -
// the cold start's queue; a run ten times longer with a 10 s warm-up says
// under 3 ms. The warm-up that waits for the pilots' pools to catch up
// (FillTime) is 400 ms, and its wait p99 is within 3 ms of the long run's
// (about its interval) - where MSER-5's alone is 20 ms off.
func TestWarmupCoversThePoolsFill(t *testing.T) {
	f, _ := FieldByName("wait_p99_ms")
	for _, seed := range []uint64{2, 4} {
		c := webAtTwice(seed, 10*sim.Second)
		var ps []Pilot
		for i := range Pilots {
			p, err := RunPilot(context.Background(), c, i)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		cut, _ := WarmupFrom(c, ps)
		fill := FillTime(c, ps)
		mser := ps[:0:0]
		for _, p := range ps {
			p.Filled = 0
			mser = append(mser, p)
		}
		old, _ := WarmupFrom(c, mser)
		if rc, _, _ := Resolved(context.Background(), c); rc.Workload.Warmup != cut {
			t.Fatalf("seed %d: the automatic warm-up is %v, WarmupFrom's %v", seed, rc.Workload.Warmup, cut)
		}
		with := func(x Config, w sim.Time, n int) (float64, float64) {
			x.Workload.WarmupAuto, x.Workload.Warmup = false, w
			return reps(x, n).Stat(f)
		}
		auto, ha := with(c, cut, 10)
		before, hb := with(c, old, 10)
		long, hl := with(webAtTwice(seed, 100*sim.Second), 10*sim.Second, 3)
		t.Logf("seed %d: MSER-5 cuts %v, the fill ends by %v: wait p99 %.2f ± %.2f ms with the fill's cut, %.2f ± %.2f with MSER-5's alone, %.2f ± %.2f over 100 s cut at 10 s",
			seed, old, fill, auto, ha, before, hb, long, hl)
		if cut < fill || fill <= old {
			t.Errorf("seed %d: warm-up %v, fill %v, MSER-5 %v: want the fill to set it", seed, cut, fill, old)
		}
		if d := auto - long; d > 3 || d < -3 {
			t.Errorf("seed %d: wait p99 %.2f ms with the automatic warm-up, %.2f over a run ten times longer: want within 3 ms", seed, auto, long)
		}
		if before-long < 10 {
			t.Errorf("seed %d: MSER-5's warm-up alone gives %.2f ms, the long run %.2f: the test would not catch the cold start", seed, before, long)
		}
	}
}

// With classes, the automatic warm-up is the run's: found from the
// pilots of the whole run (every class open), and given to every class;
// it used to be looked for in the top-level workload only, which a
// scenario of classes leaves closed, so it was never decided (0).
func TestAutoWarmupWithClasses(t *testing.T) {
	one := webAtTwice(4, 10*sim.Second)
	c := one.Clone()
	w := c.Workload
	c.Classes = []Class{{Name: "web", Workload: w, Set: []string{"workload.arrival_rate"}}}
	c.Pools = []PoolSpec{{Name: "web", Database: "app", User: "web", Mode: c.Pooler.PoolMode, ModeSet: true, Size: c.Pooler.DefaultPoolSize}}
	c.Workload.ArrivalRate = 0 // the top level keeps only the defaults
	c.Workload.Clients = 1
	if !c.WarmupAuto() {
		t.Fatal("a scenario of open classes does not ask for the automatic warm-up")
	}
	rc, _, err := Resolved(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	r1, _, _ := Resolved(context.Background(), one)
	if rc.WarmupAuto() || rc.WarmupCut() == 0 || rc.Classes[0].Workload.Warmup != rc.WarmupCut() {
		t.Fatalf("with classes: warm-up %v (auto %v, the class's %v), want one decided for every class", rc.WarmupCut(), rc.WarmupAuto(), rc.Classes[0].Workload.Warmup)
	}
	if c.Classes[0].Workload.Warmup != 0 || !c.Classes[0].Workload.WarmupAuto {
		t.Error("deciding the warm-up changed the configuration it was decided from (shared classes)")
	}
	t.Logf("warm-up with classes %v, without %v", rc.WarmupCut(), r1.WarmupCut())
}
