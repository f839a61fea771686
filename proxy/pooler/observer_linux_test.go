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

// TestObserverOwnThread: an Observer that asks for LoopOwnThread is told
// the thread the event loop then keeps, the loop runs there from turn to
// turn and the traffic through the proxy runs there (validate reads that
// thread's CPU as the pooler's); back to LoopShared it is told 0, and the
// proxy serves on.
func TestObserverOwnThread(t *testing.T) {
	obs := &testObserver{}
	tp := startProxy(t, func(c *Config) {
		c.MaxPreparedStatements = 5 // pgx's statement cache, as pgbench -M prepared would
		c.Verbose = false
		c.Observer = obs
	})
	ctx := testCtx(t, time.Minute)
	runAdders(ctx, t, tp.dsn, 2, 5) // serving, with a server open
	obs.mode.Store(uint32(LoopOwnThread))
	// The loop looks at the next turn: at once when busy, at the janitor's
	// next tick (a third of a second) when idle.
	tid := obs.thread(true, 10*time.Second)
	if tid <= 0 {
		t.Fatalf("asked for LoopOwnThread, the observer was told no thread (%v)", obs.tids)
	}
	cpu := func() time.Duration {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
		if err != nil {
			t.Fatalf("the loop's thread %d: %v", tid, err)
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		if err != nil {
			t.Fatalf("the loop's thread %d's schedstat %q: %v", tid, b, err)
		}
		return time.Duration(ns)
	}
	for range 3 { // the loop stays on its thread from one turn to the next
		var on int
		if !tp.loop.call(func() { on = syscall.Gettid() }) {
			t.Fatal("the loop stopped")
		}
		if on != tid {
			t.Fatalf("the observer was told thread %d, the loop runs on %d", tid, on)
		}
	}
	c0 := cpu()
	runAdders(ctx, t, tp.dsn, 4, 200)
	if c1 := cpu(); c1 <= c0 {
		t.Errorf("the loop's thread %d ran %v of CPU while 4 clients ran 200 statements each through the proxy", tid, c1-c0)
	}
	if d := obs.cpu.Load(); d != 0 {
		t.Errorf("LoopOwnThread: LoopCPU was told %v, want nothing (only LoopTimed turns are timed)", time.Duration(d))
	}
	obs.mode.Store(uint32(LoopShared))
	runAdders(ctx, t, tp.dsn, 2, 5) // a turn or more: the loop gives the thread back
	if got := obs.thread(false, 10*time.Second); got != 0 {
		t.Fatalf("back to LoopShared, the observer's last thread is %d (told %v), want 0", got, obs.tids)
	}
	runAdders(ctx, t, tp.dsn, 2, 5) // and the proxy serves on
}

// TestObserverTimed: with LoopTimed the loop keeps a thread of its own and
// times its turns: LoopCPU is told CPU time while clients run statements,
// no more than the thread itself ran.
func TestObserverTimed(t *testing.T) {
	obs := &testObserver{}
	tp := startProxy(t, func(c *Config) {
		c.MaxPreparedStatements = 5 // runAdders uses pgx's statement cache
		c.Verbose = false
		c.Observer = obs
	})
	ctx := testCtx(t, time.Minute)
	runAdders(ctx, t, tp.dsn, 2, 5)
	obs.mode.Store(uint32(LoopTimed))
	tid := obs.thread(true, 10*time.Second)
	if tid <= 0 {
		t.Fatalf("asked for LoopTimed, the observer was told no thread (%v)", obs.tids)
	}
	clock := func() time.Duration { // the loop's thread's CPU, read on the loop
		var ns int64
		if !tp.loop.call(func() { ns = threadCPU() }) {
			t.Fatal("the loop stopped")
		}
		return time.Duration(ns)
	}
	c0, before := clock(), obs.cpu.Load()
	runAdders(ctx, t, tp.dsn, 4, 200)
	c1, after := clock(), obs.cpu.Load()
	// The turns that read the clock are timed too and straddle the reads:
	// a few milliseconds of slack.
	told, ran := time.Duration(after-before), c1-c0
	if told <= 0 || told > ran+5*time.Millisecond {
		t.Errorf("LoopCPU told %v while 4 clients ran 200 statements each; the loop's thread ran %v: want more than 0, at most that", told, ran)
	}
	obs.mode.Store(uint32(LoopShared))
	runAdders(ctx, t, tp.dsn, 2, 5)
	if got := obs.thread(false, 10*time.Second); got != 0 {
		t.Fatalf("back to LoopShared, the observer's last thread is %d, want 0", got)
	}
	shared := obs.cpu.Load()
	runAdders(ctx, t, tp.dsn, 2, 5)
	if d := obs.cpu.Load() - shared; d != 0 {
		t.Errorf("LoopShared: LoopCPU told %v more, want nothing", time.Duration(d))
	}
}
