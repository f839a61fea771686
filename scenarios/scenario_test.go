package scenarios

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

func TestPgbouncerModesMatchesTheSeedCounts(t *testing.T) {
	s, err := Builtin("pgbouncer-modes")
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	rows := Run(points, 0)
	if len(rows) != 8 {
		t.Fatalf("got %d rows, want 8", len(rows))
	}
	for _, r := range rows {
		c, m := r.Config, r.Metrics
		n := int64(c.Workload.Clients)
		switch c.Pooler.PoolMode {
		case poolmode.Direct:
			// 20 slots: the first 20 clients run 3 transactions each, the rest are refused.
			if m.OKTxns != 60 || m.ConnRefused != n-20 || m.HopMsPerTxn != 0 {
				t.Errorf("direct, %d clients: ok %d refused %d hop %.2f; want 60, %d, 0", n, m.OKTxns, m.ConnRefused, m.HopMsPerTxn, n-20)
			}
		default:
			if m.OKTxns != 3*n || m.ConnRefused != 0 || m.WaitTimeouts != 0 {
				t.Errorf("%v, %d clients: ok %d refused %d timeouts %d; want %d, 0, 0", c.Pooler.PoolMode, n, m.OKTxns, m.ConnRefused, m.WaitTimeouts, 3*n)
			}
			// 6 statements × 2 hops × 25us.
			if math.Abs(m.HopMsPerTxn-0.30) > 1e-9 {
				t.Errorf("%v, %d clients: hop %.4f ms/txn, want 0.30", c.Pooler.PoolMode, n, m.HopMsPerTxn)
			}
			if m.ServerConns != 20 {
				t.Errorf("%v, %d clients: %d server connections, want the pool's 20", c.Pooler.PoolMode, n, m.ServerConns)
			}
		}
	}
}

func TestBuiltinsHoldLittleAndConservation(t *testing.T) {
	for _, b := range Builtins() {
		s, err := Builtin(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		points, _ := s.Points()
		for _, r := range Run(points, 0) {
			m := r.Metrics
			// Workers on a session pool smaller than themselves: the
			// starved ones wait for a server from soon after each
			// timeout to past the end of arrivals, so every run ends its
			// steady window with those waits under way - in the
			// window's L, not yet in λW. Little's law holds over the
			// whole run there, not over the window.
			starved := r.Config.Workload.Persistent() && r.Config.Pooler.PoolMode == poolmode.Session && m.WaitTimeouts > 0
			if lw := m.WaitLambda * m.WaitW; !starved && math.Abs(m.WaitL-lw) > 0.01*m.WaitL+1e-12 {
				t.Errorf("%s %v: wait_L %.6g, wait_lambda × wait_W %.6g", b.Name, r.Params, m.WaitL, lw)
			}
			if sum := m.Outcomes(); sum != m.AttemptedTxns {
				t.Errorf("%s %v: ok+refused+timed out+unfinished = %d, attempted %d", b.Name, r.Params, sum, m.AttemptedTxns)
			}
		}
	}
}

func TestRunIsDeterministic(t *testing.T) {
	// A scenario with every random distribution, run twice and on one and
	// two workers, must give identical rows.
	src := `
name: random
seed: 42
workload:
  clients: 60
  txns_per_session: 5
  stmts_per_txn: 3
  query: {dist: lognormal, mean: 300us, p99: 2ms}
  think: {dist: uniform, min: 100us, max: 900us}
pooler:
  mode: transaction
  hop: 25us
  default_pool_size: 8
  query_wait_timeout: 3ms
server:
  connect: {dist: exp, mean: 1ms}
sweep:
  pooler.mode: [session, transaction, statement]
`
	s, err := Parse([]byte(src), "random.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, _ := s.Points()
	a, b := Run(points, 1), Run(points, 2)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same scenario differ")
	}
	if a[0].Metrics.P99Ms == a[0].Metrics.P50Ms {
		t.Error("random distributions gave a flat latency distribution; were they applied?")
	}
	s2, _ := Parse([]byte(strings.Replace(src, "seed: 42", "seed: 43", 1)), "random.yaml")
	p2, _ := s2.Points()
	if reflect.DeepEqual(a, Run(p2, 1)) {
		t.Error("another seed gave the same rows")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"malformed", "name: x\nworkload: [\n", "not valid YAML"},
		{"unknown top key", "name: x\nworkload: {clients: 1}\nbogus: 1\n", `x.yaml:3: unknown key "bogus"`},
		{"unknown section key", "name: x\nworkload:\n  clients: 1\n  client: 2\n", `x.yaml:4: unknown key "client" in workload`},
		{"repeated key", "name: x\nworkload:\n  clients: 1\n  clients: 2\n", "repeated"},
		{"negative duration", "name: x\nworkload:\n  clients: 1\n  think: -1ms\n", "x.yaml:4: workload.think: must not be negative"},
		{"bad duration", "name: x\nworkload:\n  clients: 1\n  query: 3 ms\n", "want a duration such as"},
		{"unknown mode", "name: x\nworkload: {clients: 1}\npooler:\n  mode: pooled\n", `unknown pool mode "pooled"`},
		{"zero clients", "name: x\nworkload:\n  clients: 0\n", "workload.clients: must be from 1"},
		{"both workloads", "name: x\nworkload:\n  clients: 5\n  arrival_rate: 10/s\n  duration: 1s\n", "both clients and arrival_rate"},
		{"open without duration", "name: x\nworkload:\n  arrival_rate: 10/s\n", "workload.duration must be above 0"},
		{"bad rate", "name: x\nworkload:\n  arrival_rate: fast\n  duration: 1s\n", "want a rate such as 80/s"},
		{"bad dist", "name: x\nworkload:\n  clients: 1\n  query: {dist: normal, mean: 1ms}\n", `unknown distribution "normal"`},
		{"dist key", "name: x\nworkload:\n  clients: 1\n  query: {dist: exp, mean: 1ms, max: 2ms}\n", `"max" does not apply to dist exp`},
		{"lognormal p99", "name: x\nworkload:\n  clients: 1\n  query: {dist: lognormal, mean: 1ms, p99: 1ms}\n", "p99 (1ms) must be above the mean"},
		{"sweep key", "name: x\nworkload: {clients: 1}\nsweep:\n  pooler.modes: [session]\n", `sweep: unknown key "pooler.modes"`},
		{"sweep value", "name: x\nworkload: {clients: 1}\nsweep:\n  pooler.mode: [session, pooled]\n", `x.yaml:4: sweep: pooler.mode: unknown pool mode "pooled"`},
		{"no name", "workload: {clients: 1}\n", "name is missing"},
		{"not a mapping", "- 1\n- 2\n", "a scenario is a mapping"},
		{"two documents", "name: x\nworkload: {clients: 1}\n---\nname: y\n", "more than one YAML document"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), "x.yaml")
		if err == nil {
			t.Errorf("%s: Parse succeeded, want an error containing %q", tt.name, tt.want)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %q does not wrap ErrInvalid", tt.name, err)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want it to contain %q", tt.name, err, tt.want)
		}
		if strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: error spans lines: %q", tt.name, err)
		}
	}
}

func TestSet(t *testing.T) {
	s, err := Builtin("pgbouncer-modes")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("workload.clients", "500"); err != nil {
		t.Fatal(err)
	}
	points, _ := s.Points()
	if len(points) != 4 || points[0].Config.Workload.Clients != 500 {
		t.Errorf("after --set workload.clients=500: %d points, clients %d; want 4 points of 500 (the axis replaced)", len(points), points[0].Config.Workload.Clients)
	}
	if err := s.Set("workload.query", "{dist: exp, mean: 2ms}"); err != nil {
		t.Fatal(err)
	}
	if q := s.Base.Workload.Query; q.Kind != sim.Exp || q.Mean != 2*sim.Millisecond {
		t.Errorf("query = %v, want exp(mean 2ms)", q)
	}
	before := s.Base
	for _, kv := range [][2]string{{"pooler.nope", "1"}, {"workload.clients", "-1"}, {"pooler.hop", "-2ms"}, {"pooler.mode", "[a, b]"}} {
		err := s.Set(kv[0], kv[1])
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("Set(%q, %q) = %v, want an ErrInvalid", kv[0], kv[1], err)
		}
	}
	if !reflect.DeepEqual(before, s.Base) {
		t.Error("a failed Set changed the scenario")
	}
	// Switching an open workload to a closed one by --set is allowed.
	e, _ := Builtin("erlang-c")
	if err := e.Set("workload.clients", "10"); err != nil {
		t.Errorf("--set workload.clients on an open workload: %v", err)
	}
}

func TestSweepOrder(t *testing.T) {
	s, err := Parse([]byte("name: x\nworkload: {clients: 1}\nsweep:\n  workload.clients: [1, 2]\n  pooler.mode: [session, statement]\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, _ := s.Points()
	var got []string
	for _, p := range points {
		got = append(got, p.Params[0].Value+"/"+p.Params[1].Value)
	}
	want := []string{"1/session", "1/statement", "2/session", "2/statement"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("points %v, want %v (first key outermost)", got, want)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load("no-such-scenario"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of an unknown name: %v, want ErrNotFound", err)
	}
	if _, err := Load("./missing.yaml"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of a missing file: %v, want ErrNotFound", err)
	}
	if _, err := Load("pgbouncer-modes"); err != nil {
		t.Errorf("Load(pgbouncer-modes): %v", err)
	}
}

func TestVariants(t *testing.T) {
	src := "name: x\nworkload: {clients: 2}\nvariants:\n  light: {workload.query: 1ms}\n  heavy: {workload.query: 9ms, pooler.mode: transaction}\nsweep:\n  variant: [light, heavy]\n"
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, _ := s.Points()
	if len(points) != 2 || points[1].Config.Workload.Query.Mean != 9e6 || points[1].Config.Pooler.PoolMode.String() != "transaction" || points[0].Config.Workload.Query.Mean != 1e6 {
		t.Errorf("variants not applied: %+v", points)
	}
	for _, bad := range []string{
		"name: x\nworkload: {clients: 2}\nvariants:\n  light: {workload.qurey: 1ms}\n",
		"name: x\nworkload: {clients: 2}\nvariants:\n  light: {workload.query: 1ms}\nsweep:\n  variant: [light, dark]\n",
		"name: x\nworkload: {clients: 2}\nsweep:\n  variant: [light]\n",
	} {
		if _, err := Parse([]byte(bad), "x.yaml"); err == nil {
			t.Errorf("Parse accepted %q", bad)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	for _, c := range []struct{ word, want string }{
		{"default_pool_sise", "; did you mean `default_pool_size`?"},
		{"transation", "; did you mean `transaction`?"},
		{"sesion", "; did you mean `session`?"},
		{"lognromal", "; did you mean `lognormal`?"}, // a swap is one edit
		{"zzzzzz", ""},
		{"session", ""}, // an exact match needs no guess
	} {
		got := didYouMean(c.word, []string{"default_pool_size", "transaction", "session", "statement", "lognormal", "exp"})
		if got != c.want {
			t.Errorf("didYouMean(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

// TestValidateSection: the validate: block is kept as written, line
// numbers included, for poolsim validate (lab/validate) to decode; --set
// validate.KEY is recorded for it; a sweep or a variant does not vary its
// keys; and the model's key help has none of them.
func TestValidateSection(t *testing.T) {
	src := "name: x\nworkload: {clients: 1}\nserver: {cores: 2}\nvalidate:\n  statement: pgbench-select\n  background: 0.25\n"
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := s.Validate.Node
	if s.Validate.Name != SectionValidate || n == nil || len(n.Content) != 4 || n.Content[0].Value != "statement" || n.Content[0].Line != 5 || n.Content[3].Value != "0.25" || n.Content[3].Line != 6 {
		t.Fatalf("the validate: block as kept: %+v", s.Validate)
	}
	if err := s.Set("validate.background", "1.5"); err != nil {
		t.Fatalf("--set validate.background=1.5: %v", err)
	}
	if err := s.Set("validate.speed", "[0.75, 1.25]"); err != nil {
		t.Fatalf("--set validate.speed=[0.75, 1.25]: %v", err)
	}
	if o := s.Validate.Sets; len(o) != 2 || o[0].Key != "background" || o[0].Value.Value != "1.5" || o[1].Key != "speed" || len(o[1].Value.Content) != 2 || o[1].Flag != "--set validate.speed=[0.75, 1.25]" {
		t.Errorf("the --set overrides as kept: %+v", o)
	}
	for _, bad := range []struct{ key, value, want string }{
		{"validate.", "1", "want a key of the validate: section"},
		{"validate.a.b", "1", "want a key of the validate: section"},
		{"validate.speed", "[1,", "not valid YAML"},
	} {
		if err := s.Set(bad.key, bad.value); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--set %s=%s: %v, want an error saying %q", bad.key, bad.value, err, bad.want)
		}
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"not a mapping", "name: x\nworkload: {clients: 1}\nvalidate: sleep\n", "x.yaml:3: validate must be a mapping"},
		{"swept", "name: x\nworkload: {clients: 1}\nsweep:\n  validate.background: [0, 1]\n", "x.yaml:4: sweep: validate.background is poolsim validate's"},
		{"a variant", "name: x\nworkload: {clients: 1}\nvariants:\n  a: {validate.background: 1}\n", "x.yaml:4: variant a: validate.background is poolsim validate's"},
		{"the old testbed: block", "name: x\nworkload: {clients: 1}\ntestbed:\n  background: 1\n", `x.yaml:3: unknown key "testbed"`},
		{"the old live: block", "name: x\nworkload: {clients: 1}\nlive:\n  statement: sleep\n", `x.yaml:3: unknown key "live"`},
	} {
		if _, err := Parse([]byte(tc.yaml), "x.yaml"); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	for _, line := range Fields() {
		if k := strings.Fields(line)[0]; strings.HasPrefix(k, "testbed.") || strings.HasPrefix(k, "live.") || strings.HasPrefix(k, SectionValidate+".") {
			t.Errorf("%s is in the model's key list", k)
		}
	}
}
