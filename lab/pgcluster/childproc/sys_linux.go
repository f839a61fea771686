//go:build linux

package childproc

import "syscall"

func sysProcAttr(a Account, death int) (*syscall.SysProcAttr, error) {
	if death == 0 {
		death = int(syscall.SIGKILL)
	}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.Signal(death)}
	if a.Switch {
		attr.Credential = &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: []uint32{}}
	}
	return attr, nil
}
