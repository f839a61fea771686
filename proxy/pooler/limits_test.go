package pooler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// fakeProxy serves a proxy in front of an in-process fake PostgreSQL.
func fakeProxy(t *testing.T, fake *fakePG, edit func(*Config)) *testProxy {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream = fake.dsn()
	cfg.PoolMode = poolmode.Transaction
	cfg.ShutdownTimeout = time.Second
	cfg.AdminUsers = []string{"fake"}
	if edit != nil {
		edit(&cfg)
	}
	tp := serveProxy(t, cfg)
	tp.dsn = "postgres://fake@" + tp.Addr().String() + "/fake?sslmode=disable"
	return tp
}

// TestServerLoginRefused: when PostgreSQL refuses the pool's login (53300
// sorry, too many clients already) and the pool has no server, the clients
// logging in get the server's message as a FATAL 08P01, as PgBouncer 1.18
// sends it (measured: kill_pool_logins), and the log has PgBouncer's line
// for it.
func TestServerLoginRefused(t *testing.T) {
	fake := startFakePG(t)
	fake.refuse.Store(fatal(poolmode.SQLStateTooManyConn, poolmode.ErrTooManyClients))
	var logged sync.Map
	tp := fakeProxy(t, fake, func(c *Config) {
		c.ServerLoginRetry = 200 * time.Millisecond
		c.Logf = func(format string, args ...any) { logged.Store(fmt.Sprintf(format, args...), true) }
	})
	ctx := testCtx(t, 10*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = pgconn.Connect(ctx, tp.dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != poolmode.SQLStatePooler || pe.Message != poolmode.ErrTooManyClients || pe.Severity != "FATAL" {
			t.Errorf("client %d: err = %v, want FATAL 08P01 %q", i, err, poolmode.ErrTooManyClients)
		}
	}
	if got := fake.logins.Load(); got > 3 {
		t.Errorf("%d server logins for 3 clients; want at most one at a time, one per waiting batch", got)
	}
	if _, ok := logged.Load("server login failed: FATAL " + poolmode.ErrTooManyClients); !ok {
		t.Errorf("no log line %q, PgBouncer's for a refused first login", "server login failed: FATAL "+poolmode.ErrTooManyClients)
	}
}

// TestServerLoginRetry: after a failed server login, a client logging in to
// the pool is not refused at once: it waits for the next login, which
// starts server_login_retry after the failed one, and gets its outcome
// (PgBouncer 1.18, measured with server_login_retry 5 s: the second client
// got the server's error 5.3 s later).
func TestServerLoginRetry(t *testing.T) {
	fake := startFakePG(t)
	fake.refuse.Store(fatal(poolmode.SQLStateTooManyConn, poolmode.ErrTooManyClients))
	const retry = 600 * time.Millisecond
	tp := fakeProxy(t, fake, func(c *Config) { c.ServerLoginRetry = retry })
	ctx := testCtx(t, 10*time.Second)
	var pe *pgconn.PgError
	if _, err := pgconn.Connect(ctx, tp.dsn); !errors.As(err, &pe) || pe.Message != poolmode.ErrTooManyClients {
		t.Fatalf("first client: %v, want the server's %q", err, poolmode.ErrTooManyClients)
	}
	failed := time.Now()
	_, err := pgconn.Connect(ctx, tp.dsn)
	if !errors.As(err, &pe) || pe.Message != poolmode.ErrTooManyClients {
		t.Errorf("second client: %v, want the server's %q from the next login", err, poolmode.ErrTooManyClients)
	}
	if took := time.Since(failed); took < retry*3/4 {
		t.Errorf("second client answered after %v, before server_login_retry %v passed", took, retry)
	}
	if n := fake.logins.Load(); n != 2 {
		t.Errorf("%d server logins, want 2 (one per server_login_retry)", n)
	}
	// Once PostgreSQL accepts again, the next login gets through.
	fake.refuse.Store(nil)
	conn, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatalf("after PostgreSQL accepts again: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.Exec(ctx, "select 1").Close(); err != nil {
		t.Fatalf("query: %v", err)
	}
}

// TestOneLoginAtATime: a burst of clients in a fresh pool opens servers one
// at a time, never more than default_pool_size.
func TestOneLoginAtATime(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) { c.DefaultPoolSize = 3 })
	ctx := testCtx(t, 10*time.Second)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgconn.Connect(ctx, tp.dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			for range 20 {
				if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := fake.logins.Load(); n > 3 {
		t.Errorf("%d server logins, want at most default_pool_size 3", n)
	}
}

// TestServerIdleTimeout: idle servers are closed after server_idle_timeout;
// the janitor checks three times a second.
func TestServerIdleTimeout(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) { c.ServerIdleTimeout = 300 * time.Millisecond })
	ctx := testCtx(t, 10*time.Second)
	conn, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if fake.open.Load() != 1 {
		t.Fatalf("open server connections = %d, want 1", fake.open.Load())
	}
	waitFor(ctx, func() bool { return fake.open.Load() == 0 })
	if n := fake.open.Load(); n != 0 {
		t.Errorf("after server_idle_timeout: %d server connections open, want 0", n)
	}
	// The next query opens a new one.
	if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
		t.Fatalf("query after idle close: %v", err)
	}
}

// TestServerLifetime: a server older than server_lifetime is closed at
// release, not reused.
func TestServerLifetime(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) { c.ServerLifetime = 100 * time.Millisecond })
	ctx := testCtx(t, 10*time.Second)
	conn, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	time.Sleep(200 * time.Millisecond)
	for range 2 {
		if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fake.logins.Load(); n != 2 {
		t.Errorf("server logins = %d, want 2 (the first server outlived server_lifetime)", n)
	}
}

// TestMaxDBConnections: two pools of one database share
// max_db_connections = 1; the second pool gets its server once the first
// one's is idle (evicted), and there is never a second server.
func TestMaxDBConnections(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) { c.MaxDBConnections = 1 })
	ctx := testCtx(t, 10*time.Second)
	// b's pool logs in first; a's login then evicts b's idle server.
	b, err := pgconn.Connect(ctx, strings.Replace(tp.dsn, "fake@", "other@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	a, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if _, err := a.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, "select 1").ReadAll()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("second pool got a server while the database was full: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := a.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("second pool: %v", err)
	}
	if n := fake.logins.Load(); n != 3 {
		t.Errorf("server logins = %d, want 3 (b, a evicting b, b evicting a)", n)
	}
	tp.mu.Lock()
	n := tp.dbs["fake"].n.Load()
	tp.mu.Unlock()
	if n > 1 {
		t.Errorf("the proxy counts %d server connections of database fake, want at most max_db_connections 1", n)
	}
	// The fake notices closed connections a moment later.
	waitFor(ctx, func() bool { return fake.open.Load() <= 1 })
	if n := fake.open.Load(); n > 1 {
		t.Errorf("%d server connections open, want at most max_db_connections 1", n)
	}
}

// TestGracefulShutdown: after the context is cancelled, an idle client is
// closed at once, a client inside a transaction may finish it, and Serve
// returns once it has.
func TestGracefulShutdown(t *testing.T) {
	fake := startFakePG(t)
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream = fake.dsn()
	cfg.PoolMode = poolmode.Transaction
	cfg.ShutdownTimeout = 30 * time.Second // longer than the test could need
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- p.Serve(sctx, ln) }()
	dsn := "postgres://fake@" + p.Addr().String() + "/fake?sslmode=disable"
	ctx := testCtx(t, 60*time.Second)
	idle, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(ctx)
	busy, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close(ctx)
	if _, err := busy.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	stop()
	// Shutdown closes the listener, then the idle clients; wait for each
	// (the busy client, checked below, must outlive both).
	if !waitFor(ctx, func() bool {
		c, err := net.Dial("tcp", p.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	}) {
		t.Fatalf("the proxy still accepts connections after shutdown began")
	}
	if !waitFor(ctx, func() bool {
		_, err := idle.Exec(ctx, "select 1").ReadAll()
		return err != nil
	}) {
		t.Fatalf("idle client still served after shutdown began")
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) while a transaction was open", err)
	default:
	}
	if _, err := busy.Exec(ctx, "select 1").ReadAll(); err != nil {
		t.Fatalf("query inside the open transaction during shutdown: %v", err)
	}
	if _, err := busy.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		t.Fatalf("COMMIT during shutdown: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return after the last transaction ended")
	}
}

// TestProtocolErrors: malformed input before and after login gets a FATAL
// and a closed connection, never a server.
func TestProtocolErrors(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, nil)
	for _, tc := range []struct {
		name     string
		loggedIn bool
		data     []byte
		want     string
	}{
		{"bad startup length", false, []byte{0, 0, 0, 2, 0, 0, 0, 0}, "bad packet header: '0000000200000000'"},
		{"startup length bomb", false, []byte{0x40, 0, 0, 0, 0, 3, 0, 0}, "bad packet header: '4000000000030000'"},
		{"unknown message type", true, msg('z', ""), "unknown client packet type"},
		{"bad message length", true, []byte{'Q', 0, 0, 0, 1}, "bad packet header: '5100000001'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", tp.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			data := tc.data
			if tc.loggedIn {
				data = append(startupBytes(), data...)
			}
			if _, err := conn.Write(data); err != nil {
				t.Fatal(err)
			}
			fe := pgproto3.NewFrontend(conn, conn)
			for {
				m, err := fe.Receive()
				if err != nil {
					t.Fatalf("no FATAL before the connection closed: %v", err)
				}
				if e, ok := m.(*pgproto3.ErrorResponse); ok {
					if e.Severity != "FATAL" || e.Code != "08P01" || e.Message != tc.want {
						t.Errorf("got %s %s %q, want FATAL 08P01 %q", e.Severity, e.Code, e.Message, tc.want)
					}
					break
				}
			}
		})
	}
}

// TestProtocol32Declined: a client asking for protocol 3.2 is answered with
// NegotiateProtocolVersion 3.0 and works.
func TestProtocol32Declined(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, nil)
	ctx := testCtx(t, 5*time.Second)
	conn, err := pgconn.Connect(ctx, tp.dsn+"&max_protocol_version=3.2")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
}

// rawClient logs in to the proxy with a pgproto3.Frontend.
func rawClient(t *testing.T, addr string) (net.Conn, *pgproto3.Frontend) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(startupBytes()); err != nil {
		t.Fatal(err)
	}
	fe := pgproto3.NewFrontend(conn, conn)
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			return conn, fe
		}
	}
}

// TestWaitingClientSendsMore: a client that keeps sending while it waits
// for a server gets every request answered, in order, once it has one.
func TestWaitingClientSendsMore(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 10*time.Second)
	holder, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	_, fe := rawClient(t, tp.Addr().String())
	for i := range 3 { // three separate writes while waiting
		fe.Send(&pgproto3.Query{String: "select " + string(rune('1'+i))})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(ctx, func() bool { return waiting(tp.Proxy) == 1 }) {
			t.Fatalf("write %d: the client never waited for a server", i)
		}
	}
	if _, err := holder.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for {
			m, err := fe.Receive()
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			if _, ok := m.(*pgproto3.ReadyForQuery); ok {
				break
			}
			if e, ok := m.(*pgproto3.ErrorResponse); ok {
				t.Fatalf("reply %d: error %s", i, e.Message)
			}
		}
	}
}

// TestWaitingClientLeaves: a client that disconnects while waiting leaves
// the queue; its request never reaches a server and no server is closed.
func TestWaitingClientLeaves(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 10*time.Second)
	holder, err := pgconn.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	conn, fe := rawClient(t, tp.Addr().String())
	fe.Send(&pgproto3.Query{String: "select 1"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool { return waiting(tp.Proxy) == 1 }) {
		t.Fatal("the client never waited for a server")
	}
	conn.Close()
	if !waitFor(ctx, func() bool { c, _ := proxyLoad(tp.Proxy); return c == 1 }) {
		t.Fatal("the proxy still counts the client that left")
	}
	if _, err := holder.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "select 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if n := fake.logins.Load(); n != 1 {
		t.Errorf("server logins = %d, want 1: the server must survive a waiter that left", n)
	}
}
