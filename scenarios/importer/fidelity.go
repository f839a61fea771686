package importer

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// Tolerance is the relative error within which a model figure fits the
// observed one (a figure also fits within its absolute allowance).
const Tolerance = 0.15

// Comparison is one observed figure beside the model's.
type Comparison struct {
	Figure
	Model, Half float64 // the model's mean over the replications and its 95 % half-width
	Err         float64 // (model − observed) / observed; 0 when observed is 0
	Fits        bool
}

// Fidelity is the imported scenario simulated with the observed settings,
// beside what was observed.
type Fidelity struct {
	Replications int
	Rows         []Comparison
	Fits         bool
	Verdict      string
}

// modelFigure computes the model's side of a figure from one
// replication's metrics.
func modelFigure(metric string, cfg system.Config, m *system.Metrics) (float64, error) {
	switch metric {
	case "tps":
		if m.TPSSteady > 0 {
			return m.TPSSteady, nil
		}
		return m.TPS, nil
	case "wait_per_txn_ms":
		if m.OKTxns == 0 {
			return 0, nil
		}
		return m.WaitMeanMs * float64(m.Assignments) / float64(m.OKTxns), nil
	case "wait_L":
		return m.WaitL, nil
	case "sv_active":
		return m.ServerLinked * float64(m.ServerBudget), nil
	case "txn_ms":
		return m.MeanMs, nil
	case "pgbench_ms":
		// pgbench times its whole script: the think after a transaction's
		// last statement (the script's trailing \sleep) is in it.
		return m.MeanMs + cfg.Workload.Think.MeanValue().Milliseconds(), nil
	}
	return 0, fmt.Errorf("unknown figure %q", metric)
}

// ModelFigure is the model's value of an observed figure's metric
// (tps, wait_per_txn_ms, wait_L, sv_active, txn_ms, pgbench_ms) from one
// run, so other comparisons (a live run at another pool size) use the
// same definitions as the fidelity report.
func ModelFigure(metric string, cfg system.Config, m *system.Metrics) (float64, error) {
	return modelFigure(metric, cfg, m)
}

// Check simulates sc's single point with reps replications and compares
// it with the observed figures.
func Check(ctx context.Context, sc *scenarios.Scenario, observed []Figure, reps int) (*Fidelity, error) {
	points, err := sc.Points()
	if err != nil {
		return nil, err
	}
	if len(points) != 1 {
		return nil, fmt.Errorf("fidelity: the scenario has %d points; an imported one has one", len(points))
	}
	rows, err := scenarios.RunStudy(ctx, points, scenarios.Study{Replications: max(1, reps)}, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("fidelity: %w", err)
	}
	r := rows[0]
	fd := &Fidelity{Replications: len(r.Reps), Fits: true}
	var misses []string
	for _, f := range observed {
		vals := make([]float64, len(r.Reps))
		for i := range r.Reps {
			if vals[i], err = modelFigure(f.Metric, r.Config, &r.Reps[i]); err != nil {
				return nil, err
			}
		}
		mean, half, _ := sim.MeanCI(vals)
		c := Comparison{Figure: f, Model: mean, Half: half}
		if f.Value != 0 {
			c.Err = (mean - f.Value) / f.Value
		}
		diff := math.Abs(mean - f.Value)
		c.Fits = diff <= Tolerance*math.Abs(f.Value) || diff <= f.Abs
		if !c.Fits {
			fd.Fits = false
			misses = append(misses, fmt.Sprintf("%s %+.0f%%", f.Name, 100*c.Err))
		}
		fd.Rows = append(fd.Rows, c)
	}
	switch {
	case len(fd.Rows) == 0:
		fd.Verdict = "NOTHING TO CHECK: no source gave a figure to compare with"
		fd.Fits = false
	case fd.Fits:
		fd.Verdict = fmt.Sprintf("FITS: every figure within %.0f%% (or its absolute allowance: 0.5 clients, 0.5 ms, a wait within 5%% of a transaction's time) of what was observed", 100*Tolerance)
	default:
		fd.Verdict = fmt.Sprintf("DOES NOT FIT: %s (allowed: %.0f%%); read the caveats and dropped items for why before trusting its answers", strings.Join(misses, ", "), 100*Tolerance)
	}
	return fd, nil
}

// Text is the fidelity report as a table with its verdict.
func (fd *Fidelity) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Fidelity: the imported scenario simulated with the observed settings (%d replications; ± is the 95%% confidence half-width)\n\n", fd.Replications)
	fmt.Fprintf(&b, "%-38s %-12s %-22s %-8s %s\n", "figure", "observed", "model", "error", "")
	for _, c := range fd.Rows {
		mark := "ok"
		if !c.Fits {
			mark = "MISS"
		}
		fmt.Fprintf(&b, "%-38s %-12s %-22s %-8s %s\n", c.Name, num(c.Value)+c.Unit, num(c.Model)+" ± "+num(c.Half)+c.Unit,
			fmt.Sprintf("%+.1f%%", 100*c.Err), mark)
	}
	b.WriteString("\nObserved: ")
	for i, c := range fd.Rows {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s from %s", c.Name, c.From)
	}
	fmt.Fprintf(&b, ".\n\nVerdict: %s\n", fd.Verdict)
	return b.String()
}

// num prints a figure with four significant digits or two decimals.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
