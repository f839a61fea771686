package advise_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// scenario parses a YAML scenario.
func scenario(t *testing.T, text string) system.Config {
	t.Helper()
	sc, err := scenarios.Parse([]byte("name: test\n"+text), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return sc.Base
}

// runner simulates every configuration with reps replications (one when
// it draws nothing), on this goroutine.
func runner(reps int) advise.Runner {
	return func(cfgs []system.Config) ([]advise.Outcome, error) {
		out := make([]advise.Outcome, len(cfgs))
		for i, c := range cfgs {
			n := reps
			if !c.Stochastic() {
				n = 1
			}
			o := advise.Outcome{Deterministic: n == 1}
			for r := range n {
				x := c
				x.Seed = system.ReplicationSeed(c.Seed, r)
				res := system.Run(x)
				o.Total = append(o.Total, res.Metrics)
				if !c.Multi() {
					if r == 0 {
						o.Classes = make([]system.Replicated, 1)
					}
					o.Classes[0] = append(o.Classes[0], res.Metrics)
					continue
				}
				if r == 0 {
					o.Classes = make([]system.Replicated, len(res.Classes))
				}
				for k, cm := range res.Classes {
					o.Classes[k] = append(o.Classes[k], cm.Metrics)
				}
			}
			out[i] = o
		}
		return out, nil
	}
}

func mustAdvise(t *testing.T, r advise.Request, reps int) *advise.Advice {
	t.Helper()
	a, err := advise.Advise(r, runner(reps))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A closed workload without a CPU model: 200 clients on a server of 20
// connections. Direct would need 200; the budget is 20 − 0 reserved − 2
// headroom = 18; transaction pooling carries the load below it.
const closed200 = `
workload: {clients: 200, txns_per_session: 3, stmts_per_txn: 6, query: 300us, think: 800us}
pooler: {mode: transaction, hop: 25us, max_client_conn: 1000}
server: {max_connections: 20, superuser_reserved_connections: 0}
`

func TestBudgetNeverFilled(t *testing.T) {
	a := mustAdvise(t, advise.Request{Base: scenario(t, closed200)}, 1)
	b := a.Budget
	if b.Total != 18 || b.Headroom != 2 || b.SuperuserReserved != 0 {
		t.Fatalf("budget %+v, want 20 - 0 - 2 = 18", b)
	}
	if !a.Answer || a.Spend > b.Total {
		t.Fatalf("answer %v spends %d of %d: %s", a.Answer, a.Spend, b.Total, a.Binding)
	}
	ch := a.Pools[0].Choice
	if ch.Mode != poolmode.Transaction {
		t.Errorf("answer %s, want transaction (direct needs 200 connections, session starves clients for whole sessions)", ch.Where())
	}
	for _, v := range a.Pools[0].Verdicts {
		if v.Mode == poolmode.Direct && (v.Min == nil || v.Min.Spend != 200) {
			t.Errorf("direct spends %v, want 200 (one per client)", v.Min)
		}
	}
	// The reserved slots and the headroom come off the budget.
	r := advise.Request{Base: scenario(t, closed200), Headroom: advise.Headroom{Count: 5}}
	r.Base.Server.SuperuserReserved = 3
	if a := mustAdvise(t, r, 1); a.Budget.Total != 12 || a.Spend > 12 {
		t.Errorf("budget %d, spend %d; want 20 - 3 - 5 = 12 and no more", a.Budget.Total, a.Spend)
	}
}

// The exact smallest pool: the default search (a coarse grid refined by
// bisection) gives the same answer as trying every size.
func TestExactSmallestPool(t *testing.T) {
	base := scenario(t, closed200)
	coarse := mustAdvise(t, advise.Request{Base: base}, 1)
	var every []int
	for n := 1; n <= 18; n++ {
		every = append(every, n)
	}
	brute := mustAdvise(t, advise.Request{Base: base, PoolSizes: every}, 1)
	if c, b := coarse.Pools[0].Choice, brute.Pools[0].Choice; c.Mode != b.Mode || c.Size != b.Size {
		t.Fatalf("refined answer %s, every size tried %s", c.Where(), b.Where())
	}
	v := verdict(coarse.Pools[0], poolmode.Transaction)
	if v.Min.Size > 1 && !slices.ContainsFunc(v.Evals, func(e *advise.Eval) bool { return e.Size == v.Min.Size-1 && !e.Meets }) {
		t.Errorf("the size below the answer (%d) was not tried and failed", v.Min.Size-1)
	}
	if len(coarse.Evaluated) >= len(brute.Evaluated) {
		t.Errorf("the refined search ran %d configurations, every size %d: no saving", len(coarse.Evaluated), len(brute.Evaluated))
	}
}

func verdict(p *advise.Pool, m poolmode.Mode) *advise.Verdict {
	for _, v := range p.Verdicts {
		if v.Mode == m {
			return v
		}
	}
	return nil
}

// Three classes on three pools, a web app; threeClasses writes the
// classes in one order and the pools in another.
func threeClasses(order ...string) string {
	classes := map[string]string{
		"web":    "  web:\n    pool: web\n    workload: {clients: 40, requests_per_session: 10, txns_per_request: 2, think: {dist: exp, mean: 60ms}}\n",
		"jobs":   "  jobs:\n    pool: jobs\n    workload: {clients: 12, requests_per_session: 5, txns_per_request: 1, stmts_per_txn: 4, think: {dist: exp, mean: 30ms}}\n",
		"report": "  report:\n    pool: report\n    workload: {clients: 2, requests_per_session: 3, txns_per_request: 1, stmts_per_txn: 6, think: 200ms}\n",
	}
	pools := map[string]string{
		"web":    "  web: {database: app, user: web, mode: transaction, size: 10}\n",
		"jobs":   "  jobs: {database: app, user: jobs, mode: session, size: 12}\n",
		"report": "  report: {database: app, user: report, mode: session, size: 2}\n",
	}
	if len(order) == 0 {
		order = []string{"web", "jobs", "report"}
	}
	s := `
seed: 7
workload: {query: {dist: exp, mean: 2ms}, stmts_per_txn: 2, app: 1ms}
pooler: {hop: 50us, max_client_conn: 2000}
server: {max_connections: 100, connect: 2ms}
classes:
`
	for _, n := range order {
		s += classes[n]
	}
	s += "pools:\n"
	for i := range order {
		s += pools[order[(i+1)%len(order)]]
	}
	return s
}

func TestAnswerDoesNotDependOnOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole search twice")
	}
	a1, a2 := scenario(t, threeClasses()), scenario(t, threeClasses("report", "web", "jobs"))
	if a1.Classes[0].Name == a2.Classes[0].Name || a1.Pools[0].Name == a2.Pools[0].Name {
		t.Fatal("the permutation left the order as it was")
	}
	needs := map[string]advise.Need{"web": {SLOP99: 40 * time.Millisecond}, "jobs": {Features: []compat.Feature{compat.AdvisoryLocks}}}
	x := mustAdvise(t, advise.Request{Base: a1, Needs: needs}, 3)
	y := mustAdvise(t, advise.Request{Base: a2, Needs: needs}, 3)
	if x.Split() != y.Split() || x.Spend != y.Spend {
		t.Fatalf("file order changed the answer: %q (%d) against %q (%d)", x.Split(), x.Spend, y.Split(), y.Spend)
	}
	if !x.Answer {
		t.Fatalf("no answer: %s", x.Binding)
	}
	for _, c := range x.Classes {
		if c.Check == nil || !c.Check.Meets {
			t.Errorf("class %s misses at the answer: %+v", c.Name, c.Check)
		}
	}
	jobs := pool(x, "jobs")
	if jobs.Choice.Mode != poolmode.Session && jobs.Choice.Mode != poolmode.Direct {
		t.Errorf("jobs (session-level advisory locks) at %s", jobs.Choice.Where())
	}
}

func pool(a *advise.Advice, name string) *advise.Pool {
	for _, p := range a.Pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// A class that holds its server for whole sessions starves when its
// session pool is smaller than its clients: its throughput falls short of
// what it reaches with servers to spare, and the bar rejects it, with or
// without an SLO.
func TestStarvedClassDoesNotQualify(t *testing.T) {
	base := scenario(t, threeClasses())
	needs := map[string]advise.Need{"jobs": {Features: []compat.Feature{compat.AdvisoryLocks}}}
	a := mustAdvise(t, advise.Request{Base: base, Needs: needs, Modes: []poolmode.Mode{poolmode.Session, poolmode.Transaction}}, 3)
	v := verdict(pool(a, "jobs"), poolmode.Session)
	if v.Min == nil {
		t.Fatalf("session never qualifies for jobs: %s", v.Closest.Fails())
	}
	for _, e := range v.Evals {
		if e.Size < v.Min.Size && e.Meets {
			t.Errorf("session %d below the answer %d meets", e.Size, v.Min.Size)
		}
	}
	small := v.Evals[0]
	if small.Meets || !strings.Contains(strings.Join(small.Fails(), ";"), "with a server for every connection") {
		t.Errorf("jobs at session %d: fails %q, want its throughput against servers to spare", small.Size, small.Fails())
	}
	// An open class is held to its arrivals: one that would carry 58.7 of
	// 60 per second at a noisy estimate is judged against the same
	// arrivals with servers to spare, not against the nominal rate.
	if v.Min.Size < 9 {
		t.Errorf("jobs' 12 clients hold a server for a whole session; the session pool answer %d is below what carries them", v.Min.Size)
	}
}

// The change that frees a pool: session-level advisory locks keep jobs
// on session pooling; with transaction-level locks it needs fewer
// connections, and --assume answers for the changed application.
func TestChangeThatFreesAPool(t *testing.T) {
	base := scenario(t, threeClasses())
	needs := map[string]advise.Need{"jobs": {Features: []compat.Feature{compat.AdvisoryLocks}}}
	a := mustAdvise(t, advise.Request{Base: base, Needs: needs}, 3)
	i := slices.IndexFunc(a.Frees, func(f advise.Freeing) bool { return f.Pool == "jobs" })
	if i < 0 {
		t.Fatalf("no change suggested for jobs; frees %+v", a.Frees)
	}
	f := a.Frees[i]
	if f.To >= f.From || f.Assume != "--assume jobs=xact_locks" || f.Changes[0].Name != "xact_locks" {
		t.Fatalf("freeing %+v: want fewer connections after xact_locks", f)
	}
	as := map[string][]advise.Assumption{"jobs": {{Change: f.Changes[0]}}}
	b := mustAdvise(t, advise.Request{Base: base, Needs: needs, Assume: as}, 3)
	// The prediction came from the first round's search; the changed
	// application's answer is searched and checked again as a whole.
	if ch := pool(b, "jobs").Choice; ch.Mode != poolmode.Transaction || ch.Spend < f.To-1 || ch.Spend > f.To+1 {
		t.Errorf("with --assume jobs=xact_locks: jobs at %s (%d connections), want transaction with about %d", ch.Where(), ch.Spend, f.To)
	}
	if b.Spend >= a.Spend {
		t.Errorf("the changed application spends %d, the unchanged %d", b.Spend, a.Spend)
	}
	if _, _, err := advise.ParseAssume("jobs=listen_direct"); err == nil || !strings.Contains(err.Error(), "listen_direct:4") {
		t.Errorf("listen_direct without a count: %v", err)
	}
	if _, err := advise.Advise(advise.Request{Base: base, Assume: as}, runner(1)); err == nil || !strings.Contains(err.Error(), "does not use advisory_locks") {
		t.Errorf("--assume for a feature not in use: %v", err)
	}
}

// --objective latency spends more of the budget for a lower latency.
func TestObjectiveLatency(t *testing.T) {
	base := scenario(t, closed200)
	fewest := mustAdvise(t, advise.Request{Base: base}, 1)
	best := mustAdvise(t, advise.Request{Base: base, Objective: advise.BestLatency}, 1)
	if !best.Answer || best.Spend > best.Budget.Total {
		t.Fatalf("latency objective: answer %v, spend %d of %d", best.Answer, best.Spend, best.Budget.Total)
	}
	p99 := func(a *advise.Advice) float64 { m, _ := a.Classes[0].Reps.Stat(mustField("p99_ms")); return m }
	if best.Spend < fewest.Spend || p99(best) > p99(fewest) {
		t.Errorf("latency objective spends %d for p99 %.2f ms, connections objective %d for %.2f ms", best.Spend, p99(best), fewest.Spend, p99(fewest))
	}
}

func mustField(name string) system.Field {
	f, ok := system.FieldByName(name)
	if !ok {
		panic(name)
	}
	return f
}

// --emit: a pgbouncer.ini that poolconf (what poolsim proxy --config
// reads) loads to the same pools.
func TestINI(t *testing.T) {
	base := scenario(t, threeClasses())
	needs := map[string]advise.Need{"jobs": {Features: []compat.Feature{compat.AdvisoryLocks}}}
	a := mustAdvise(t, advise.Request{Base: base, Needs: needs}, 2)
	text, err := advise.INI(a, "three")
	if err != nil {
		t.Fatal(err)
	}
	s, err := poolconf.Parse("advise.ini", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if s.MaxClientConn != a.MaxClientConn {
		t.Errorf("max_client_conn %d, want %d", s.MaxClientConn, a.MaxClientConn)
	}
	for _, p := range a.Pools {
		if p.Choice.Mode == poolmode.Direct {
			continue
		}
		d, ok := s.Database(p.Database)
		if !ok {
			t.Fatalf("no database %s in\n%s", p.Database, text)
		}
		got := s.PoolFor(d, s.User(p.User))
		limit := got.Size
		for _, l := range []int{got.MaxDBConnections, got.MaxUserConnections} {
			if l > 0 {
				limit = min(limit, l)
			}
		}
		if got.Mode != p.Choice.Mode || limit != p.Choice.Size {
			t.Errorf("pool %s: the ini gives %v with %d servers, the answer %s\n%s", p.Name, got.Mode, limit, p.Choice.Where(), text)
		}
	}
	if _, err := advise.INI(&advise.Advice{}, "x"); !errors.Is(err, advise.ErrNoAnswer) {
		t.Errorf("INI without an answer: %v", err)
	}
}

// An interrupted advise returns what finished, marked incomplete.
func TestInterrupted(t *testing.T) {
	calls := 0
	run := func(cfgs []system.Config) ([]advise.Outcome, error) {
		calls++
		out, _ := runner(1)(cfgs[:len(cfgs)/2])
		return out, context.Canceled
	}
	a, err := advise.Advise(advise.Request{Base: scenario(t, closed200)}, run)
	if !errors.Is(err, context.Canceled) || a == nil || !a.Incomplete || len(a.Evaluated) == 0 || a.Answer {
		t.Fatalf("interrupted: err %v, advice %+v", err, a)
	}
}

func TestHeadroomAndObjective(t *testing.T) {
	for s, want := range map[string]int{"10%": 10, "0.05": 5, "7": 7, "0": 0} {
		h, err := advise.ParseHeadroom(s)
		if err != nil || h.Of(100) != want {
			t.Errorf("headroom %q: %+v %v, want %d of 100", s, h, err, want)
		}
	}
	for _, s := range []string{"-1", "100%", "1.5", "lots"} {
		if _, err := advise.ParseHeadroom(s); err == nil {
			t.Errorf("headroom %q accepted", s)
		}
	}
	if _, err := advise.ParseObjective("throughput"); err == nil {
		t.Error("objective throughput accepted")
	}
	r := advise.Request{Base: scenario(t, closed200), Headroom: advise.Headroom{Count: 20}}
	if _, err := advise.Advise(r, runner(1)); err == nil || !strings.Contains(err.Error(), "leaves none") {
		t.Errorf("a headroom of the whole server: %v", err)
	}
}

// Workers behind a session pool smaller than their persistent
// connections: those beyond the pool never get a server while the others
// keep theirs. A short run hides it in the throughput and the p99 (the
// stuck requests are few); the starvation bar does not.
func TestStarvedWorkersDoNotQualify(t *testing.T) {
	base := scenario(t, `
seed: 3
workload: {workers: 12, arrival_rate: 40/s, duration: 30s, txns_per_request: 2, stmts_per_txn: 2, query: {dist: exp, mean: 3ms}, app: 1ms}
pooler: {mode: session, hop: 50us, max_client_conn: 1000}
server: {max_connections: 100}
`)
	r := advise.Request{Base: base, Modes: []poolmode.Mode{poolmode.Session}, Needs: map[string]advise.Need{"": {SLOP99: time.Second}}}
	a := mustAdvise(t, r, 3)
	v := verdict(a.Pools[0], poolmode.Session)
	if v.Min == nil || v.Min.Size != 12 {
		t.Fatalf("session answer %v, want 12: one server per persistent connection", v.Min)
	}
	for _, e := range v.Evals {
		if e.Size < 12 && !strings.Contains(strings.Join(e.Fails(), ";"), "waited") {
			t.Errorf("session %d: fails %q, want the starved connections named", e.Size, e.Fails())
		}
	}
	// Transaction pooling shares the servers a transaction at a time.
	r.Modes = nil
	if b := mustAdvise(t, r, 3); b.Pools[0].Choice.Mode != poolmode.Transaction || b.Spend >= 12 {
		t.Errorf("with every mode: %s, want transaction below 12", b.Split())
	}
}

// A light open class carries its arrivals: judged against the same
// arrivals with servers to spare, the noise of a short run's arrivals does
// not fail it (58.7 of 60 a second is all that arrived).
func TestLightOpenClassQualifies(t *testing.T) {
	base := scenario(t, `
seed: 11
workload: {arrival_rate: 60/s, duration: 10s, txns_per_session: 1, stmts_per_txn: 1, query: {dist: exp, mean: 5ms}}
pooler: {mode: transaction, hop: 50us, max_client_conn: 1000}
server: {max_connections: 50}
`)
	a := mustAdvise(t, advise.Request{Base: base}, 5)
	if !a.Answer {
		t.Fatalf("no answer for a light open class: %q; %+v", a.Binding, a.Classes[0].Check)
	}
	if c := a.Classes[0]; !c.Check.Meets {
		t.Errorf("the class misses: %q", c.Check.Fails)
	}
}

// The classic starting points: Little's law counts the application's
// time inside a transaction, never exceeds the class's connections, and
// HikariCP's rule takes the scenario's cores.
func TestClassicStartingPoints(t *testing.T) {
	base := scenario(t, `
workload: {clients: 60, requests_per_session: 5, txns_per_request: 4, stmts_per_txn: 4, query: 5ms, app: 3ms, think: 50ms}
pooler: {mode: transaction, hop: 0s, max_client_conn: 1000}
server: {max_connections: 100, cores: 8}
`)
	a := mustAdvise(t, advise.Request{Base: base, Spindles: 1}, 1)
	k := a.Classes[0].Classic
	if k.ServiceMs != 20 || k.HeldMs != 29 {
		t.Errorf("server time %v ms, held %v ms; want 4 x 5 = 20 and 20 + 3 x 3 = 29 (the app's time between statements)", k.ServiceMs, k.HeldMs)
	}
	if k.LittleHeld > 60 || k.LittleBusy > 60 {
		t.Errorf("Little's law gives %.1f held and %.1f busy for 60 clients", k.LittleHeld, k.LittleBusy)
	}
	if h := a.Hikari; h.Cores != 8 || h.Conns != 17 || h.Assumed {
		t.Errorf("HikariCP %+v, want the scenario's 8 cores: 17", h)
	}
}
