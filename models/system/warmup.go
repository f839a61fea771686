package system

import (
	"context"

	"github.com/poolsim/poolsim/sim"
)

// The automatic warm-up. A run that starts empty reports waits that are
// too short until its queues have filled; how long that takes depends on
// the load, and the truncation must be found, not guessed. MSER-5 (the
// Marginal Standard Error Rule on batches of five) finds it, but applied to
// the very run it truncates it chases that run's own noise: it cuts where
// a congested stretch happened to end, and the figures of what is left
// come out low (an M/M/10 at ρ = 0.8 for 60 s: Wq 5 % low on average,
// against 1 % low without any cut). So the warm-up is decided once per
// configuration on pilot runs of their own: Pilots runs with seeds
// independent of every replication's, their mean transaction latency in
// each of PilotGrid intervals of the arrival period averaged over the
// pilots, MSER-5 applied to that curve, and the cut rounded up to the grid.
// Every replication of the configuration then cuts the same warm-up, which
// its own data did not choose.

// Pilots is the number of pilot runs behind an automatic warm-up, and
// PilotGrid the intervals of the arrival period they are averaged over.
const (
	Pilots    = 5
	PilotGrid = 200
)

// PilotSeed is the seed of pilot i of a configuration whose seed is seed:
// independent of every ReplicationSeed.
func PilotSeed(seed uint64, i int) uint64 { return ReplicationSeed(seed^0x70696c6f74, i+1) }

// Pilot is one pilot run's transaction latencies by completion interval:
// their sum (nanoseconds) and count in each of PilotGrid intervals.
type Pilot struct {
	Sum   []float64
	Count []float64
}

// RunPilot runs pilot i of c (an open workload) without a warm-up; it
// stops early with ctx's error when ctx is done.
func RunPilot(ctx context.Context, c Config, i int) (Pilot, error) {
	c.Seed = PilotSeed(c.Seed, i)
	c.Workload.WarmupAuto, c.Workload.Warmup = false, 0
	m, _ := simulateWith(c, options{pilot: true, done: ctx.Done()})
	if m.canceled {
		return Pilot{}, ctx.Err()
	}
	p := Pilot{Sum: make([]float64, PilotGrid), Count: make([]float64, PilotGrid)}
	lat := m.results.lat.Series()
	sn := m.window.snaps
	for k := 1; k < len(sn) && k <= PilotGrid; k++ {
		for _, t := range lat[sn[k-1].sets[0].counts[0]:sn[k].sets[0].counts[0]] {
			p.Sum[k-1] += float64(t)
			p.Count[k-1]++
		}
	}
	return p, nil
}

// WarmupFrom decides c's warm-up from its pilots: MSER-5 on their mean
// latency per interval (intervals without a completion left out), rounded
// up to the grid. atLimit reports that MSER-5 cut as much as it may (half
// the run): the arrival period is too short for a steady state.
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
	if d == 0 || len(at) == 0 {
		return 0, atLimit
	}
	// Cut the intervals before the first one kept.
	k := at[min(d, len(at)-1)]
	return sim.Time(int64(c.Workload.Duration) * int64(k) / PilotGrid), atLimit
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
	if !c.Workload.Open() || !c.Workload.WarmupAuto {
		return c, false, nil
	}
	cut, atLimit, err := AutoWarmup(ctx, c)
	c.Workload.WarmupAuto, c.Workload.Warmup = false, cut
	return c, atLimit, err
}
