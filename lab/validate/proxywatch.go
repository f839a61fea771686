package validate

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolsim/poolsim/proxy/pooler"
)

// proxyWatch is the validator's pooler.Observer on the in-process proxy:
// it keeps every server assignment's wait (a row's measured acquire waits,
// drained by running.waits) and, on request, keeps the proxy's event loop
// on an OS thread of its own (pin: that thread's counters are then the
// pooler's) or times the loop's CPU turn by turn (measureCPU). The proxy
// calls its Observer methods on its event loop; the validator's goroutines
// call the others.
type proxyWatch struct {
	waits  waitLog
	pinned atomic.Bool  // pin asked for a thread of the loop's own
	timed  atomic.Bool  // measureCPU(true): LoopTimed
	cpu    atomic.Int64 // the timed turns' CPU, nanoseconds

	mu   sync.Mutex
	tid  int           // the loop's own thread, 0 when it has none
	told chan struct{} // closed at the next LoopThread; nil when nobody waits
}

// waitLogMax bounds the assignments a proxyWatch keeps between drains.
const waitLogMax = 1 << 20

func newProxyWatch() *proxyWatch { return &proxyWatch{waits: waitLog{max: waitLogMax}} }

// Assigned keeps the assignment (pooler.Observer).
func (x *proxyWatch) Assigned(w pooler.Wait) { x.waits.add(w) }

// LoopMode is what the validator wants of the loop's thread (pooler.Observer).
func (x *proxyWatch) LoopMode() pooler.LoopMode {
	switch {
	case x.timed.Load():
		return pooler.LoopTimed
	case x.pinned.Load():
		return pooler.LoopOwnThread
	}
	return pooler.LoopShared
}

// LoopThread notes the loop's own thread (pooler.Observer).
func (x *proxyWatch) LoopThread(tid int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tid = tid
	if x.told != nil {
		close(x.told)
		x.told = nil
	}
}

// LoopCPU adds a timed turn's CPU (pooler.Observer).
func (x *proxyWatch) LoopCPU(d time.Duration) { x.cpu.Add(int64(d)) }

// pinWait bounds how long pin waits for the loop to take its thread: the
// loop looks at its next turn, at once when busy and within the janitor's
// third of a second when idle.
const pinWait = 10 * time.Second

// pin keeps the loop on a thread of its own until unpin and returns the
// thread's id, once the loop has taken it; 0 if it did not within pinWait
// (the proxy is not serving).
func (x *proxyWatch) pin() int {
	x.pinned.Store(true)
	deadline := time.NewTimer(pinWait)
	defer deadline.Stop()
	for {
		x.mu.Lock()
		tid := x.tid
		if tid > 0 {
			x.mu.Unlock()
			return tid
		}
		if x.told == nil {
			x.told = make(chan struct{})
		}
		told := x.told
		x.mu.Unlock()
		select {
		case <-told:
		case <-deadline.C:
			x.pinned.Store(false)
			return 0
		}
	}
}

// unpin lets the loop give its thread back at its next turn (unless its
// CPU is being timed).
func (x *proxyWatch) unpin() { x.pinned.Store(false) }

// measureCPU starts (on) or stops timing the loop's turns: each turn's
// CPU on its thread, from epoll_wait's return to the turn's end. It costs
// two system calls a turn while on, and the loop keeps an OS thread of its
// own meanwhile, which is not how it runs otherwise: it is off unless a
// calibration needs the loop's CPU apart from the rest of the process.
func (x *proxyWatch) measureCPU(on bool) { x.timed.Store(on) }

// timedCPU is the loop's CPU counted while measureCPU was on: the proxy's
// data plane (relaying, assigning), without logins, the console and Go's
// runtime.
func (x *proxyWatch) timedCPU() time.Duration { return time.Duration(x.cpu.Load()) }

// waitLog is a bounded ring of assignments, kept compact and free of
// pointers (the garbage collector never scans it): the database and user
// are an index into keys.
type waitLog struct {
	mu   sync.Mutex
	max  int
	buf  []waitRec
	head int // index of the oldest record once the ring is full
	keys []waitKey
}

type waitRec struct {
	at, wait int64 // UnixNano, nanoseconds
	key      int32 // index into waitLog.keys
}

type waitKey struct{ db, user string }

// add keeps w, dropping the oldest record when the ring is full.
func (l *waitLog) add(w pooler.Wait) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := waitRec{at: w.At.UnixNano(), wait: int64(w.Wait), key: l.key(waitKey{w.Database, w.User})}
	if len(l.buf) < l.max {
		l.buf = append(l.buf, r)
		return
	}
	l.buf[l.head] = r
	l.head = (l.head + 1) % l.max
}

// key is the index of k, added if new; a row has a pool or a few. l.mu is
// held.
func (l *waitLog) key(k waitKey) int32 {
	for i := len(l.keys) - 1; i >= 0; i-- {
		if l.keys[i] == k {
			return int32(i)
		}
	}
	l.keys = append(l.keys, k)
	return int32(len(l.keys) - 1)
}

// drain returns the records kept, oldest first, and forgets them.
func (l *waitLog) drain() []pooler.Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]pooler.Wait, 0, len(l.buf))
	for _, part := range [][]waitRec{l.buf[l.head:], l.buf[:l.head]} {
		for _, r := range part {
			k := l.keys[r.key]
			out = append(out, pooler.Wait{At: time.Unix(0, r.at), Wait: time.Duration(r.wait), Database: k.db, User: k.user})
		}
	}
	l.buf = l.buf[:0]
	l.head = 0
	return out
}
