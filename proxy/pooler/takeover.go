//go:build linux

package pooler

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Online restart, the new process's side, as PgBouncer 1.18's pgbouncer -R
// (src/takeover.c): StartTakeover connects to the running proxy's console
// over its Unix socket (unix_socket_dir/.s.PGSQL.<listen_port>, user and
// database pgbouncer, peer authentication), sends SUSPEND - the old process
// finishes what is in flight and stops reading - then SHOW FDS, whose rows
// come each with its descriptor. ServeTakeover rebuilds from them the
// listening sockets, each client in its pool with its cancel key and
// session settings and each server with its settings and its link, then
// sends SHUTDOWN; the old process exits without touching what it handed
// over. Until SHUTDOWN is sent, a failure sends RESUME instead and the old
// process serves on.

// Takeover is an online restart in progress: the console connection to the
// old process, suspended, and what its SHOW FDS handed over. Serve it with
// Proxy.ServeTakeover, or give it back with Abort.
type Takeover struct {
	// AfterShutdown, when set, runs once the old process has gone and
	// before this one reads its clients: the command writes its pidfile
	// there (the old process removes its own as it exits).
	AfterShutdown func()

	conn    *net.UnixConn
	path    string
	pidFile string
	logf    func(string, ...any)

	in   []byte // read from the console and not parsed yet
	fds  []int  // descriptors received and not yet matched to a row
	lns  []net.Listener
	rows []fdRow // clients and servers, in SHOW FDS's order
	done bool    // Abort or finish has run
}

// fdRow is one client or server row of SHOW FDS, with the descriptor that
// came with it.
type fdRow struct {
	fd                       int
	oldFD, linkFD            int
	task, user, db, addr     string
	port                     int
	key                      uint64
	vars                     map[string]string
	password                 string
	scramClient, scramServer []byte
}

// StartTakeover connects to the proxy serving on cfg's Unix socket,
// suspends it and receives its sockets (SHOW FDS). On an error the old
// process is resumed and every descriptor received is closed. Each step
// is bounded (SUSPEND by PgBouncer's suspend_timeout and a margin) and by
// ctx.
func StartTakeover(ctx context.Context, cfg *Config) (*Takeover, error) {
	if cfg.UnixSocketDir == "" {
		return nil, errors.New("takeover: unix_socket_dir is empty: online restart reaches the running process over its Unix socket")
	}
	t := &Takeover{path: UnixSocketPath(cfg.UnixSocketDir, cfg.listenPort()), pidFile: cfg.PidFile, logf: cfg.Logf}
	if t.logf == nil {
		t.logf = func(string, ...any) {}
	}
	t.logf("takeover_init: launching connection")
	d := net.Dialer{Timeout: takeoverStep}
	conn, err := d.DialContext(ctx, "unix", t.path)
	if err != nil {
		return nil, fmt.Errorf("takeover: connect to the running process: %w", err)
	}
	t.conn = conn.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { _ = t.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := t.login(); err != nil {
		t.close()
		return nil, err
	}
	t.logf("login OK, sending SUSPEND")
	if err := t.command("SUSPEND;", "SUSPEND", suspendTimeout+takeoverStep); err != nil {
		t.close() // the old process resumes when its console leaves
		return nil, fmt.Errorf("takeover: SUSPEND: %w", err)
	}
	t.logf("SUSPEND finished, sending SHOW FDS")
	if err := t.command("SHOW FDS;", "SHOW", takeoverStep); err != nil {
		_ = t.Abort()
		return nil, fmt.Errorf("takeover: SHOW FDS: %w", err)
	}
	if len(t.fds) > 0 {
		_ = t.Abort()
		return nil, fmt.Errorf("takeover: SHOW FDS: %d descriptors without a row", len(t.fds))
	}
	t.logf("SHOW FDS finished")
	if ctx.Err() != nil {
		_ = t.Abort()
		return nil, fmt.Errorf("takeover: %w", ctx.Err())
	}
	return t, nil
}

// Listeners are the listening sockets taken over, TCP first, for
// ServeTakeover.
func (t *Takeover) Listeners() []net.Listener { return t.lns }

// Abort gives the takeover up before SHUTDOWN: the old process gets RESUME
// and serves on; the listeners and descriptors received are closed here
// (the Unix socket's file stays). It is idempotent.
func (t *Takeover) Abort() error {
	if t.done {
		return nil
	}
	for _, ln := range t.lns {
		if ul, ok := ln.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false)
		}
	}
	err := t.command("RESUME;", "RESUME", takeoverStep)
	if err != nil {
		err = fmt.Errorf("takeover: RESUME: %w (the old process resumes when its console connection closes)", err)
	}
	t.close()
	return err
}

// close ends the console connection and closes everything received and not
// adopted.
func (t *Takeover) close() {
	t.done = true
	if t.conn != nil {
		_ = t.conn.Close()
	}
	for _, ln := range t.lns {
		_ = ln.Close()
	}
	for _, fd := range t.fds {
		_ = syscall.Close(fd)
	}
	for _, r := range t.rows {
		if r.fd >= 0 {
			_ = syscall.Close(r.fd)
		}
	}
	t.fds, t.rows = nil, nil
}

// finish tells the old process to go (SHUTDOWN), waits for its console
// connection to close and then for its pidfile to go away, each for up to
// takeoverStep. The sockets are this process's from here on: a wait that
// times out is logged, not undone.
func (t *Takeover) finish() {
	t.done = true
	t.logf("sending SHUTDOWN;")
	b, _ := (&pgproto3.Query{String: "SHUTDOWN;"}).Encode(nil)
	_ = t.conn.SetDeadline(time.Now().Add(takeoverStep))
	if _, err := t.conn.Write(b); err != nil {
		t.logf("ERROR: failed to send SHUTDOWN;: %v", err)
	}
	var buf [512]byte
	for {
		if _, err := t.conn.Read(buf[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.logf("WARNING: the old process has not closed its console %v after SHUTDOWN", takeoverStep)
			}
			break
		}
	}
	_ = t.conn.Close()
	if t.pidFile != "" {
		t.logf("waiting for old pidfile to go away")
		deadline := time.Now().Add(takeoverStep)
		for {
			if _, err := os.Stat(t.pidFile); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.logf("WARNING: the old pidfile %s is still there %v after SHUTDOWN", t.pidFile, takeoverStep)
				break
			}
			time.Sleep(100 * time.Millisecond) // PgBouncer polls it so, every 0.1 s
		}
	}
	t.logf("old process killed, resuming work")
}

// login logs in to the old process's console: StartupMessage as user and
// database pgbouncer, which peer authentication lets in without a
// password.
func (t *Takeover) login() error {
	_ = t.conn.SetDeadline(time.Now().Add(takeoverStep))
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": adminDB, "database": adminDB}}).Encode(nil)
	if _, err := t.conn.Write(b); err != nil {
		return fmt.Errorf("takeover: console login: %w", err)
	}
	for {
		typ, body, err := t.next()
		if err != nil {
			return fmt.Errorf("takeover: console login: %w", err)
		}
		switch typ {
		case 'R':
			if len(body) < 4 || binary.BigEndian.Uint32(body) != 0 {
				return errors.New("takeover: console login: the running process asks for a password; peer authentication of user pgbouncer needs this process to run as the same OS user")
			}
		case 'E':
			return fmt.Errorf("takeover: console login: %s", errorText(body))
		case 'Z':
			return nil
		}
	}
}

// command sends query and reads its answer up to ReadyForQuery within
// timeout: CommandComplete tag is success, an ErrorResponse failure. The
// rows of SHOW FDS are taken with their descriptors.
func (t *Takeover) command(query, tag string, timeout time.Duration) error {
	_ = t.conn.SetDeadline(time.Now().Add(timeout))
	b, _ := (&pgproto3.Query{String: query}).Encode(nil)
	if _, err := t.conn.Write(b); err != nil {
		return err
	}
	var failed error
	ok := false
	for {
		typ, body, err := t.next()
		if err != nil {
			return err
		}
		switch typ {
		case 'T', 'N', 'S':
		case 'D':
			if err := t.row(body); err != nil && failed == nil {
				failed = err
			}
		case 'C':
			ok = bytes.HasPrefix(body, []byte(tag))
		case 'E':
			failed = fmt.Errorf("the running process answered: %s", errorText(body))
		case 'Z':
			if failed != nil {
				return failed
			}
			if !ok {
				return fmt.Errorf("no %s command tag", tag)
			}
			return nil
		default:
			return fmt.Errorf("unexpected message %q", typ)
		}
	}
}

// next reads the next message; the descriptors that come with the data
// are queued in t.fds in their order.
func (t *Takeover) next() (byte, []byte, error) {
	for {
		if len(t.in) >= 5 {
			n := int(binary.BigEndian.Uint32(t.in[1:5])) + 1
			if n < 5 || n > 1<<20 {
				return 0, nil, fmt.Errorf("%w: message of length %d", errProtocol, n-1)
			}
			if len(t.in) >= n {
				typ, body := t.in[0], append([]byte(nil), t.in[5:n]...)
				t.in = t.in[n:]
				return typ, body, nil
			}
		}
		var buf [16 << 10]byte
		oob := make([]byte, syscall.CmsgSpace(64*4))
		n, oobn, flags, _, err := t.conn.ReadMsgUnix(buf[:], oob)
		if oobn > 0 {
			msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
			if perr == nil {
				for _, m := range msgs {
					if fds, e := syscall.ParseUnixRights(&m); e == nil {
						t.fds = append(t.fds, fds...)
					}
				}
			}
		}
		if flags&syscall.MSG_CTRUNC != 0 {
			return 0, nil, errors.New("descriptors lost: ancillary data truncated")
		}
		t.in = append(t.in, buf[:n]...)
		if err != nil {
			return 0, nil, err
		}
		if n == 0 {
			return 0, nil, errors.New("unexpected EOF")
		}
	}
}

// row takes one DataRow of SHOW FDS with the next descriptor received.
func (t *Takeover) row(body []byte) error {
	if len(t.fds) == 0 {
		return errors.New("got row without fd info")
	}
	fd := t.fds[0]
	t.fds = t.fds[1:]
	var dr pgproto3.DataRow
	if err := dr.Decode(body); err != nil || len(dr.Values) != 15 {
		_ = syscall.Close(fd)
		return errors.New("invalid data from old process")
	}
	v := dr.Values
	num := func(i int) int { n, _ := strconv.Atoi(string(v[i])); return n }
	r := fdRow{fd: fd, oldFD: num(0), task: string(v[1]), user: string(v[2]), db: string(v[3]), addr: string(v[4]),
		port: num(5), linkFD: num(7), password: string(v[12])}
	r.key, _ = strconv.ParseUint(string(v[6]), 10, 64)
	r.vars = map[string]string{}
	for i, name := range []string{"client_encoding", "standard_conforming_strings", "DateStyle", "TimeZone"} {
		if v[8+i] != nil {
			r.vars[name] = string(v[8+i])
		}
	}
	var err error
	if r.scramClient, err = byteaText(v[13]); err == nil {
		r.scramServer, err = byteaText(v[14])
	}
	if err != nil || v[1] == nil || v[4] == nil {
		_ = syscall.Close(fd)
		return errors.New("incomplete data from old process")
	}
	switch r.task {
	case "pooler":
		if r.addr == "unix" {
			t.logf("got pooler socket: unix:%d", r.port) // PgBouncer's words
		} else {
			t.logf("got pooler socket: %s", net.JoinHostPort(r.addr, strconv.Itoa(r.port)))
		}
		f := os.NewFile(uintptr(fd), "takeover listener")
		ln, err := net.FileListener(f) // a duplicate
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("listening socket %s:%d: %w", r.addr, r.port, err)
		}
		if ul, ok := ln.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(true) // this process removes the socket file at exit, as the old one would
			t.lns = append(t.lns, ln)
		} else {
			t.lns = append([]net.Listener{ln}, t.lns...)
		}
	case "client", "server":
		t.rows = append(t.rows, r)
	default:
		_ = syscall.Close(fd)
		return fmt.Errorf("unknown task: %s", r.task)
	}
	return nil
}

// byteaText reads a bytea in the text format ("\x" and hex); nil for NULL.
func byteaText(v []byte) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if !bytes.HasPrefix(v, []byte(`\x`)) {
		return nil, errors.New("invalid bytea value")
	}
	return hex.DecodeString(string(v[2:]))
}

// errorText is an ErrorResponse's message.
func errorText(body []byte) string {
	var e pgproto3.ErrorResponse
	if e.Decode(body) != nil {
		return "(unreadable error)"
	}
	return e.Message
}
