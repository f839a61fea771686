package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/scenarios"
)

// studyFlags are the replication flags of run, sweep and advise.
type studyFlags struct {
	replications int
	precision    string
	maxReps      int
	workers      int
	quiet        bool
}

const studyHelp = `Replications (run, sweep, advise):
  --replications N    run every point N times with independent seeds (the
                      first is the scenario's own seed, the others derived
                      from it, the same for every point, so points compare
                      replication by replication) and print each figure as
                      its mean ± the half-width of its 95% confidence
                      interval (Student t); JSON and CSV carry <metric>,
                      <metric>_ci95 and replications. A scenario whose every
                      draw is constant is deterministic and runs once.
  --precision P       keep adding replications (from N, default 10) until the
                      95% half-width of tps and p99 is within P of the mean
                      (2% or 0.02), up to --max-replications (default 200)
  replications: and precision: at the top of a scenario do the same; the
  flags win. Replications of all points share the workers (one per CPU).
`

func addStudyFlags(fs *pflag.FlagSet) *studyFlags {
	f := &studyFlags{}
	fs.IntVar(&f.replications, "replications", 0, "independent replications per point, reported as mean ± 95% CI (default: the scenario's, else 1)")
	fs.StringVar(&f.precision, "precision", "", "add replications until tps and p99 are known within this relative half-width, e.g. 2%")
	fs.IntVar(&f.maxReps, "max-replications", 0, "cap on replications with --precision (default 200)")
	fs.IntVar(&f.workers, "workers", 0, "simulations run at once (default: one per CPU)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	return f
}

// study is the scenario's study with the flags applied.
func (f *studyFlags) study(fs *pflag.FlagSet, sc *scenarios.Scenario) (scenarios.Study, error) {
	st := sc.Study
	if fs.Changed("replications") {
		if f.replications < 1 || f.replications > scenarios.MaxReplications {
			return st, usagef("--replications %d: want 1 to %d", f.replications, scenarios.MaxReplications)
		}
		st.Replications = f.replications
	}
	if fs.Changed("precision") {
		p, err := scenarios.ParsePrecision(f.precision)
		if err != nil {
			return st, usagef("--precision: %v", err)
		}
		st.Precision = p
	}
	if fs.Changed("max-replications") {
		if f.maxReps < 2 || f.maxReps > scenarios.MaxReplications {
			return st, usagef("--max-replications %d: want 2 to %d", f.maxReps, scenarios.MaxReplications)
		}
		if st.Precision == 0 {
			return st, usagef("--max-replications bounds --precision: give --precision too")
		}
		st.MaxReplications = f.maxReps
	}
	if f.workers < 0 {
		return st, usagef("--workers %d: want 0 (one per CPU) or more", f.workers)
	}
	return st, nil
}

// run simulates the points of a study with progress on stderr. When ctx
// is done it returns the rows with the error: the unfinished ones are
// marked Incomplete.
func (f *studyFlags) run(ctx context.Context, points []scenarios.Point, st scenarios.Study, stderr io.Writer, what string) ([]scenarios.Row, error) {
	p := newProgress(stderr, what, f.quiet)
	rows, err := scenarios.RunStudy(ctx, points, st, f.workers, p.update)
	p.finish()
	if err != nil {
		return rows, fmt.Errorf("%s: interrupted: %w", what, err)
	}
	return rows, nil
}

// finished is the rows a study completed, and how many it did not.
func finished(rows []scenarios.Row) ([]scenarios.Row, int) {
	var out []scenarios.Row
	for _, r := range rows {
		if !r.Incomplete {
			out = append(out, r)
		}
	}
	return out, len(rows) - len(out)
}
