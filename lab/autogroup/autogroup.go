package autogroup

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// ErrUnavailable is returned, wrapped with the reason, when autogroup
// cannot be turned off: no such sysctl (not Linux, or a kernel without
// autogroup), or no permission.
var ErrUnavailable = errors.New("the kernel's autogroup cannot be turned off here")

// sysctl is the setting's file; a variable for the tests.
var sysctl = "/proc/sys/kernel/sched_autogroup_enabled"

// Enabled reports whether the kernel's autogroup is on. ok is false where
// the setting cannot be read (not Linux, or no autogroup in the kernel).
func Enabled() (on, ok bool) {
	b, err := os.ReadFile(sysctl)
	if err != nil {
		return false, false
	}
	return strings.TrimSpace(string(b)) != "0", true
}

var (
	mu    sync.Mutex
	held  int
	found string // the value the first Off found, written back by the last Restore
)

// Off turns autogroup off, if it is on, and reports whether it was on;
// each successful Off must be matched by one Restore.
func Off() (wasOn bool, err error) {
	mu.Lock()
	defer mu.Unlock()
	if held > 0 {
		held++
		return found != "0", nil
	}
	b, err := os.ReadFile(sysctl)
	if err != nil {
		return false, fmt.Errorf("autogroup: off: %w: %v", ErrUnavailable, err)
	}
	v := strings.TrimSpace(string(b))
	if v != "0" {
		if err := os.WriteFile(sysctl, []byte("0"), 0); err != nil {
			return false, fmt.Errorf("autogroup: off: %w: %v", ErrUnavailable, err)
		}
	}
	found, held = v, 1
	return v != "0", nil
}

// Restore drops one Off; the last writes back the value the first found.
func Restore() error {
	mu.Lock()
	defer mu.Unlock()
	if held == 0 {
		return errors.New("autogroup: restore: not turned off here")
	}
	held--
	if held > 0 || found == "0" {
		return nil
	}
	if err := os.WriteFile(sysctl, []byte(found), 0); err != nil {
		return fmt.Errorf("autogroup: restore: write %s back to %s: %w", found, sysctl, err)
	}
	return nil
}
