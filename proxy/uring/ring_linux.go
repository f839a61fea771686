//go:build linux

package uring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Linux's io_uring ABI (include/uapi/linux/io_uring.h).
const (
	sysSetup    = 425
	sysEnter    = 426
	sysRegister = 427

	registerProbe = 8 // IORING_REGISTER_PROBE (5.6 on)
	opSupported   = 1 // IO_URING_OP_SUPPORTED

	opSend = 26
	opRecv = 27

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	featSingleMmap = 1 << 0
	enterGetEvents = 1 << 0

	sqeSize = 64
	cqeSize = 16
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	msgFlags    uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad         uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// probe is struct io_uring_probe with room for every opcode.
type probe struct {
	lastOp, opsLen uint8
	resv           uint16
	resv2          [3]uint32
	ops            [256]probeOp
}

type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

// ErrUnsupported is returned by New when the kernel has no usable io_uring.
var ErrUnsupported = errors.New("io_uring is not available")

// Ring is one io_uring instance with its submission and completion
// queues mapped into the process.
type Ring struct {
	fd      int
	sqMem   []byte
	cqMem   []byte // == sqMem with IORING_FEAT_SINGLE_MMAP
	sqeMem  []byte
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe
	entries uint32

	queued  uint32 // operations queued since the last Submit
	pending uint32 // completions not yet reaped
	enters  int64  // io_uring_enter calls made
}

// Enters is the number of io_uring_enter system calls the ring has made.
func (r *Ring) Enters() int64 { return r.enters }

// New sets up a ring for up to entries operations per Submit (a power of
// two from 1 to 4096).
func New(entries uint32) (*Ring, error) {
	if entries == 0 || entries > 4096 || entries&(entries-1) != 0 {
		return nil, fmt.Errorf("uring: entries %d: want a power of two from 1 to 4096", entries)
	}
	var p params
	fd, _, e := syscall.RawSyscall(sysSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("%w: io_uring_setup: %v", ErrUnsupported, e)
	}
	r := &Ring{fd: int(fd), entries: p.sqEntries}
	if err := r.probe(); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.mmap(&p); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.checkInline(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// probe checks that the kernel runs SEND and RECV. Kernels 5.4 and 5.5 set
// a ring up but fail both with -EINVAL in every completion, which a caller
// could not tell from a broken socket; they have no IORING_REGISTER_PROBE
// either, and neither may a sandbox that offers part of io_uring.
func (r *Ring) probe() error {
	var pr probe
	_, _, e := syscall.RawSyscall6(sysRegister, uintptr(r.fd), registerProbe, uintptr(unsafe.Pointer(&pr)), uintptr(len(pr.ops)), 0, 0)
	if e != 0 {
		return fmt.Errorf("%w: io_uring_register probe (Linux 5.6 or later): %v", ErrUnsupported, e)
	}
	return supports(&pr, opSend, opRecv)
}

// supports reports whether pr, a kernel's answer to a probe, marks every op
// supported.
func supports(pr *probe, ops ...uint8) error {
	for _, op := range ops {
		if int(op) >= int(pr.opsLen) || op > pr.lastOp || pr.ops[op].flags&opSupported == 0 {
			return fmt.Errorf("%w: the kernel does not run io_uring opcode %d (SEND 26, RECV 27: Linux 5.6 or later)", ErrUnsupported, op)
		}
	}
	return nil
}

func (r *Ring) mmap(p *params) error {
	if p.features&featSingleMmap == 0 {
		return fmt.Errorf("%w: kernel lacks IORING_FEAT_SINGLE_MMAP (older than 5.4)", ErrUnsupported)
	}
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	size := max(sqSize, cqSize)
	mem, err := syscall.Mmap(r.fd, offSQRing, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("uring: mmap rings: %w", err)
	}
	r.sqMem, r.cqMem = mem, mem
	r.sqeMem, err = syscall.Mmap(r.fd, offSQEs, int(p.sqEntries*sqeSize), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("uring: mmap submission entries: %w", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }
	r.sqHead = (*uint32)(at(p.sqOff.head))
	r.sqTail = (*uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqArray = unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead = (*uint32)(at(p.cqOff.head))
	r.cqTail = (*uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*cqe)(at(p.cqOff.cqes)), p.cqEntries)
	return nil
}

// Close unmaps the rings and closes the ring's descriptor.
func (r *Ring) Close() {
	if r.sqeMem != nil {
		_ = syscall.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.sqMem != nil {
		_ = syscall.Munmap(r.sqMem)
		r.sqMem, r.cqMem = nil, nil
	}
	if r.fd >= 0 {
		_ = syscall.Close(r.fd)
		r.fd = -1
	}
}

// Space is how many more operations can be queued before Submit.
func (r *Ring) Space() int { return int(r.entries - r.queued) }

// Send queues a send of b on the socket fd (MSG_DONTWAIT, MSG_NOSIGNAL);
// its result comes back with tag. b must stay untouched until Submit
// returns. It reports false when the ring is full.
func (r *Ring) Send(fd int, b []byte, tag uint64) bool {
	return r.queue(opSend, fd, b, syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, tag)
}

// Recv queues a receive into b from the socket fd (MSG_DONTWAIT).
func (r *Ring) Recv(fd int, b []byte, tag uint64) bool {
	return r.queue(opRecv, fd, b, syscall.MSG_DONTWAIT, tag)
}

func (r *Ring) queue(op uint8, fd int, b []byte, flags uint32, tag uint64) bool {
	if r.queued == r.entries || len(b) == 0 {
		return false
	}
	tail := *r.sqTail + r.queued // only this goroutine writes the tail
	i := tail & r.sqMask
	r.sqes[i] = sqe{
		opcode:   op,
		fd:       int32(fd),
		addr:     uint64(uintptr(unsafe.Pointer(&b[0]))),
		len:      uint32(len(b)),
		msgFlags: flags,
		userData: tag,
	}
	r.sqArray[i] = i
	r.queued++
	return true
}

// Submit hands the queued operations to the kernel in one system call and
// calls done with each one's tag and result (bytes moved, 0 at end of
// input, or a negated errno such as -EAGAIN), in completion order. Every
// queued buffer is free again when it returns.
func (r *Ring) Submit(done func(tag uint64, res int32)) error {
	if err := r.enter(done); err != nil {
		return err
	}
	for r.pending > 0 {
		// MSG_DONTWAIT operations complete inline (New checks it); this
		// wait is a safety net.
		r.enters++
		_, _, e := syscall.Syscall6(sysEnter, uintptr(r.fd), 0, uintptr(r.pending), enterGetEvents, 0, 0)
		if e != 0 && e != syscall.EINTR {
			return fmt.Errorf("uring: io_uring_enter wait: %w", e)
		}
		r.reap(done)
	}
	runtime.KeepAlive(r)
	return nil
}

// enter hands the queued operations to the kernel and reaps the
// completions already posted, without waiting for the others.
func (r *Ring) enter(done func(tag uint64, res int32)) error {
	n := r.queued
	if n == 0 {
		return nil
	}
	atomic.StoreUint32(r.sqTail, *r.sqTail+n) // publishes the entries
	r.queued = 0
	r.pending += n
	submitted := uint32(0)
	for submitted < n {
		r.enters++
		got, _, e := syscall.RawSyscall6(sysEnter, uintptr(r.fd), uintptr(n-submitted), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			// Operations not taken stay in the queue: take them back.
			r.pending -= n - submitted
			atomic.StoreUint32(r.sqTail, *r.sqTail-(n-submitted))
			r.reap(done)
			return fmt.Errorf("uring: io_uring_enter: %w", e)
		}
		submitted += uint32(got)
	}
	r.reap(done)
	return nil
}

// checkInline checks what the caller's use of Submit relies on: a RECV on
// an empty socket and a SEND with room complete within the io_uring_enter
// that submits them (MSG_DONTWAIT), not armed for later nor handed to a
// kernel worker, which would make Submit wait for the socket. Closing the
// ring cancels what is left if not.
func (r *Ring) checkInline() error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("uring: check: socketpair: %w", err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	in, out := make([]byte, 1), []byte{'x'}
	for _, c := range []struct {
		name string
		op   func() bool
		want int32
	}{
		{"RECV on an empty socket", func() bool { return r.Recv(fds[0], in, 0) }, -int32(syscall.EAGAIN)},
		{"SEND with room", func() bool { return r.Send(fds[1], out, 0) }, 1},
	} {
		c.op()
		got, ok := int32(0), false
		if err := r.enter(func(_ uint64, res int32) { got, ok = res, true }); err != nil {
			return fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		switch {
		case !ok:
			return fmt.Errorf("%w: a %s did not complete at once (MSG_DONTWAIT)", ErrUnsupported, c.name)
		case got != c.want:
			return fmt.Errorf("%w: a %s gave %d, want %d", ErrUnsupported, c.name, got, c.want)
		}
	}
	return nil
}

func (r *Ring) reap(done func(tag uint64, res int32)) {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		c := r.cqes[head&r.cqMask]
		r.pending--
		atomic.StoreUint32(r.cqHead, head+1)
		done(c.userData, c.res)
	}
}
