package validate

import (
	"fmt"
	"math"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// balanceSteps are the idle balancing rates fitBalance tries, from none
// (a core out of work never takes a queued thread) to every chance (0).
var balanceSteps = []sim.Time{-1, 100 * sim.Millisecond, 30 * sim.Millisecond, 10 * sim.Millisecond, 3 * sim.Millisecond,
	sim.Millisecond, 300 * sim.Microsecond, 100 * sim.Microsecond, 0}

// fitBalance sets how often a pooled row's model lets a core out of work
// take a thread queued on the other (Testbed.Balance): the rate whose
// model of the through loop - its clients, its CPU per statement - keeps
// the cores as busy as the machine's CPUs were during that loop
// (/proc/stat, ThroughBusy), the closest of balanceSteps. It is a kernel
// counter read before the run, as the loop's CPU per statement is; the
// run's own busy CPUs then test the model. Measured through PgBouncer and
// the proxy with pgbench -S: where the model balanced only as often as
// the kernel moved the pooler and the servers (idleBalance), its cores
// idled 8-10 points more than the machine's at 200 clients and its
// throughput fell 7-12 % short, and the misses went with that difference
// (correlation 0.85 over 20 rows, results/pgbench-select-live/cores).
// Without the loop's busy CPUs the kernel's moves decide.
func fitBalance(cfg system.Config, cal Calibration) {
	tb := cal.Testbed
	if tb == nil || tb.ThroughBusy <= 0 || tb.ThroughClients <= 0 || !cfg.Pooler.PoolMode.Pooled() {
		return
	}
	c := cfg
	c.Workload.Clients = tb.ThroughClients
	c.Workload.TxnsPerSession = max(50, c.Workload.TxnsPerSession/4)
	best, bestD := sim.Time(0), math.Inf(1)
	for _, b := range balanceSteps {
		t := *tb
		t.Balance, t.balanceSet = b, true
		m := system.Run(testbedConfig(c, cal, &t)).Metrics
		if d := math.Abs(m.CPUUtil - tb.ThroughBusy); d < bestD {
			best, bestD = b, d
		}
	}
	tb.Balance, tb.balanceSet = best, true
}

// balanceText names an idle balancing rate for the report.
func balanceText(b sim.Time) string {
	switch {
	case b < 0:
		return "none"
	case b == 0:
		return "every chance"
	}
	return "once per " + b.Duration().String()
}

// balanceLog is the fitted idle balancing for the validator's log, or
// nothing.
func (tb *Testbed) balanceLog() string {
	if !tb.balanceSet {
		return ""
	}
	return fmt.Sprintf("; idle balancing %s (the through loop's CPUs %.0f %% busy)", balanceText(tb.Balance), 100*tb.ThroughBusy)
}
