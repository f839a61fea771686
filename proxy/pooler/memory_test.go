package pooler

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

// memorySink keeps TestMemoryCheck's garbage reachable until it drops it.
var memorySink [][]byte

// TestMemoryCheck: free heap memory past memoryIdleMax (640 KB of it here)
// is given back to the system at the next check.
// Whether a later check finds nothing is not asserted: in a test process
// beside others (the race run, the busy-CPU rerun) the package's other
// goroutines free memory of their own between checks (five in a row gave
// back in CI).
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
	// What the runtime then releases is its own business (under the race
	// detector 32 KB of the 640 KB showed as released in CI): logged only.
	after := released[0].Value.Uint64()
	t.Logf("released heap %d B -> %d B", before, after)
}
