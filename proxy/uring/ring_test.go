//go:build linux

package uring

import (
	"bytes"
	"errors"
	"net"
	"syscall"
	"testing"
)

// tcpPairs opens n loopback TCP connections and returns the descriptors
// of both ends, non-blocking, closed when the test ends.
func tcpPairs(t testing.TB, n int) (a, b []int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fdOf := func(c net.Conn) int {
		f, err := c.(*net.TCPConn).File() // a blocking duplicate
		if err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		c.Close()
		if err := syscall.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		return fd
	}
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, fdOf(c))
		b = append(b, fdOf(s))
	}
	return a, b
}

func newRing(t testing.TB, entries uint32) *Ring {
	t.Helper()
	r, err := New(entries)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestSendRecv moves a message over each of several connections with one
// Submit for the sends and one for the receives, and checks every result:
// bytes, end of input and EAGAIN.
func TestSendRecv(t *testing.T) {
	r := newRing(t, 8)
	a, b := tcpPairs(t, 3)
	msgs := [][]byte{[]byte("hello"), []byte("a longer message"), []byte("x")}
	for i, fd := range a {
		if !r.Send(fd, msgs[i], uint64(100+i)) {
			t.Fatalf("Send %d refused", i)
		}
	}
	sent := map[uint64]int32{}
	if err := r.Submit(func(tag uint64, res int32) { sent[tag] = res }); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if got := sent[uint64(100+i)]; got != int32(len(msgs[i])) {
			t.Errorf("send %d: result %d, want %d", i, got, len(msgs[i]))
		}
	}
	// The data may take a moment to be readable on loopback only in
	// theory (it is queued synchronously); receive until every byte came.
	bufs := make([][]byte, len(b))
	got := make([][]byte, len(b))
	for i := range bufs {
		bufs[i] = make([]byte, 64)
	}
	for round := 0; round < 1000; round++ {
		left := 0
		for i, fd := range b {
			if len(got[i]) < len(msgs[i]) {
				r.Recv(fd, bufs[i], uint64(i))
				left++
			}
		}
		if left == 0 {
			break
		}
		if err := r.Submit(func(tag uint64, res int32) {
			if res > 0 {
				got[tag] = append(got[tag], bufs[tag][:res]...)
			} else if res != -int32(syscall.EAGAIN) {
				t.Errorf("recv %d: result %d", tag, res)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range msgs {
		if !bytes.Equal(got[i], msgs[i]) {
			t.Errorf("connection %d: got %q, want %q", i, got[i], msgs[i])
		}
	}
	// Nothing more to read: -EAGAIN, at once (MSG_DONTWAIT), not later.
	var res int32 = 1
	r.Recv(b[0], bufs[0], 7)
	if err := r.Submit(func(_ uint64, v int32) { res = v }); err != nil {
		t.Fatal(err)
	}
	if res != -int32(syscall.EAGAIN) {
		t.Errorf("empty socket: result %d, want -EAGAIN (%d)", res, -int32(syscall.EAGAIN))
	}
	// The peer closed: 0.
	syscall.Shutdown(a[1], syscall.SHUT_WR)
	res = 1
	for round := 0; round < 1000 && res != 0; round++ {
		r.Recv(b[1], bufs[1], 8)
		if err := r.Submit(func(_ uint64, v int32) { res = v }); err != nil {
			t.Fatal(err)
		}
	}
	if res != 0 {
		t.Errorf("after the peer's shutdown: result %d, want 0 (end of input)", res)
	}
}

// TestFull checks that a ring refuses operations past its size and
// accepts them again after Submit.
func TestFull(t *testing.T) {
	r := newRing(t, 2)
	a, _ := tcpPairs(t, 1)
	b := []byte("x")
	if !r.Send(a[0], b, 1) || !r.Send(a[0], b, 2) {
		t.Fatal("a ring of 2 refused 2 operations")
	}
	if r.Send(a[0], b, 3) {
		t.Fatal("a ring of 2 took a third operation")
	}
	n := 0
	if err := r.Submit(func(uint64, int32) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d results, want 2", n)
	}
	if r.Space() != 2 {
		t.Fatalf("Space after Submit = %d, want 2", r.Space())
	}
}

// TestProbe checks the opcode probe's reading of a kernel's answer: an
// opcode past the kernel's last, or not flagged supported, is refused.
func TestProbe(t *testing.T) {
	var pr probe
	pr.lastOp, pr.opsLen = opRecv, opRecv+1
	pr.ops[opSend].flags = opSupported
	pr.ops[opRecv].flags = opSupported
	if err := supports(&pr, opSend, opRecv); err != nil {
		t.Errorf("both supported: %v", err)
	}
	pr.ops[opRecv].flags = 0
	if err := supports(&pr, opSend, opRecv); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RECV not flagged: %v, want ErrUnsupported", err)
	}
	pr.ops[opRecv].flags = opSupported
	pr.lastOp, pr.opsLen = opSend, opSend+1 // a kernel that stops at SEND
	if err := supports(&pr, opSend, opRecv); !errors.Is(err, ErrUnsupported) {
		t.Errorf("RECV past the last opcode: %v, want ErrUnsupported", err)
	}
	// This kernel, if it has io_uring at all, answers for both.
	r := newRing(t, 2)
	if err := r.probe(); err != nil {
		t.Errorf("probe on a ring New accepted: %v", err)
	}
}

func TestNewRejectsBadSize(t *testing.T) {
	for _, n := range []uint32{0, 3, 8192} {
		if _, err := New(n); err == nil || errors.Is(err, ErrUnsupported) {
			t.Errorf("New(%d): %v, want a size error", n, err)
		}
	}
}

// The benchmarks compare one Submit of 16 sends (and 16 receives) with 16
// sendto (and read) system calls: the syscall cost the ring saves.
const benchConns = 16

func BenchmarkSendRecvRing(b *testing.B) {
	r := newRing(b, 32)
	a, c := tcpPairs(b, benchConns)
	msg := make([]byte, 64)
	buf := make([]byte, 1024)
	for b.Loop() {
		for _, fd := range a {
			r.Send(fd, msg, 0)
		}
		if err := r.Submit(func(uint64, int32) {}); err != nil {
			b.Fatal(err)
		}
		for _, fd := range c {
			r.Recv(fd, buf, 0)
		}
		if err := r.Submit(func(uint64, int32) {}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSendRecvSyscalls(b *testing.B) {
	a, c := tcpPairs(b, benchConns)
	msg := make([]byte, 64)
	buf := make([]byte, 1024)
	for b.Loop() {
		for _, fd := range a {
			syscall.Sendto(fd, msg, syscall.MSG_NOSIGNAL, nil)
		}
		for _, fd := range c {
			syscall.Read(fd, buf)
		}
	}
}
