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
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	c.Pooler.MaxPreparedStatements = 0
	return c
}

// synthetic evaluations: tps and p99 per (mode, pool).
func ev(m poolmode.Mode, pool int, tps, p99 float64) *Eval {
	mt := system.Metrics{OKTxns: 1, TPS: tps, TPSSteady: tps, P99Ms: p99}
	return &Eval{Option: Option{Mode: m}, PoolSize: pool, Metrics: mt, Reps: system.Replicated{mt}}
}

// refused sets a point's refusals.
func refused(e *Eval, n int64) *Eval {
	e.Metrics.ConnRefused = n
	e.Reps[0].ConnRefused = n
	return e
}

func TestSmallestPoolNotWorseThanTheBest(t *testing.T) {
	evals := func() []*Eval {
		return []*Eval{ev(poolmode.Session, 5, 500, 90), ev(poolmode.Session, 10, 960, 40), ev(poolmode.Session, 15, 990, 32), ev(poolmode.Session, 20, 1000, 30)}
	}
	// Pool 5 does not carry the load (500 of the best 1000 tps); pool 10
	// does (within 5%) but its p99 is 33% above the best (30 ms); pool 15
	// is within 10% of it.
	for _, slo := range []time.Duration{0, 50 * time.Millisecond} {
		r := Request{Base: base(100, 50), SLOP99: slo}
		a := Decide(r, evals())
		if a.Answer == nil || a.Answer.PoolSize != 15 {
			t.Fatalf("SLO %v: answer %+v, want pool 15", slo, a.Answer)
		}
		if f := a.Modes[1].Evals[0].Fails; len(f) == 0 || !strings.Contains(f[0], "below 95% of the best 1000.0") {
			t.Errorf("pool 5 fails %q, want the throughput against the best", f)
		}
	}
	// An SLO of 35 ms leaves 15 and 20; the choice is the same.
	r := Request{Base: base(100, 50), SLOP99: 35 * time.Millisecond}
	if a := Decide(r, evals()); a.Answer == nil || a.Answer.PoolSize != 15 {
		t.Fatalf("SLO 35ms: answer %+v, want pool 15", a.Answer)
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
	d := refused(ev(poolmode.Direct, 0, 100, 5), 90)
	s := refused(ev(poolmode.Session, 10, 100, 5), 3)
	a := Decide(r, []*Eval{d, s})
	if a.Answer != nil || len(a.Binding) != 1 || !strings.Contains(a.Binding[0], "at best 3") {
		t.Fatalf("binding %q, want refusals at best 3", a.Binding)
	}
}

func TestRunWithSimulator(t *testing.T) {
	r := Request{Base: base(200, 20), PoolSizes: []int{5, 10, 20}, ServerCores: 2, Spindles: 1}
	r.Base.Workload.Query.Mean = 1e6 // 1 ms
	r.Base.Pooler.MaxClientConn = 1000
	a, err := Run(r, func(cs []system.Config) ([]system.Replicated, error) {
		out := make([]system.Replicated, len(cs))
		for i, c := range cs {
			out[i] = system.Replicated{system.Run(c).Metrics}
		}
		return out, nil
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
