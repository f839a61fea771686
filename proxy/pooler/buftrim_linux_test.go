package pooler

import (
	"testing"
	"time"
)

// TestTrimFree: the loop's free buffers that no connection took over a
// trim period are dropped; those taken during it stay; an idle loop ends
// with none.
func TestTrimFree(t *testing.T) {
	l := &loop{now: time.Unix(1000, 0)}
	for range 8 {
		l.free = append(l.free, make([]byte, sockBufSize))
	}
	l.trimFree() // the first trim only starts the period
	if len(l.free) != 8 {
		t.Fatalf("first trim: %d free, want the 8 there were", len(l.free))
	}
	var taken [][]byte
	for range 3 {
		taken = append(taken, l.outBuf())
	}
	var sk sock
	l.buffer(&sk, 100)
	taken = append(taken, sk.buf)
	for _, b := range taken { // written: back on the list
		l.free = append(l.free, b[:sockBufSize])
	}
	l.now = l.now.Add(freeTrimPeriod - time.Millisecond)
	l.trimFree()
	if len(l.free) != 8 {
		t.Fatalf("before the period is over: %d free, want 8", len(l.free))
	}
	l.now = l.now.Add(time.Millisecond)
	l.trimFree()
	if len(l.free) != 4 {
		t.Fatalf("after a period in which 4 of 8 were taken at once: %d free, want 4", len(l.free))
	}
	l.now = l.now.Add(freeTrimPeriod)
	l.trimFree()
	if len(l.free) != 0 {
		t.Fatalf("after an idle period: %d free, want none", len(l.free))
	}
	if b := l.outBuf(); cap(b) != sockBufSize {
		t.Errorf("a buffer after the trim: capacity %d, want %d", cap(b), sockBufSize)
	}
}
