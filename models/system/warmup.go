package system

import (
	"context"
	"math"

	"github.com/poolsim/poolsim/sim"
)

// The automatic warm-up. A run starts cold - no server connection, empty
// queues - and reports waits that are too short while its queues fill and
// too long while its pools log their servers in; how long that lasts
// depends on the load, and the truncation must be found, not guessed.
//
// It is decided once per configuration on pilot runs of their own
// (Pilots runs with seeds independent of every replication's), by two
// rules, and the later of the two wins:
//
//   - MSER-5 (the Marginal Standard Error Rule on batches of five) on the
//     pilots' mean transaction latency in each of PilotGrid intervals of
//     the arrival period, averaged over the pilots. Applied to the very run
//     it truncates, MSER-5 chases that run's own noise: it cuts where a
//     congested stretch happened to end, and the figures of what is left
//     come out low (an M/M/10 at ρ = 0.8 for 60 s: Wq 5 % low on average,
//     against 1 % low without any cut); on pilots, no run is cut where its
//     own data chose.
//   - The pools' fill: the warm-up is at least the time at which, in every
//     pilot, the pools have opened the servers the start asks of them and
//     caught up with the clients that queued meanwhile - the first moment,
//     after a backend was started, that no backend start-up (a pool's
//     server login, a direct client's backend) runs or waits and no client
//     waits at a pool or an application pool. Logins go one at a time
//     (server.connect each), and while the pools grow toward the servers
//     they keep, clients queue behind the logins, and the queue takes a
//     while more to drain: waits that belong to the cold start, not to the
//     pool size, and that the mean latency MSER-5 reads can hide when the
//     latencies are long-tailed. It is the first such moment, not the last
//     time a pool grew: a pool keeps its servers, so its count creeps up
//     with every rarer burst for as long as the run goes on. A fill over
//     within the grid's first interval is left in.
//
// Both cuts are rounded up to the grid and at most half the arrival
// period (atLimit says the limit held them: the run is too short for a
// steady state). Every replication of the configuration then cuts the same
// warm-up, which its own data did not choose.
//
// A study of several replications checks the warm-up again after its first
// batch (scenarios.RunStudy): MSER-5 on five pilots cannot see a start-up
// that fades more slowly than the pilots' noise, yet one that leaves a few
// per cent in every replication is all that a precision goal of 2 % cannot
// afford. The first batch measures how long the latencies stay correlated
// (CorrelationTime, a 95 % upper bound), a start-up from empty is taken
// to fade at that pace (StartupBias), and when what it could leave at the
// pilots' cut is more than the study can afford the warm-up is lengthened
// to where it is not (WarmupFor, at most half the arrival period) and the
// batch run again; a run too short even then says so.

// Pilots is the number of pilot runs behind an automatic warm-up, and
// PilotGrid the intervals of the arrival period they are averaged over.
const (
	Pilots    = 5
	PilotGrid = 200
)

// PilotSeed is the seed of pilot i of a configuration whose seed is seed:
// independent of every ReplicationSeed.
func PilotSeed(seed uint64, i int) uint64 { return ReplicationSeed(seed^0x70696c6f74, i+1) }

// Pilot is one pilot run: the transaction latencies completed in each of
// PilotGrid intervals of the arrival period (their sum in nanoseconds and
// count), and when its pools' fill ended (window.fillEnd; the arrival
// period's end if it never did).
type Pilot struct {
	Sum    []float64
	Count  []float64
	Filled sim.Time
}

// RunPilot runs pilot i of c (an open workload) without a warm-up; it
// stops early with ctx's error when ctx is done.
func RunPilot(ctx context.Context, c Config, i int) (Pilot, error) {
	c.Seed = PilotSeed(c.Seed, i)
	c.SetWarmup(0)
	m, _ := simulateWith(c, options{pilot: true, done: ctx.Done()})
	if m.canceled {
		return Pilot{}, ctx.Err()
	}
	p := Pilot{Sum: make([]float64, PilotGrid), Count: make([]float64, PilotGrid), Filled: c.Duration()}
	sn := m.window.snaps
	for k := 1; k < len(sn) && k <= PilotGrid; k++ {
		p.Sum[k-1], p.Count[k-1] = sn[k].latSum, sn[k].latN
	}
	if w := &m.window; w.filled {
		p.Filled = w.fillEnd
	}
	return p, nil
}

// WarmupFrom decides c's warm-up from its pilots: the later of MSER-5 on
// their mean latency per interval (intervals without a completion left
// out) and the pools' fill (FillTime), rounded up to the grid. atLimit
// reports that MSER-5 cut as much as it may (half the run): the arrival
// period is too short for a steady state.
func WarmupFrom(c Config, pilots []Pilot) (cut sim.Time, atLimit bool) {
	var xs []float64
	var at []int // grid interval of each point of xs
	for k := range PilotGrid {
		var sum, n float64
		for _, p := range pilots {
			sum += p.Sum[k]
			n += p.Count[k]
		}
		if n > 0 {
			xs = append(xs, sum/n)
			at = append(at, k)
		}
	}
	d, atLimit := sim.MSER5(xs)
	k := 0
	if d > 0 && len(at) > 0 {
		k = at[min(d, len(at)-1)] // cut the intervals before the first one kept
	}
	k = max(k, fillIntervals(c, pilots))
	return gridTime(c, k), atLimit
}

// gridTime is the start of interval k of c's pilot grid.
func gridTime(c Config, k int) sim.Time {
	return sim.Time(int64(c.Duration()) * int64(k) / PilotGrid)
}

// FillTime is the warm-up c's pools' fill asks for, by its pilots: the
// latest end of their fills (Pilot.Filled) rounded up to the grid, at most
// half the arrival period; 0 when every fill ended within the grid's first
// interval (0.5 % of the arrival period), too little of the window to
// move a figure by more than its share.
func FillTime(c Config, pilots []Pilot) sim.Time { return gridTime(c, fillIntervals(c, pilots)) }

// fillIntervals is FillTime in grid intervals.
func fillIntervals(c Config, pilots []Pilot) int {
	var last sim.Time
	for _, p := range pilots {
		last = max(last, p.Filled)
	}
	d := int64(c.Duration())
	if d <= 0 || int64(last)*PilotGrid < d {
		return 0
	}
	k := (int64(last)*PilotGrid + d - 1) / d
	return int(min(k, PilotGrid/2))
}

// CorrelationTime is how long the transaction latencies of r's runs stay
// correlated, in seconds: the time per independent latency, τ = W ·
// Var(window means) / σ², from the spread of the replications' mean
// latency over their steady windows of W seconds (mean_ms) and the
// variance σ² of the latencies themselves (their histograms merged) - the
// batch-means identity Var(mean over W) = σ² τ / W. up is its 95 % upper
// bound (the variance's χ² bound on R−1 degrees of freedom). ok is false
// without two replications of an open workload with their distributions
// and a window.
func (r Replicated) CorrelationTime() (tau, up float64, ok bool) {
	if len(r) < 2 || !r.haveDists() || r[0].SteadyMs <= 0 {
		return 0, 0, false
	}
	mf, _ := FieldByName("mean_ms")
	xs := r.Values(mf)
	var mean, v float64
	for _, x := range xs {
		mean += x / float64(len(xs))
	}
	for _, x := range xs {
		v += (x - mean) * (x - mean) / float64(len(xs)-1)
	}
	pf, _ := FieldByName("p99_ms")
	sigma2 := r.merged(pf).Variance() / 1e12 // ns² to ms²
	if sigma2 <= 0 {
		return 0, 0, false
	}
	w := r[0].SteadyMs / 1000
	tau = w * v / sigma2
	k := float64(len(xs) - 1)
	return tau, tau * k / chiSquareLow(k), true
}

// chiSquareLow is the 5 % quantile of χ² with k degrees of freedom
// (Wilson and Hilferty's cube-root approximation, within 1 % from k = 3).
func chiSquareLow(k float64) float64 {
	const z = -1.6448536269514722
	c := 2 / (9 * k)
	return k * math.Pow(1-c+z*math.Sqrt(c), 3)
}

// StartupBias is the share of a figure that a start-up from empty, fading
// with time constant tau, can still leave in a window from cut to end:
// its deficit, all of the figure at the start and e^(−t/τ) of it at t,
// averaged over the window, τ·e^(−cut/τ)/(end−cut). A figure that starts
// at nothing (a wait from empty queues) has all of it to lose; a latency
// that includes service loses less, so for it the bound is generous.
func StartupBias(tau, cut, end float64) float64 {
	if end <= cut {
		return math.Inf(1)
	}
	if tau <= 0 {
		return 0
	}
	return tau * math.Exp(-cut/tau) / (end - cut)
}

// WarmupFor is the least warm-up, from at on and on c's pilot grid, after
// which StartupBias with time constant tau is within target; atLimit
// reports that even half the arrival period (the most it may cut) leaves
// more, and cut is then that half.
func WarmupFor(c Config, tau float64, at sim.Time, target float64) (cut sim.Time, atLimit bool) {
	end := c.Duration().Seconds()
	for k := 0; k <= PilotGrid/2; k++ {
		if t := gridTime(c, k); t >= at && StartupBias(tau, t.Seconds(), end) <= target {
			return t, false
		}
	}
	return max(at, gridTime(c, PilotGrid/2)), true
}

// DurationFor is the shortest arrival period, in seconds, whose window can
// hold StartupBias with time constant tau within target after cutting at
// most half of it.
func DurationFor(tau, target float64) float64 {
	ok := func(d float64) bool { return StartupBias(tau, d/2, d) <= target }
	lo, hi := 0.0, math.Max(1, tau)
	for !ok(hi) {
		lo, hi = hi, 2*hi
	}
	for range 60 {
		mid := (lo + hi) / 2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// AutoWarmup runs c's pilots one after the other and decides its warm-up.
func AutoWarmup(ctx context.Context, c Config) (sim.Time, bool, error) {
	ps := make([]Pilot, Pilots)
	for i := range ps {
		p, err := RunPilot(ctx, c, i)
		if err != nil {
			return 0, false, err
		}
		ps[i] = p
	}
	cut, atLimit := WarmupFrom(c, ps)
	return cut, atLimit, nil
}

// Resolved is c with an automatic warm-up replaced by the one its pilots
// give (a closed workload, or an explicit warm-up, is returned as it is),
// and whether MSER-5 hit its limit.
func Resolved(ctx context.Context, c Config) (Config, bool, error) {
	if !c.WarmupAuto() {
		return c, false, nil
	}
	cut, atLimit, err := AutoWarmup(ctx, c)
	c.SetWarmup(cut)
	return c, atLimit, err
}

// WarmupAuto reports whether c's warm-up is to be found from pilots: an
// open run (every class open) that asks for it. With classes the run's
// warm-up is its first class's (SetWarmup gives every class the same).
func (c Config) WarmupAuto() bool { return c.Open() && c.ClassList()[0].Workload.WarmupAuto }

// WarmupCut is c's warm-up as it stands (its first class's).
func (c Config) WarmupCut() sim.Time { return c.ClassList()[0].Workload.Warmup }

// SetWarmup fixes c's warm-up at cut, for the run and every class; c's
// classes are copied first, so a copy of c that shares them keeps its own.
func (c *Config) SetWarmup(cut sim.Time) {
	c.Workload.WarmupAuto, c.Workload.Warmup = false, cut
	if c.Classes != nil {
		c.Classes = append([]Class(nil), c.Classes...)
		for i := range c.Classes {
			c.Classes[i].Workload.WarmupAuto, c.Classes[i].Workload.Warmup = false, cut
		}
	}
}
