//go:build linux

package pooler

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenControl sets what PgBouncer sets on its TCP listeners before
// bind: SO_REUSEPORT with so_reuseport = 1, so that several poolers listen
// on one port and the kernel spreads the connections among them.
func listenControl(cfg *Config) func(network, address string, c syscall.RawConn) error {
	if !cfg.SOReuseport {
		return nil
	}
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}
}

// peerCred is the uid and pid of the process at the other end of a Unix
// socket connection (SO_PEERCRED); ok false when it cannot be read.
func peerCred(conn net.Conn) (uid, pid int, ok bool) {
	uc, isUnix := conn.(*net.UnixConn)
	if !isUnix {
		return 0, 0, false
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return 0, 0, false
	}
	return int(cred.Uid), int(cred.Pid), true
}
