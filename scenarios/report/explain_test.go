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
