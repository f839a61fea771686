//go:build unix

package pooler

import "syscall"

// fdBudget computes the descriptors left for connections from
// RLIMIT_NOFILE and the descriptors open now; 0 means no limit could be
// read.
func fdBudget() (limit int, inUse int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<24 {
		return 0, 0
	}
	inUse = openFDs()
	// A few more for what the process opens besides sockets: cancels in
	// flight, the loop's socket pairs for TLS, log files.
	limit = int(rl.Cur) - inUse - fdConsoleReserve - 8
	if limit < 1 {
		limit = 1
	}
	return limit, inUse
}
