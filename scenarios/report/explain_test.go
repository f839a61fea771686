package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// boundWorkloads are request and class workloads beside the built-ins:
// the case (one client, 2 requests of 3 transactions) in every
// mode, random draws, CPU, a fleet, and closed classes with their own
// pools.
var boundWorkloads = map[string]string{
	"requests": `name: requests
seed: 1
workload: {clients: 1, requests_per_session: 2, txns_per_request: 3, stmts_per_txn: 2, query: 1ms, think: 10ms, app: 0.5ms}
pooler: {mode: transaction, hop: 0s}
server: {max_connections: 20, superuser_reserved_connections: 0}
sweep:
  workload.clients: [1, 30, 200]
  pooler.mode: [direct, session, transaction, statement]
`,
	"random-requests": `name: random-requests
seed: 3
workload:
  clients: 40
  requests_per_session: 20
  txns_per_request: {dist: uniform, min: 1, max: 5}
  stmts_per_txn: 3
  query: {dist: exp, mean: 400us}
  cpu: {dist: exp, mean: 100us}
  think: {dist: exp, mean: 5ms}
  app: {dist: exp, mean: 200us}
pooler: {mode: transaction, hop: 30us, default_pool_size: 8}
server: {max_connections: 50, cores: 2}
sweep:
  pooler.mode: [direct, session, transaction, statement]
  workload.clients: [4, 40]
`,
	"finite-sessions": `name: finite-sessions
seed: 2
workload: {clients: 10, txns_per_session: 2, stmts_per_txn: 4, query: 300us, think: 2ms}
pooler: {mode: transaction, hop: 25us, default_pool_size: 4, processes: 4, budget: divided}
server: {max_connections: 40, superuser_reserved_connections: 0}
sweep:
  pooler.mode: [session, transaction, statement]
`,
	"app-pools": `name: app-pools
seed: 5
workload: {clients: 40, requests_per_session: 5, txns_per_request: 2, stmts_per_txn: 2, query: {dist: exp, mean: 500us}, cpu: 200us, think: 3ms, app: 300us}
app_pool: {mode: queue, size: 6, max_overflow: 2, timeout: 10s}
pooler: {mode: transaction, hop: 40us, default_pool_size: 5}
server: {max_connections: 30, cores: 2, connect: 1ms}
sweep:
  app_pool.mode: [queue, null]
  pooler.mode: [direct, session, transaction, statement]
`,
	"classes": `name: classes
seed: 4
workload: {query: {dist: exp, mean: 1ms}, stmts_per_txn: 2, app: 200us}
pooler: {hop: 50us, max_client_conn: 2000}
server: {max_connections: 60, cores: 4}
pools:
  web: {database: app, user: web, mode: transaction, size: 10}
  report: {database: app, user: report, mode: session, size: 2}
classes:
  web:
    pool: web
    workload: {clients: 60, requests_per_session: 8, txns_per_request: 2, think: {dist: exp, mean: 20ms}, cpu: 300us}
  report:
    pool: report
    workload: {clients: 3, requests_per_session: 2, stmts_per_txn: 6, think: 30ms, cpu: 1ms}
`,
	"class-workers": `name: class-workers
seed: 6
workload: {duration: 20s, query: {dist: exp, mean: 2ms}, cpu: {dist: exp, mean: 300us}, stmts_per_txn: 2}
pooler: {hop: 50us, max_client_conn: 2000}
server: {max_connections: 80, cores: 4}
pools:
  shared: {mode: transaction, size: 8}
  jobs: {mode: session, size: 6}
classes:
  web: {pool: shared, workload: {workers: 16, arrival_rate: 800/s}}
  api: {pool: shared, workload: {workers: 8, arrival_rate: 300/s, stmts_per_txn: 1, cpu: {dist: exp, mean: 1ms}}}
  jobs: {pool: jobs, workload: {workers: 6, arrival_rate: 40/s, txns_per_request: 3}}
sweep:
  pools.shared.size: [4, 8]
`,
	"class-one-pool": `name: class-one-pool
seed: 8
workload: {query: {dist: exp, mean: 1ms}, think: {dist: exp, mean: 2ms}, txns_per_session: 20}
pooler: {mode: transaction, default_pool_size: 4, hop: 20us}
server: {max_connections: 40, cores: 2}
classes:
  a: {workload: {clients: 10, cpu: {dist: exp, mean: 200us}}}
  b: {workload: {clients: 5, stmts_per_txn: 3, cpu: 500us}}
`,
	"class-app-pools": `name: class-app-pools
seed: 7
workload: {query: {dist: exp, mean: 1ms}, cpu: {dist: exp, mean: 200us}, stmts_per_txn: 2}
pooler: {hop: 50us, max_client_conn: 2000}
server: {max_connections: 60, cores: 2, connect: 1ms}
pools:
  web: {mode: transaction, size: 6}
  batch: {mode: direct}
classes:
  web:
    pool: web
    workload: {clients: 40, requests_per_session: 10, txns_per_request: 2, think: {dist: exp, mean: 5ms}, app: 100us}
    app_pool: {mode: queue, size: 5, max_overflow: 1, timeout: 10s}
  batch:
    pool: batch
    workload: {clients: 4, txns_per_session: 20, think: 2ms, stmts_per_txn: 5, cpu: {dist: exp, mean: 1ms}}
    app_pool: {mode: null}
`,
}

// tolerance is how far above its bound a run may measure: none beyond
// rounding when it draws nothing at random; else three standard errors
// of a mean over ok cycles whose squared coefficient of variation is at
// most 1 (exponential at worst), as the bounds are made of mean times.
func tolerance(x *scenarios.Row) float64 {
	if x.Deterministic {
		return 1e-9
	}
	return 1e-9 + 3/math.Sqrt(math.Max(1, float64(x.Metrics.OKTxns)))
}

// TestExplainBoundsHold: no run of a built-in scenario or of the request
// and class workloads measures above its own closed-system bound, and
// every closed workload gets one.
func TestExplainBoundsHold(t *testing.T) {
	var all []*scenarios.Scenario
	for _, b := range scenarios.Builtins() {
		sc, err := scenarios.Builtin(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sc)
	}
	for name, y := range boundWorkloads {
		sc, err := scenarios.Parse([]byte(y), name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		all = append(all, sc)
	}
	bounds := 0
	for _, sc := range all {
		points, err := sc.Points()
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		rows := scenarios.Run(points, 1)
		e := Explain(rows)
		most := 0.0
		for i, r := range e.Rows {
			x := &rows[i]
			want := !x.Config.Open()
			got := false
			for _, p := range r.Paragraphs {
				for _, c := range p.Checks {
					if !c.Bound {
						continue
					}
					got = true
					bounds++
					most = math.Max(most, c.PctOfBound)
					if tol := tolerance(x); c.Measured > c.Computed*(1+tol) {
						t.Errorf("%s, %s: measured %.6g/s is %.2f%% of its bound %.6g/s (tolerance %.2g%%):\n%s",
							sc.Name, r.Title, c.Measured, c.PctOfBound, c.Computed, 100*tol, p.Text)
					}
				}
			}
			if got != want {
				t.Errorf("%s, %s: a closed-system bound: %v, want %v", sc.Name, r.Title, got, want)
			}
		}
		t.Logf("%s: at most %.2f%% of its bound", sc.Name, most)
	}
	if bounds < 40 {
		t.Errorf("only %d bounds checked: the workloads should give dozens", bounds)
	}
}

// TestExplanationJSON: every paragraph has a kind, a title and text, and
// the explanation encodes (no NaN or Inf slips into a number).
func TestExplanationJSON(t *testing.T) {
	sc, err := scenarios.Parse([]byte(boundWorkloads["requests"]), "requests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, err := sc.Points()
	if err != nil {
		t.Fatal(err)
	}
	e := Explain(scenarios.Run(points[:4], 1)) // one client, every mode
	kinds := map[string]bool{}
	for _, r := range e.Rows {
		for _, p := range r.Paragraphs {
			if p.Kind == "" || p.Title == "" || p.Text == "" {
				t.Errorf("%s: paragraph without kind, title or text: %+v", r.Title, p)
			}
			kinds[p.Kind] = true
		}
	}
	for _, k := range []string{system.KindSteady, system.KindLittle, system.KindClosedBounds} {
		if !kinds[k] {
			t.Errorf("no %q paragraph among %v", k, kinds)
		}
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(e); err != nil {
		t.Fatal(err)
	}
	var back Explanation
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the explanation does not read back: %v", err)
	}
	if len(back.Rows) != len(e.Rows) || back.Rows[0].Paragraphs[0].Text != e.Rows[0].Paragraphs[0].Text ||
		len(back.Rows[1].Params) != 2 || back.Rows[1].Params[1] != e.Rows[1].Params[1] {
		t.Errorf("the explanation reads back as %+v, want %+v", back.Rows, e.Rows)
	}
}

// TestWrap: lines at most the width, a longer word on a line of its own.
func TestWrap(t *testing.T) {
	got := Wrap("aa bb λλλ dddddddddd e", 6)
	if want := "aa bb\nλλλ\ndddddddddd\ne"; got != want {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
	if strings.Contains(Wrap("  x  y ", 80), "  ") {
		t.Error("Wrap keeps runs of spaces")
	}
}

// classWorkloads are the built-ins with classes and the class workloads
// above, with rails-app at twice its traffic (the README's worked
// example) beside it.
func classWorkloads(t *testing.T) []*scenarios.Scenario {
	t.Helper()
	var all []*scenarios.Scenario
	for _, b := range scenarios.Builtins() {
		sc, err := scenarios.Builtin(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Base.Classes) > 0 {
			all = append(all, sc)
		}
	}
	twice, err := scenarios.Builtin("rails-app")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"classes.web.workload.arrival_rate", "1000/s"}, {"classes.jobs.workload.arrival_rate", "120/s"}} {
		if err := twice.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	twice.Name = "rails-app at twice the traffic"
	all = append(all, twice)
	for _, name := range []string{"classes", "class-workers", "class-app-pools", "class-one-pool"} {
		sc, err := scenarios.Parse([]byte(boundWorkloads[name]), name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		all = append(all, sc)
	}
	if len(all) < 6 {
		t.Fatalf("only %d scenarios with classes", len(all))
	}
	return all
}

// TestExplainClassLaws: with classes, the explanation is each pool's and
// each class's, and its laws hold on the figures it quotes: a Little
// paragraph for every pooled pool's wait queue and every workers class's
// application queue (and queue application pool's), each with L = λW
// within 1% (as TestBuiltinsHoldLittleAndConservation holds the run's);
// the CPU law's U = Σ X·D / cores over every class's own statements and
// CPU, computed here from the class figures and within its statistical
// tolerance of the measured utilisation; an Erlang C paragraph for each
// workers class at its own arrival rate; and a title naming every class's
// pool and mode.
func TestExplainClassLaws(t *testing.T) {
	overloaded := 0
	for _, sc := range classWorkloads(t) {
		points, err := sc.Points()
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		rows := scenarios.Run(points, 1)
		e := Explain(rows)
		for i, r := range e.Rows {
			x := &rows[i]
			c := x.Config
			pools := c.PoolList()
			wantLittle := map[string]bool{}
			for _, p := range pools {
				used := false
				for _, cl := range c.Classes {
					used = used || cl.Pool == p.Name
				}
				switch {
				case !used || !p.Mode.Pooled():
				case p.Name == "":
					wantLittle["The pooler's wait queue"] = true
				default:
					wantLittle["The wait queue of pool "+p.Name] = true
				}
			}
			wantErlang := map[string]float64{}
			for _, cl := range c.Classes {
				if cl.Workload.Persistent() {
					wantLittle["The application queue of class "+cl.Name] = true
					wantErlang[cl.Name] = cl.Workload.ArrivalRate
				}
				if cl.AppPool.Mode == system.QueuePool {
					wantLittle["The application pool of class "+cl.Name] = true
				}
				p := pools[0]
				for _, q := range pools {
					if q.Name == cl.Pool {
						p = q
					}
				}
				want := cl.Name + ": pool " + p.Name + " (" + p.Mode.String()
				if p.Name == "" {
					want = cl.Name + ": " + p.Mode.String()
				}
				if !strings.Contains(r.Title, want) {
					t.Errorf("%s: the title %q does not name class %s's pool %s (%v)", sc.Name, r.Title, cl.Name, p.Name, p.Mode)
				}
			}
			cpu := 0
			for _, p := range r.Paragraphs {
				switch p.Kind {
				case system.KindLittle:
					if !wantLittle[p.Title] {
						t.Errorf("%s, %s: an unexpected Little paragraph %q (want %v)", sc.Name, r.Title, p.Title, wantLittle)
						continue
					}
					delete(wantLittle, p.Title)
					for _, ch := range p.Checks {
						checkLittle(t, sc.Name+", "+r.Title, x, p, ch)
					}
				case system.KindCPU:
					cpu++
					checkClassCPU(t, sc.Name+", "+r.Title, x, p)
				case system.KindErlangC:
					for name, lambda := range wantErlang {
						if strings.HasSuffix(p.Title, " of class "+name+" as M/M/N (Erlang C)") || strings.HasSuffix(p.Title, " of class "+name) {
							if len(p.Inputs) == 0 || p.Inputs[0].Name != "λ" || p.Inputs[0].Value != lambda {
								t.Errorf("%s, %s: %s: λ %v, want the class's %v/s", sc.Name, r.Title, p.Title, p.Inputs, lambda)
							}
							delete(wantErlang, name)
						}
					}
					overloaded += checkPoolLoad(t, sc.Name+", "+r.Title, p)
				}
			}
			if len(wantLittle) > 0 || len(wantErlang) > 0 {
				t.Errorf("%s, %s: no Little paragraph for %v, no Erlang C for %v", sc.Name, r.Title, wantLittle, wantErlang)
			}
			if want := min(c.Server.Cores, 1); cpu != want {
				t.Errorf("%s, %s: %d CPU paragraphs, want %d", sc.Name, r.Title, cpu, want)
			}
		}
	}
	if overloaded == 0 {
		t.Error("no workers class's pool was overloaded: rails-app at twice the traffic's web pool is")
	}
}

// checkPoolLoad: a workers class's Erlang paragraph says its pool cannot
// keep up exactly when the load offered to the pool (A_pool) is at or
// above its servers (c_pool), and then the application queue's measured
// wait is far above M/M/N's; it returns 1 when the paragraph says so.
func checkPoolLoad(t *testing.T, where string, p system.Paragraph) int {
	t.Helper()
	in := map[string]float64{}
	for _, v := range p.Inputs {
		in[v.Name] = v.Value
	}
	a, ok := in["A_pool"]
	says := strings.Contains(p.Text, "cannot keep up")
	if !ok {
		if says {
			t.Errorf("%s: %s says the pool cannot keep up without its load:\n%s", where, p.Title, p.Text)
		}
		return 0
	}
	if over := a >= in["c_pool"]; over != says {
		t.Errorf("%s: %s: A_pool %.4g, c_pool %g, and the text says:\n%s", where, p.Title, a, in["c_pool"], p.Text)
	}
	if !says {
		return 0
	}
	for _, ch := range p.Checks {
		if ch.Name == "Wq" && ch.Measured < 100*ch.Computed {
			t.Errorf("%s: %s: the pool cannot keep up, yet the application queue waited %.6g s against M/M/N's %.6g s", where, p.Title, ch.Measured, ch.Computed)
		}
	}
	return 1
}

// checkClassCPU checks the CPU law of a row with classes: U = Σ X·D /
// cores with each class's statements completed (over the steady window
// when open, the wall when closed) and its own mean CPU, as computed here
// from the class figures; and that the measured utilisation is within the
// law's tolerance: three standard errors of the mean CPU over the
// statements completed and the statements across the span's ends, with
// backend start-ups (CPU work too, at most the
// connections opened, the servers at peak and those evicted) allowed on
// top.
func checkClassCPU(t *testing.T, where string, x *scenarios.Row, p system.Paragraph) {
	t.Helper()
	c, m := x.Config, x.Metrics
	span, open := m.WallMs/1000, c.Open()
	if open {
		span = m.SteadyMs / 1000
	}
	var xd, n, scv, dmax float64
	for k, cl := range c.Classes {
		cm := x.Classes[k].Metrics
		stmts := float64(cm.OKTxns) * float64(cl.Workload.StmtsPerTxn) / (m.WallMs / 1000)
		if open {
			stmts = cm.TPSSteady * float64(cl.Workload.StmtsPerTxn)
		}
		xd += stmts * cl.Workload.CPU.MeanValue().Seconds()
		n += stmts * span
		scv = math.Max(scv, cl.Workload.CPU.SCV())
		dmax = math.Max(dmax, cl.Workload.CPU.MeanValue().Seconds())
	}
	cores := float64(c.Server.Cores)
	want := xd / cores
	if len(p.Checks) != 1 || p.Checks[0].Name != "U" {
		t.Errorf("%s: the CPU paragraph checks %+v, want U", where, p.Checks)
		return
	}
	u := p.Checks[0]
	if math.Abs(u.Computed-want) > 1e-9*want {
		t.Errorf("%s: the CPU law gives U = %.6g, want Σ X·D / cores = %.6g:\n%s", where, u.Computed, want, p.Text)
	}
	startups := float64(m.ConnsOpened+m.ServerConns+m.ServersEvicted) * c.Server.Connect.MeanValue().Seconds() / (span * cores)
	// A statement running across either end of the span is counted in
	// one figure and not the other: at most every server connection's.
	edge := 2 * float64(m.ServerConns) * dmax / (span * cores)
	tol := 3*math.Sqrt(scv/math.Max(1, n))*want + edge
	t.Logf("%s: U law %.4f, measured %.4f (%+.2f%%), tolerance -%.4f +%.4f", where, want, u.Measured, 100*(u.Measured-want)/want, tol, tol+startups)
	if u.Measured < want-tol || u.Measured > want+tol+startups {
		t.Errorf("%s: the CPU law predicts U = %.4f, the run measured %.4f (tolerance -%.4f, +%.4f):\n%s", where, want, u.Measured, tol, tol+startups, p.Text)
	}
}

// checkLittle: L = λW within system.LittleSlack of L, or the paragraph
// says which end of the window the queue's waits straddle, and the run
// had a backlog at that end: at its close when L is the larger (a queue
// growing through the window), at its opening when λW is.
func checkLittle(t *testing.T, where string, x *scenarios.Row, p system.Paragraph, ch system.Check) {
	t.Helper()
	lw, L := ch.Computed, ch.Measured
	switch {
	case math.Abs(lw-L) <= system.LittleSlack*L+1e-12:
		if strings.Contains(p.Text, "the window closed") || strings.Contains(p.Text, "the window opened") {
			t.Errorf("%s: %s: L = λW within %g%%, yet the text explains a difference:\n%s", where, p.Title, 100*system.LittleSlack, p.Text)
		}
	case L > lw:
		if !strings.Contains(p.Text, "had not emptied when the window closed") || x.Metrics.BacklogEnd == 0 {
			t.Errorf("%s: %s: L = %.6g above λW = %.6g, backlog_end %d, and the text says:\n%s", where, p.Title, L, lw, x.Metrics.BacklogEnd, p.Text)
		}
	default:
		if !strings.Contains(p.Text, "when the window opened") || x.Metrics.BacklogStart == 0 {
			t.Errorf("%s: %s: λW = %.6g above L = %.6g, backlog_start %d, and the text says:\n%s", where, p.Title, lw, L, x.Metrics.BacklogStart, p.Text)
		}
	}
}
