//go:build linux

package pooler

import "syscall"

// Batched reads and writes (package uring). A system call's entry and exit
// cost about a microsecond of CPU on the machines poolsim runs on, more
// than the pooler's own work on a message, and one turn of the loop reads
// from and writes to many sockets: under pgbench -S one epoll_wait reports
// 15 to 40 of them. So the loop reads every socket it is about to handle
// in one io_uring_enter, right after epoll_wait, and writes every socket
// with output in one more when the turn settles. The results are applied
// exactly as read and sendto's would be (fill and flush); a socket whose
// operation did not complete falls back to them.

// readable reports whether sk's input is handled now, so that reading
// ahead takes nothing the loop would leave in the socket: a client waiting
// for a server, or whose server's output is full, is not read.
func readable(sk *sock) bool {
	switch {
	case sk.closed:
		return false
	case sk.c != nil:
		c := sk.c
		return !c.gone && !c.queued && !c.stalled
	case sk.s != nil:
		return !sk.s.closed && !sk.s.stalled
	}
	return false
}

// readAhead reads, in one system call, every socket of events that has
// input to handle and no unhandled bytes, into a buffer lent as fill
// would. Fewer than two such sockets are left to fill: one read costs the
// same as one io_uring_enter.
func (l *loop) readAhead(events []syscall.EpollEvent) {
	l.batch = l.batch[:0]
	for i := range events {
		sk := l.sockOf(&events[i])
		if sk == nil || !sk.more || sk.inRing || sk.r != sk.w || !readable(sk) {
			continue
		}
		sk.inRing = true // an fd appears once per epoll_wait; this makes sure
		l.batch = append(l.batch, sk)
	}
	defer l.dropBatch()
	if len(l.batch) < 2 || len(l.batch) > l.ring.Space() {
		for _, sk := range l.batch {
			sk.inRing = false
		}
		return
	}
	for i, sk := range l.batch {
		if len(sk.buf) > sockBufSize {
			sk.buf = nil // no large buffer is kept for new input (fill)
		}
		if sk.buf == nil {
			l.buffer(sk, sockBufSize)
		}
		sk.r, sk.w = 0, 0
		l.ring.Recv(sk.fd, sk.buf, uint64(i))
	}
	l.submit(l.onRecv)
	for _, sk := range l.batch {
		sk.inRing = false // not done: fill reads it when it is handled
	}
}

// received applies one read's result as fill does.
func (l *loop) received(tag uint64, res int32) {
	sk := l.batch[tag]
	sk.inRing = false
	switch {
	case res > 0:
		sk.w += int(res)
		// Short: drained, unless the peer hung up (see fill).
		if sk.w < len(sk.buf) && !sk.hup {
			sk.more = false
		}
	case res == -int32(syscall.EAGAIN):
		sk.more = false
	case res == -int32(syscall.EINTR):
		// more stays set: fill reads again
	default:
		sk.more, sk.eof = false, true
	}
}

// writeBatch writes the output of the dirty sockets, up to a ring's worth,
// in one system call.
func (l *loop) writeBatch() {
	l.batch = l.batch[:0]
	defer l.dropBatch()
	for len(l.dirty) > 0 && len(l.batch) < l.ring.Space() {
		sk := l.popDirty()
		if sk.closed || sk.pending() == 0 {
			continue
		}
		sk.inRing = true
		l.ring.Send(sk.fd, sk.out[sk.sent:], uint64(len(l.batch)))
		l.batch = append(l.batch, sk)
	}
	l.submit(l.onSent)
	for _, sk := range l.batch {
		if sk.inRing { // not done: write it with sendto
			sk.inRing = false
			if !sk.closed {
				l.flush(sk)
			}
		}
	}
}

// dropBatch empties the batch, letting go of its sockets: a socket left
// in the backing array would keep its client or server, and the pool
// behind it, from the garbage collector after they are gone (300 dropped
// auto-database pools kept up to a ring's worth of clients alive).
func (l *loop) dropBatch() {
	clear(l.batch)
	l.batch = l.batch[:0]
}

// sent applies one write's result as flush does.
func (l *loop) sent(tag uint64, res int32) {
	sk := l.batch[tag]
	sk.inRing = false
	switch {
	case res >= 0:
		sk.sent += int(res)
		if sk.sent < len(sk.out) {
			l.flush(sk) // the rest, until the socket takes no more
		} else {
			l.written(sk)
		}
	case res == -int32(syscall.EAGAIN):
		// EPOLLOUT will tell when there is room
	case res == -int32(syscall.EINTR):
		l.flush(sk)
	default:
		l.writeFailed(sk)
	}
}

// submit runs the batch. If io_uring fails as a whole, the loop goes on
// without it.
func (l *loop) submit(done func(tag uint64, res int32)) {
	if err := l.ring.Submit(done); err != nil {
		l.px.logf("event loop: %v; going on with one read or sendto system call per socket", err)
		l.enters += l.ring.Enters()
		l.ring.Close()
		l.ring = nil
	}
}
