//go:build linux

package pooler

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/poolsim/poolsim/proxy/uring"
)

// loop is the proxy's data plane: one goroutine that owns every logged-in
// client and every server connection and moves bytes between them with
// non-blocking reads and writes driven by one edge-triggered epoll set, as
// PgBouncer does with libevent. Each socket is registered once for input
// and output; a read shorter than the space offered means the socket is
// drained (unless the peer hung up), so a transaction costs two reads and
// two writes in the proxy and no epoll_ctl.
//
// Every client, server and pool field the data plane uses belongs to the
// loop. Other goroutines (logins, cancels, the admin console, shutdown) hand
// it work with post and call.
type loop struct {
	px  *Proxy
	ep  int // epoll set
	efd int // eventfd that wakes the loop for posted work

	socks []*sock // by fd
	gen   uint32  // registration counter: tells a reused fd from the old one

	mu      sync.Mutex
	posted  []func()
	stopped bool // no more work is taken: run has returned or is returning
	quit    bool // run returns after this batch

	// Work of the current iteration.
	now    time.Time
	dirty  []*sock   // sockets with bytes to write
	resume []*client // clients to read on (linked after a wait, or unblocked)
	free   [][]byte  // read buffers of sockBufSize not in use
	broken []*sock   // sockets whose write failed
	spare  []func()

	// freeLow is the fewest buffers free since freeTrim was set: trimFree
	// drops that many at freeTrim (buftrim_linux.go).
	freeLow  int
	freeTrim time.Time

	// busy is when the last epoll_wait returned events, yielded when the
	// loop last let Go's scheduler run (see paceRuntime).
	busy, yielded time.Time

	// ring batches the reads of one epoll_wait's sockets, and the writes
	// of one settle, into one system call each (nil: a read or sendto per
	// socket; Config.PlainIO, or no io_uring here). batch is the sockets
	// whose operation is in the ring, by tag.
	ring           *uring.Ring
	enters         int64 // io_uring_enter calls of rings closed since
	batch          []*sock
	onRecv, onSent func(tag uint64, res int32)
	events         []syscall.EpollEvent

	// calls counts the loop's system calls on its sockets, for tests and
	// benchmarks (sysCalls).
	calls sysCalls
	// locked: the loop holds its thread while its observer wants it to
	// (LoopOwnThread, LoopTimed).
	locked bool
}

// sysCalls counts system calls by kind.
type sysCalls struct{ epollWait, reads, writes, ringEnters int64 }

// sysCalls returns the loop's counts so far; it runs on the loop.
func (l *loop) sysCalls() sysCalls {
	c := l.calls
	c.ringEnters = l.enters
	if l.ring != nil {
		c.ringEnters += l.ring.Enters()
	}
	return c
}

func newLoop(px *Proxy) (*loop, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	efd, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		_ = syscall.Close(ep)
		return nil, fmt.Errorf("eventfd: %w", e)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(efd)}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(efd), &ev); err != nil {
		_ = syscall.Close(ep)
		_ = syscall.Close(int(efd))
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	l := &loop{px: px, ep: ep, efd: int(efd), now: time.Now(), events: make([]syscall.EpollEvent, 256)}
	l.onRecv, l.onSent = l.received, l.sent
	// Which path the loop takes is logged at start: a user can tell.
	if px.conf().PlainIO {
		px.logf("event loop: epoll; one read or sendto system call per socket (plain I/O asked for)")
		return l, nil
	}
	r, err := uring.New(ringSize)
	if err != nil {
		// Not built in, kernel.io_uring_disabled, or a container's
		// seccomp profile (Docker's default refuses io_uring_setup).
		px.logf("event loop: epoll; one read or sendto system call per socket (%v)", err)
		return l, nil
	}
	l.ring = r
	px.logf("event loop: epoll; a turn's reads batched into one io_uring_enter, its writes into another")
	return l, nil
}

// ringSize is the most operations one io_uring_enter carries; a larger
// batch takes several.
const ringSize = 256

// post hands fn to the loop; false if the loop has stopped (fn will not run
// and the caller cleans up what it meant to hand over).
func (l *loop) post(fn func()) bool {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	l.posted = append(l.posted, fn)
	first := len(l.posted) == 1
	l.mu.Unlock()
	if first {
		one := uint64(1)
		_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(l.efd), uintptr(unsafe.Pointer(&one)), 8)
	}
	return true
}

// call runs fn on the loop and waits for it; false if the loop has stopped.
func (l *loop) call(fn func()) bool {
	done := make(chan struct{})
	if !l.post(func() { fn(); close(done) }) {
		return false
	}
	<-done
	return true
}

// stop makes run return after the current batch; work posted later is
// refused.
func (l *loop) stop() {
	l.post(func() { l.quit = true })
}

// run is the loop's goroutine. It returns after stop, closing every socket
// it still owns.
func (l *loop) run() {
	events := l.events
	for !l.quit {
		l.calls.epollWait++
		n, err := syscall.EpollWait(l.ep, events, l.timeout())
		if err != nil {
			n = 0
			if err != syscall.EINTR {
				l.px.logf("epoll_wait: %v", err)
				time.Sleep(time.Millisecond)
			}
		}
		l.now = time.Now()
		mode := LoopShared
		if o := l.px.observer; o != nil {
			mode = o.LoopMode()
		}
		measuring := mode == LoopTimed
		if own := mode != LoopShared; own != l.locked {
			// While an observer wants it the loop keeps a thread of its
			// own, so that the thread's counters and clock count the loop
			// alone (no other goroutine runs there in between).
			tid := 0
			if own {
				runtime.LockOSThread()
				tid = syscall.Gettid()
			} else {
				runtime.UnlockOSThread()
			}
			l.locked = own
			l.px.observer.LoopThread(tid)
		}
		var cpu0 int64
		var tid0 int
		if measuring {
			tid0, cpu0 = syscall.Gettid(), threadCPU()
		}
		l.paceRuntime(n)
		// First what each event says about its socket, and the reads of
		// the sockets that will be read, batched; then the events in order.
		for i := 0; i < n; i++ {
			if sk := l.sockOf(&events[i]); sk != nil {
				l.note(sk, events[i].Events)
			}
		}
		if l.ring != nil {
			l.readAhead(events[:n])
		}
		for i := 0; i < n; i++ {
			ev := &events[i]
			if int(ev.Fd) == l.efd {
				l.runPosted()
				continue
			}
			if sk := l.sockOf(ev); sk != nil {
				l.event(sk, ev.Events)
			}
		}
		l.tick()
		l.settle()
		if measuring {
			// A goroutine that changed threads mid-iteration (rare: the
			// loop only yields in paceRuntime) would read another
			// thread's clock: such an iteration is not counted.
			if d := threadCPU() - cpu0; syscall.Gettid() == tid0 && d >= 0 && d <= int64(time.Since(l.now))+int64(time.Millisecond) {
				l.px.observer.LoopCPU(time.Duration(d))
			}
		}
	}
	if l.ring != nil {
		l.enters += l.ring.Enters()
		l.ring.Close()
		l.ring = nil
	}
	l.mu.Lock()
	l.stopped = true
	rest := l.posted
	l.posted = nil
	l.mu.Unlock()
	for _, fn := range rest { // work posted before stop still runs
		fn()
	}
	for _, sk := range l.socks {
		if sk != nil {
			l.close(sk)
		}
	}
	_ = syscall.Close(l.ep)
	_ = syscall.Close(l.efd)
}

func (l *loop) runPosted() {
	var b [8]byte
	_, _, _ = syscall.RawSyscall(syscall.SYS_READ, uintptr(l.efd), uintptr(unsafe.Pointer(&b[0])), 8)
	l.mu.Lock()
	fns := l.posted
	l.posted = l.spare[:0]
	l.mu.Unlock()
	for i, fn := range fns {
		fn()
		fns[i] = nil
		l.settle()
	}
	l.spare = fns[:0]
}

// sockOf is the socket an epoll event is for, nil for the eventfd and for
// a descriptor closed (or closed and reused) since the event was queued.
func (l *loop) sockOf(ev *syscall.EpollEvent) *sock {
	fd := int(ev.Fd)
	if fd == l.efd || fd >= len(l.socks) {
		return nil
	}
	sk := l.socks[fd]
	if sk == nil || sk.gen != uint32(ev.Pad) {
		return nil
	}
	return sk
}

// note records what an epoll report says about sk's input.
func (l *loop) note(sk *sock, ev uint32) {
	if ev&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		sk.hup = true
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		sk.more = true
	}
}

// event handles one epoll report for sk (note has run for it).
func (l *loop) event(sk *sock, ev uint32) {
	if ev&syscall.EPOLLOUT != 0 && sk.pending() > 0 {
		l.flush(sk)
		if sk.pending() == 0 {
			l.drained(sk)
		}
	}
	switch {
	case sk.closed, l.suspended(sk):
	case sk.c != nil:
		sk.c.input()
	case sk.s != nil:
		sk.s.input()
	}
	l.idle(sk)
}

// Read and output buffers are lent to a socket while it holds unhandled
// or unwritten bytes, so an idle connection costs no buffer (PgBouncer's
// sbuf does the same): ten thousand idle clients do not hold 320 MB.
const maxFreeBufs = 1024

// idle takes back sk's read buffer if it holds nothing unhandled.
func (l *loop) idle(sk *sock) {
	if sk.buf == nil || sk.r != sk.w {
		return
	}
	if len(sk.buf) == sockBufSize && len(l.free) < maxFreeBufs {
		l.free = append(l.free, sk.buf)
	}
	sk.buf, sk.r, sk.w = nil, 0, 0
}

// buffer lends sk a read buffer of at least n bytes.
func (l *loop) buffer(sk *sock, n int) {
	if n <= sockBufSize && len(l.free) > 0 {
		sk.buf = l.free[len(l.free)-1]
		l.free[len(l.free)-1] = nil
		l.free = l.free[:len(l.free)-1]
		l.freeLow = min(l.freeLow, len(l.free))
		return
	}
	sk.buf = make([]byte, max(n, sockBufSize))
}

// drained is called when sk has written everything it held: the connection
// that feeds it may be read again.
func (l *loop) drained(sk *sock) {
	switch {
	case sk.c != nil:
		if s := sk.c.server; s != nil && s.stalled {
			s.stalled = false
			s.input()
		}
	case sk.s != nil:
		if c := sk.s.client; c != nil && c.stalled {
			c.stalled = false
			l.resume = append(l.resume, c)
		}
	}
}

// settle finishes a batch of events: clients linked meanwhile read on,
// pending output is written, broken connections are closed. Output is
// written last marked, first written: where a server's ReadyForQuery
// released it to a waiting client, the waiter's query (queued after the
// response) goes to the server before the response goes to its client,
// so the server works while the loop writes the response - the order
// the model calls pooler.assign_first (PgBouncer's is the other one).
func (l *loop) settle() {
	for len(l.resume) > 0 || len(l.dirty) > 0 || len(l.broken) > 0 {
		for i := 0; i < len(l.resume); i++ { // input may append more
			if c := l.resume[i]; !c.gone {
				c.input()
				l.idle(&c.sk)
			}
			l.resume[i] = nil
		}
		l.resume = l.resume[:0]
		for len(l.dirty) > 0 {
			if l.ring != nil && len(l.dirty) > 1 {
				l.writeBatch()
				continue
			}
			if sk := l.popDirty(); !sk.closed {
				l.flush(sk)
			}
		}
		for len(l.broken) > 0 {
			sk := l.broken[len(l.broken)-1]
			l.broken[len(l.broken)-1] = nil // the array keeps no gone socket
			l.broken = l.broken[:len(l.broken)-1]
			switch {
			case sk.closed:
			case sk.c != nil:
				sk.c.finish(true)
			case sk.s != nil:
				sk.s.lost(fmt.Errorf("write failed"))
			}
		}
	}
}

// popDirty takes the last socket with output to write off the list. Its
// slot is cleared: the array keeps no socket (and no client or server
// behind it) that is gone.
func (l *loop) popDirty() *sock {
	n := len(l.dirty) - 1
	sk := l.dirty[n]
	l.dirty[n] = nil
	l.dirty = l.dirty[:n]
	sk.dirty = false
	return sk
}

// timeout is how long epoll_wait may sleep: until the next janitor tick
// (query_wait_timeout is one of its checks), and no more than busyWait
// while the loop is busy (see paceRuntime).
func (l *loop) timeout() int {
	ms := time.Until(l.px.nextTick).Milliseconds() + 1
	if ms < 0 {
		return 0
	}
	if l.now.Sub(l.busy) < busyFor && ms > busyWait.Milliseconds() {
		return int(busyWait.Milliseconds())
	}
	return int(ms)
}

// Go's runtime and the loop. Go's monitor thread (sysmon) takes the
// processor from a goroutine that has been in one system call for 10 ms,
// and preempts one that has run 10 ms without passing through the
// scheduler, with a signal; on the next busy moment the loop then wakes
// a second thread and moves over to it, and the monitor, woken from its
// deep sleep, polls every 20 us for a millisecond before it backs off
// again. Measured under pgbench -S on a loaded machine, that was 0.3
// system calls (nanosleep, futex, tgkill) and 0.2 context switches per
// transaction on top of the loop's own. So while busy the loop waits in
// epoll_wait for at most busyWait, and every yieldEvery it yields to the
// scheduler itself (runtime.Gosched: a wake-up of an idle thread at
// most, no signal, no move). After busyFor with no event it sleeps until
// the janitor's next tick, as PgBouncer does.
const (
	busyWait   = 5 * time.Millisecond
	busyFor    = time.Second
	yieldEvery = 8 * time.Millisecond
)

// paceRuntime notes whether the loop is busy (n events) and yields to Go's
// scheduler when yieldEvery has passed since it last did.
func (l *loop) paceRuntime(n int) {
	if n > 0 {
		l.busy = l.now
	}
	if l.now.Sub(l.yielded) >= yieldEvery {
		runtime.Gosched()
		l.yielded = l.now
	}
}

func (l *loop) tick() {
	l.px.tick(l.now)
	l.trimFree()
}

// add registers a connection's descriptor with the loop. The descriptor
// must be non-blocking and owned by nobody else.
func (l *loop) add(sk *sock, fd int) error {
	l.gen++
	sk.fd, sk.gen = fd, l.gen
	ev := syscall.EpollEvent{
		Events: syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | epollET,
		Fd:     int32(fd),
		Pad:    int32(sk.gen),
	}
	if err := syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add: %w", err)
	}
	for len(l.socks) <= fd {
		l.socks = append(l.socks, nil)
	}
	l.socks[fd] = sk
	sk.more = true // bytes may have arrived before registration
	return nil
}

const epollET = 1 << 31

// close closes sk's descriptor (which also takes it out of the epoll set).
func (l *loop) close(sk *sock) {
	if sk.closed {
		return
	}
	sk.closed = true
	if sk.fd < len(l.socks) && l.socks[sk.fd] == sk {
		l.socks[sk.fd] = nil
	}
	_ = syscall.Close(sk.fd)
	l.px.fds.released() // the reserve takes it back first (fdreserve.go)
	sk.r = sk.w
	l.idle(sk)
	sk.out, sk.sent = nil, 0
}

// send queues b for writing to sk; it is written when the iteration
// settles.
func (l *loop) send(sk *sock, b []byte) {
	if sk.closed || sk.werr {
		return
	}
	if sk.out == nil && len(b) <= sockBufSize {
		sk.out = l.outBuf()
	}
	sk.out = append(sk.out, b...)
	l.markDirty(sk)
}

// outBuf lends an empty output buffer of sockBufSize bytes' capacity from
// the free list (flush gives it back once everything is written).
func (l *loop) outBuf() []byte {
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.freeLow = min(l.freeLow, n-1)
		return b[:0]
	}
	return make([]byte, 0, sockBufSize)
}

func (l *loop) markDirty(sk *sock) {
	if !sk.dirty {
		sk.dirty = true
		l.dirty = append(l.dirty, sk)
	}
}

// full reports whether dst still holds highWater bytes or more after a
// write: then its source must not be read until dst drains.
func (l *loop) full(dst *sock) bool {
	if dst.pending() < highWater {
		return false
	}
	l.flush(dst)
	return dst.pending() >= highWater
}

// pass moves up to *left buffered bytes of a large message from src to dst
// (dropped when dst is nil) and returns how many.
func (l *loop) pass(src *sock, left *int, dst *sock) int {
	n := min(src.w-src.r, *left)
	if dst != nil {
		l.send(dst, src.buf[src.r:src.r+n])
	}
	src.r += n
	*left -= n
	return n
}

// flush writes what sk holds until the socket takes no more.
func (l *loop) flush(sk *sock) {
	for sk.sent < len(sk.out) {
		rest := sk.out[sk.sent:]
		l.calls.writes++
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(sk.fd), uintptr(unsafe.Pointer(&rest[0])),
			uintptr(len(rest)), syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			sk.sent += int(n)
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return // EPOLLOUT will tell when there is room
		}
		l.writeFailed(sk)
		return
	}
	l.written(sk)
}

// writeFailed marks sk broken: settle closes it.
func (l *loop) writeFailed(sk *sock) {
	sk.out, sk.sent = sk.out[:0], 0
	if !sk.werr {
		sk.werr = true
		l.broken = append(l.broken, sk)
	}
}

// written is called when sk has written everything: the buffer goes back
// to the loop's free list, so an idle connection holds none (a large one
// is dropped).
func (l *loop) written(sk *sock) {
	sk.sent = 0
	if cap(sk.out) == sockBufSize && len(l.free) < maxFreeBufs {
		l.free = append(l.free, sk.out[:sockBufSize])
	}
	sk.out = nil
}

// fill reads once into sk's buffer, first making room for need bytes from
// sk.r on. It reports whether bytes were read; a short read clears more,
// end of input sets eof.
func (l *loop) fill(sk *sock, need int) bool {
	if sk.r == sk.w {
		sk.r, sk.w = 0, 0
		if len(sk.buf) > sockBufSize && need <= sockBufSize {
			sk.buf = nil // no large buffer is kept for small messages
		}
	}
	if sk.buf == nil {
		l.buffer(sk, need)
	}
	if need > len(sk.buf) {
		// Grow by doubling, so the buffer follows the bytes that arrive,
		// not the length a message claims.
		nb := make([]byte, min(need, 2*len(sk.buf)))
		sk.w = copy(nb, sk.buf[sk.r:sk.w])
		sk.r, sk.buf = 0, nb
	} else if sk.r > 0 && (sk.r+need > len(sk.buf) || sk.w == len(sk.buf)) {
		// Move the unhandled bytes to the front.
		sk.w = copy(sk.buf, sk.buf[sk.r:sk.w])
		sk.r = 0
	}
	space := len(sk.buf) - sk.w
	for {
		l.calls.reads++
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(sk.fd), uintptr(unsafe.Pointer(&sk.buf[sk.w])), uintptr(space))
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			sk.more = false
			return false
		case e != 0 || n == 0:
			sk.more, sk.eof = false, true
			return false
		}
		sk.w += int(n)
		// A short read means drained, unless the peer hung up: then the
		// end of input is still to be read (no edge will come for it).
		if int(n) < space && !sk.hup {
			sk.more = false
		}
		return true
	}
}

// detach takes the descriptor of a plain TCP or Unix connection out of Go's
// poller for the loop: a non-blocking duplicate, with the original closed.
// Other connections (TLS) are bridged through a socket pair by two
// goroutines owned by the proxy.
func (px *Proxy) detach(conn net.Conn) (int, error) {
	if sc, ok := conn.(syscall.Conn); ok && isPlain(conn) {
		rc, err := sc.SyscallConn()
		if err != nil {
			return -1, err
		}
		fd := -1
		var derr error
		// Out of descriptors, a spare makes room for the duplicate: the
		// original is closed right after (fdreserve.go).
		dup := func(f uintptr) {
			derr = px.withSpare(0, func() error {
				var err error
				fd, err = dupCloexec(int(f))
				return err
			})
		}
		if err := rc.Control(dup); err != nil {
			return -1, err
		}
		if derr != nil {
			return -1, derr
		}
		_ = conn.Close()
		px.fds.released()
		if err := syscall.SetNonblock(fd, true); err != nil {
			_ = syscall.Close(fd)
			return -1, err
		}
		return fd, nil
	}
	return px.bridge(conn)
}

func dupCloexec(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, fmt.Errorf("dup: %w", e)
	}
	return int(r), nil
}

func socketPair() (loopEnd, goEnd int, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("socketpair: %w", err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return -1, -1, err
	}
	return fds[0], fds[1], nil
}

// threadCPU is the calling thread's CPU time in nanoseconds, user and
// system (getrusage RUSAGE_THREAD; 0 if it fails).
func threadCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
