package api

import (
	"fmt"
	"math"

	"github.com/poolsim/poolsim/models/queueing"
	"github.com/poolsim/poolsim/models/usl"
)

// Formula is one evaluation of an analytic result: Name and its
// arguments in the order formulas lists them.
type Formula struct {
	Name string    `json:"name"`
	Args []float64 `json:"args"`
}

// formula is an analytic result the lessons plot: its arguments' names
// and its outputs' names, and the call into the model package.
type formula struct {
	args, outs []string
	variadic   bool // the last argument repeats (MVA's demands)
	eval       func(a []float64) []float64
}

var formulas = map[string]formula{
	"little": {args: []string{"lambda", "W"}, outs: []string{"L"},
		eval: func(a []float64) []float64 { return []float64{a[0] * a[1]} }},
	"erlang_b": {args: []string{"c", "a"}, outs: []string{"B"},
		eval: func(a []float64) []float64 { return []float64{queueing.ErlangB(int(a[0]), a[1])} }},
	"erlang_c": {args: []string{"c", "lambda", "s"}, outs: []string{"pWait", "Wq"},
		eval: func(a []float64) []float64 {
			p, w, _ := queueing.ErlangC(int(a[0]), a[1], a[2])
			return []float64{p, w}
		}},
	"mmc_timeout": {args: []string{"c", "lambda", "s", "tau"}, outs: []string{"pTimeout", "servedWait"},
		eval: func(a []float64) []float64 {
			p, w := queueing.MMcD(int(a[0]), a[1], a[2], a[3])
			return []float64{p, w}
		}},
	"pollaczek_khinchine": {args: []string{"lambda", "s", "scv"}, outs: []string{"Wq"},
		eval: func(a []float64) []float64 {
			w, _ := queueing.PollaczekKhinchine(a[0], a[1], a[2])
			return []float64{w}
		}},
	"mva": {args: []string{"n", "z", "d"}, outs: []string{"X", "R"}, variadic: true,
		eval: func(a []float64) []float64 {
			x, r := queueing.MVA(int(a[0]), a[1], a[2:])
			return []float64{x, r}
		}},
	"closed_bounds": {args: []string{"n", "z", "d", "dmax"}, outs: []string{"Xmax", "knee"},
		eval: func(a []float64) []float64 {
			x, k := queueing.Bounds(int(a[0]), a[1], a[2], a[3])
			return []float64{x, k}
		}},
	// The interactive response time law, R = N/X − Z: a closed system's
	// response time from its throughput (Little's law over the whole loop).
	"response_time_law": {args: []string{"n", "X", "z"}, outs: []string{"R"},
		eval: func(a []float64) []float64 { return []float64{a[0]/a[1] - a[2]} }},
	"usl": {args: []string{"sigma", "kappa", "lambda", "n"}, outs: []string{"X", "R"},
		eval: func(a []float64) []float64 {
			m := usl.Model{Sigma: a[0], Kappa: a[1], Lambda: a[2]}
			return []float64{m.X(a[3]), m.R(a[3])}
		}},
	"usl_peak": {args: []string{"sigma", "kappa", "lambda"}, outs: []string{"n", "X"},
		eval: func(a []float64) []float64 {
			n, x := usl.Model{Sigma: a[0], Kappa: a[1], Lambda: a[2]}.Peak()
			return []float64{n, x}
		}},
}

// integerArgs are the arguments that count something: whole and at least 1.
var integerArgs = map[string]bool{"c": true, "n": true}

// Evaluate computes each formula; a value that is not finite (a
// saturated queue's wait) is null in the answer.
func Evaluate(fs []Formula) ([][]*float64, error) {
	out := make([][]*float64, len(fs))
	for i, f := range fs {
		def, ok := formulas[f.Name]
		if !ok {
			return nil, fmt.Errorf("formulas: unknown formula %q: want one of little, erlang_b, erlang_c, mmc_timeout, pollaczek_khinchine, mva, closed_bounds, response_time_law, usl, usl_peak", f.Name)
		}
		if len(f.Args) != len(def.args) && !(def.variadic && len(f.Args) > len(def.args)) {
			return nil, fmt.Errorf("formulas: %s takes %v, got %d arguments", f.Name, def.args, len(f.Args))
		}
		for k, v := range f.Args {
			name := def.args[min(k, len(def.args)-1)]
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("formulas: %s: %s = %v: want a finite number, 0 or more", f.Name, name, v)
			}
			if integerArgs[name] && (v < 1 || v != math.Trunc(v) || v > 1e6) {
				return nil, fmt.Errorf("formulas: %s: %s = %v: want a whole number from 1 to 1000000", f.Name, name, v)
			}
		}
		vals := def.eval(f.Args)
		out[i] = make([]*float64, len(vals))
		for k, v := range vals {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				out[i][k] = &vals[k]
			}
		}
	}
	return out, nil
}
