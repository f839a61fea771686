package sim

import "math/bits"

// Event is one scheduled happening. Kind and the two arguments are the
// model's to interpret; the engine only orders events.
type Event struct {
	At   Time   // when it happens
	seq  uint64 // tie-breaker: scheduling order
	Kind int32  // what happens
	ID   int32  // to whom (an entity index)
	Arg  int64  // anything else, e.g. a generation number for lazy cancellation
}

// eventHeap is a typed 4-ary min-heap of events ordered by (At, seq): time
// first, then scheduling order (the Go runtime's timer heap shape): no interface boxing, no allocation per push once grown.
// Both sifts move a hole rather than swapping, and keep the key being
// compared in locals, which is most of their cost.
type eventHeap []Event

func (h *eventHeap) push(e Event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 4
		if pe := &s[p]; e.At > pe.At || (e.At == pe.At && e.seq > pe.seq) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = e
}

func (h *eventHeap) pop() Event {
	s := *h
	top := s[0]
	n := len(s) - 1
	last := s[n]
	*h = s[:n]
	if n > 0 {
		h.siftDown(last)
	}
	return top
}

// siftDown puts e in the root's place and moves it down to where it
// belongs.
func (h *eventHeap) siftDown(e Event) {
	s := *h
	n := len(s)
	lt, lq := uint64(e.At), e.seq
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		// Pick the least child without branching on the comparisons,
		// which are as good as random: (At, seq) compared as one 128-bit
		// number by the borrow of a subtraction (At is never negative).
		m := c
		mt, mq := uint64(s[c].At), s[c].seq
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			t, q := uint64(s[j].At), s[j].seq
			mask := -earlier(t, q, mt, mq) // all ones when child j is earlier
			m ^= (m ^ j) & int(mask)
			mt ^= (mt ^ t) & mask
			mq ^= (mq ^ q) & mask
		}
		if earlier(lt, lq, mt, mq) == 1 {
			break
		}
		s[i] = s[m]
		i = m
	}
	s[i] = e
}

// earlier is 1 when (t1, q1) comes before (t2, q2), else 0: the borrow of
// the 128-bit subtraction, computed without a branch.
func earlier(t1, q1, t2, q2 uint64) uint64 {
	_, b := bits.Sub64(q1, q2, 0)
	_, b = bits.Sub64(t1, t2, b)
	return b
}
