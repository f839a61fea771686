package validate

import (
	"math"
	"slices"
	"time"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// A row runs several times, each run calibrated right before it. The row
// compares, metric by metric, the median of the measurements with the
// median of the calibrated models, so one run disturbed by other work on
// the machine moves neither side, and no run is picked. Counts are not
// medians: every run must reproduce them, so the first run whose count
// differs from the model's is the one shown.

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return median(v)
}

func medianDur[T any](xs []T, f func(T) time.Duration) time.Duration {
	return time.Duration(medianOf(xs, func(x T) float64 { return float64(f(x)) }))
}

// count is the count every run should share: want when they all have it,
// else the first run's count that differs.
func count[T any](xs []T, want int64, f func(T) int64) int64 {
	for _, x := range xs {
		if f(x) != want {
			return f(x)
		}
	}
	return want
}

// combineMeasured folds the runs of a row into one measurement: medians of
// times and rates, counts that every run must share (model's are the
// reference).
func combineMeasured(xs []Measured, model system.Metrics) Measured {
	if len(xs) == 0 {
		return Measured{}
	}
	m := xs[0]
	m.OKTxns = count(xs, model.OKTxns, func(x Measured) int64 { return x.OKTxns })
	if model.PreparedErrorTxns > 0 {
		// Which transactions fail is a race: medians, not a shared count.
		m.OKTxns = int64(medianOf(xs, func(x Measured) float64 { return float64(x.OKTxns) }))
		m.Prepared.Counts.FailedTxns = int64(medianOf(xs, func(x Measured) float64 { return float64(x.Prepared.Counts.FailedTxns) }))
	} else {
		m.Prepared.Counts.FailedTxns = count(xs, 0, func(x Measured) int64 { return x.Prepared.Counts.FailedTxns })
	}
	m.ConnRefused = count(xs, model.ConnRefused, func(x Measured) int64 { return x.ConnRefused })
	m.WaitTimeouts = count(xs, model.WaitTimeouts, func(x Measured) int64 { return x.WaitTimeouts })
	m.Failed = count(xs, 0, func(x Measured) int64 { return x.Failed })
	m.OKReqs = count(xs, model.OKReqs, func(x Measured) int64 { return x.OKReqs })
	m.Errors = nil
	for _, x := range xs {
		m.Errors = append(m.Errors, x.Errors...)
	}
	for _, f := range []struct {
		dst *float64
		get func(Measured) float64
	}{
		{&m.WallMs, func(x Measured) float64 { return x.WallMs }},
		{&m.TPS, func(x Measured) float64 { return x.TPS }},
		{&m.TPSSteady, func(x Measured) float64 { return x.TPSSteady }},
		{&m.MeanMs, func(x Measured) float64 { return x.MeanMs }},
		{&m.P50Ms, func(x Measured) float64 { return x.P50Ms }},
		{&m.P95Ms, func(x Measured) float64 { return x.P95Ms }},
		{&m.P99Ms, func(x Measured) float64 { return x.P99Ms }},
		{&m.WaitMeanMs, func(x Measured) float64 { return x.WaitMeanMs }},
		{&m.WaitP50Ms, func(x Measured) float64 { return x.WaitP50Ms }},
		{&m.WaitP99Ms, func(x Measured) float64 { return x.WaitP99Ms }},
		{&m.StmtMeanMs, func(x Measured) float64 { return x.StmtMeanMs }},
		{&m.StmtP99Ms, func(x Measured) float64 { return x.StmtP99Ms }},
		{&m.ThinkMeanMs, func(x Measured) float64 { return x.ThinkMeanMs }},
		{&m.HoldMs, func(x Measured) float64 { return x.HoldMs }},
		{&m.StartGapMs, func(x Measured) float64 { return x.StartGapMs }},
		{&m.AppMeanMs, func(x Measured) float64 { return x.AppMeanMs }},
		{&m.ReqTPS, func(x Measured) float64 { return x.ReqTPS }},
		{&m.ReqP50Ms, func(x Measured) float64 { return x.ReqP50Ms }},
		{&m.ReqP99Ms, func(x Measured) float64 { return x.ReqP99Ms }},
		{&m.CPUBusy, func(x Measured) float64 { return x.CPUBusy }},
		{&m.DriverSpread, func(x Measured) float64 { return x.DriverSpread }},
		{&m.CPUSelf, func(x Measured) float64 { return x.CPUSelf }},
		{&m.CPUSteal, func(x Measured) float64 { return x.CPUSteal }},
		{&m.Prepared.HitRate, func(x Measured) float64 { return x.Prepared.HitRate }},
		{&m.Prepared.ServerParsesPerS, func(x Measured) float64 { return x.Prepared.ServerParsesPerS }},
	} {
		*f.dst = medianOf(xs, f.get)
	}
	if m.RunDelay.OK {
		for _, f := range []struct {
			dst *time.Duration
			get func(RunDelay) time.Duration
		}{
			{&m.RunDelay.Server, func(d RunDelay) time.Duration { return d.Server }},
			{&m.RunDelay.Pooler, func(d RunDelay) time.Duration { return d.Pooler }},
			{&m.RunDelay.Driver, func(d RunDelay) time.Duration { return d.Driver }},
		} {
			*f.dst = time.Duration(medianOf(xs, func(x Measured) float64 { return float64(f.get(x.RunDelay)) }))
		}
	}
	if m.RunDelay.PreemptsOK {
		m.RunDelay.PoolerPreempts = medianOf(xs, func(x Measured) float64 { return x.RunDelay.PoolerPreempts })
	}
	m.Assignments = int64(medianOf(xs, func(x Measured) float64 { return float64(x.Assignments) }))
	m.HoldQueries = int64(medianOf(xs, func(x Measured) float64 { return float64(x.HoldQueries) }))
	m.StartsInRun = int(medianOf(xs, func(x Measured) float64 { return float64(x.StartsInRun) }))
	m.Prepared.ServerParses = int64(medianOf(xs, func(x Measured) float64 { return float64(x.Prepared.ServerParses) }))
	m.Prepared.StmtExecs = int64(medianOf(xs, func(x Measured) float64 { return float64(x.Prepared.StmtExecs) }))
	return m
}

// combineModels folds the calibrated models of a row's runs: medians of the
// judged times and rates, counts that every run's model must share.
func combineModels(ms []ModelRun, model system.Metrics) ModelRun {
	if len(ms) == 0 {
		return ModelRun{}
	}
	c := ms[0]
	c.OKTxns = count(ms, model.OKTxns, func(x ModelRun) int64 { return x.OKTxns })
	c.PreparedErrorTxns = count(ms, model.PreparedErrorTxns, func(x ModelRun) int64 { return x.PreparedErrorTxns })
	if model.PreparedErrorTxns > 0 {
		c.OKTxns = int64(medianOf(ms, func(x ModelRun) float64 { return float64(x.OKTxns) }))
		c.PreparedErrorTxns = int64(medianOf(ms, func(x ModelRun) float64 { return float64(x.PreparedErrorTxns) }))
	}
	c.ServerParses = int64(medianOf(ms, func(x ModelRun) float64 { return float64(x.ServerParses) }))
	c.StmtExecs = int64(medianOf(ms, func(x ModelRun) float64 { return float64(x.StmtExecs) }))
	c.ConnRefused = count(ms, model.ConnRefused, func(x ModelRun) int64 { return x.ConnRefused })
	c.WaitTimeouts = count(ms, model.WaitTimeouts, func(x ModelRun) int64 { return x.WaitTimeouts })
	c.OKReqs = count(ms, model.OKReqs, func(x ModelRun) int64 { return x.OKReqs })
	for _, f := range []struct {
		dst *float64
		get func(ModelRun) float64
	}{
		{&c.WallMs, func(x ModelRun) float64 { return x.WallMs }},
		{&c.TPS, func(x ModelRun) float64 { return x.TPS }},
		{&c.TPSSteady, func(x ModelRun) float64 { return x.TPSSteady }},
		{&c.MeanMs, func(x ModelRun) float64 { return x.MeanMs }},
		{&c.P50Ms, func(x ModelRun) float64 { return x.P50Ms }},
		{&c.P95Ms, func(x ModelRun) float64 { return x.P95Ms }},
		{&c.P99Ms, func(x ModelRun) float64 { return x.P99Ms }},
		{&c.WaitMeanMs, func(x ModelRun) float64 { return x.WaitMeanMs }},
		{&c.WaitP50Ms, func(x ModelRun) float64 { return x.WaitP50Ms }},
		{&c.WaitP99Ms, func(x ModelRun) float64 { return x.WaitP99Ms }},
		{&c.ReqTPS, func(x ModelRun) float64 { return x.ReqTPS }},
		{&c.ReqP50Ms, func(x ModelRun) float64 { return x.ReqP50Ms }},
		{&c.ReqP99Ms, func(x ModelRun) float64 { return x.ReqP99Ms }},
		{&c.PreparedHitRate, func(x ModelRun) float64 { return x.PreparedHitRate }},
		{&c.ServerParsesPerS, func(x ModelRun) float64 { return x.ServerParsesPerS }},
		{&c.RunQueueServerUs, func(x ModelRun) float64 { return x.RunQueueServerUs }},
		{&c.RunQueuePoolerUs, func(x ModelRun) float64 { return x.RunQueuePoolerUs }},
		{&c.RunQueueDriverUs, func(x ModelRun) float64 { return x.RunQueueDriverUs }},
		{&c.DriverThreadSpread, func(x ModelRun) float64 { return x.DriverThreadSpread }},
	} {
		*f.dst = medianOf(ms, f.get)
	}
	return c
}

// combineCal is the calibration shown for a row: medians of its runs'.
func combineCal(cs []Calibration) Calibration {
	if len(cs) == 0 {
		return Calibration{}
	}
	c := cs[0]
	c.Connect = medianDur(cs, func(x Calibration) time.Duration { return x.Connect })
	c.QueryMean = medianDur(cs, func(x Calibration) time.Duration { return x.QueryMean })
	c.QueryP99 = medianDur(cs, func(x Calibration) time.Duration { return x.QueryP99 })
	c.ThinkMean = medianDur(cs, func(x Calibration) time.Duration { return x.ThinkMean })
	c.Hop = medianDur(cs, func(x Calibration) time.Duration { return x.Hop })
	c.HopRTT = medianDur(cs, func(x Calibration) time.Duration { return x.HopRTT })
	c.ServersOpen = int(math.Round(medianOf(cs, func(x Calibration) float64 { return float64(x.ServersOpen) })))
	c.Hold = medianDur(cs, func(x Calibration) time.Duration { return x.Hold })
	c.ConnectLoaded = medianDur(cs, func(x Calibration) time.Duration { return x.ConnectLoaded })
	c.RTT = medianDur(cs, func(x Calibration) time.Duration { return x.RTT })
	c.Unnamed = medianDur(cs, func(x Calibration) time.Duration { return x.Unnamed })
	c.Parse = medianDur(cs, func(x Calibration) time.Duration { return x.Parse })
	c.Testbed = combineTestbed(cs)
	return c
}

// calibrated runs the model of cfg with a run's calibration.
func calibrated(cfg system.Config, cal Calibration) ModelRun {
	if cal.Testbed != nil {
		return calibratedTestbed(cfg, cal)
	}
	cc := cfg
	cc.Workload.Query = cal.Query
	calibratedPauses(&cc.Workload, cal)
	cc.Server.Connect = sim.ConstDist(0) // direct clients connect before time zero
	if cfg.Pooler.PoolMode.Pooled() {
		cc.Pooler.Hop = sim.FromDuration(cal.Hop)
		cc.Server.Connect = sim.ConstDist(sim.FromDuration(cal.Connect))
		onMachine(&cc, func(m *testbed.Machine) { m.ServersOpen = cal.ServersOpen })
		heldAtPooler(&cc, cal)
	}
	if cal.Prepared {
		calibratedPrepared(&cc, cfg.Workload, cal)
	}
	return runModel(cc)
}

// heldAtPooler gives a pooled row's model what its pooler saw of the
// statement (calibrateHold): the server is held for the statement's time
// at the pooler, the scenario's shape scaled to that mean, and the rest
// of the driver's round trip straight to PostgreSQL (its own wake-ups)
// is the client's, half on each hop, so that a client's round trip stays
// the one measured; the pool's logins take as long as they did with the
// machine busy.
func heldAtPooler(cc *system.Config, cal Calibration) {
	if cal.Hold <= 0 || cal.QueryMean <= 0 {
		return
	}
	cc.Workload.Query = scaleDist(cc.Workload.Query, float64(cal.Hold)/float64(cal.QueryMean))
	cc.Pooler.Hop = sim.FromDuration(max(0, cal.Hop+(cal.QueryMean-cal.Hold)/2))
	if cal.ConnectLoaded > 0 {
		cc.Server.Connect = sim.ConstDist(sim.FromDuration(cal.ConnectLoaded))
	}
}
