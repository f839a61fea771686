package pooler

import (
	"sync"
	"time"
)

// Wait is one server assignment: how long a client's request waited from
// reaching the proxy to being linked to a server (zero when a server was
// idle). The validator compares these with the model's acquire waits.
type Wait struct {
	At       time.Time     // when the server was linked
	Wait     time.Duration // request reached the proxy -> server linked
	Database string
	User     string
}

// Waits returns the assignments recorded since the last call, oldest first,
// and forgets them. At most Config.WaitLog are kept; older ones are dropped
// first and counted by WaitsDropped.
func (p *Proxy) Waits() []Wait { return p.waits.drain() }

// WaitsDropped is the number of Wait records dropped because the log was full.
func (p *Proxy) WaitsDropped() int64 {
	p.waits.mu.Lock()
	defer p.waits.mu.Unlock()
	return p.waits.dropped
}

// waitLog is a bounded ring of Wait records, kept compact and free of
// pointers (the garbage collector never scans it): the database and user
// are an index into keys.
type waitLog struct {
	mu      sync.Mutex
	max     int
	buf     []waitRec
	head    int // index of the oldest record once the ring is full
	dropped int64
	keys    []poolKey
}

type waitRec struct {
	at, wait int64 // UnixNano, nanoseconds
	key      int32 // index into waitLog.keys
}

// key returns the index of k, adding it; pools call it once. With no log
// kept nothing is added (pools come and go: autodb_idle_timeout).
func (l *waitLog) key(k poolKey) int32 {
	if l.max <= 0 {
		return -1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, k)
	return int32(len(l.keys) - 1)
}

func (l *waitLog) add(at time.Time, wait time.Duration, key int32) {
	if l.max <= 0 {
		return // nobody reads the log
	}
	r := waitRec{at: at.UnixNano(), wait: int64(wait), key: key}
	l.mu.Lock()
	if len(l.buf) < l.max {
		l.buf = append(l.buf, r)
	} else {
		l.buf[l.head] = r
		l.head = (l.head + 1) % l.max
		l.dropped++
	}
	l.mu.Unlock()
}

func (l *waitLog) drain() []Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Wait, 0, len(l.buf))
	for _, part := range [][]waitRec{l.buf[l.head:], l.buf[:l.head]} {
		for _, r := range part {
			k := l.keys[r.key]
			out = append(out, Wait{At: time.Unix(0, r.at), Wait: time.Duration(r.wait), Database: k.db, User: k.user})
		}
	}
	l.buf = l.buf[:0]
	l.head = 0
	return out
}
