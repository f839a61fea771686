//go:build !linux

package pooler

import "time"

// cpuTime is 0 off Linux (no /proc/PID/stat): TestBenchVsPgBouncer then
// reports no pooler CPU.
func cpuTime(pid int) time.Duration { return 0 }
