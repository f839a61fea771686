//go:build linux

package main

import (
	"os"
	"syscall"
)

// peakRSS is a finished process's peak resident memory in kB (Linux's
// ru_maxrss).
func peakRSS(ps *os.ProcessState) (kb int64, ok bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	return ru.Maxrss, true
}
