package system

import "github.com/poolsim/poolsim/sim"

// Replications. One run of a stochastic system is one sample of it; a
// study runs independent replications - the same system with different
// seeds - and reports each metric's mean over them with a confidence
// interval. Replication 0 runs with the scenario's own seed (so one
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
// matters: a distribution that is not constant, Poisson arrivals, a
// choice among several statements, so_reuseport's hashing across several
// pooler processes. A system that is not stochastic gives the same
// metrics for every seed, so one run is the exact answer and replications
// would only repeat it.
func (c Config) Stochastic() bool {
	w := c.Workload
	if w.Open() {
		return true
	}
	for _, d := range [...]struct {
		random bool
		used   bool
	}{
		{w.Query.Random(), true},
		{w.CPU.Random(), true},
		{w.Think.Random(), w.TxnsPerSession*w.StmtsPerTxn > 1},
		{w.Parse.Random(), w.Parse.MeanValue() > 0 || w.Parse.Random()},
		{c.Server.Connect.Random(), true},
	} {
		if d.random && d.used {
			return true
		}
	}
	if w.Statements > 1 {
		return true
	}
	return c.Pooler.Processes > 1
}

// Replicated is one configuration's replications: every run's metrics in
// replication order.
type Replicated []Metrics

// Stat is metric f's mean over the replications and the half-width of its
// 95 % confidence interval (0 with a single replication).
func (r Replicated) Stat(f Field) (mean, half float64) {
	mean, half, _ = sim.MeanCI(r.Values(f))
	return mean, half
}

// Values is metric f of every replication.
func (r Replicated) Values(f Field) []float64 {
	xs := make([]float64, len(r))
	for i := range r {
		xs[i] = f.Get(&r[i])
	}
	return xs
}

// Mean is the metrics averaged over the replications (counts rounded to
// the nearest integer); a single replication's own metrics.
func (r Replicated) Mean() Metrics {
	if len(r) == 1 {
		return r[0]
	}
	var m Metrics
	for _, f := range Fields() {
		mean, _ := r.Stat(f)
		f.Set(&m, mean)
	}
	return m
}
