package pooler

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
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

	// Named statements, for the proxies that track them (modes 3 and 4):
	// Parse, Bind, Describe, Close, reuse of a name, unknown names,
	// evictions (the cache holds 2), a pipeline with fakes in it.
	cat := func(ms ...[]byte) []byte { return bytes.Join(ms, nil) }
	parse := func(name, query string) []byte { return msg('P', name+"\x00"+query+"\x00\x00\x00") }
	bind := func(name string) []byte { return msg('B', "\x00"+name+"\x00\x00\x00\x00\x00\x00\x00") }
	exec := msg('E', "\x00\x00\x00\x00\x00")
	sync := msg('S', "")
	closeS := func(name string) []byte { return msg('C', "S"+name+"\x00") }
	describe := func(kind, name string) []byte { return msg('D', kind+name+"\x00") }
	named := [][]byte{
		cat(parse("s1", "select 1"), bind("s1"), exec, sync),
		cat(parse("s1", "select 1"), sync, bind("s1"), exec, sync, parse("s1", "select 1"), sync),
		cat(parse("s1", "select 1"), sync, closeS("s1"), sync, bind("s1"), exec, sync),
		cat(parse("a", "select 1"), parse("b", "select 2"), parse("c", "select 3"), bind("a"), exec, describe("S", "b"), bind("c"), exec, sync),
		cat(parse("a", "select 1"), sync, parse("b", "select 1"), bind("b"), exec, closeS("a"), closeS("b"), sync, parse("a", "select 2"), sync),
		cat(closeS("nothing"), msg('H', ""), bind("nothing"), sync),
		cat(describe("S", "nothing"), sync),
		cat(describe("P", ""), parse("", "select 1"), bind(""), closeS(""), msg('C', "P\x00"), sync),
		cat(parse("x", "select 1"), q, bind("x"), exec, sync, msg('Q', "BEGIN\x00"), bind("x"), exec, sync),
		cat(msg('P', "s1\x00select 1"), sync),
		cat(msg('B', "\x00s1"), sync),
		cat(msg('D', "S"), msg('C', "S"), sync),
		cat(parse("s1", "select 1"), bind("s1"), exec, []byte{'S', 0, 0}), // leaves mid-message
		{'P', 0x3f, 0xff, 0xff, 0xff, 's', '1', 0},                        // claims 1 GB, sends 3 bytes
	}
	for _, b := range named {
		f.Add(true, uint8(3), b)
		f.Add(true, uint8(4), b)
	}

	fake := startFakePG(f)
	// Modes 0-2: session, transaction, statement; 3 and 4: transaction and
	// statement tracking prepared statements, 2 per server.
	var proxies [5]*Proxy
	for i, mode := range []poolmode.Mode{poolmode.Session, poolmode.Transaction, poolmode.Statement, poolmode.Transaction, poolmode.Statement} {
		cfg := DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.Upstream = fake.dsn()
		cfg.PoolMode = mode
		cfg.DefaultPoolSize = 2
		if i >= 3 {
			cfg.MaxPreparedStatements = 2
		}
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
		// Until the proxy closes the connection; the read deadline ends it
		// with a timeout error if the proxy never does.
		_, err = io.Copy(io.Discard, conn)
		conn.Close()
		if err != nil {
			t.Fatalf("the proxy did not close a client that had sent everything: %v", err)
		}

		deadline := time.Now().Add(30 * time.Second) // a guard: the proxy tidies up in milliseconds
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
		// No server connection leaks: the fake has at most as many open as
		// the proxies count, and no pool more than its size. (Inputs that
		// log in as another user or database make pools of their own.)
		// Servers the proxy closed may take a moment to be noticed by the fake.
		for {
			held, over := serverCount(proxies[:])
			if over != "" {
				t.Fatal(over)
			}
			n := fake.open.Load()
			if n <= int64(held) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fake server has %d connections open, the proxies count %d", n, held)
			}
			time.Sleep(time.Millisecond)
		}
		// Every registered statement is held by a server's cache (the
		// client's names are gone), and no server expects a response.
		for err := psConsistent(p); err != nil; err = psConsistent(p) {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// serverCount counts the proxies' server connections (logins in flight
// included) and names a pool that has more than its size.
func serverCount(proxies []*Proxy) (held int, over string) {
	for _, px := range proxies {
		_ = px.Addr() // the proxy has started: its loop is set
		px.loop.call(func() {
			for _, pl := range px.loopPools {
				held += pl.queue.Servers()
				if pl.queue.Servers() > pl.size {
					over = fmt.Sprintf("pool %s has %d servers, more than its size %d", pl.key, pl.queue.Servers(), pl.size)
				}
			}
		})
	}
	return held, over
}

// proxyLoad counts logged-in clients and servers that are not idle.
func proxyLoad(p *Proxy) (clients, busy int) {
	p.loop.call(func() {
		clients = len(p.clientList())
		for _, pl := range p.poolList() {
			for s := range pl.servers {
				if s.state != stateIdle {
					busy++
				}
			}
			if pl.queue.LoggingIn() {
				busy++
			}
		}
	})
	return clients, busy
}

// waiting counts the clients waiting for a server in all of p's pools.
func waiting(p *Proxy) (n int) {
	p.loop.call(func() {
		for _, pl := range p.poolList() {
			n += pl.queue.Waiting()
		}
	})
	return n
}

// psConsistent checks the prepared-statement bookkeeping of an idle proxy:
// each registered statement has exactly as many references as client names
// and server caches (and eviction Closes in flight) hold, and no server
// holds a statement the registry lost.
func psConsistent(p *Proxy) (err error) {
	p.loop.call(func() { err = psConsistentLoop(p) })
	return err
}

func psConsistentLoop(p *Proxy) error {
	want := map[*psEntry]int{}
	for _, c := range p.clientList() {
		for _, e := range c.stmts {
			want[e]++
		}
	}
	for _, pl := range p.poolList() {
		for _, s := range pl.allServers() {
			for e := range s.ps.cache {
				want[e]++
			}
			for _, r := range s.ps.queue[s.ps.head:] {
				if r.typ == 'C' && r.stmt != nil {
					want[r.stmt]++
				}
			}
			if pending := s.ps.pending(); pending > 0 && s.client == nil {
				return fmt.Errorf("server %d is unlinked with %d responses due", s.id, pending)
			}
		}
	}
	p.ps.mu.Lock()
	defer p.ps.mu.Unlock()
	for e, n := range want {
		if p.ps.byKey[e.key] != e {
			return fmt.Errorf("statement %s is held but not registered", e.name)
		}
		if e.refs != n {
			return fmt.Errorf("statement %s has %d references, %d holders", e.name, e.refs, n)
		}
	}
	if len(p.ps.byKey) != len(want) {
		return fmt.Errorf("%d statements registered, %d held", len(p.ps.byKey), len(want))
	}
	return nil
}
