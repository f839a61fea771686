package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// startupBytes is a valid StartupMessage for user fake, database fake.
func startupBytes() []byte {
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "fake", "database": "fake"}}).Encode(nil)
	return b
}

func msg(typ byte, body string) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// FuzzClient feeds arbitrary bytes to the proxy as a client, before login
// (raw) or after a valid StartupMessage, in each pool mode, against an
// in-process fake PostgreSQL. Property: the proxy must not panic, and once
// the client is gone it holds no client and no linked server (every server
// is idle or closed), so nothing leaks; goroutine leaks are checked when the
// proxies stop (TestMain runs goleak).
func FuzzClient(f *testing.F) {
	q := msg('Q', "select 1\x00")
	f.Add(false, uint8(1), []byte{})
	f.Add(false, uint8(1), []byte{0, 0, 0, 8, 4, 210, 22, 47}) // SSLRequest, then EOF
	f.Add(false, uint8(1), []byte{0, 0, 0, 16, 4, 210, 22, 46, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add(false, uint8(1), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(false, uint8(0), append(startupBytes(), q...))
	f.Add(true, uint8(0), q)
	f.Add(true, uint8(1), q)
	f.Add(true, uint8(2), append(msg('Q', "BEGIN\x00"), q...))
	f.Add(true, uint8(1), append(msg('Q', "BEGIN\x00"), 'Q', 0, 0, 0)) // dies mid-message inside a transaction
	f.Add(true, uint8(1), append(append(msg('P', "\x00select 1\x00\x00\x00"), msg('B', "\x00\x00\x00\x00\x00\x00\x00\x00")...), append(msg('E', "\x00\x00\x00\x00\x00"), msg('S', "")...)...))
	f.Add(true, uint8(1), msg('H', ""))
	f.Add(true, uint8(1), msg('d', "garbage"))
	f.Add(true, uint8(1), msg('Z', "I"))
	f.Add(true, uint8(1), []byte{'Q', 0, 0, 0, 1})
	f.Add(true, uint8(1), []byte{'Q', 0x7f, 0xff, 0xff, 0xff, 's'})
	f.Add(true, uint8(1), msg('X', ""))
	f.Add(true, uint8(0), append(q, msg('X', "")...))

	fake := startFakePG(f)
	var proxies [3]*Proxy
	for i, mode := range []poolmode.Mode{poolmode.Session, poolmode.Transaction, poolmode.Statement} {
		cfg := DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.Upstream = fake.dsn()
		cfg.Mode = mode
		cfg.PoolSize = 2
		cfg.ShutdownTimeout = time.Second
		p, err := New(cfg)
		if err != nil {
			f.Fatal(err)
		}
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			f.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx, ln) }()
		f.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				f.Errorf("Serve: %v", err)
			}
		})
		proxies[i] = p
	}

	f.Fuzz(func(t *testing.T, loggedIn bool, mode uint8, data []byte) {
		p := proxies[int(mode)%len(proxies)]
		conn, err := net.Dial("tcp", p.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if loggedIn {
			data = append(startupBytes(), data...)
		}
		_, _ = conn.Write(data)
		_ = conn.(*net.TCPConn).CloseWrite()
		start := time.Now()
		_, _ = io.Copy(io.Discard, conn) // until the proxy closes the connection
		conn.Close()
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the proxy took %v to close a client that had sent everything", d)
		}

		deadline := time.Now().Add(5 * time.Second)
		for {
			clients, linked := proxyLoad(p)
			if clients == 0 && linked == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the client left: %d clients, %d servers not idle", clients, linked)
			}
			time.Sleep(time.Millisecond)
		}
		// Servers the proxy closed may take a moment to be noticed by the fake.
		for n := fake.open.Load(); n > 3*2; n = fake.open.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("fake server has %d connections open, more than the pools allow (6)", n)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// proxyLoad counts logged-in clients and servers that are not idle.
func proxyLoad(p *Proxy) (clients, busy int) {
	clients = len(p.clientList())
	for _, pl := range p.poolList() {
		pl.mu.Lock()
		for s := range pl.servers {
			if s.state != stateIdle {
				busy++
			}
		}
		if pl.login {
			busy++
		}
		pl.mu.Unlock()
	}
	return clients, busy
}
