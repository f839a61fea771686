package pooler

import "time"

// The loop's free list (loop.free) keeps up to maxFreeBufs buffers of
// sockBufSize, so that busy connections do not allocate one per message.
// After a burst that needed many at once (a thousand clients sending at
// the same moment) they would stay for good: 16 MB at the bound, held by
// a proxy whose clients have all gone idle. So every freeTrimPeriod the
// loop drops the buffers that were not taken over the whole period (the
// list's low-water mark since the last trim): a steady load keeps what it
// uses, an idle proxy keeps none, and the memory check (memory.go) gives
// the dropped buffers back to the operating system.
const freeTrimPeriod = 10 * time.Second

// trimFree drops the free buffers unused since the last trim, when
// freeTrimPeriod has passed. It runs on the loop, every turn.
func (l *loop) trimFree() {
	if l.now.Before(l.freeTrim) {
		return
	}
	if drop := min(l.freeLow, len(l.free)); drop > 0 {
		// The list is a stack: the bottom ones are the longest unused.
		n := copy(l.free, l.free[drop:])
		clear(l.free[n:])
		l.free = l.free[:n]
	}
	l.freeLow = len(l.free)
	l.freeTrim = l.now.Add(freeTrimPeriod)
}
