//go:build unix

package childproc

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func signal(pid, sig int) error {
	err := syscall.Kill(pid, syscall.Signal(sig))
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Exited reports whether the process pid has ended (gone, or a zombie
// waiting to be reaped by its parent). A pid owned by another user counts as
// ended: the children we start never run as another user than the one we
// can signal, so such a pid has been reused.
func Exited(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.EPERM) {
		return true
	}
	st, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return false
	}
	// Field 3, after the parenthesised command name, is the state.
	s := string(st)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}
