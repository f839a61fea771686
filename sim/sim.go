package sim

import "fmt"

// Handler is a simulated system: it reacts to each event in turn.
type Handler interface {
	Handle(s *Sim, e Event)
}

// Sim is the engine: a clock and a queue of pending events.
// The zero value is ready to use, with the clock at 0.
type Sim struct {
	now     Time
	seq     uint64
	events  eventHeap // stray events and the head of every busy lane
	lanes   [nLanes]lane
	pending int
	handled uint64
	stopped bool
}

// Now is the current virtual time.
func (s *Sim) Now() Time { return s.now }

// Pending is the number of scheduled events not yet handled.
func (s *Sim) Pending() int { return s.pending }

// Handled is the number of events handled so far.
func (s *Sim) Handled() uint64 { return s.handled }

// At schedules an event at time t. Scheduling in the past is a bug in the
// model and panics.
func (s *Sim) At(t Time, kind, id int32, arg int64) {
	if t < s.now {
		s.pastPanic(t, kind, id)
	}
	s.schedule(t, kind, id, arg)
}

// After schedules an event d after now; d must not be negative.
func (s *Sim) After(d Time, kind, id int32, arg int64) {
	if d < 0 {
		negativePanic(d, kind, id)
	}
	s.schedule(s.now+d, kind, id, arg)
}

func (s *Sim) pastPanic(t Time, kind, id int32) {
	panic(fmt.Sprintf("sim: event kind %d for %d scheduled at %v, before now (%v)", kind, id, t, s.now))
}

func negativePanic(d Time, kind, id int32) {
	panic(fmt.Sprintf("sim: event kind %d for %d scheduled %v after now: negative delay", kind, id, d))
}

// schedule queues an event at t (not before now): behind its kind's lane
// when it is not earlier than the lane's last, else in the heap - as the
// lane's head when the lane is empty.
func (s *Sim) schedule(t Time, kind, id int32, arg int64) {
	s.seq++
	s.pending++
	i := uint64(kind) & (nLanes - 1)
	ln := &s.lanes[i]
	seq := s.seq<<laneBits | (i + 1)
	if ln.busy && t >= ln.last { // later than the lane's last (and scheduled after it)
		ln.last = t
		ln.put(t, seq, kind, id, arg)
		return
	}
	if ln.busy {
		seq &^= laneMask // out of order: the heap's alone
	} else {
		ln.busy, ln.last = true, t
	}
	s.events.push(Event{At: t, seq: seq, Kind: kind, ID: id, Arg: arg})
}

// Step handles the earliest pending event and reports whether there was one.
func (s *Sim) Step(h Handler) bool {
	if len(s.events) == 0 {
		return false
	}
	e := s.next()
	s.now = e.At
	s.handled++
	h.Handle(s, e)
	return true
}

// next removes the earliest event: the heap's top, whose place goes to the
// next event of its lane if it came from one.
func (s *Sim) next() Event {
	s.pending--
	e := s.events[0]
	if l := e.seq & laneMask; l != 0 {
		ln := &s.lanes[l-1]
		if ln.n > 0 {
			s.events.siftDown(ln.take())
			return e
		}
		ln.busy = false
	}
	return s.events.pop()
}

// Run handles events until none are left or Stop is called.
func (s *Sim) Run(h Handler) {
	s.stopped = false
	for !s.stopped && len(s.events) > 0 {
		e := s.next()
		s.now = e.At
		s.handled++
		h.Handle(s, e)
	}
}

// RunUntil handles events up to and including time t, then sets the clock
// to t (if it is later than the last event handled).
func (s *Sim) RunUntil(h Handler, t Time) {
	s.stopped = false
	for !s.stopped && len(s.events) > 0 && s.events[0].At <= t {
		s.Step(h)
	}
	if !s.stopped && t > s.now {
		s.now = t
	}
}

// Stop makes Run or RunUntil return after the current event.
func (s *Sim) Stop() { s.stopped = true }
