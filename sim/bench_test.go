package sim

import (
	"fmt"
	"testing"
)

// holdModel is the classic hold benchmark's handler: every event
// reschedules itself at now + a random delay, so the number pending stays
// constant.
type holdModel struct {
	r *Rand
	d Dist
}

func (h *holdModel) Handle(s *Sim, e Event) {
	s.After(h.d.Sample(h.r), e.Kind, e.ID, e.Arg+1)
}

// holdTable is the hold model with its Exp(mean) delays drawn in advance
// and cycled, so the benchmark measures the engine and not math.Log1p.
type holdTable struct {
	delay []Time // length a power of two
	i     int
}

func (h *holdTable) Handle(s *Sim, e Event) {
	s.After(h.delay[h.i&(len(h.delay)-1)], e.Kind, e.ID, e.Arg+1)
	h.i++
}

func newHoldTable(d Dist, r *Rand) *holdTable {
	h := &holdTable{delay: make([]Time, 1<<16)}
	for i := range h.delay {
		h.delay[i] = d.Sample(r)
	}
	return h
}

// benchHold runs the classic hold model: n events pending at random
// times; each op pops the earliest and reschedules it at now + Exp(1 ms).
func benchHold(b *testing.B, h Handler, d Dist, r *Rand) {
	for _, n := range []int{100, 10_000, 1_000_000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			var s Sim
			for i := 0; i < n; i++ {
				s.At(d.Sample(r), 0, int32(i), 0)
			}
			// Warm up so the heap is in its steady-state shape.
			for i := 0; i < 2*n; i++ {
				s.Step(h)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Step(h)
			}
			if s.Pending() != n {
				b.Fatalf("%d pending, want %d", s.Pending(), n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkHold measures the engine's cost per event (pop, Handle through
// the interface, push) at a steady number of pending events.
func BenchmarkHold(b *testing.B) {
	d, r := ExpDist(Millisecond), NewRand(1, "hold")
	benchHold(b, newHoldTable(d, r), d, r)
}

// BenchmarkHoldSample is BenchmarkHold drawing each delay from the stream
// as a model does (Dist.Sample: Float64, Log1p, FromSeconds).
func BenchmarkHoldSample(b *testing.B) {
	d, r := ExpDist(Millisecond), NewRand(1, "hold")
	benchHold(b, &holdModel{r: r, d: d}, d, r)
}

// BenchmarkSamples records 1e6 samples and asks two percentiles.
func BenchmarkSamples(b *testing.B) { benchSamples(b, ExactLimit) }

// BenchmarkSamplesPastLimit is BenchmarkSamples past the exact limit: the
// histogram.
func BenchmarkSamplesPastLimit(b *testing.B) { benchSamples(b, 1000) }

func benchSamples(b *testing.B, limit int) {
	const n = 1_000_000
	r := NewRand(2, "samples")
	d := ExpDist(Millisecond)
	v := make([]Time, n)
	for i := range v {
		v[i] = d.Sample(r)
	}
	b.ReportAllocs()
	for b.Loop() {
		var s Samples
		s.SetExactLimit(limit)
		for _, x := range v {
			s.Add(x)
		}
		_ = s.Percentile(50)
		_ = s.Percentile(99)
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkFIFO is a steady queue of about 64 waiters: each op pushes one
// and serves one, and every eighth op one waiter at the head gives up.
func BenchmarkFIFO(b *testing.B) {
	q := NewFIFO(0)
	var now Time
	next := int32(0)
	for ; next < 64; next++ {
		q.Push(now, next)
	}
	b.ReportAllocs()
	for b.Loop() {
		now += Microsecond
		q.Push(now, next)
		next++
		if next%8 == 0 {
			id, _, _ := q.Pop(now)
			q.Push(now, id) // keep the length steady
			q.Remove(now, next-64)
		}
		q.Pop(now)
	}
}

// laneModel is the shape of a pooled model's events: every client goes
// round four kinds with constant delays (a hop, the statement, a hop
// back, a think time), and each round leaves a timeout pending (a
// query_wait_timeout that the answer makes void), so most events ride in
// lanes and thousands of timeouts are pending.
type laneModel struct{ rounds int }

func (h *laneModel) Handle(s *Sim, e Event) {
	switch e.Kind {
	case 0:
		s.After(25*Microsecond, 1, e.ID, 0)
		s.After(100*Millisecond, 4, e.ID, 0)
	case 1:
		s.After(300*Microsecond, 2, e.ID, 0)
	case 2:
		s.After(25*Microsecond, 3, e.ID, 0)
	case 3:
		h.rounds++
		s.After(800*Microsecond, 0, e.ID, 0)
	}
}

// BenchmarkLanes is the engine under laneModel with 200 clients (about
// 17,000 timeouts pending): each op is one event.
func BenchmarkLanes(b *testing.B) {
	var s Sim
	h := &laneModel{}
	for i := range 200 {
		s.At(Time(i), 0, int32(i), 0)
	}
	for range 200_000 { // until the timeouts come due as fast as they are set
		s.Step(h)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Step(h)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
