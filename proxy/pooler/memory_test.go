package pooler

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

// memorySink keeps TestMemoryCheck's garbage reachable until it drops it.
var memorySink [][]byte

// TestMemoryCheck: free heap memory past memoryIdleMax (640 KB of it here)
// goes back to the system at the next check (the released bytes grow), and the checks after
// that, with nothing freed since, soon find nothing to give back.
func TestMemoryCheck(t *testing.T) {
	var m memoryChecker
	m.check() // whatever the tests before left

	// 640 KB in large objects (pages of their own).
	for range 16 {
		memorySink = append(memorySink, make([]byte, 40<<10))
	}
	memorySink = nil
	runtime.GC()
	released := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(released)
	before := released[0].Value.Uint64()
	if !m.check() {
		t.Fatal("640 KB of free heap: nothing given back")
	}
	metrics.Read(released)
	if after := released[0].Value.Uint64(); after < before+memoryIdleMax {
		t.Errorf("released heap %d B -> %d B, want at least %d B more", before, after, memoryIdleMax)
	}
	// With nothing freed since, a check finds nothing to give back: it does
	// not give memory back on every turn. The package's other goroutines
	// (a cluster's log reader, a closing test's last frees) may free a
	// little meanwhile on a busy machine, so one of a few checks in a row
	// must find nothing (one in a row failed once in CI's busy-CPU rerun).
	for i := 0; m.check(); i++ {
		if i == 4 {
			t.Error("given back at five checks in a row with nothing freed by this test since")
			break
		}
	}
}
