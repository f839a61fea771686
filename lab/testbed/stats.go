package testbed

import (
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Stats are what the machine's scheduler did over a whole run, beside
// what the model measures: the diagnostics poolsim validate sets beside
// the kernel's counters (Linux's schedstat run delay, involuntary context
// switches, pgbench's threads). They are the run's system.Result.Machine
// (StatsOf); zero where the machine runs no per-core queues or driver
// threads.
type Stats struct {
	// With per-core run queues: how long the backends, the pooler's
	// threads and the load driver's threads waited in a core's queue
	// before running, per statement run, in µs. A thread that goes on
	// with more work without leaving its core has not waited.
	RunQueueServerUs, RunQueuePoolerUs, RunQueueDriverUs float64
	// PoolerPreempts is how often a woken driver's thread took the
	// pooler's core from it, per pooled statement (Machine.PoolerPreempt;
	// the kernel's count is PgBouncer's involuntary context switches);
	// ServerPreempts the same for the backends' statements
	// (Machine.ServerPreempt).
	PoolerPreempts, ServerPreempts float64
	// DriverThreadSpread is how far apart the load driver's threads'
	// clients fared (Machine.DriverThreads over 1): the mean latency of
	// the slowest thread's transactions over the fastest's, 1 when even.
	// Linux keeps a thread on its core, and a thread whose core is
	// busier serves its clients slower; their mixture widens the
	// latencies' spread.
	DriverThreadSpread float64
}

// StatsOf is the machine's stats of a run of a configuration on a
// Machine; zero for any other.
func StatsOf(r system.Result) Stats {
	s, _ := r.Machine.(Stats)
	return s
}

// counts are the per-core scheduler's tallies behind Stats.
type counts struct {
	rqWait                              [4]sim.Time // per job kind: how long its jobs waited in a core's queue
	rqJobs                              [4]int64    // per job kind: jobs started on a core
	preempted, srvPreempted, pooledDone int64       // preemptions made; pooled statements done (with a preemption rate)
}

// report is the run's Stats (system.Parts.Report).
func (c *cores) report() any {
	var s Stats
	if n := c.stats.rqJobs[kStatement]; c.pc != nil && n > 0 {
		per := func(k kind) float64 { return float64(c.stats.rqWait[k]) / float64(n) / 1e3 }
		s.RunQueueServerUs, s.RunQueuePoolerUs, s.RunQueueDriverUs = per(kStatement), per(kPooler), per(kDriver)
		if d := c.stats.pooledDone; d > 0 {
			s.PoolerPreempts = float64(c.stats.preempted) / float64(d)
			s.ServerPreempts = float64(c.stats.srvPreempted) / float64(d)
		}
	}
	if c.drv != nil {
		s.DriverThreadSpread = c.drv.spread()
	}
	return s
}
