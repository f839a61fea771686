package pooler

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// fakePG is a tiny in-process PostgreSQL built on pgproto3.Backend: enough
// protocol for pgconn to log in and for a pooler to forward simple and
// extended queries, with no PostgreSQL installed. Unexpected messages get a
// FATAL error and a closed connection, as a real server would answer
// garbage.
type fakePG struct {
	ln   net.Listener
	wg   sync.WaitGroup
	open atomic.Int64 // connections currently open
	mu   sync.Mutex
	cs   map[net.Conn]struct{}
	// refuse, when set, is sent instead of AuthenticationOk (e.g. 53300).
	refuse atomic.Pointer[pgproto3.ErrorResponse]
	logins atomic.Int64
}

func startFakePG(t testing.TB) *fakePG {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePG{ln: ln, cs: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go func() { // owner: fakePG; ends when close closes the listener
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.cs[c] = struct{}{}
			f.mu.Unlock()
			f.open.Add(1)
			f.wg.Add(1)
			go f.serve(c)
		}
	}()
	t.Cleanup(f.close)
	return f
}

func (f *fakePG) dsn() string {
	return "postgres://fake:x@" + f.ln.Addr().String() + "/fake?sslmode=disable"
}

func (f *fakePG) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for c := range f.cs {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakePG) serve(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.cs, c)
		f.mu.Unlock()
		f.open.Add(-1)
		_ = c.Close()
	}()
	be := pgproto3.NewBackend(c, c)
	msg, err := be.ReceiveStartupMessage()
	if err != nil {
		return
	}
	switch msg.(type) {
	case *pgproto3.StartupMessage:
	case *pgproto3.SSLRequest:
		_, _ = c.Write([]byte{'N'})
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
	default: // CancelRequest: nothing runs long here
		return
	}
	f.logins.Add(1)
	if e := f.refuse.Load(); e != nil {
		be.Send(e)
		_ = be.Flush()
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"})
	be.Send(&pgproto3.ParameterStatus{Name: "client_encoding", Value: "UTF8"})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	status := byte('I')
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			q := bytes.ToUpper([]byte(m.String))
			switch {
			case bytes.HasPrefix(q, []byte("BEGIN")):
				status = 'T'
			case bytes.HasPrefix(q, []byte("COMMIT")), bytes.HasPrefix(q, []byte("ROLLBACK")):
				status = 'I'
			}
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: status})
		case *pgproto3.Parse:
			be.Send(&pgproto3.ParseComplete{})
		case *pgproto3.Bind:
			be.Send(&pgproto3.BindComplete{})
		case *pgproto3.Describe:
			be.Send(&pgproto3.NoData{})
		case *pgproto3.Execute:
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		case *pgproto3.Close:
			be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			be.Send(&pgproto3.ReadyForQuery{TxStatus: status})
		case *pgproto3.Flush:
		case *pgproto3.Terminate:
			return
		default:
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "08P01", Message: "unexpected message"})
			_ = be.Flush()
			return
		}
		if be.Flush() != nil {
			return
		}
	}
}
