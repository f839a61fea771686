package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// PoolsAdviceInput is what advise prints for a scenario with classes.
type PoolsAdviceInput struct {
	Scenario string
	Seed     uint64
	Advice   *advise.PoolsAdvice
	Study    scenarios.Study
}

// poolWords is "transaction 40" or "direct".
func poolWords(s system.PoolSpec) string {
	if s.Mode == poolmode.Direct {
		return "direct"
	}
	return fmt.Sprintf("%s %d", s.Mode, s.Size)
}

// classFigures is one class's figures at the final configuration.
func classFigures(c advise.ClassCheck) string {
	r := scenarios.Row{Reps: c.Reps}
	cell := func(name string, dec int) string {
		f, _ := system.FieldByName(name)
		return Cell(&r, f, dec)
	}
	s := fmt.Sprintf("%s tps steady, p99 %s ms", cell("tps_steady", 1), cell("p99_ms", 2))
	if c.Latency == "req_p99_ms" {
		s += fmt.Sprintf(", request p50 %s ms, request p99 %s ms", cell("req_p50_ms", 2), cell("req_p99_ms", 2))
	}
	s += fmt.Sprintf(", wait p99 %s ms, %s refused, %s timed out", cell("wait_p99_ms", 2), cell("conn_refused", 0), cell("wait_timeouts", 0))
	switch {
	case c.SLO > 0 && len(c.Fails) == 0:
		s += fmt.Sprintf("; SLO p99 %v met", c.SLO)
	case len(c.Fails) > 0:
		s += "; MISSES: " + strings.Join(c.Fails, "; ")
	}
	return s
}

// WritePoolsAdviceText writes the split first, how sure, every class at
// the final configuration, then each pool's own advice.
func WritePoolsAdviceText(w io.Writer, in PoolsAdviceInput) error {
	a := in.Advice
	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("Answer: %s.", a.Split())
	bad := 0
	for _, c := range a.Classes {
		if len(c.Fails) > 0 {
			bad++
		}
	}
	if bad > 0 {
		p("WARNING: at this configuration %d of %d classes miss what they need (below); no configuration tried meets every class.", bad, len(a.Classes))
	}
	p("How sure:")
	if a.Deterministic {
		p("  - every draw of this workload is constant, so each configuration ran once and its figures are exact.")
	} else {
		p("  - %d replications per configuration, the same seeds for every one (paired comparisons); figures are mean ± 95%% CI.", a.Replications)
	}
	for _, part := range a.Parts {
		if part.Advice == nil {
			continue
		}
		if part.Kept {
			p("  - pool %s: no configuration qualified; it keeps the scenario's %s.", part.Pool.Name, poolWords(part.Pool))
			continue
		}
		for _, s := range sureWords(part.Advice, verdictOf(part.Advice, part.Advice.Answer)) {
			if strings.HasPrefix(s, "pool size:") || strings.Contains(s, "statistically tied") || strings.HasPrefix(s, "the deciding p99") {
				p("  - pool %s: %s.", part.Pool.Name, s)
			}
		}
	}
	p("Every class at this configuration:")
	final := a.Final.PoolList()
	for _, c := range a.Classes {
		spec := system.PoolSpec{Name: c.Pool}
		for _, s := range final {
			if s.Name == c.Pool {
				spec = s
			}
		}
		p("  - %s (pool %s, %s): %s.", c.Name, c.Pool, poolWords(spec), classFigures(c))
	}
	p("Assumptions:")
	for _, s := range Assumptions([]scenarios.Row{{Config: a.Final}}) {
		p("  - %s.", s)
	}
	for _, n := range a.Notes {
		p("Note: %s.", n)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, part := range a.Parts {
		if part.Advice == nil {
			continue
		}
		var buf bytes.Buffer
		ai := AdviceInput{Scenario: fmt.Sprintf("%s, pool %s", in.Scenario, part.Pool.Name), Request: part.Request, Advice: part.Advice, Study: in.Study}
		if err := WriteAdviceText(&buf, ai); err != nil {
			return err
		}
		head := fmt.Sprintf("\n== Pool %s (database %s, user %s; classes %s; decided by class %s's figures) ==\n",
			part.Pool.Name, part.Pool.Database, part.Pool.User, strings.Join(part.Classes, ", "), part.Lead)
		if _, err := io.WriteString(w, head+buf.String()); err != nil {
			return err
		}
	}
	return nil
}

type poolsAdviceJSON struct {
	Scenario       string            `json:"scenario"`
	Seed           uint64            `json:"seed"`
	Replications   int               `json:"replications"`
	Deterministic  bool              `json:"deterministic"`
	Answer         string            `json:"answer"`
	Budget         int               `json:"server_conns_budget"`
	MaxConnections int               `json:"max_connections"`
	Pools          []poolAdviceJSON  `json:"pools"`
	Classes        []classAdviceJSON `json:"classes"`
	Assumptions    []string          `json:"assumptions"`
	Notes          []string          `json:"notes"`
}

type poolAdviceJSON struct {
	Name     string     `json:"name"`
	Database string     `json:"database"`
	User     string     `json:"user"`
	Mode     string     `json:"mode"`
	Size     int        `json:"size"`
	Kept     bool       `json:"kept"`
	Classes  []string   `json:"classes"`
	Lead     string     `json:"decided_by"`
	Advice   adviceJSON `json:"advice"`
}

type classAdviceJSON struct {
	Name     string   `json:"name"`
	Pool     string   `json:"pool"`
	SLOP99Ms float64  `json:"slo_p99_ms"`
	Latency  string   `json:"slo_applies_to"`
	Meets    bool     `json:"meets"`
	Fails    []string `json:"fails"`
	Metrics  Metrics  `json:"metrics"`
}

// WritePoolsAdviceJSON writes the advice for several pools as JSON.
func WritePoolsAdviceJSON(w io.Writer, in PoolsAdviceInput) error {
	a := in.Advice
	out := poolsAdviceJSON{Scenario: in.Scenario, Seed: in.Seed, Replications: a.Replications, Deterministic: a.Deterministic,
		Answer: a.Split(), Budget: a.Budget, MaxConnections: a.MaxConnections, Pools: []poolAdviceJSON{}, Classes: []classAdviceJSON{},
		Assumptions: append([]string{}, Assumptions([]scenarios.Row{{Config: a.Final}})...), Notes: append([]string{}, a.Notes...)}
	final := a.Final.PoolList()
	for i, part := range a.Parts {
		s := final[i]
		pj := poolAdviceJSON{Name: s.Name, Database: s.Database, User: s.User, Mode: s.Mode.String(), Size: s.Size, Kept: part.Kept,
			Classes: append([]string{}, part.Classes...), Lead: part.Lead}
		if part.Advice != nil {
			pj.Advice = adviceDoc(AdviceInput{Scenario: in.Scenario, Request: part.Request, Advice: part.Advice, Study: in.Study})
		}
		out.Pools = append(out.Pools, pj)
	}
	for _, c := range a.Classes {
		r := &scenarios.Row{Reps: c.Reps}
		out.Classes = append(out.Classes, classAdviceJSON{Name: c.Name, Pool: c.Pool, SLOP99Ms: float64(c.SLO) / 1e6, Latency: c.Latency,
			Meets: len(c.Fails) == 0, Fails: append([]string{}, c.Fails...), Metrics: Metrics{r}})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
