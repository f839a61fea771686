package pooler

import (
	"sync"
	"sync/atomic"
	"time"
)

// testObserver is an Observer that keeps what it is told; mode is what it
// asks of the event loop's thread.
type testObserver struct {
	mode atomic.Uint32 // a LoopMode
	cpu  atomic.Int64  // LoopCPU's sum, nanoseconds

	mu      sync.Mutex
	waits   []Wait
	tids    []int         // LoopThread's, in order
	told    chan struct{} // closed and replaced at each LoopThread
	current int           // the last tid told
}

func (o *testObserver) Assigned(w Wait) {
	o.mu.Lock()
	o.waits = append(o.waits, w)
	o.mu.Unlock()
}

func (o *testObserver) LoopMode() LoopMode { return LoopMode(o.mode.Load()) }

func (o *testObserver) LoopThread(tid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tids = append(o.tids, tid)
	o.current = tid
	if o.told != nil {
		close(o.told)
		o.told = nil
	}
}

func (o *testObserver) LoopCPU(d time.Duration) { o.cpu.Add(int64(d)) }

// assigned is every assignment told so far.
func (o *testObserver) assigned() []Wait {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Wait(nil), o.waits...)
}

// thread waits until the loop's thread told is (tid > 0) or is not (tid
// 0 or less: none) one of its own, up to timeout, and returns the last told.
func (o *testObserver) thread(own bool, timeout time.Duration) int {
	deadline := time.After(timeout)
	for {
		o.mu.Lock()
		tid := o.current
		if (tid > 0) == own {
			o.mu.Unlock()
			return tid
		}
		if o.told == nil {
			o.told = make(chan struct{})
		}
		told := o.told
		o.mu.Unlock()
		select {
		case <-told:
		case <-deadline:
			return tid
		}
	}
}
