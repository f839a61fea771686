package system

import (
	"math"

	"github.com/poolsim/poolsim/sim"
)

// ps is processor sharing over the server's cores, the model's built-in
// CPU: each of n jobs in their CPU phase runs at min(1, cores/n) of a
// core, slowed by the USL factor of the n. Every job is a backend's (the
// model has no others). The model calls it directly, not through the CPU
// interface it satisfies (a port's CPU is the interface's other side).
type ps struct {
	h       *Host
	srv     Server
	running []psJob      // jobs in their CPU phase, in arrival order
	least   float64      // the least work left among them
	done    []psJob      // Tick's buffer
	last    sim.Time     // when their work left was last brought up to date
	levels  [2]sim.Level // backend jobs in their CPU phase; cores in use, min(jobs, cores)
}

// psJob is a job and its work left, in nanoseconds.
type psJob struct {
	job  Job
	left float64
}

func (v *ps) init(h *Host, srv Server) {
	v.h, v.srv = h, srv
	v.levels = [2]sim.Level{sim.NewLevel(0), sim.NewLevel(0)}
}

// USLFactor is the Universal Scalability Law's slowdown of each of n
// running backends: 1 + σ(n−1) + κn(n−1), with σ Contention and κ
// Coherency.
func (s Server) USLFactor(n float64) float64 {
	return 1 + s.Contention*(n-1) + s.Coherency*n*(n-1)
}

// rate is the CPU work each of n running jobs receives per unit of time:
// its share of the cores, slowed by the USL factor.
func (v *ps) rate(n int) float64 {
	share := 1.0
	if n > v.srv.Cores {
		share = float64(v.srv.Cores) / float64(n)
	}
	return share / v.srv.USLFactor(float64(n))
}

// advance brings the running jobs' work left up to now. Rounding is
// monotonic, so the least work left is the least less the same work.
func (v *ps) advance(now sim.Time) {
	if n := len(v.running); n > 0 && now > v.last {
		done := float64(now-v.last) * v.rate(n)
		for i := range v.running {
			v.running[i].left -= done
		}
		v.least -= done
	}
	v.last = now
}

// count sets the levels.
func (v *ps) count(now sim.Time) {
	n := int64(len(v.running))
	v.levels[0].Set(now, n)
	v.levels[1].Set(now, min(n, int64(v.srv.Cores)))
}

// plan plans the Tick of the job that will finish first at the current
// rate, in whole nanoseconds rounded up.
func (v *ps) plan() {
	n := len(v.running)
	if n == 0 {
		v.h.Unplan()
		return
	}
	v.h.Plan(sim.Time(math.Ceil(max(v.least, 0) / v.rate(n))))
}

// Run adds a job to the running ones: their work brought up to now, the
// job added, the levels counted and the next completion planned.
func (v *ps) Run(j Job) sim.Time {
	now := v.h.Now()
	v.advance(now)
	left := float64(j.Work)
	if len(v.running) == 0 {
		v.least = left
	} else {
		v.least = min(v.least, left)
	}
	v.running = append(v.running, psJob{j, left})
	v.count(now)
	v.plan()
	return j.Work
}

// Tick finishes the jobs whose work is done (within half a nanosecond)
// and plans the next, then hands them back.
func (v *ps) Tick() {
	now := v.h.Now()
	v.advance(now)
	finished := v.done[:0]
	kept := v.running[:0]
	least := math.Inf(1)
	for _, j := range v.running {
		if j.left <= 0.5 {
			finished = append(finished, j)
			continue
		}
		if j.left < least { // both above 0.5: no NaN or signed zero for min to mind
			least = j.left
		}
		kept = append(kept, j)
	}
	v.running, v.done, v.least = kept, finished, least
	v.count(now)
	v.plan()
	for _, j := range finished {
		v.h.Finished(j.job)
	}
}

// PoolerWakeup: the built-in runs no pooler thread.
func (v *ps) PoolerWakeup(wakeup sim.Time) sim.Time { return wakeup }

// Levels are the backend jobs in their CPU phase and the cores in use.
func (v *ps) Levels() []*sim.Level { return []*sim.Level{&v.levels[0], &v.levels[1]} }

// Measure is the cores' mean utilisation and the mean backend jobs.
func (v *ps) Measure(level func(int) float64) (util, backendJobs float64) {
	return level(1) / float64(v.srv.Cores), level(0)
}

var _ CPU = (*ps)(nil)
