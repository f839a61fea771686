//go:build !linux

package pooler

import (
	"net"
	"syscall"
)

// listenControl: SO_REUSEPORT is set on Linux only here.
func listenControl(*Config) func(network, address string, c syscall.RawConn) error { return nil }

// peerCred: no peer credentials outside Linux here.
func peerCred(net.Conn) (uid, pid int, ok bool) { return 0, 0, false }
