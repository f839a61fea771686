//go:build linux

package validate

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// pinTask lets thread tid (0: the calling thread) run on core alone.
func pinTask(tid, core int) error {
	var set unix.CPUSet
	set.Set(core)
	return unix.SchedSetaffinity(tid, &set)
}

// saveAffinity reads the threads' affinity of the processes; restore
// sets it back (threads gone since are skipped).
func saveAffinity(pids ...int) (restore func() error, err error) {
	saved := map[int]unix.CPUSet{}
	for _, p := range pids {
		ts, err := tasks(p)
		if err != nil {
			return nil, fmt.Errorf("read the affinity of process %d: %w", p, err)
		}
		for _, t := range ts {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(t, &set); err != nil {
				return nil, fmt.Errorf("read the affinity of process %d: %w", p, err)
			}
			saved[t] = set
		}
	}
	return func() error {
		var errs []error
		for t, set := range saved {
			if err := unix.SchedSetaffinity(t, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("thread %d: %w", t, err))
			}
		}
		return errors.Join(errs...)
	}, nil
}
