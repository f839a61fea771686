//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// sigPause and sigResume are PgBouncer's SIGUSR1 (pause every pool) and
// SIGUSR2 (resume them).
var sigPause, sigResume os.Signal = syscall.SIGUSR1, syscall.SIGUSR2

// processAlive reports whether a process with this pid exists (a pidfile's
// owner): kill(pid, 0) finds it, or it exists under another user.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}
