//go:build linux

package pooler

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBridge checks the socket pair that stands in for a connection the
// loop cannot take over (TLS): bytes pass both ways, and closing the loop's
// end closes the connection and ends both copying goroutines.
func TestBridge(t *testing.T) {
	px := &Proxy{}
	inner, outer := net.Pipe() // not a plain socket: it is bridged
	if isPlain(inner) {
		t.Fatal("net.Pipe counted as a plain socket")
	}
	fd, err := px.detach(inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "loop end")
	_ = outer.SetDeadline(time.Now().Add(5 * time.Second))

	if _, err := f.Write([]byte("to server")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(outer, buf); err != nil || string(buf) != "to server" {
		t.Fatalf("outer read %q, %v", buf, err)
	}
	go func() { _, _ = outer.Write([]byte("to loop")) }()
	buf = make([]byte, 7)
	if _, err := io.ReadFull(f, buf); err != nil || string(buf) != "to loop" {
		t.Fatalf("loop end read %q, %v", buf, err)
	}

	_ = f.Close()
	if _, err := outer.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection is still open after the loop closed its end")
	}
	done := make(chan struct{})
	go func() { px.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the bridge's goroutines did not end")
	}
}

// TestIdleConnectionsHoldNoBuffers: after their queries, idle clients and
// servers have given their read buffers back to the loop.
func TestIdleConnectionsHoldNoBuffers(t *testing.T) {
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 3 })
	ctx := testCtx(t, 20*time.Second)
	for range 20 {
		conn := connect(ctx, t, tp.dsn)
		if _, err := conn.Exec(ctx, "select repeat('x', 100000)"); err != nil {
			t.Fatal(err)
		}
	}
	var clients, holding int
	tp.loop.call(func() {
		for _, c := range tp.clientList() {
			clients++
			if c.sk.buf != nil || cap(c.sk.out) > sockBufSize {
				holding++
			}
		}
		for _, pl := range tp.poolList() {
			for s := range pl.servers {
				if s.sk.buf != nil || cap(s.sk.out) > sockBufSize {
					holding++
				}
			}
		}
	})
	if clients != 20 || holding != 0 {
		t.Errorf("%d clients; %d idle connections still hold a buffer", clients, holding)
	}
}
