//go:build linux

package pooler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/proxy/uring"
)

// ioModes runs f with the loop's reads and writes batched through
// io_uring and with a system call per socket (Config.PlainIO). The
// io_uring variant is skipped where the kernel has none.
func ioModes[T interface {
	testing.TB
	Run(string, func(T)) bool
}](t T, f func(t T, plain bool)) {
	for _, plain := range []bool{false, true} {
		name := "io_uring"
		if plain {
			name = "plain"
		}
		t.Run(name, func(t T) {
			if !plain {
				r, err := uring.New(2)
				if errors.Is(err, uring.ErrUnsupported) {
					t.Skipf("no io_uring on this kernel: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
			}
			f(t, plain)
		})
	}
}

func (tp *testProxy) sysCalls() sysCalls {
	var c sysCalls
	tp.loop.call(func() { c = tp.loop.sysCalls() })
	return c
}

func (c sysCalls) total() int64 { return c.epollWait + c.reads + c.writes + c.ringEnters }

// TestBatchedIO runs 24 clients at once through a pool of 4, each a mix
// of short queries and 100 KB results (several buffers: partial writes,
// streamed messages, full sockets), every value checked. Batched, the
// loop must have gone through io_uring; plain, never.
func TestBatchedIO(t *testing.T) {
	ioModes(t, func(t *testing.T, plain bool) {
		tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 4; c.PlainIO = plain })
		ctx := testCtx(t, 90*time.Second)
		const clients, rounds = 24, 30
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range clients {
			wg.Add(1)
			go func() { // owner: the test; ends after its rounds
				defer wg.Done()
				errs <- batchClient(ctx, tp.dsn, i, clients, rounds)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		c := tp.sysCalls()
		t.Logf("loop system calls: %+v", c)
		if plain && c.ringEnters != 0 {
			t.Errorf("PlainIO: %d io_uring_enter calls, want none", c.ringEnters)
		}
		if !plain && c.ringEnters == 0 {
			t.Errorf("no batch went through io_uring (%+v)", c)
		}
		if c.reads+c.writes == 0 && c.ringEnters == 0 {
			t.Errorf("no system calls counted: %+v", c)
		}
	})
}

// TestLoopLogsIOPath: the proxy says at start which path its loop takes,
// so that a user can tell.
func TestLoopLogsIOPath(t *testing.T) {
	ioModes(t, func(t *testing.T, plain bool) {
		var mu sync.Mutex
		var lines []string
		startProxy(t, func(c *Config) {
			c.PlainIO = plain
			c.Logf = func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, fmt.Sprintf(format, args...))
			}
		})
		want := "event loop: epoll; a turn's reads batched into one io_uring_enter"
		if plain {
			want = "event loop: epoll; one read or sendto system call per socket (plain I/O asked for)"
		}
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "event loop:") {
				n++
				if !strings.HasPrefix(l, want) {
					t.Errorf("log %q, want it to start %q", l, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d event loop lines in %q, want 1", n, lines)
		}
	})
}

func batchClient(ctx context.Context, dsn string, i, clients, rounds int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("client %d: %w", i, err)
	}
	defer conn.Close(ctx)
	for r := range rounds {
		// Simple and extended (unnamed) protocol in turn: in
		// transaction pooling pgx's statement cache needs
		// max_prepared_statements.
		mode := pgx.QueryExecModeSimpleProtocol
		if r%2 == 1 {
			mode = pgx.QueryExecModeExec
		}
		want := r*clients + i
		var got int
		if err := conn.QueryRow(ctx, "select $1::int * 2", mode, want).Scan(&got); err != nil || got != 2*want {
			return fmt.Errorf("client %d round %d: %d, %v; want %d", i, r, got, err, 2*want)
		}
		if r%5 == 0 {
			var s string
			letter := string(rune('a' + (i+r)%26))
			if err := conn.QueryRow(ctx, "select repeat($1::text, 100000)", mode, letter).Scan(&s); err != nil {
				return fmt.Errorf("client %d round %d: 100 KB: %w", i, r, err)
			}
			if len(s) != 100000 || strings.Trim(s, letter) != "" {
				return fmt.Errorf("client %d round %d: 100 KB of %q: got %d bytes, other letters %t", i, r, letter, len(s), strings.Trim(s, letter) != "")
			}
		}
	}
	return nil
}

// TestLoopWaitsShortWhileBusy checks the loop's pacing against Go's
// monitor thread: while events came within busyFor, epoll_wait sleeps at
// most busyWait; after, until the janitor's next tick.
func TestLoopWaitsShortWhileBusy(t *testing.T) {
	tp := startProxy(t, nil)
	var idle, busy int
	tp.loop.call(func() {
		l := tp.loop
		tp.nextTick = time.Now().Add(200 * time.Millisecond)
		l.now = time.Now()
		l.busy = l.now.Add(-2 * busyFor)
		idle = l.timeout()
		l.busy = l.now
		busy = l.timeout()
	})
	if want := int(busyWait.Milliseconds()); busy != want {
		t.Errorf("busy: epoll_wait timeout %d ms, want %d", busy, want)
	}
	if idle < 100 || idle > 201 {
		t.Errorf("idle: epoll_wait timeout %d ms, want the 200 ms to the janitor's tick", idle)
	}
}

// BenchmarkForward measures a round of 16 clients each running one simple
// query at once through the proxy, and reports the loop's system calls per
// query (epoll_wait, read, sendto, io_uring_enter): the figure that stays
// put on a loaded machine, where ns/op does not.
func BenchmarkForward(b *testing.B) {
	ioModes(b, func(b *testing.B, plain bool) {
		tp := startProxy(b, func(c *Config) { c.DefaultPoolSize = 8; c.PlainIO = plain; c.Verbose = false })
		ctx := testCtx(b, 10*time.Minute)
		conns := make([]*pgconn.PgConn, 16)
		for i := range conns {
			c, err := pgconn.Connect(ctx, tp.dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			if _, err := c.Exec(ctx, "select 1").ReadAll(); err != nil {
				b.Fatal(err)
			}
			conns[i] = c
		}
		start := tp.sysCalls()
		queries := 0
		errs := make([]error, len(conns))
		for b.Loop() {
			var wg sync.WaitGroup
			for i, c := range conns {
				wg.Add(1)
				go func() { // owner: this iteration
					defer wg.Done()
					_, errs[i] = c.Exec(ctx, "select 1").ReadAll()
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			queries += len(conns)
		}
		end := tp.sysCalls()
		b.ReportMetric(float64(end.total()-start.total())/float64(queries), "syscalls/query")
	})
}
