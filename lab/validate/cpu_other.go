//go:build !unix

package validate

import "time"

// processCPU is this process's CPU time: 0 where there is no getrusage.
func processCPU() time.Duration { return 0 }
