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
// Each rate is tried with the wake-up's look for an idle core and
// without it (Testbed.NoScan): Linux stops looking when the cores are
// busy (SIS_UTIL), and at a small pool through PgBouncer (50 clients,
// pool 2) the model that looked kept its cores 93 % busy where the
// machine's were 82 % and ran 8 % ahead of its loop; without the look
// its cores idle beside a queue on the waker's core as the machine's do.
// Without the loop's busy CPUs the kernel's moves decide.
func fitBalance(cfg system.Config, cal Calibration) {
	tb := cal.Testbed
	if tb == nil || tb.ThroughBusy <= 0 || tb.ThroughClients <= 0 || !cfg.Pooler.PoolMode.Pooled() {
		return
	}
	c := cfg
	c.Workload.Clients = tb.ThroughClients
	c.Workload.TxnsPerSession = max(50, c.Workload.TxnsPerSession/4)
	best, noScan := fitIdle(tb.ThroughBusy, func(b sim.Time, ns bool) float64 {
		t := *tb
		t.Balance, t.NoScan, t.balanceSet = b, ns, true
		return system.Run(testbedConfig(c, cal, &t)).Metrics.CPUUtil
	})
	tb.Balance, tb.NoScan, tb.balanceSet = best, noScan, true
}

// fitIdle is the idle balancing rate of balanceSteps, with the idle-core
// scan or without, whose model (util: its cores' utilisation) comes
// closest to busy.
func fitIdle(busy float64, util func(b sim.Time, noScan bool) float64) (sim.Time, bool) {
	best, bestD, noScan := sim.Time(0), math.Inf(1), false
	for _, ns := range []bool{false, true} {
		for _, b := range balanceSteps {
			if d := math.Abs(util(b, ns) - busy); d < bestD {
				best, bestD, noScan = b, d, ns
			}
		}
	}
	return best, noScan
}

// balanceText names an idle balancing rate for the report, and the
// wake-up's look for an idle core if it has none.
func balanceText(b sim.Time, noScan bool) string {
	var s string
	switch {
	case b < 0:
		s = "none"
	case b == 0:
		s = "every chance"
	default:
		s = "once per " + b.Duration().String()
	}
	if noScan {
		s += ", no idle-core scan"
	}
	return s
}

// balanceLog is the fitted idle balancing for the validator's log, or
// nothing.
func (tb *Testbed) balanceLog() string {
	if !tb.balanceSet {
		return ""
	}
	return fmt.Sprintf("; idle balancing %s (the through loop's CPUs %.0f %% busy)", balanceText(tb.Balance, tb.NoScan), 100*tb.ThroughBusy)
}
