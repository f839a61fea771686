//go:build !linux

package validate

import "errors"

// errNoPinning is what pinning a thread says off Linux: the pinned
// arrangements and the wake-up ping-pong set threads' affinity with
// sched_setaffinity, which other systems do not have.
var errNoPinning = errors.New("CPU pinning needs Linux (sched_setaffinity)")

// pinTask cannot pin off Linux.
func pinTask(tid, core int) error { return errNoPinning }

// saveAffinity cannot read an affinity off Linux.
func saveAffinity(pids ...int) (restore func() error, err error) { return nil, errNoPinning }
