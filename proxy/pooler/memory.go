package pooler

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Memory that follows the connections. The proxy's state per idle client is
// small (the loop lends buffers only while bytes wait), but Go's runtime
// keeps heap memory it has used until its scavenger gives it back, slowly
// and only down to about twice the live heap: after a storm of logins the
// memory of their garbage (goroutine stacks, messages) stays resident. So
// every memoryCheck the proxy looks at the heap memory that is free but
// still held, and when it is more than memoryIdleMax it collects and gives
// it back to the operating system (debug.FreeOSMemory: a full collection,
// concurrent but for short pauses, then madvise). With a live heap of a
// few MB that costs milliseconds of CPU, at most once per memoryCheck, and
// only after the heap shrank. The threshold is 256 KB: at 1 MB the garbage
// and free pages a storm of 5,000 logins left (0.5-0.9 MB) stayed resident
// for good in most runs, about 140 bytes per idle client (chaos suite,
// idle clients, 2026-12-06: 0.82 KB per client settled at 1 MB, 0.69 KB at
// 256 KB). Once given back that memory counts as released, not free, so
// the check does not fire again until the heap shrinks once more.
const (
	memoryCheck   = 5 * time.Second
	memoryIdleMax = 256 << 10
)

// returnMemory runs until ctx is done. Besides free heap it counts the
// garbage no collection has reclaimed yet when no collection ran during the
// last memoryCheck (a quiet proxy): a storm of logins that stays below the
// collector's goal (which a larger live heap, a larger binary's, raises)
// would otherwise keep its garbage resident. A busy proxy collects on its
// own and is not interrupted.
func returnMemory(ctx context.Context) {
	t := time.NewTicker(memoryCheck)
	defer t.Stop()
	var m memoryChecker
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.check()
	}
}

// memoryChecker is returnMemory's state between two checks.
type memoryChecker struct {
	sample     []metrics.Sample
	lastCycles uint64
}

// check gives the idle heap memory back when it is more than
// memoryIdleMax, and reports whether it did.
func (m *memoryChecker) check() bool {
	if m.sample == nil {
		m.sample = []metrics.Sample{
			{Name: "/memory/classes/heap/free:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"}, // live and not yet reclaimed
			{Name: "/gc/heap/live:bytes"},                // live at the last collection
			{Name: "/gc/cycles/total:gc-cycles"},
		}
	}
	sample := m.sample
	metrics.Read(sample)
	v := func(i int) uint64 {
		if sample[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[i].Value.Uint64()
	}
	idle := v(0)
	if cycles := v(3); cycles == m.lastCycles && v(1) > v(2) {
		idle += v(1) - v(2)
	}
	returned := idle > memoryIdleMax
	if returned {
		debug.FreeOSMemory()
	}
	metrics.Read(sample[3:])
	m.lastCycles = v(3)
	return returned
}
