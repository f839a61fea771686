package validate

import (
	"fmt"
	"math"
	"strconv"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Error bars on the measured side. A row runs several times, each run with
// its own calibrated model: calibrated right before that run, on the
// machine as it was then. So the calibrated model's error is a run's:
// run i's model against run i's measurement. The runs give, per metric,
// the measured mean with its 95 % confidence interval and that per-run
// error's mean and 95 % interval (Student t, runs − 1 degrees of freedom).
// The table also shows the medians of the measurements and of the
// calibrated models, but their error is not judged: the median
// measurement and the median model can come from different runs, so
// their difference holds the runs' own spread besides the model's error
// (an example: docs/validate.md).
//
// The verdict of a cell with a relative tolerance takes both the tolerance
// and the interval:
//   - the runs' mean error within the tolerance (with one run, or runs
//     without an error each, the medians' error): a pass by the tolerance;
//   - outside it, but the runs' 95 % interval of the error reaching into
//     the tolerance band: a pass by the interval, said so in the verdict
//     (the miss cannot be told apart from the runs' own spread);
//   - the whole interval outside the band, or a single run: a fail.
//
// The tolerances themselves are unchanged.

// What a cell's pass rests on.
const (
	ByTolerance = "tolerance" // the judged error (judgedErr) is within Tol
	ByCI        = "ci"        // outside Tol, but the runs' 95 % interval of the error reaches into it
)

// runMetric reads one metric of a run: measured and calibrated model.
type runMetric struct {
	measured func(Measured) float64
	model    func(system.Metrics) float64
}

// runMetrics are the metrics with a relative tolerance whose runs are kept.
var runMetrics = map[string]runMetric{
	"tps":        {func(x Measured) float64 { return x.TPS }, func(m system.Metrics) float64 { return m.TPS }},
	"tps_steady": {func(x Measured) float64 { return x.TPSSteady }, func(m system.Metrics) float64 { return m.TPSSteady }},
	"p50_ms":     {func(x Measured) float64 { return x.P50Ms }, func(m system.Metrics) float64 { return m.P50Ms }},
	"p99_ms":     {func(x Measured) float64 { return x.P99Ms }, func(m system.Metrics) float64 { return m.P99Ms }},
	"req_tps":    {func(x Measured) float64 { return x.ReqTPS }, func(m system.Metrics) float64 { return m.ReqTPS }},
	"req_p50_ms": {func(x Measured) float64 { return x.ReqP50Ms }, func(m system.Metrics) float64 { return m.ReqP50Ms }},
	"req_p99_ms": {func(x Measured) float64 { return x.ReqP99Ms }, func(m system.Metrics) float64 { return m.ReqP99Ms }},
	"server_parses_per_s": {func(x Measured) float64 { return x.Prepared.ServerParsesPerS },
		func(m system.Metrics) float64 { return m.ServerParsesPerS }},
}

// spread fills a cell's run statistics from the row's runs: the measured
// mean and its 95 % half-width, and the calibrated model's relative error
// per run, its mean and half-width. A metric without runs (or one run)
// leaves Runs at the count and the intervals unset (ok false).
func spread(c *Cell, r *Row) {
	g, ok := runMetrics[c.Metric]
	if !ok || !c.Known {
		return
	}
	n := min(len(r.Repeats), len(r.RepeatModels))
	var meas, errs []float64
	for i := range n {
		x, m := g.measured(r.Repeats[i]), g.model(r.RepeatModels[i].Metrics)
		meas = append(meas, x)
		if e := relErr(m, x); !math.IsNaN(e) {
			errs = append(errs, e)
		}
	}
	c.Runs = n
	c.MeasMean, c.MeasHalf, _ = sim.MeanCI(meas)
	c.ErrMean, c.ErrHalf, c.HasCI = sim.MeanCI(errs)
	c.HasCI = c.HasCI && len(errs) == n
}

// judgedErr is the calibrated model's relative error the verdict holds to
// the tolerance: the runs' mean of each run's own error, or, without an
// interval (one run, or a run without an error), the medians' error. NaN
// when it is undefined.
func (c Cell) judgedErr() float64 {
	if c.HasCI {
		return c.ErrMean
	}
	return relErr(c.Calibrated, c.Measured)
}

// withinByCI reports whether the runs' 95 % interval of the error reaches
// into the band ±tol.
func (c Cell) withinByCI() bool {
	return c.HasCI && c.ErrMean-c.ErrHalf <= c.Tol+1e-9 && c.ErrMean+c.ErrHalf >= -c.Tol-1e-9
}

// ciText is the runs' interval of the error in percent ("+3.1 ± 4.2 (5
// runs)"), "" when there is none.
func (c Cell) ciText() string {
	if !c.HasCI {
		return ""
	}
	return fmt.Sprintf("%+.1f ± %.1f (%d runs)", 100*c.ErrMean, 100*c.ErrHalf, c.Runs)
}

// measText is the measured mean with its 95 % half-width, "" without runs
// to give one.
func (c Cell) measText() string {
	if c.Runs < 2 {
		return ""
	}
	return fnum(c.Metric, c.MeasMean) + " ± " + fnum(c.Metric, c.MeasHalf)
}

// csvRuns is a cell's run columns for rows.csv: runs, measured mean and
// 95 % half-width, the error's mean and half-width in percent, pass_by.
func (c Cell) csvRuns() []string {
	out := []string{strconv.Itoa(c.Runs), "", "", "", "", c.By}
	if c.Runs >= 2 {
		out[1], out[2] = fnum(c.Metric, c.MeasMean), fnum(c.Metric, c.MeasHalf)
	}
	if c.HasCI {
		out[3], out[4] = strconv.FormatFloat(100*c.ErrMean, 'f', 1, 64), strconv.FormatFloat(100*c.ErrHalf, 'f', 1, 64)
	}
	return out
}
