package proxy

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

// waitLog is a bounded ring of Wait records.
type waitLog struct {
	mu      sync.Mutex
	max     int
	buf     []Wait
	head    int // index of the oldest record once the ring is full
	dropped int64
}

func (l *waitLog) add(w Wait) {
	l.mu.Lock()
	if len(l.buf) < l.max {
		l.buf = append(l.buf, w)
	} else {
		l.buf[l.head] = w
		l.head = (l.head + 1) % l.max
		l.dropped++
	}
	l.mu.Unlock()
}

func (l *waitLog) drain() []Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Wait, 0, len(l.buf))
	out = append(out, l.buf[l.head:]...)
	out = append(out, l.buf[:l.head]...)
	l.buf = l.buf[:0]
	l.head = 0
	return out
}
