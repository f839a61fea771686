//go:build !linux

package pooler

import (
	"errors"
	"net"
	"time"
)

// The proxy's data plane is an epoll event loop (loop_linux.go); on other
// systems Serve fails with errNoLoop and nothing below runs.
var errNoLoop = errors.New("the proxy's event loop needs Linux (epoll)")

type loop struct {
	px     *Proxy
	now    time.Time
	resume []*client
	socks  []*sock
	free   [][]byte
}

func newLoop(*Proxy) (*loop, error)            { return nil, errNoLoop }
func (l *loop) run()                           {}
func (l *loop) post(func()) bool               { return false }
func (l *loop) call(func()) bool               { return false }
func (l *loop) stop()                          {}
func (l *loop) add(*sock, int) error           { return errNoLoop }
func (l *loop) close(*sock)                    {}
func (l *loop) send(*sock, []byte)             {}
func (l *loop) markDirty(*sock)                {}
func (l *loop) flush(*sock)                    {}
func (l *loop) fill(*sock, int) bool           { return false }
func (l *loop) buffer(*sock, int)              {}
func (l *loop) idle(*sock)                     {}
func (l *loop) full(*sock) bool                { return false }
func (l *loop) pass(*sock, *int, *sock) int    { return 0 }
func (px *Proxy) detach(net.Conn) (int, error) { return -1, errNoLoop }
func sysClose(int) error                       { return nil }
