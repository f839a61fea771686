//go:build linux

package pooler

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPinLoop checks that PinLoop hands back the thread the event loop runs
// on, and that the traffic through the proxy runs there: validate reads
// that thread's CPU as the pooler's.
func TestPinLoop(t *testing.T) {
	tp := startProxy(t, func(c *Config) {
		c.MaxPreparedStatements = 5 // pgx's statement cache, as pgbench -M prepared would
		c.Verbose = false
	})
	ctx := testCtx(t, time.Minute)
	runAdders(ctx, t, tp.dsn, 2, 5) // serving, with a server open
	tid, unpin, err := tp.PinLoop()
	if err != nil {
		t.Fatalf("PinLoop: %v", err)
	}
	defer unpin()
	cpu := func() time.Duration {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
		if err != nil {
			t.Fatalf("the pinned loop's thread %d: %v", tid, err)
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		if err != nil {
			t.Fatalf("the pinned loop's thread %d's schedstat %q: %v", tid, b, err)
		}
		return time.Duration(ns)
	}
	for range 3 { // the loop stays on its thread from one turn to the next
		var on int
		if !tp.loop.call(func() { on = syscall.Gettid() }) {
			t.Fatal("the loop stopped")
		}
		if on != tid {
			t.Fatalf("PinLoop said thread %d, the loop runs on %d", tid, on)
		}
	}
	c0 := cpu()
	runAdders(ctx, t, tp.dsn, 4, 200)
	if c1 := cpu(); c1 <= c0 {
		t.Errorf("the pinned loop's thread %d ran %v of CPU while 4 clients ran 200 statements each through the proxy", tid, c1-c0)
	}
	unpin()
	unpin()                         // a second call does nothing
	runAdders(ctx, t, tp.dsn, 2, 5) // and the proxy serves on
}
