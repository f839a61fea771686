package system

import (
	"reflect"

	"github.com/poolsim/poolsim/sim"
)

// Replications. One run of a stochastic system is one sample of it; a
// study runs independent replications - the same system with different
// seeds - and reports each metric over them (a mean, or a percentile of
// their samples together: see Replicated) with a confidence interval. Replication 0 runs with the scenario's own seed (so one
// replication is exactly the run poolsim has always made); replication i
// runs with ReplicationSeed(seed, i), the same for every configuration of
// a study, so configurations compared replication by replication share
// their random draws (common random numbers: see Config's streams).

// ReplicationSeed is the seed of replication i of a study whose scenario
// seed is seed. It is stable: the same (seed, i) always gives the same
// seed, and replication 0 is the scenario's own.
func ReplicationSeed(seed uint64, i int) uint64 {
	if i == 0 {
		return seed
	}
	// SplitMix64 of the pair: neighbouring i give unrelated seeds.
	x := seed ^ 0x5851f42d4c957f2d*uint64(i)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Stochastic reports whether a run of c draws a random number that
// matters: any of draws(c), in any class. A system that is not stochastic
// gives the same metrics for every seed, so one run is the exact answer
// and replications would only repeat it.
func (c Config) Stochastic() bool {
	for _, d := range c.draws() {
		if d.random {
			return true
		}
	}
	return false
}

// draw is one source of random numbers a run of a configuration may use:
// what it is (a field's path, "classes.web.workload.Query"), and whether it
// draws from more than one value where the run uses it.
type draw struct {
	what   string
	random bool
}

// draws are every source of random numbers a run of c uses. Each class's
// workload is walked field by field, so a duration (sim.Dist) or count
// (sim.IntDist) added to Workload is found here without being named - a
// field the run draws only under a condition names it in unusedDraw - and
// so are the server's and the pooler's; then what draws without a
// distribution: Poisson arrivals, a choice among several statements,
// so_reuseport's hashing of connections to several pooler processes, and
// a plugged-in Machine's own draws (Machine.Random: lab/testbed's load
// driver's CPU distribution, its speed sequence's random start).
func (c Config) draws() []draw {
	var out []draw
	walk := func(prefix string, v any, unused func(field string) bool) {
		walkDists(reflect.ValueOf(v), prefix, func(path, field string, random bool) {
			out = append(out, draw{what: path, random: random && (unused == nil || !unused(field))})
		})
	}
	for _, cl := range c.ClassList() {
		w := cl.Workload
		p := "workload"
		if c.Multi() {
			p = "classes." + cl.Name + ".workload"
		}
		walk(p, w, func(field string) bool { return unusedDraw(w, field) })
		out = append(out, draw{p + ".arrival_rate", w.Open()}, draw{p + ".statements", w.Statements > 1})
	}
	walk("server", c.Server, nil)
	walk("pooler", c.Pooler, nil)
	out = append(out, draw{"pooler.processes", c.Pooler.Processes > 1})
	if c.Machine != nil {
		out = append(out, draw{"validate (the test machine)", c.Machine.Random(c)})
	}
	return out
}

// unusedDraw reports whether a run of workload w leaves its distribution
// field (a Workload field's name) undrawn: think time after a session's
// only statement, the pause inside a request's transactions without
// requests, the transactions per request without requests.
func unusedDraw(w Workload, field string) bool {
	switch field {
	case "Think":
		return !w.RequestLevel() && w.TxnsPerSession*w.StmtsPerTxn <= 1
	case "App", "TxnsPerRequest":
		return !w.RequestLevel()
	}
	return false
}

var (
	distType    = reflect.TypeFor[sim.Dist]()
	intDistType = reflect.TypeFor[sim.IntDist]()
)

// walkDists calls f on every sim.Dist and sim.IntDist in v, a struct,
// and in the structs it holds (not behind pointers or in slices): its
// path, its field's name, and whether it is random.
func walkDists(v reflect.Value, path string, f func(path, field string, random bool)) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		fv := v.Field(i)
		p := path + "." + sf.Name
		switch {
		case sf.Type == distType:
			f(p, sf.Name, fv.Interface().(sim.Dist).Random())
		case sf.Type == intDistType:
			f(p, sf.Name, fv.Interface().(sim.IntDist).Random())
		case sf.Type.Kind() == reflect.Struct:
			walkDists(fv, p, f)
		}
	}
}

// Replicated is one configuration's replications: every run's metrics in
// replication order.
//
// What a study reports of them (Stat) depends on the metric:
//
//   - a percentile (Field.Percentile: p99_ms, wait_p99_ms, req_p99_ms, the
//     parts' p50 and p99, ...) is the percentile of every replication's
//     samples together - their histograms merged (Metrics.Dists) - with a
//     jackknife interval over the replications;
//   - every other metric is the mean of the replications' values, with
//     Student t's interval over them.
//
// Why pooled: the mean of the replications' own p99s estimates the p99 of
// a run that short, not the system's. A short run's tail rests on the few
// congested stretches it happened to have, so most runs read it low and a
// few high; their mean is biased low (an M/M/3 at ρ = 0.9 over 60 s: its
// wait p99 36 % low), and more replications only narrow the interval
// around the wrong value. The percentile of all the samples together is
// the estimate of the system's that gets better with every replication.
//
// Why the jackknife: the replications are the independent observations -
// the samples within a run are correlated (one congested stretch makes
// hundreds of long waits), so an interval from the pooled samples' order
// statistics, as if independent, is far too narrow. Leaving one
// replication out at a time and recomputing the pooled percentile
// estimates the variance of the very figure reported, from estimates each
// made of (R−1)/R of the data, so a single short run's skewed tail does
// not stand in for it as it does in sectioning (the spread of the
// replications' own percentiles around the pooled one): on that M/M/3
// with a 20 s warm-up and 200 replications, sectioning's half-width was
// 3.6 % and covered Erlang C's p99 in 10 of 40 seeds, the jackknife's 14 %
// and 35 of 40 -
// the pooled p99 moves with the few replications that hold a long
// congested stretch, which the replications' own p99s, averaged, hide.
// It is consistent for quantiles when the
// groups left out are large (Shao and Wu 1989: a run is thousands of
// samples), and it carries over to the paired difference of two
// configurations run with common random numbers (Paired): leaving the
// same replication out of both keeps the pair's shared noise out of the
// interval.
//
// Values is every replication's own value in either case: what a paired
// comparison of a mean needs, and what a plot of the runs shows.
type Replicated []Metrics

// Stat is one metric's estimate over replications and the half-width of
// its 95 % confidence interval.
type Stat struct{ Estimate, Half float64 }

// Stats is Stat of every metric, in Fields() order, each distribution
// merged once for all the percentiles read from it.
func (r Replicated) Stats() []Stat {
	out := make([]Stat, len(Fields()))
	merged := map[int]*sim.Merged{}
	for _, f := range Fields() {
		if f.Percentile() && len(r) >= 2 && r.haveDists() {
			m, ok := merged[f.dist]
			if !ok {
				m = r.merged(f)
				merged[f.dist] = m
			}
			out[f.pos].Estimate, out[f.pos].Half = r.pooledFrom(f, m, nil, 0)
			continue
		}
		out[f.pos].Estimate, out[f.pos].Half, _ = sim.MeanCI(r.Values(f))
	}
	return out
}

// Stat is metric f's estimate over the replications and the half-width of
// its 95 % confidence interval (0 with a single replication, whose own
// value it is): a percentile's pooled value with its jackknife interval
// when every replication carries its distributions (Metrics.Dists), else
// the mean with Student t's interval.
func (r Replicated) Stat(f Field) (estimate, half float64) {
	if f.Percentile() && len(r) >= 2 && r.haveDists() {
		return r.pooled(f, nil, 0)
	}
	estimate, half, _ = sim.MeanCI(r.Values(f))
	return estimate, half
}

// Paired is the difference a − k·b of metric f between two configurations
// run on the same replications (common random numbers), over the
// replications both have: its estimate and 95 % half-width. A percentile
// (Field.Percentile) is the difference of the pooled percentiles, its
// interval the jackknife leaving replication i out of both at once; any
// other metric the mean of a[i] − k·b[i] with Student t (sim.PairedCI).
// Either way the noise the pair shares cancels. Without two replications
// in common the half-width is 0.
func (r Replicated) Paired(b Replicated, f Field, k float64) (estimate, half float64) {
	n := min(len(r), len(b))
	a, b := r[:n], b[:n]
	if f.Percentile() && n >= 2 && a.haveDists() && b.haveDists() {
		return a.pooled(f, b, k)
	}
	xa, xb := a.Values(f), b.Values(f)
	for i := range xb {
		xb[i] *= k
	}
	estimate, half, _ = sim.PairedCI(xa, xb)
	return estimate, half
}

// haveDists reports whether every replication carries its distributions.
func (r Replicated) haveDists() bool {
	for i := range r {
		if r[i].Dists.Empty() {
			return false
		}
	}
	return true
}

// pooled is percentile f of r's replications' samples together, less k
// times b's (b nil: r's alone), in f's unit (milliseconds), and the
// jackknife's 95 % half-width leaving one replication out (of both).
func (r Replicated) pooled(f Field, b Replicated, k float64) (estimate, half float64) {
	var mb *sim.Merged
	if b != nil {
		mb = b.merged(f)
	}
	return r.pooledFrom(f, r.merged(f), mb, k)
}

// pooledFrom is pooled with the unions made: ma of r's replications, mb
// of b's (nil: none).
//
// The estimate reads the percentile at its bucket's midpoint, as a
// recorder past its exact limit does; the leave-one-out estimates are read
// inside their buckets (sim.Merged.Smooth), because leaving one of many
// replications out moves a percentile by less than a bucket's width
// (0.2 %), and read at midpoints they would all agree - an interval of 0 -
// or jump a whole bucket.
func (r Replicated) pooledFrom(f Field, ma, mb *sim.Merged, k float64) (estimate, half float64) {
	loo := make([]float64, len(r))
	for i := range loo {
		loo[i] = ma.SmoothWithout(i, f.pct) / 1e6 // ns to ms
		if mb != nil {
			loo[i] -= k * mb.SmoothWithout(i, f.pct) / 1e6
		}
	}
	half, _ = sim.JackknifeCI(loo)
	estimate = ms(ma.Percentile(f.pct))
	if mb != nil {
		estimate -= k * ms(mb.Percentile(f.pct))
	}
	return estimate, half
}

// StartBias is what is left of the start-up in percentile f: how far the
// pooled percentile of the replications' steady windows reads from that
// of their second halves (in f's unit: negative when the whole reads
// lower), with the jackknife's 95 % half-width of that difference
// (leaving each replication out of both). A run long enough for its
// figure has its start-up in neither half and the two agree within the
// half-width; when the start-up is still in the window - the warm-up cut
// too little of it, or the window is too short for it to fade - it sits
// in the first half, and the difference estimates the error it leaves in
// the figure (against a second half of equal length it would be about
// twice as large). ok is false for a metric that is not a percentile,
// fewer than two replications, or runs without halves (closed workloads,
// metrics read back from a report).
func (r Replicated) StartBias(f Field) (bias, half float64, ok bool) {
	if !f.Percentile() || len(r) < 2 || !r.haveDists() {
		return 0, 0, false
	}
	whole, late := r.merged(f), r.mergedLate(f)
	if late.Count() == 0 {
		return 0, 0, false
	}
	loo := make([]float64, len(r))
	for i := range loo {
		loo[i] = (whole.SmoothWithout(i, f.pct) - late.SmoothWithout(i, f.pct)) / 1e6
	}
	half, _ = sim.JackknifeCI(loo)
	return (whole.Smooth(f.pct) - late.Smooth(f.pct)) / 1e6, half, true
}

// merged is the union of the replications' distribution behind f.
func (r Replicated) merged(f Field) *sim.Merged { return r.union(f, false) }

// mergedLate is the union of the second halves of their windows.
func (r Replicated) mergedLate(f Field) *sim.Merged { return r.union(f, true) }

func (r Replicated) union(f Field, late bool) *sim.Merged {
	hs := make([]sim.Histogram, len(r))
	for i := range r {
		hs[i] = r[i].Dists.hist(f.dist, late)
	}
	return sim.MergeHistograms(hs)
}

// Values is metric f of every replication.
func (r Replicated) Values(f Field) []float64 {
	xs := make([]float64, len(r))
	for i := range r {
		xs[i] = f.Get(&r[i])
	}
	return xs
}

// Mean is the metrics of the replications as Stat reports them: means
// (counts rounded to the nearest integer) and pooled percentiles; a
// single replication's own metrics.
func (r Replicated) Mean() Metrics {
	if len(r) == 1 {
		return r[0]
	}
	return MetricsOf(r.Stats())
}

// RunMean is what one run reads on average: every metric's mean over the
// replications, a percentile too (the mean of the replications' own, not
// the percentile of their samples together); a single replication's own
// metrics. It is the model of a single run of the same length - what a
// live run is compared with - where Mean is the study's estimate of the
// system.
func (r Replicated) RunMean() Metrics {
	if len(r) == 1 {
		return r[0]
	}
	var m Metrics
	for _, f := range Fields() {
		mean, _, _ := sim.MeanCI(r.Values(f))
		f.Set(&m, mean)
	}
	return m
}

// MetricsOf is the metrics of a table of Stats' estimates (counts rounded
// to the nearest integer).
func MetricsOf(stats []Stat) Metrics {
	var m Metrics
	for _, f := range Fields() {
		f.Set(&m, stats[f.pos].Estimate)
	}
	return m
}
