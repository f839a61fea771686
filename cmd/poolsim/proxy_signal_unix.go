//go:build unix

package main

import (
	"os"
	"syscall"
)

// sigPause and sigResume are PgBouncer's SIGUSR1 (pause every pool) and
// SIGUSR2 (resume them).
var sigPause, sigResume os.Signal = syscall.SIGUSR1, syscall.SIGUSR2
