//go:build linux

package pooler

import (
	"io"
	"net"
	"os"
	"syscall"
)

// bridge gives the loop a socket for a connection it cannot take over (a
// TLS connection to the server): one end of a socket pair goes to the loop,
// two goroutines copy between the other end and conn. Both end when either
// side closes.
func (px *Proxy) bridge(conn net.Conn) (int, error) {
	loopEnd, goEnd, err := socketPair()
	if err != nil {
		return -1, err
	}
	f := os.NewFile(uintptr(goEnd), "bridge")
	gc, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		_ = syscall.Close(loopEnd)
		return -1, err
	}
	closeBoth := func() {
		_ = gc.Close()
		_ = conn.Close()
	}
	px.wg.Add(2)
	go func() {
		defer px.wg.Done()
		_, _ = io.Copy(gc, conn)
		closeBoth()
	}()
	go func() {
		defer px.wg.Done()
		_, _ = io.Copy(conn, gc)
		closeBoth()
	}()
	return loopEnd, nil
}

func sysClose(fd int) error { return syscall.Close(fd) }
