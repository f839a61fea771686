package sim

// Event is one scheduled happening. Kind and the two arguments are the
// model's to interpret; the engine only orders events.
type Event struct {
	At   Time   // when it happens
	seq  uint64 // tie-breaker: scheduling order
	Kind int32  // what happens
	ID   int32  // to whom (an entity index)
	Arg  int64  // anything else, e.g. a generation number for lazy cancellation
}

// before orders events by (At, seq).
func (e *Event) before(o *Event) bool {
	return e.At < o.At || (e.At == o.At && e.seq < o.seq)
}

// eventHeap is a typed 4-ary min-heap of events (the Go runtime's timer
// heap shape): no interface boxing, no allocation per push once grown.
type eventHeap []Event

func (h *eventHeap) push(e Event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !s[i].before(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() Event {
	s := *h
	top := s[0]
	n := len(s) - 1
	last := s[n]
	*h = s[:n]
	if n == 0 {
		return top
	}
	s = s[:n]
	// Sift the last element down from the root.
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := c + 4
		if end > n {
			end = n
		}
		for j := c + 1; j < end; j++ {
			if s[j].before(&s[m]) {
				m = j
			}
		}
		if !s[m].before(&last) {
			break
		}
		s[i] = s[m]
		i = m
	}
	s[i] = last
	return top
}
