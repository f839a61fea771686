package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// studyFlags are the replication flags of run, sweep and advise.
type studyFlags struct {
	replications int
	precision    string
	maxReps      int
	workers      int
	quiet        bool
	yes          bool
}

const studyHelp = `Replications (run, sweep, advise):
  --replications N    run every point N times with independent seeds (the
                      first is the scenario's own seed, the others derived
                      from it, the same for every point, so points compare
                      replication by replication) and print each figure ±
                      the half-width of its 95% confidence interval: a
                      mean with Student t's; a percentile (p99_ms,
                      wait_p99_ms, ...) read from every replication's
                      samples together, with a jackknife over the
                      replications. JSON and CSV carry <metric>,
                      <metric>_ci95 and replications. A scenario whose every
                      draw, in every class, is constant is deterministic and
                      runs once. An open workload's first batch (10) checks
                      that its start-up is out of the figures, lengthens an
                      automatic warm-up (and runs the batch again) when it
                      is not, and a row whose runs are too short for the
                      study says so in a note (table and JSON).
  --precision P       keep adding replications (from N, default 10) until the
                      95% half-width of tps and p99 is within P of the
                      estimate (2% or 0.02), up to --max-replications
                      (default 200; a note says when it was not reached)
  replications: and precision: at the top of a scenario do the same; the
  flags win. Replications of all points share the workers (one per CPU).
  Before running, the cost is estimated from the scenario's size (clients,
  transactions, statements, points, replications); above about 10 minutes
  or 2 GB on this machine the command stops with the estimate and a smaller
  equivalent, and runs anyway with --yes.
`

func addStudyFlags(fs *pflag.FlagSet) *studyFlags {
	f := &studyFlags{}
	fs.IntVar(&f.replications, "replications", 0, "independent replications per point, reported as estimate ± 95% CI (default: the scenario's, else 1)")
	fs.StringVar(&f.precision, "precision", "", "add replications until tps and p99 are known within this relative half-width, e.g. 2%")
	fs.IntVar(&f.maxReps, "max-replications", 0, "cap on replications with --precision (default 200)")
	fs.IntVar(&f.workers, "workers", 0, "simulations run at once (default: one per CPU)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fs.BoolVar(&f.yes, "yes", false, "run even when the estimate is above 10 minutes or 2 GB")
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

// Cost limits beyond which a run asks for --yes: about 10 minutes or 2 GB
// on this machine (variables only so a test can lower them).
var (
	costSeconds float64 = 600
	costBytes   float64 = 2 << 30
)

// checkCost refuses, before anything runs, a study estimated above the
// limits unless --yes was given: with the estimate, the flag that allows
// it and a smaller equivalent of the same steady state.
func (f *studyFlags) checkCost(sc *scenarios.Scenario, points []scenarios.Point, st scenarios.Study) error {
	workers := f.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	c := scenarios.EstimateStudy(points, st, workers)
	if f.yes || (c.Seconds <= costSeconds && c.PeakBytes <= costBytes) {
		return nil
	}
	more := ""
	if c.AtLeast {
		more = "at least "
	}
	msg := fmt.Sprintf("this would take %sabout %s and %s of memory (%d runs, %.3g transactions, %.3g events on %d cores); the limits are %s and %s: give --yes to run it anyway",
		more, time.Duration(c.Seconds*float64(time.Second)).Round(time.Second), bytesWords(c.PeakBytes), c.Runs, c.Txns, c.Events, workers,
		time.Duration(costSeconds*float64(time.Second)), bytesWords(costBytes))
	if s := smaller(sc.Base, max(c.Seconds/costSeconds, c.PeakBytes/costBytes)); s != "" {
		msg += ", or " + s
	}
	return usagef("%s", msg)
}

// smaller suggests an equivalent of c about factor times cheaper with the
// same steady state: fewer transactions (or requests) per client of a
// closed workload, a shorter arrival period of an open one.
func smaller(c system.Config, factor float64) string {
	w := c.Workload
	factor *= 1.25 // land under the limit
	switch {
	case w.Open():
		d := time.Duration(float64(w.Duration.Duration()) / factor).Round(time.Second)
		if d >= 20*time.Second {
			return fmt.Sprintf("--set workload.duration=%v: the same arrivals for a shorter time (the steady window is what is measured)", d)
		}
	case w.RequestLevel():
		if n := int(float64(w.RequestsPerSession) / factor); n >= 10 {
			return fmt.Sprintf("--set workload.requests_per_session=%d: the same clients for fewer requests each (tps_steady measures the steady state)", n)
		}
	default:
		if n := int(float64(w.TxnsPerSession) / factor); n >= 10 {
			return fmt.Sprintf("--set workload.txns_per_session=%d: the same clients for fewer transactions each (tps_steady measures the steady state)", n)
		}
	}
	if !w.Open() && float64(w.Clients)*system.BytesPerClient > costBytes/2 {
		return fmt.Sprintf("fewer clients: %d clients alone hold about %s; scale clients and pool sizes down together", w.Clients, bytesWords(float64(w.Clients)*system.BytesPerClient))
	}
	return ""
}

func bytesWords(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MB", b/(1<<20))
	default:
		return fmt.Sprintf("%.0f kB", b/(1<<10))
	}
}
