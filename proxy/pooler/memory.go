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
// only after the heap shrank.
const (
	memoryCheck   = 5 * time.Second
	memoryIdleMax = 1 << 20
)

// returnMemory runs until ctx is done.
func returnMemory(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	t := time.NewTicker(memoryCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > memoryIdleMax {
			debug.FreeOSMemory()
		}
	}
}
