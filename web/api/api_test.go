package api

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/queueing"
)

func TestFormulasCallTheModel(t *testing.T) {
	got, err := Evaluate([]Formula{
		{"erlang_c", []float64{10, 80, 0.1}},
		{"closed_bounds", []float64{40, 0.004, 0.002, 0.0005}},
		{"usl_peak", []float64{0.02, 0.0005, 100}},
		{"erlang_c", []float64{2, 30, 0.1}}, // ρ = 1.5: no steady state
	})
	if err != nil {
		t.Fatal(err)
	}
	p, w, _ := queueing.ErlangC(10, 80, 0.1)
	if *got[0][0] != p || *got[0][1] != w {
		t.Errorf("erlang_c = %v, %v; want %v, %v", *got[0][0], *got[0][1], p, w)
	}
	if math.Abs(p-0.40918) > 1e-4 {
		t.Errorf("erlang_c P(wait) = %v, want 0.40918 (docs/queueing-oracles.md §2)", p)
	}
	if x, k := *got[1][0], *got[1][1]; x != 2000 || math.Abs(k-12) > 1e-9 {
		t.Errorf("closed_bounds = %v, %v; want 2000/s and knee 12", x, k)
	}
	if got[3][1] != nil {
		t.Errorf("a saturated queue's wait = %v, want null", *got[3][1])
	}
}

func TestCallErrors(t *testing.T) {
	for _, c := range []struct{ op, req, want string }{
		{"nope", `{}`, `unknown operation`},
		{"run", `{"scenario":"no-such"}`, `run: no such scenario`},
		{"run", `{"scenario":"erlang-c","sets":["workload.clientz=3"]}`, "unknown key"},
		{"run", `{"scenario":"erlang-c","colour":1}`, `unknown field "colour"`},
		{"run", `{}`, `no scenario`},
		{"run", `{"scenario":"erlang-c","vary":["workload.arrival_rate=1/s"],"sets":["workload.arrival_rate=2/s"]}`, "both set and varied"},
		{"run", `{"scenario":"erlang-c","replications":100000}`, "the page runs at most"},
		{"formulas", `[{"name":"erlang_c","args":[1.5,1,1]}]`, "want a whole number"},
		{"formulas", `[{"name":"usl","args":[1]}]`, "takes [sigma kappa lambda n]"},
	} {
		out := Call(context.Background(), c.op, []byte(c.req))
		var ans struct{ Error string }
		if err := json.Unmarshal(out, &ans); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ans.Error, c.want) {
			t.Errorf("%s %s: error %q, want it to contain %q", c.op, c.req, ans.Error, c.want)
		}
	}
}

func TestBuiltinsListsKeys(t *testing.T) {
	list, keys, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 10 || !strings.Contains(list[0].YAML, "name:") {
		t.Errorf("builtins: %d, first %q", len(list), list[0].Name)
	}
	found := false
	for _, k := range keys {
		found = found || k == "workload.clients"
	}
	if !found {
		t.Errorf("keys %v lack workload.clients", keys)
	}
}
