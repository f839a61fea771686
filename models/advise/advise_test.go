package advise

import (
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

func base(clients, slots int) system.Config {
	c := system.Default()
	c.Workload.Clients = clients
	c.Workload.StmtsPerTxn = 1
	c.Server.MaxConnections = slots
	c.Pooler.MaxPreparedStatements = 0
	return c
}

// synthetic evaluations: tps and p99 per (mode, pool).
func ev(m poolmode.Mode, pool int, tps, p99 float64) *Eval {
	return &Eval{Option: Option{Mode: m}, PoolSize: pool, Metrics: system.Metrics{OKTxns: 1, TPS: tps, P99Ms: p99}}
}

func TestSmallestPoolWithinTolerance(t *testing.T) {
	evals := func() []*Eval {
		return []*Eval{ev(poolmode.Session, 5, 500, 90), ev(poolmode.Session, 10, 960, 40), ev(poolmode.Session, 15, 990, 32), ev(poolmode.Session, 20, 1000, 30)}
	}
	r := Request{Base: base(100, 50), SLOP99: 50 * time.Millisecond}
	if a := Decide(r, evals()); a.Answer == nil || a.Answer.PoolSize != 10 {
		t.Fatalf("answer %+v, want pool 10 (within 5%% of 1000 tps, p99 within the SLO)", a.Answer)
	}
	// Without an SLO, the p99 must also be within 10% of the best (30 ms).
	r.SLOP99 = 0
	if a := Decide(r, evals()); a.Answer == nil || a.Answer.PoolSize != 15 {
		t.Fatalf("answer %+v, want pool 15 (p99 32 ms within 10%% of 30 ms)", a.Answer)
	}
}

func TestContendersBrokenByP99(t *testing.T) {
	r := Request{Base: base(100, 50), SLOP99: 80 * time.Millisecond}
	a := Decide(r, []*Eval{
		ev(poolmode.Session, 20, 1000, 70),
		ev(poolmode.Transaction, 20, 1020, 20), // within 5%: lower p99 wins
		ev(poolmode.Statement, 20, 5000, 90),   // fastest, but misses the SLO
	})
	if a.Answer == nil || a.Answer.Mode != poolmode.Transaction || a.RunnerUp == nil || a.RunnerUp.Mode != poolmode.Session {
		t.Fatalf("answer %+v runner-up %+v, want transaction then session", a.Answer, a.RunnerUp)
	}
}

func TestFeaturesDropAndSave(t *testing.T) {
	fs, err := ParseFeatures("prepared, advisory_locks")
	if err != nil || len(fs) != 2 || fs[0] != compat.ProtocolPrepared || fs[1] != compat.AdvisoryLocks {
		t.Fatalf("ParseFeatures = %v, %v", fs, err)
	}
	if _, err := ParseFeatures("prepared,cursors"); err == nil || !strings.Contains(err.Error(), `"cursors"`) {
		t.Fatalf("unknown feature: %v", err)
	}
	r := Request{Base: base(10, 20), Features: []compat.Feature{compat.ProtocolPrepared}, PoolSizes: []int{5, 10, 40}}
	evals, cfgs, notes, err := Plan(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "above the server's limit (20)") {
		t.Errorf("notes %q", notes)
	}
	// direct 1 + (session, transaction saved, statement saved) x 3 sizes.
	if len(evals) != 10 || len(cfgs) != 10 {
		t.Fatalf("%d evaluations, want 10", len(evals))
	}
	for i, e := range evals {
		if e.Mode >= poolmode.Transaction && (!e.Saved || cfgs[i].Pooler.MaxPreparedStatements != SavedMaxPrepared) {
			t.Errorf("%v not evaluated with max_prepared_statements=%d", e.Mode, SavedMaxPrepared)
		}
	}
	// With two statements per transaction, statement mode is dropped.
	r.Base.Workload.StmtsPerTxn = 2
	for _, v := range r.options() {
		if v.Mode == poolmode.Statement && v.Allowed {
			t.Error("statement mode allowed for 2-statement transactions")
		}
	}
}

func TestBindingRefusals(t *testing.T) {
	r := Request{Base: base(100, 10)}
	d := ev(poolmode.Direct, 0, 100, 5)
	d.Metrics.ConnRefused = 90
	s := ev(poolmode.Session, 10, 100, 5)
	s.Metrics.ConnRefused = 3
	a := Decide(r, []*Eval{d, s})
	if a.Answer != nil || len(a.Binding) != 1 || !strings.Contains(a.Binding[0], "at best 3") {
		t.Fatalf("binding %q, want refusals at best 3", a.Binding)
	}
}

func TestRunWithSimulator(t *testing.T) {
	r := Request{Base: base(200, 20), PoolSizes: []int{5, 10, 20}, ServerCores: 2, Spindles: 1}
	r.Base.Workload.Query.Mean = 1e6 // 1 ms
	r.Base.Pooler.MaxClientConn = 1000
	a, err := Run(r, func(cs []system.Config) []system.Result {
		out := make([]system.Result, len(cs))
		for i, c := range cs {
			out[i] = system.Run(c)
		}
		return out
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Answer == nil || a.Answer.Mode == poolmode.Direct {
		t.Fatalf("answer %+v: 200 clients on 20 slots cannot be direct", a.Answer)
	}
	if a.Classic.Hikari != 5 || a.Classic.TPS <= 0 || a.Classic.LittleBusy <= 0 {
		t.Errorf("classic %+v", a.Classic)
	}
}
