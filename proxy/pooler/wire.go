package pooler

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Buffer sizes for the two directions. Messages that fit are forwarded from
// the read buffer without a copy; larger ones are streamed.
const (
	readBufSize  = 16 << 10
	writeBufSize = 16 << 10
)

// maxMsgLen bounds a protocol message's length (PostgreSQL's own limit on a
// query string is 1 GB). Larger lengths are a protocol violation.
const maxMsgLen = 1 << 30

// maxStartupLen is PostgreSQL's MAX_STARTUP_PACKET_LENGTH.
const maxStartupLen = 10000

// Request codes of the untyped start-up packets.
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
	protocol30        = 3 << 16
	protocol32        = 3<<16 | 2
)

var errProtocol = errors.New("protocol violation")

// header peeks at the next message's type and total length (type byte
// included). It blocks until the 5-byte header is available.
func header(r *bufio.Reader) (typ byte, n int, err error) {
	h, err := r.Peek(5)
	if err != nil {
		return 0, 0, err
	}
	l := int(int32(binary.BigEndian.Uint32(h[1:])))
	if l < 4 || l > maxMsgLen {
		return 0, 0, fmt.Errorf("%w: message %q with length %d", errProtocol, h[0], l)
	}
	return h[0], l + 1, nil
}

// forward copies the next n bytes (one whole message) from r to w without
// decoding them.
func forward(w *bufio.Writer, r *bufio.Reader, n int) error {
	if n <= r.Size() {
		b, err := r.Peek(n)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		_, err = r.Discard(n)
		return err
	}
	_, err := io.CopyN(w, r, int64(n))
	return err
}

// body reads the next whole message of n bytes and returns its body. The
// slice is only valid until the next read from r; messages larger than the
// read buffer are copied into scratch.
func body(r *bufio.Reader, n int, scratch *[]byte) ([]byte, error) {
	if n <= r.Size() {
		b, err := r.Peek(n)
		if err != nil {
			return nil, err
		}
		if _, err := r.Discard(n); err != nil {
			return nil, err
		}
		return b[5:], nil
	}
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b[5:], nil
}

// wholeMessageBuffered reports whether r holds at least one complete
// message, so the reader will not block on it. Writers flush when it is
// false: the peer may be waiting for what was written.
func wholeMessageBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 5 {
		return false
	}
	h, _ := r.Peek(5)
	l := int(int32(binary.BigEndian.Uint32(h[1:])))
	return l >= 4 && n >= l+1
}

// frontendTypes are the message types a client may send after login.
var frontendTypes = func() (t [256]bool) {
	for _, c := range []byte("BCDEFHPQSXcdfp") {
		t[c] = true
	}
	return t
}()

// encode appends msg to w, ignoring the encode error of messages that cannot
// fail to encode.
func send(w *bufio.Writer, msg pgproto3.BackendMessage) error {
	b, err := msg.Encode(nil)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// fatal builds a FATAL ErrorResponse as PgBouncer's send_pooler_error
// writes it: severity, code and message, no unlocalized severity ('V').
func fatal(code, message string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", Code: code, Message: message}
}

// poolerError is a FATAL 08P01 ErrorResponse with a pooler's text.
func poolerError(message string) *pgproto3.ErrorResponse {
	return fatal(poolmode.SQLStatePooler, message)
}

// sendFatal writes a FATAL error to a client and flushes it; errors are
// ignored because the connection is closed next.
func sendFatal(w *bufio.Writer, e *pgproto3.ErrorResponse) {
	_ = send(w, e)
	_ = w.Flush()
}
