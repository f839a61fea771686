package pooler

import "encoding/binary"

// sock is one connection the loop owns: its descriptor, the bytes read but
// not yet handled (buf[r:w]) and the bytes not yet written (out).
type sock struct {
	fd     int
	gen    uint32
	buf    []byte
	r, w   int
	out    []byte // out[sent:] is still to be written
	sent   int
	more   bool // an input edge came and the socket was not read dry since
	eof    bool // end of input, or a failed read
	hup    bool // the peer hung up (EPOLLRDHUP, EPOLLHUP or EPOLLERR)
	closed bool
	dirty  bool // in loop.dirty
	werr   bool // a write failed: the connection is broken
	inRing bool // an operation on it is in the loop's io_uring batch
	c      *client
	s      *server
}

// Buffer sizes: what one read takes at most, and how many unwritten bytes
// one connection may pile up before its source is no longer read.
const (
	sockBufSize = 16 << 10
	highWater   = 64 << 10
)

// pending is the number of bytes still to be written.
func (sk *sock) pending() int { return len(sk.out) - sk.sent }

// header reads the type and length field of the message at the head of
// the buffer, which holds at least 5 bytes.
func (sk *sock) header() (typ byte, length int) {
	return sk.buf[sk.r], int(int32(binary.BigEndian.Uint32(sk.buf[sk.r+1:])))
}
