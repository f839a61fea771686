//go:build !linux

package validate

import "time"

// threadCPU is the calling thread's CPU time: 0 off Linux, where the
// instruments' CPU is not told apart from the rest of the process's.
func threadCPU() time.Duration { return 0 }
