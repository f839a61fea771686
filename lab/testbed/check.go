package testbed

import (
	"fmt"
	"math"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Bounds of the machine's parameters.
const (
	// MaxSpeed bounds a speed factor: a window a hundred times faster
	// than the calibration is a measuring error, not a machine.
	MaxSpeed = 100
	// MinSpeedPeriod bounds how often the speed changes: the model takes
	// the time window by window.
	MinSpeedPeriod = 100 * sim.Microsecond
	// MaxServerTail bounds Machine.ServerTail: a backend's work after its
	// response is its statement's last steps, not most of it.
	MaxServerTail = 0.5
	// MaxPreempt bounds Machine.PoolerPreempt and ServerPreempt:
	// measured, well under one a statement; more than a few is a
	// measuring error.
	MaxPreempt = 4
)

// rule is one of the machine's checks: broken says whether t breaks it on
// server.cores cores, say what is wrong (in the words of the validate:
// section's keys), and stop whether the checks end there.
type rule struct {
	broken func(t *Machine, cores int) bool
	say    func(t *Machine, cores int) string
	stop   bool
}

// fixed is a rule's message that depends on nothing.
func fixed(msg string) func(*Machine, int) string { return func(*Machine, int) string { return msg } }

// perCoreOnly is the rule that what set says is set needs the per-core
// scheduler, which what explains.
func perCoreOnly(set func(t *Machine) bool, what string) rule {
	return rule{
		broken: func(t *Machine, _ int) bool { return set(t) && t.Scheduler != PerCore },
		say:    fixed(what + ": it needs validate.scheduler per_core"),
	}
}

// rules are the machine's checks, in the order they report.
var rules = []rule{
	{broken: func(t *Machine, _ int) bool { return t.DriverCPU.MeanValue() < 0 || t.DriverCPU.Min < 0 },
		say: fixed("validate.driver_cpu must not be negative")},
	{broken: func(t *Machine, _ int) bool { return !finite(t.Background) || t.Background < 0 },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.background must be a number of cores, 0 or more, got %v", t.Background)
		},
		stop: true},
	{broken: func(t *Machine, _ int) bool { return badSpeed(t) >= 0 }, say: speedMessage, stop: true},
	{broken: func(t *Machine, _ int) bool {
		return len(t.Speed) > 0 && t.SpeedPeriod != 0 && t.SpeedPeriod < MinSpeedPeriod
	}, say: func(t *Machine, _ int) string {
		return fmt.Sprintf("validate.speed_period: the cores' speed changes every period, a duration of at least %v; got %v", MinSpeedPeriod, t.SpeedPeriod)
	}},
	{broken: func(t *Machine, _ int) bool { return len(t.Speed) == 0 && t.SpeedPeriod != 0 },
		say: fixed("validate.speed_period is set without validate.speed: want the list of speed factors it changes between")},
	{broken: func(t *Machine, _ int) bool { return t.DriverThreads < 0 },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.driver_threads must be 0 (every client its own) or more, got %d", t.DriverThreads)
		}},
	{broken: func(t *Machine, _ int) bool { return t.DriverScan && t.DriverThreads <= 0 },
		say: fixed("validate.driver_scan is set without validate.driver_threads: it is the order in which each thread takes its clients")},
	{broken: func(t *Machine, _ int) bool { return t.DriverThreads > 0 && t.DriverCPU.MeanValue() <= 0 },
		say: fixed("validate.driver_threads is set without validate.driver_cpu: the threads run the driver's CPU per statement")},
	{broken: func(t *Machine, _ int) bool {
		return t.Affinity != Free && (t.Scheduler != PerCore || !t.PoolerOnCores)
	},
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.affinity %s pins the pooler's thread and the backends to cores: it needs validate.scheduler per_core and validate.pooler_on_cores true", t.Affinity)
		}},
	{broken: func(t *Machine, _ int) bool { return t.Wakeup < 0 },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.wakeup must not be negative, got %v", t.Wakeup)
		}},
	perCoreOnly(func(t *Machine) bool { return t.Wakeup > 0 }, "validate.wakeup is an idle core's wake-up for a backend placed on it"),
	{broken: func(t *Machine, _ int) bool { return badWakePoint(t) >= 0 }, say: wakeCurveMessage, stop: true},
	perCoreOnly(func(t *Machine) bool { return len(t.WakeCurve) > 0 }, "validate.wake_curve is an idle core's wake-up by how long it idled"),
	{broken: func(t *Machine, _ int) bool { return len(t.WakeCurve) > 0 && t.Wakeup > 0 },
		say: fixed("validate.wake_curve and validate.wakeup both set the idle core's wake-up: set one")},
	perCoreOnly(func(t *Machine) bool { return t.NoIdleBalance }, "validate.idle_balance false keeps queued threads on their cores"),
	perCoreOnly(func(t *Machine) bool { return t.NoIdleScan }, "validate.idle_scan false stops a woken thread's look for an idle core"),
	{broken: func(t *Machine, _ int) bool { return outside(t.ServerTail, MaxServerTail) },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.server_tail is the share of a pooled statement's CPU its backend runs after the response: want 0 to %v, got %v", MaxServerTail, t.ServerTail)
		}},
	perCoreOnly(func(t *Machine) bool { return t.ServerTail > 0 }, "validate.server_tail keeps a backend's core for the tail of its statement"),
	{broken: func(t *Machine, _ int) bool { return outside(t.PoolerPreempt, MaxPreempt) },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.pooler_preempt is how often per pooled statement a woken driver thread takes the pooler's core: want 0 to %v, got %v", MaxPreempt, t.PoolerPreempt)
		}},
	{broken: func(t *Machine, _ int) bool {
		return t.PoolerPreempt > 0 && (t.Scheduler != PerCore || !t.PoolerOnCores)
	},
		say: fixed("validate.pooler_preempt takes the pooler's core from its thread: it needs validate.scheduler per_core and validate.pooler_on_cores")},
	{broken: func(t *Machine, _ int) bool { return outside(t.ServerPreempt, MaxPreempt) },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.server_preempt is how often per pooled statement a woken driver thread takes a backend's core: want 0 to %v, got %v", MaxPreempt, t.ServerPreempt)
		}},
	perCoreOnly(func(t *Machine) bool { return t.ServerPreempt > 0 }, "validate.server_preempt takes a backend's core"),
	{broken: func(t *Machine, _ int) bool { return t.ServersOpen < 0 },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.servers_open must be 0 (every pool starts empty) or more, got %d", t.ServersOpen)
		}},
	{broken: func(t *Machine, _ int) bool { return t.IdleBalanceEvery < 0 },
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.idle_balance must be true, false or a positive duration, got %v", t.IdleBalanceEvery)
		}},
	{broken: func(t *Machine, _ int) bool {
		return t.IdleBalanceEvery > 0 && (t.Scheduler != PerCore || t.NoIdleBalance)
	},
		say: func(t *Machine, _ int) string {
			return fmt.Sprintf("validate.idle_balance %v limits how often a core out of work takes a queued thread: it needs validate.scheduler per_core", t.IdleBalanceEvery)
		}},
	{broken: func(t *Machine, cores int) bool { return t.Affinity == Apart && cores < 2 },
		say: func(_ *Machine, cores int) string {
			return fmt.Sprintf("validate.affinity apart puts the backends on other cores than the pooler's: it needs server.cores 2 or more, got %d", cores)
		}},
	// The rest hold for a machine that shares the cores.
	{broken: func(t *Machine, _ int) bool { return !t.On() }, stop: true},
	{broken: func(t *Machine, cores int) bool { return cores <= 0 },
		say:  fixed("validate: the load driver's CPU, the pooler on the cores and a background share server.cores: set server.cores above 0"),
		stop: true},
	{broken: func(t *Machine, cores int) bool { return t.Background >= float64(cores) },
		say: func(t *Machine, cores int) string {
			return fmt.Sprintf("validate.background: %v is not below server.cores %d", t.Background, cores)
		}},
}

// Check reports through bad what is wrong with the machine for c's
// server (system.Machine).
func (t Machine) Check(c system.Config, bad func(string, ...any)) {
	for _, r := range rules {
		if !r.broken(&t, c.Server.Cores) {
			continue
		}
		if r.say != nil {
			bad("%s", r.say(&t, c.Server.Cores))
		}
		if r.stop {
			return
		}
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// outside reports whether x is not a number from 0 to hi.
func outside(x, hi float64) bool { return math.IsNaN(x) || x < 0 || x > hi }

// badSpeed is the index of t's first speed factor that is not one, -1
// if none.
func badSpeed(t *Machine) int {
	for i, f := range t.Speed {
		if !finite(f) || f <= 0 || f > MaxSpeed {
			return i
		}
	}
	return -1
}

func speedMessage(t *Machine, _ int) string {
	i := badSpeed(t)
	return fmt.Sprintf("validate.speed[%d]: a factor of the cores' speed must be above 0 and at most %v, got %v", i, MaxSpeed, t.Speed[i])
}

// badWakePoint is the index of t's first wake-curve point that is
// negative or does not rise, -1 if none.
func badWakePoint(t *Machine) int {
	for i, p := range t.WakeCurve {
		if p.Idle < 0 || p.Wake < 0 || i > 0 && p.Idle <= t.WakeCurve[i-1].Idle {
			return i
		}
	}
	return -1
}

func wakeCurveMessage(t *Machine, _ int) string {
	i := badWakePoint(t)
	p := t.WakeCurve[i]
	if p.Idle < 0 || p.Wake < 0 {
		return fmt.Sprintf("validate.wake_curve[%d]: idle and wake-up must not be negative, got %v and %v", i, p.Idle, p.Wake)
	}
	return fmt.Sprintf("validate.wake_curve[%d]: the idle times must rise point by point, got %v after %v", i, p.Idle, t.WakeCurve[i-1].Idle)
}
