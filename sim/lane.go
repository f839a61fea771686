package sim

// Lanes. A model schedules most of its events with a delay that is the
// same every time (a network hop, a constant service or think time, a
// timeout) or at least never earlier than the last event of the same kind:
// such events arrive in the order they must run. A lane is a FIFO of them,
// one per event kind; only its head sits in the heap, so the heap holds a
// handful of lane heads and the events that came out of order, instead of
// every pending event. Popping a lane's head puts the lane's next event in
// its place in the heap (one sift). The order of Handle calls is exactly
// the heap's order, (At, seq): a lane only ever appends an event that is
// not earlier than its last one, and sequence numbers grow, so each lane
// is sorted by (At, seq) and its head is its least.

const (
	nLanes   = 16 // kinds share them modulo 16
	laneBits = 5  // a sequence number's low bits: 0 outside a lane, else the lane's index + 1
	laneMask = 1<<laneBits - 1
)

// lane is one kind's FIFO of events behind its head (which is in the heap).
type lane struct {
	buf     []Event // ring, length a power of two
	head, n int
	busy    bool // its head is in the heap
	last    Time // At of its last event
}

func (l *lane) put(t Time, seq uint64, kind, id int32, arg int64) {
	if l.n == len(l.buf) {
		l.grow()
	}
	e := &l.buf[(l.head+l.n)&(len(l.buf)-1)]
	e.At, e.seq, e.Kind, e.ID, e.Arg = t, seq, kind, id, arg
	l.n++
}

func (l *lane) grow() {
	nb := make([]Event, max(4, 2*len(l.buf)))
	for i := 0; i < l.n; i++ {
		nb[i] = l.buf[(l.head+i)&(len(l.buf)-1)]
	}
	l.buf, l.head = nb, 0
}

func (l *lane) take() Event {
	e := l.buf[l.head]
	l.head = (l.head + 1) & (len(l.buf) - 1)
	l.n--
	return e
}
