package testbed

import (
	"fmt"
	"slices"

	"github.com/poolsim/poolsim/models/system"
)

// Random reports whether a run draws random numbers of the machine's
// own: the driver's CPU per statement from a distribution, or a speed
// sequence (its start is drawn).
func (t Machine) Random(system.Config) bool {
	speeds := false
	for _, x := range t.Speed {
		speeds = speeds || x != t.Speed[0]
	}
	return t.DriverCPU.Random() || speeds
}

// Describe is the machine in one sentence, for the model's assumptions
// (system.Machine).
func (t Machine) Describe(c system.Config) string {
	var parts string
	if t.DriverCPU.MeanValue() > 0 {
		parts = fmt.Sprintf("the load driver's CPU (%v per statement)", t.DriverCPU.MeanValue())
	}
	if t.PoolerOnCores {
		if parts != "" {
			parts += " and "
		}
		parts += "the pooler's thread"
	}
	out := "the testbed: "
	if parts != "" {
		out += parts + fmt.Sprintf(" run on the server's %d cores, shared with the statements but not slowed by their contention", c.Server.Cores)
	} else {
		out += fmt.Sprintf("the statements run on the server's %d cores", c.Server.Cores)
	}
	if t.DriverThreads > 0 {
		out += fmt.Sprintf(", the driver's statements prepared by %d threads one at a time each", t.DriverThreads)
		if t.DriverScan {
			out += " in client order, a pass at a time"
		}
	}
	if t.Scheduler == PerCore {
		out += ", a run queue per core (a job waits on the core it was placed on; a core out of work takes only a thread idle 0.5 ms or more)"
	}
	if t.NoIdleScan {
		out += ", a woken thread placed on its waker's or its own last core without a look for an idle one"
	}
	switch t.Affinity {
	case Together:
		out += ", the pooler's thread and the backends pinned to core 0"
	case Apart:
		out += ", the pooler's thread pinned to core 0 and the backends to the others"
	}
	if t.Wakeup > 0 {
		out += fmt.Sprintf(", a backend woken onto an idle core from another waiting %v for it to wake", t.Wakeup.Duration())
	}
	if t.ServerTail > 0 {
		out += fmt.Sprintf(", a pooled statement's backend sending its response with %.3g %% of its CPU still to run, on the same core", 100*t.ServerTail)
	}
	if t.PoolerPreempt > 0 {
		out += fmt.Sprintf(", a driver's thread woken by a result taking the pooler's core from it %.3g times a pooled statement", t.PoolerPreempt)
	}
	if t.ServerPreempt > 0 {
		out += fmt.Sprintf(", a driver's thread woken by a result taking a backend's core from it %.3g times a pooled statement", t.ServerPreempt)
	}
	if c := t.WakeCurve; len(c) > 0 {
		out += fmt.Sprintf(", a backend or the pooler's thread woken onto an idle core from another waiting for it to wake, %v after %v idle to %v after %v", c[0].Wake.Duration(), c[0].Idle.Duration(), c[len(c)-1].Wake.Duration(), c[len(c)-1].Idle.Duration())
	}
	if t.Background > 0 {
		out += fmt.Sprintf(", %.3g cores busy with other work", t.Background)
	}
	if len(t.Speed) > 0 {
		lo, hi := slices.Min(t.Speed), slices.Max(t.Speed)
		p := t.SpeedPeriod
		if p == 0 {
			p = DefaultSpeedPeriod
		}
		out += fmt.Sprintf(", their speed drawn every %v from %d factors between %.2f and %.2f", p.Duration(), len(t.Speed), lo, hi)
	}
	return out + " (as in a live validation on one machine)"
}
