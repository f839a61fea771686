package validate

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The validator watches a run while it goes: pgbench's threads' run delay
// every few milliseconds (watchDelay), where PgBouncer and the pool's
// servers last ran (watchPlacement). Those reads are CPU on the machine's
// cores like any other work (a tenth of a core or so: docs/validate.md),
// and they are this process's: uncounted, they would be the pooler's CPU
// per statement through the in-process proxy and nothing at all through
// PgBouncer, and the calibrated model would run faster than the machine
// could. Each instrument's goroutine keeps an OS thread of its
// own and charges that thread's CPU time here as it goes; a window's
// share is taken out of this process's CPU and counted as other work.

// instrumentNs is the CPU time this process's instruments have spent, in
// nanoseconds, over the process's life.
var instrumentNs atomic.Int64

// instrumentCPU is the instruments' CPU time so far.
func instrumentCPU() time.Duration { return time.Duration(instrumentNs.Load()) }

// instrument is one measuring goroutine's hold on its OS thread.
type instrument struct{ last time.Duration }

// startInstrument locks the calling goroutine to its OS thread, whose CPU
// time from now on is the instrument's. Call stop on the same goroutine.
func startInstrument() *instrument {
	runtime.LockOSThread()
	return &instrument{last: threadCPU()}
}

// charge adds the thread's CPU time since the last charge.
func (in *instrument) charge() {
	now := threadCPU()
	if now > in.last {
		instrumentNs.Add(int64(now - in.last))
	}
	in.last = now
}

// stop charges the last of it and unlocks the thread.
func (in *instrument) stop() {
	in.charge()
	runtime.UnlockOSThread()
}
