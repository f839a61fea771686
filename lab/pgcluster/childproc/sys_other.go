//go:build !unix

package childproc

import "syscall"

func sysProcAttr(Account, int) (*syscall.SysProcAttr, error) { return nil, ErrUnsupported }

func signal(int, int) error { return ErrUnsupported }

func killGroup(int) error { return ErrUnsupported }

// Exited reports whether the process pid has ended; unknown here.
func Exited(int) bool { return true }
