package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/report"
	"github.com/poolsim/poolsim/scenarios/vary"
)

// RunRequest is a scenario to run, as the command line would take it:
// `poolsim run SCENARIO --seed N --set K=V... --replications R`, or with
// Vary `poolsim sweep SCENARIO --vary K=VALUES... [--drop-sweep]`.
type RunRequest struct {
	Scenario     string   `json:"scenario,omitempty"` // a built-in's name, when YAML is empty
	YAML         string   `json:"yaml,omitempty"`     // the scenario's text
	Seed         *uint64  `json:"seed,omitempty"`     // nil: the scenario's
	Sets         []string `json:"sets,omitempty"`     // "key=value", applied in order
	Vary         []string `json:"vary,omitempty"`     // "key=values" (vary.Parse), the first outermost
	DropSweep    bool     `json:"drop_sweep,omitempty"`
	Replications int      `json:"replications,omitempty"` // 0: the scenario's
}

// RunAnswer is a run's result.
type RunAnswer struct {
	// Report is exactly what `poolsim run --format json` (or sweep) writes.
	Report string `json:"report"`
	// Explanation is the rows' explanation (report.Explain), the source
	// `poolsim run --explain` prints its text from, a row for each of the
	// report's in order.
	Explanation report.Explanation `json:"explanation"`
}

// MaxSeconds is the most work, in seconds of this machine's CPU as
// scenarios.EstimateStudy reckons it, that a page's run may ask: above
// it the run is refused with the estimate (a browser tab has one core
// and no --yes).
var MaxSeconds = 60.0

// Run simulates req and returns the report and its explanation.
func Run(ctx context.Context, req RunRequest) (RunAnswer, error) {
	sc, err := load(req)
	if err != nil {
		return RunAnswer{}, fmt.Errorf("run: %w", err)
	}
	st := sc.Study
	if req.Replications != 0 {
		if req.Replications < 1 || req.Replications > scenarios.MaxReplications {
			return RunAnswer{}, fmt.Errorf("run: replications %d: want 1 to %d", req.Replications, scenarios.MaxReplications)
		}
		st.Replications = req.Replications
	}
	points, err := sc.Points()
	if err != nil {
		return RunAnswer{}, fmt.Errorf("run: %w", err)
	}
	if c := scenarios.EstimateStudy(points, st, 1); c.Seconds > MaxSeconds {
		return RunAnswer{}, fmt.Errorf("run: this would take about %.0f s (%d runs, %.3g transactions); the page runs at most %.0f s: fewer clients, a shorter duration or fewer replications, or the command line",
			c.Seconds, c.Runs, c.Txns, MaxSeconds)
	}
	rows, runErr := scenarios.RunStudy(ctx, points, st, 1, nil)
	r := report.New(sc, st, rows)
	var b bytes.Buffer
	if err := report.WriteJSON(&b, r); err != nil {
		return RunAnswer{}, fmt.Errorf("run: %w", err)
	}
	if runErr != nil {
		return RunAnswer{}, fmt.Errorf("run: interrupted: %w", runErr)
	}
	return RunAnswer{Report: b.String(), Explanation: report.Explain(r.Rows)}, nil
}

// load is req's scenario with its seed, sets and vary axes applied.
func load(req RunRequest) (*scenarios.Scenario, error) {
	var sc *scenarios.Scenario
	var err error
	switch {
	case req.YAML != "":
		sc, err = scenarios.Parse([]byte(req.YAML), "page")
	case req.Scenario != "":
		sc, err = scenarios.Builtin(req.Scenario)
	default:
		return nil, fmt.Errorf("no scenario: give a built-in's name or YAML")
	}
	if err != nil {
		return nil, err
	}
	for _, v := range req.Vary {
		k, _, _ := strings.Cut(v, "=")
		for _, s := range req.Sets {
			if sk, _, _ := strings.Cut(s, "="); strings.TrimSpace(sk) == strings.TrimSpace(k) {
				return nil, fmt.Errorf("%s is both set and varied; drop one", k)
			}
		}
	}
	seed := uint64(0)
	if req.Seed != nil {
		seed = *req.Seed
	}
	if err := sc.Override(req.Seed != nil, seed, req.Sets); err != nil {
		return nil, err
	}
	if len(req.Vary) > 0 {
		var axes []vary.Axis
		for _, spec := range req.Vary {
			a, err := vary.Parse(spec)
			if err != nil {
				return nil, err
			}
			axes = append(axes, a)
		}
		if err := vary.Apply(sc, axes, req.DropSweep); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// Builtin is a built-in scenario as the page lists it.
type Builtin struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	YAML        string `json:"yaml"`
}

// Builtins lists the built-in scenarios with their text, sorted by name,
// and the keys a sweep or a set may name.
func Builtins() (list []Builtin, keys []string, err error) {
	for _, b := range scenarios.Builtins() {
		y, err := scenarios.BuiltinYAML(b.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("builtins: %w", err)
		}
		list = append(list, Builtin{b.Name, b.Description, string(y)})
	}
	for _, f := range scenarios.Fields() {
		keys = append(keys, strings.Fields(f)[0])
	}
	return list, keys, nil
}

// Call runs one operation on a JSON request and returns its JSON answer:
// {"ok": answer} or {"error": "op: what was wrong"}. op is "builtins",
// "run" (RunRequest) or "formulas" ([]Formula).
func Call(ctx context.Context, op string, request []byte) []byte {
	ans, err := call(ctx, op, request)
	var out []byte
	if err != nil {
		out, _ = json.Marshal(map[string]string{"error": err.Error()})
		return out
	}
	out, err = json.Marshal(map[string]any{"ok": ans})
	if err != nil {
		out, _ = json.Marshal(map[string]string{"error": op + ": " + err.Error()})
	}
	return out
}

func call(ctx context.Context, op string, request []byte) (any, error) {
	switch op {
	case "builtins":
		list, keys, err := Builtins()
		return map[string]any{"scenarios": list, "keys": keys}, err
	case "run":
		var req RunRequest
		if err := strictJSON(request, &req); err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		return Run(ctx, req)
	case "formulas":
		var fs []Formula
		if err := strictJSON(request, &fs); err != nil {
			return nil, fmt.Errorf("formulas: %w", err)
		}
		return Evaluate(fs)
	}
	return nil, fmt.Errorf("call %q: unknown operation: want builtins, run or formulas", op)
}

// strictJSON decodes data into v, refusing unknown fields.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	return nil
}
