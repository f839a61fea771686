//go:build unix && !linux

package childproc

import "syscall"

func sysProcAttr(a Account, _ int) (*syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if a.Switch {
		attr.Credential = &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: []uint32{}}
	}
	return attr, nil
}
