package validate

import (
	"fmt"

	"github.com/poolsim/poolsim/lab/autogroup"
)

// threadByThread has the kernel share the cores among the testbed's
// threads one by one, as the calibrated model does, for a CPU-bound run:
// it turns the kernel's autogroup off (root only; Options.KeepAutogroup
// leaves it), which would share a busy core between sessions first -
// every PostgreSQL backend is a session of its own (it calls setsid),
// while this process, its proxy and the pgbench and PgBouncer it starts
// are one, whose threads together would get one backend's share. It
// returns the sentence the report gives the run's scheduling and the
// restore to defer.
func (l *lab) threadByThread() (string, func()) {
	const bySession = "by session, under the kernel's autogroup (kernel.sched_autogroup_enabled = 1): each PostgreSQL backend a session of its own, this process with its proxy and the pgbench and PgBouncer it starts another, which the calibrated model, thread by thread, does not know"
	on, ok := autogroup.Enabled()
	switch {
	case !ok:
		return "thread by thread (the kernel has no autogroup setting)", func() {}
	case !on:
		return "thread by thread (the kernel's autogroup was off)", func() {}
	case l.o.KeepAutogroup:
		return bySession + " (--autogroup keep)", func() {}
	}
	if _, err := autogroup.Off(); err != nil {
		l.logf("validate: %v: the cores are shared by session, which the calibrated model does not know", err)
		return fmt.Sprintf("%s (it could not be turned off: %v)", bySession, err), func() {}
	}
	l.logf("validate: turned the kernel's autogroup off for the run (kernel.sched_autogroup_enabled = 0; it goes back to 1 at the end, or by hand: sysctl kernel.sched_autogroup_enabled=1)")
	return "thread by thread: the kernel's autogroup turned off for the run and back on after (kernel.sched_autogroup_enabled 1 → 0 → 1)", func() {
		if err := autogroup.Restore(); err != nil {
			l.logf("validate: %v", err)
		}
	}
}
