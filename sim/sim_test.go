package sim

import (
	"cmp"
	"slices"
	"strings"
	"testing"
)

// cmpEvent orders events the way the heap must: by (At, seq).
func cmpEvent(a, b Event) int {
	if c := cmp.Compare(a.At, b.At); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// TestHeapPopOrder pushes thousands of events at random times with many
// ties and checks the pops against a sort of the same events.
func TestHeapPopOrder(t *testing.T) {
	r := NewRand(1, "heap")
	for _, n := range []int{1, 2, 5, 17, 1000, 5000} {
		for _, span := range []uint64{1, 10, 1 << 40} { // 1: every time equal
			var h eventHeap
			want := make([]Event, 0, n)
			for i := 0; i < n; i++ {
				e := Event{At: Time(r.IntN(span)), seq: uint64(i + 1), ID: int32(i)}
				h.push(e)
				want = append(want, e)
			}
			slices.SortFunc(want, cmpEvent)
			for i, w := range want {
				if len(h) != n-i {
					t.Fatalf("n=%d span=%d: len %d after %d pops", n, span, len(h), i)
				}
				if got := h.pop(); got != w {
					t.Fatalf("n=%d span=%d: pop %d = %+v, want %+v", n, span, i, got, w)
				}
			}
			if len(h) != 0 {
				t.Fatalf("n=%d: %d left", n, len(h))
			}
		}
	}
}

// TestHeapInterleaved mixes pushes and pops (pushes may be earlier than
// what was popped before, unlike in a Sim) against a sorted-slice model.
func TestHeapInterleaved(t *testing.T) {
	r := NewRand(2, "heap")
	var h eventHeap
	var model []Event
	var seq uint64
	for step := 0; step < 20000; step++ {
		if len(model) == 0 || r.IntN(100) < 55 {
			seq++
			e := Event{At: Time(r.IntN(50)), seq: seq, Kind: int32(step), Arg: int64(step)}
			h.push(e)
			i, _ := slices.BinarySearchFunc(model, e, cmpEvent)
			model = slices.Insert(model, i, e)
			continue
		}
		got, want := h.pop(), model[0]
		model = model[1:]
		if got != want {
			t.Fatalf("step %d: pop %+v, want %+v", step, got, want)
		}
	}
	for len(model) > 0 {
		if got := h.pop(); got != model[0] {
			t.Fatalf("drain: pop %+v, want %+v", got, model[0])
		}
		model = model[1:]
	}
}

// recorder is a Handler that logs the events it handles and may schedule
// follow-ups.
type recorder struct {
	got    []Event
	times  []Time
	then   func(s *Sim, e Event)
	stopAt int // Stop when this many events are handled (0: never)
}

func (h *recorder) Handle(s *Sim, e Event) {
	if s.Now() != e.At {
		panic("clock is not at the event's time")
	}
	h.got = append(h.got, e)
	h.times = append(h.times, s.Now())
	if h.then != nil {
		h.then(s, e)
	}
	if h.stopAt > 0 && len(h.got) == h.stopAt {
		s.Stop()
	}
}

// TestSimRandomOrder schedules thousands of events through the Sim, from
// inside handlers too, and checks they are handled in (time, scheduling
// order) with a clock that never goes backwards.
func TestSimRandomOrder(t *testing.T) {
	r := NewRand(3, "sim")
	var s Sim
	var all []Event // every event scheduled, in scheduling order
	sched := func(at Time, id int32) {
		s.At(at, 7, id, int64(len(all)))
		all = append(all, Event{At: at, seq: uint64(len(all) + 1), Kind: 7, ID: id, Arg: int64(len(all))})
	}
	for i := 0; i < 3000; i++ {
		sched(Time(r.IntN(100)), int32(i))
	}
	h := &recorder{then: func(s *Sim, e Event) {
		if e.ID < 6000 && r.IntN(2) == 0 {
			sched(s.Now()+Time(r.IntN(3)), e.ID+3000) // 0: same instant
		}
	}}
	s.Run(h)
	want := slices.Clone(all)
	slices.SortFunc(want, cmpEvent)
	if len(h.got) != len(want) || s.Handled() != uint64(len(want)) || s.Pending() != 0 {
		t.Fatalf("handled %d (%d), want %d; %d pending", len(h.got), s.Handled(), len(want), s.Pending())
	}
	for i := range want {
		g, w := h.got[i], want[i]
		if g.At != w.At || g.Kind != w.Kind || g.ID != w.ID || g.Arg != w.Arg {
			t.Fatalf("event %d: got %+v, want %+v", i, g, w)
		}
	}
	if s.Now() != want[len(want)-1].At {
		t.Errorf("Now = %v, want %v", s.Now(), want[len(want)-1].At)
	}
}

// TestSimLanesOrder drives the lanes the way models do: kinds (more than
// there are lanes, so some share one) that always wait the same delay,
// kinds that wait one of two delays or a random one, kinds scheduled at
// instants on a grid, with many ties. Every event must be handled in
// (time, scheduling order), however it was queued.
func TestSimLanesOrder(t *testing.T) {
	r := NewRand(4, "lanes")
	var s Sim
	var all []Event
	sched := func(at Time, kind, id int32) {
		s.At(at, kind, id, int64(len(all)))
		all = append(all, Event{At: at, seq: uint64(len(all) + 1), Kind: kind, ID: id, Arg: int64(len(all))})
	}
	const kinds = 21
	delay := func(kind int32, now Time) Time {
		switch kind % 4 {
		case 0: // constant
			return Time(kind+1) * 10
		case 1: // one of two
			return Time(5 + 50*r.IntN(2))
		case 2: // random, ties likely
			return Time(r.IntN(40))
		default: // on a grid of 100 after a constant wait
			return (now+333)/100*100 + 100 - now
		}
	}
	for i := 0; i < 500; i++ {
		k := int32(r.IntN(kinds))
		sched(Time(r.IntN(200)), k, int32(i))
	}
	h := &recorder{then: func(s *Sim, e Event) {
		if len(all) < 60_000 {
			k := int32((int(e.Kind) + int(r.IntN(3))) % kinds)
			sched(s.Now()+delay(k, s.Now()), k, e.ID)
		}
	}}
	s.Run(h)
	want := slices.Clone(all)
	slices.SortFunc(want, cmpEvent)
	if len(h.got) != len(want) || s.Pending() != 0 {
		t.Fatalf("handled %d, want %d; %d pending", len(h.got), len(want), s.Pending())
	}
	inLane := 0
	for i := range want {
		g, w := h.got[i], want[i]
		if g.At != w.At || g.Kind != w.Kind || g.ID != w.ID || g.Arg != w.Arg {
			t.Fatalf("event %d: got %+v, want %+v", i, g, w)
		}
		if g.seq&laneMask != 0 {
			inLane++
		}
	}
	if inLane < len(want)/2 {
		t.Errorf("only %d of %d events went through a lane", inLane, len(want))
	}
}

// TestSimTiesFIFO: events at the same instant run in scheduling order, and
// one scheduled at now from a handler runs after those already pending.
func TestSimTiesFIFO(t *testing.T) {
	var s Sim
	h := &recorder{then: func(s *Sim, e Event) {
		if e.ID == 1 {
			s.After(0, 0, 99, 0)
		}
	}}
	for id := int32(0); id < 4; id++ {
		s.At(5, 0, id, 0)
	}
	s.At(4, 0, 10, 0)
	s.Run(h)
	var ids []int32
	for _, e := range h.got {
		ids = append(ids, e.ID)
	}
	if want := []int32{10, 0, 1, 2, 3, 99}; !slices.Equal(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

func TestAtInThePastPanics(t *testing.T) {
	var s Sim
	s.At(2*Millisecond, 0, 0, 0)
	s.Step(&recorder{})
	msg := panicMessage(func() { s.At(1500*Microsecond, 3, 4, 0) })
	if msg == "" {
		t.Fatal("At in the past did not panic")
	}
	for _, want := range []string{"1.5ms", "2ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("panic %q does not name %s", msg, want)
		}
	}
	if s.Pending() != 0 {
		t.Errorf("the rejected event was queued")
	}
	// At now is fine.
	if msg := panicMessage(func() { s.At(2*Millisecond, 0, 0, 0) }); msg != "" {
		t.Errorf("At(now) panicked: %s", msg)
	}
}

func TestAfterNegativePanics(t *testing.T) {
	var s Sim
	msg := panicMessage(func() { s.After(-1, 0, 0, 0) })
	if msg == "" {
		t.Fatal("After(-1) did not panic")
	}
	if !strings.Contains(msg, "negative") {
		t.Errorf("panic %q does not say negative", msg)
	}
	if msg := panicMessage(func() { s.After(0, 0, 0, 0) }); msg != "" {
		t.Errorf("After(0) panicked: %s", msg)
	}
}

func TestRunUntil(t *testing.T) {
	var s Sim
	for _, at := range []Time{1, 2, 3, 3, 5} {
		s.At(at*Second, 0, int32(at), 0)
	}
	h := &recorder{}
	s.RunUntil(h, 3*Second) // includes both events at 3 s
	if len(h.got) != 4 || s.Now() != 3*Second || s.Pending() != 1 {
		t.Fatalf("RunUntil(3s): handled %d, now %v, pending %d; want 4, 3s, 1", len(h.got), s.Now(), s.Pending())
	}
	s.RunUntil(h, 4*Second) // nothing to do, but the clock moves
	if len(h.got) != 4 || s.Now() != 4*Second {
		t.Fatalf("RunUntil(4s): handled %d, now %v; want 4, 4s", len(h.got), s.Now())
	}
	s.RunUntil(h, 2*Second) // never backwards
	if s.Now() != 4*Second {
		t.Fatalf("RunUntil(2s) moved the clock to %v", s.Now())
	}
	s.RunUntil(h, 10*Second)
	if len(h.got) != 5 || h.times[4] != 5*Second || s.Now() != 10*Second || s.Pending() != 0 {
		t.Fatalf("RunUntil(10s): handled %d, now %v, pending %d", len(h.got), s.Now(), s.Pending())
	}
	// After now counts from the advanced clock.
	s.After(Second, 0, 0, 0)
	s.Run(h)
	if s.Now() != 11*Second {
		t.Fatalf("After(1s) from 10s ran at %v", s.Now())
	}
}

func TestStop(t *testing.T) {
	var s Sim
	for i := 1; i <= 10; i++ {
		s.At(Time(i)*Second, 0, int32(i), 0)
	}
	h := &recorder{stopAt: 3}
	s.Run(h)
	if len(h.got) != 3 || s.Handled() != 3 || s.Pending() != 7 || s.Now() != 3*Second {
		t.Fatalf("after Stop: handled %d, pending %d, now %v", s.Handled(), s.Pending(), s.Now())
	}
	// Run resumes where it stopped.
	h.stopAt = 5
	s.Run(h)
	if len(h.got) != 5 || s.Now() != 5*Second {
		t.Fatalf("second Run: handled %d, now %v", len(h.got), s.Now())
	}
	// Stop inside RunUntil returns at once and leaves the clock at the
	// event that stopped it.
	h.stopAt = 6
	s.RunUntil(h, 9*Second)
	if len(h.got) != 6 || s.Now() != 6*Second {
		t.Fatalf("RunUntil after Stop: handled %d, now %v; want 6, 6s", len(h.got), s.Now())
	}
	h.stopAt = 0
	s.Run(h)
	if len(h.got) != 10 || s.Pending() != 0 {
		t.Fatalf("final Run: handled %d, pending %d", len(h.got), s.Pending())
	}
	if s.Step(h) {
		t.Fatal("Step on an empty queue reported an event")
	}
}

func TestZeroSim(t *testing.T) {
	var s Sim
	if s.Now() != 0 || s.Pending() != 0 || s.Handled() != 0 || s.Step(&recorder{}) {
		t.Fatal("zero Sim is not empty at time 0")
	}
	s.Run(&recorder{})
	s.RunUntil(&recorder{}, Second)
	if s.Now() != Second {
		t.Fatalf("RunUntil on an empty Sim: now %v", s.Now())
	}
}

// TestSimDeterministic: the same schedule gives the same run.
func TestSimDeterministic(t *testing.T) {
	run := func() []Event {
		var s Sim
		r := NewRand(9, "det")
		h := &recorder{then: func(s *Sim, e Event) {
			if s.Pending() < 200 {
				s.After(Time(r.IntN(5)), e.Kind+1, e.ID, e.Arg+1)
			}
		}, stopAt: 5000}
		for i := 0; i < 100; i++ {
			s.At(Time(r.IntN(10)), 0, int32(i), 0)
		}
		s.Run(h)
		return h.got
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatal("two identical runs differ")
	}
}

func TestAllocsPerEvent(t *testing.T) {
	var s Sim
	r := NewRand(1, "allocs")
	h := &holdModel{r: r, d: ExpDist(Millisecond)}
	for i := 0; i < 1000; i++ {
		s.At(h.d.Sample(r), 0, int32(i), 0)
	}
	if n := testing.AllocsPerRun(10000, func() { s.Step(h) }); n != 0 {
		t.Errorf("%v allocations per event, want 0", n)
	}
}
