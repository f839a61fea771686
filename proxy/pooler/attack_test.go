package pooler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"weak"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// needBouncer starts a PgBouncer 1.18 with cfg, skipping the test without
// one (failing under CI=true).
func needBouncer(ctx context.Context, t *testing.T, cfg pgbouncer.Config) *pgbouncer.PgBouncer {
	t.Helper()
	b, err := pgbouncer.Start(ctx, cfg)
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("CI=true and pgbouncer is required: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return b
}

// rawExchange dials addr, writes data and returns every byte the peer sends
// until it closes the connection (or 10 s pass).
func rawExchange(t *testing.T, addr string, data []byte) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(data); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	return b
}

// lastError decodes the last ErrorResponse in a byte stream from a server.
func lastError(b []byte) *pgproto3.ErrorResponse {
	var last *pgproto3.ErrorResponse
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:])) + 1
		if n < 5 || n > len(b) {
			break
		}
		if b[0] == 'E' {
			var e pgproto3.ErrorResponse
			if e.Decode(b[5:n]) == nil {
				last = &e
			}
		}
		b = b[n:]
	}
	return last
}

func startupFor(user, db string) []byte {
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": user, "database": db}}).Encode(nil)
	return b
}

// TestConsoleAccess: the same checks against PgBouncer 1.18 and the proxy,
// both with admin_users = adm and stats_users = st: a user in neither is
// refused the console with FATAL 08P01 "not allowed"; a stats user runs
// SHOW but gets ERROR 08P01 "admin access needed" for admin commands (and
// stays connected); the admin user runs SHOW.
func TestConsoleAccess(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 60*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20),
		Users:      map[string]string{"poolsim": "poolsim", "st": "", "adm": ""},
		AdminUsers: []string{"adm"}, Extra: map[string]string{"stats_users": "st"}})
	tp := startProxy(t, func(cfg *Config) { cfg.AdminUsers = []string{"adm"}; cfg.StatsUsers = []string{"st"} })
	for _, target := range []struct {
		name string
		dsn  func(user string) string
	}{
		{"pgbouncer", func(user string) string { return b.DSN("pgbouncer", user) }},
		{"proxy", func(user string) string {
			return fmt.Sprintf("postgres://%s@%s/pgbouncer?sslmode=disable", user, tp.Addr())
		}},
	} {
		t.Run(target.name, func(t *testing.T) {
			_, err := pgconn.Connect(ctx, target.dsn("poolsim"))
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "08P01" || pe.Message != "not allowed" {
				t.Errorf("console as a user in neither list: %v, want FATAL 08P01 \"not allowed\"", err)
			}
			st, err := pgconn.Connect(ctx, target.dsn("st"))
			if err != nil {
				t.Fatalf("console as a stats user: %v", err)
			}
			defer st.Close(ctx)
			if _, err := st.Exec(ctx, "SHOW POOLS").ReadAll(); err != nil {
				t.Errorf("stats user SHOW POOLS: %v", err)
			}
			for _, cmd := range []string{"PAUSE", "RELOAD", "SHOW FDS", "SET default_pool_size = 3"} {
				_, err := st.Exec(ctx, cmd).ReadAll()
				if !errors.As(err, &pe) || pe.Severity != "ERROR" || pe.Code != "08P01" || pe.Message != "admin access needed" {
					t.Errorf("stats user %s: %v, want ERROR 08P01 \"admin access needed\"", cmd, err)
				}
			}
			if _, err := st.Exec(ctx, "SHOW STATS").ReadAll(); err != nil {
				t.Errorf("stats user after a refused command: %v (the connection must stay usable)", err)
			}
			adm, err := pgconn.Connect(ctx, target.dsn("adm"))
			if err != nil {
				t.Fatalf("console as the admin user: %v", err)
			}
			defer adm.Close(ctx)
			if _, err := adm.Exec(ctx, "SHOW POOLS").ReadAll(); err != nil {
				t.Errorf("admin SHOW POOLS: %v", err)
			}
		})
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestConsoleLengthBomb: console messages whose headers claim 1 GiB (and
// one of 5000 bytes, past pkt_buf) get PgBouncer's FATAL "incomplete pkt"
// before anything is allocated for them: eight such connections leave the
// heap where it was. PgBouncer answers the same bytes with the same text.
func TestConsoleLengthBomb(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 60*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20),
		Users: map[string]string{"poolsim": "poolsim", "adm": ""}, AdminUsers: []string{"adm"}})
	tp := startProxy(t, func(cfg *Config) { cfg.AdminUsers = []string{"adm"} })
	long := append([]byte{'Q', 0, 0, 0, 0}, strings.Repeat(" ", 4994)+"\x00"...)
	binary.BigEndian.PutUint32(long[1:], uint32(len(long)-1))
	bombs := map[string][]byte{
		"1 GiB header":      append(startupFor("adm", "pgbouncer"), 'Q', 0x40, 0, 0, 0),
		"5000-byte message": append(startupFor("adm", "pgbouncer"), long...),
	}
	for name, data := range bombs {
		for target, addr := range map[string]string{"pgbouncer": fmt.Sprintf("127.0.0.1:%d", b.Port()), "proxy": tp.Addr().String()} {
			e := lastError(rawExchange(t, addr, data))
			if e == nil || e.Severity != "FATAL" || e.Code != "08P01" || e.Message != "incomplete pkt" {
				t.Errorf("%s, %s: got %+v, want FATAL 08P01 \"incomplete pkt\"", target, name, e)
			}
		}
	}
	before := heapInUse()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rawExchange(t, tp.Addr().String(), bombs["1 GiB header"])
		}()
	}
	wg.Wait()
	if after := heapInUse(); after > before+16<<20 {
		t.Errorf("heap grew from %d to %d bytes after 8 console length bombs", before, after)
	}
	// The proxy still serves its console.
	adm, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://adm@%s/pgbouncer?sslmode=disable", tp.Addr()))
	if err != nil {
		t.Fatalf("console after the bombs: %v", err)
	}
	adm.Close(ctx)
}

// TestClientLoginTimeout: a connection that sends nothing gets FATAL
// "client_login_timeout" once client_login_timeout has passed, and until
// then it counts against max_client_conn, as in PgBouncer.
func TestClientLoginTimeout(t *testing.T) {
	fake := startFakePG(t)
	const timeout = 700 * time.Millisecond
	tp := fakeProxy(t, fake, func(c *Config) { c.MaxClientConn = 2; c.ClientLoginTimeout = timeout })
	ctx := testCtx(t, 20*time.Second)
	var idle []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", tp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		idle = append(idle, conn)
	}
	start := time.Now()
	_, err := pgconn.Connect(ctx, tp.dsn)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Message != poolmode.ErrMaxClientConn {
		t.Errorf("third connection while two have not logged in: %v, want %q", err, poolmode.ErrMaxClientConn)
	}
	for i, conn := range idle {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(conn)
		e := lastError(b)
		if e == nil || e.Severity != "FATAL" || e.Message != "client_login_timeout" {
			t.Errorf("idle connection %d: got %+v, want FATAL \"client_login_timeout\"", i, e)
		}
	}
	if took := time.Since(start); took < timeout*3/4 {
		t.Errorf("idle connections closed after %v, before client_login_timeout %v", took, timeout)
	}
	// Their places are free again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := pgconn.Connect(ctx, tp.dsn)
		if err == nil {
			conn.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client after the idle connections left: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flakyListener fails its first n Accepts with err, then accepts.
type flakyListener struct {
	net.Listener
	n   atomic.Int64
	err error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// TestAcceptErrorsBackOff: accept failing with EMFILE (the process is out
// of descriptors) does not end Serve: the errors are logged at most once a
// second, the loop backs off, and clients are served once accept works.
func TestAcceptErrorsBackOff(t *testing.T) {
	fake := startFakePG(t)
	var logs atomic.Int64
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Upstream = fake.dsn()
	cfg.PoolMode = poolmode.Transaction
	cfg.ShutdownTimeout = time.Second
	cfg.Logf = func(format string, args ...any) {
		if strings.HasPrefix(format, "ERROR: accept() failed") { // PgBouncer's log_error
			logs.Add(1)
		}
		t.Logf(format, args...)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const failures = 12
	fl := &flakyListener{Listener: ln, err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}}
	fl.n.Store(failures)
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(sctx, fl) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	conn, err := pgconn.Connect(ctx, "postgres://fake@"+ln.Addr().String()+"/fake?sslmode=disable")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("client after %d accept errors: %v", failures, err)
	}
	conn.Close(ctx)
	if n := p.stats.acceptErrors.Load(); n != failures {
		t.Errorf("%d accept errors counted, want %d", n, failures)
	}
	if n, most := logs.Load(), int64(took/time.Second)+1; n < 1 || n > most {
		t.Errorf("%d accept log lines for %d errors in %v, want 1 to %d (at most one a second)", n, failures, took, most)
	}
}

// TestAutodbIdleTimeout: 300 auto-created pools (one per user) whose
// servers have gone idle are dropped after autodb_idle_timeout, and the
// memory they held does not stay with the proxy; a client of a dropped
// pool gets a new one.
func TestAutodbIdleTimeout(t *testing.T) {
	fake := startFakePG(t)
	tp := fakeProxy(t, fake, func(c *Config) {
		c.ServerIdleTimeout = 200 * time.Millisecond
		c.AutodbIdleTimeout = 400 * time.Millisecond
		c.MaxClientConn = 1000
	})
	ctx := testCtx(t, 90*time.Second)
	pools := func() int {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.pools)
	}
	const n = 300
	goroutines := runtime.NumGoroutine()
	// round makes n pools, lets them be dropped and returns the heap with
	// them and after them.
	round := func() (grown, after uint64) {
		// Each client stays connected until all n pools exist: a pool with a
		// client is not idle, so autodb_idle_timeout cannot drop the first
		// ones while a busy machine is still making the last.
		conns := make([]*pgconn.PgConn, 0, n)
		defer func() {
			for _, c := range conns {
				c.Close(ctx)
			}
		}()
		for i := range n {
			conn, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://u%d@%s/db%d?sslmode=disable", i, tp.Addr(), i))
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
			if err := conn.Exec(ctx, "select 1").Close(); err != nil {
				t.Fatal(err)
			}
		}
		if got := pools(); got != n {
			t.Fatalf("%d pools after %d users, want %d", got, n, n)
		}
		var made []weak.Pointer[pool]
		tp.mu.Lock()
		for _, pl := range tp.pools {
			made = append(made, weak.Make(pl))
		}
		tp.mu.Unlock()
		for _, c := range conns {
			c.Close(ctx)
		}
		conns = nil
		grown = heapInUse()
		waitFor(ctx, func() bool { return pools() == 0 })
		if got := pools(); got != 0 {
			t.Fatalf("%d pools left after autodb_idle_timeout, want 0", got)
		}
		var loopPools int
		tp.loop.call(func() { loopPools = len(tp.loopPools) })
		if loopPools != 0 {
			t.Fatalf("the loop still holds %d pools", loopPools)
		}
		// The goroutines of the closed clients and servers (the proxy's
		// and the fake server's) end on their own time and may hold a
		// pool until then: a dropped pool still reachable once they are
		// gone (or after a bounded wait on a machine too busy to let
		// them end) is kept by the proxy.
		settle, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		kept := func() (n int) {
			runtime.GC()
			for _, w := range made {
				if w.Value() != nil {
					n++
				}
			}
			return n
		}
		if !waitFor(settle, func() bool { return runtime.NumGoroutine() <= goroutines && kept() == 0 }) {
			t.Logf("%d goroutines after a round, %d before the first", runtime.NumGoroutine(), goroutines)
		}
		if k := kept(); k > 0 {
			t.Fatalf("%d of %d dropped pools are still reachable", k, len(made))
		}
		return grown, heapInUse()
	}
	// What the dropped pools held is either freed or kept as capacity
	// (maps and slices keep the room they grew to): a second round reuses
	// that capacity, so it ends where the first ended, while memory that
	// leaks with each pool piles up again. What a round's pools take is
	// measured in the second round, from where the first left the heap
	// (the heap before the first round also holds what the tests before
	// this one left behind). A leak adds its share of that with every
	// round, so it shows in both rounds 2 and 3; a one-off jump of the
	// heap in one round (a busy machine's late garbage) does not.
	before := heapInUse()
	grown1, after1 := round()
	grown2, after2 := round()
	grown3, after3 := round()
	added := grown2 - min(after1, grown2)
	step := func(from, to uint64) uint64 { return to - min(from, to) }
	t.Logf("heap: %d before; with %d pools and after them, round 1: %d, %d; round 2: %d, %d; round 3: %d, %d", before, n, grown1, after1, grown2, after2, grown3, after3)
	if s2, s3 := step(after1, after2), step(after2, after3); added > 0 && s2 > added/3 && s3 > added/3 {
		t.Errorf("rounds 2 and 3 of %d dropped pools each left more on the heap (%d, %d bytes) than a third of what a round's pools took (%d): the dropped pools' memory stays", n, s2, s3, added)
	}
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://u0@%s/db0?sslmode=disable", tp.Addr()))
	if err != nil {
		t.Fatalf("client of a dropped pool: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.Exec(ctx, "select 1").Close(); err != nil {
		t.Fatal(err)
	}
}

// TestServerDownLogin: with nothing listening on the upstream port, a
// client logging in waits, then gets PgBouncer's FATAL 08P01
// "client_login_timeout (server down)" once client_login_timeout has
// passed, exactly as PgBouncer 1.18 (checked side by side); neither
// error shows the upstream's address or a Go error. A hung upstream (it
// accepts and never answers) gives the same, not query_wait_timeout, and
// the proxy's log names server_connect_timeout.
func TestServerDownLogin(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() { // owner: this test; ends when hung is closed
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	hungPort := hung.Addr().(*net.TCPAddr).Port

	const loginTimeout = 2 * time.Second
	var logged sync.Map
	for _, tc := range []struct {
		name string
		port int
	}{{"down", downPort}, {"hung", hungPort}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Listen = "127.0.0.1:0"
			cfg.Upstream = fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/poolsim?sslmode=disable", tc.port)
			cfg.PoolMode = poolmode.Transaction
			cfg.ClientLoginTimeout = loginTimeout
			cfg.ServerConnectTimeout = 500 * time.Millisecond
			cfg.ServerLoginRetry = 300 * time.Millisecond
			cfg.ShutdownTimeout = time.Second
			cfg.Logf = func(format string, args ...any) {
				line := fmt.Sprintf(format, args...)
				logged.Store(tc.name+": "+line, true)
				t.Log(line)
			}
			tp := serveProxy(t, cfg)
			targets := map[string]string{"proxy": fmt.Sprintf("postgres://poolsim@%s/poolsim?sslmode=disable", tp.Addr())}
			if _, err := pgbouncer.Find(); err == nil {
				b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: tc.port, Pooling: pgbouncer.Pool(poolmode.Transaction, 20),
					Extra: map[string]string{"client_login_timeout": "2", "server_connect_timeout": "1", "server_login_retry": "1"}})
				targets["pgbouncer"] = b.DSN("poolsim", "poolsim")
			} else if pgclustertest.InCI() {
				t.Fatal("CI=true and pgbouncer is required")
			}
			var wg sync.WaitGroup
			for name, dsn := range targets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					_, err := pgconn.Connect(ctx, dsn)
					took := time.Since(start)
					var pe *pgconn.PgError
					if !errors.As(err, &pe) || pe.Severity != "FATAL" || pe.Code != "08P01" || pe.Message != "client_login_timeout (server down)" {
						t.Errorf("%s: %v, want FATAL 08P01 \"client_login_timeout (server down)\"", name, err)
						return
					}
					for _, leak := range []string{"127.0.0.1", fmt.Sprint(tc.port), "dial", "connect:", "refused", "timeout:", "context"} {
						if strings.Contains(pe.Message+pe.Detail+pe.Hint, leak) {
							t.Errorf("%s: the client's error %q shows %q", name, pe.Message, leak)
						}
					}
					if took < loginTimeout*3/4 || took > loginTimeout+3*time.Second {
						t.Errorf("%s: answered after %v, want about client_login_timeout %v", name, took, loginTimeout)
					}
				}()
			}
			wg.Wait()
		})
	}
	found := false
	logged.Range(func(k, _ any) bool {
		if s := k.(string); strings.HasPrefix(s, "hung: ") && strings.Contains(s, "server_connect_timeout") {
			found = true
		}
		return true
	})
	if !found {
		t.Errorf("the proxy's log never names server_connect_timeout for the hung upstream")
	}
}
