package sim_test

import (
	"fmt"

	"github.com/poolsim/poolsim/sim"
)

// Event kinds of the single-server model below.
const (
	arrive int32 = iota
	depart
)

// server is a single FIFO server with a fixed service time: the smallest
// useful Handler.
type server struct {
	service sim.Time
	busy    bool
	queue   *sim.FIFO
}

func (m *server) Handle(s *sim.Sim, e sim.Event) {
	switch e.Kind {
	case arrive:
		if m.busy {
			m.queue.Push(s.Now(), e.ID)
			return
		}
		m.busy = true
		s.After(m.service, depart, e.ID, 0)
	case depart:
		fmt.Printf("%-4v job %d done\n", s.Now(), e.ID)
		if id, waited, ok := m.queue.Pop(s.Now()); ok {
			fmt.Printf("%-4v job %d starts after waiting %v\n", s.Now(), id, waited)
			s.After(m.service, depart, id, 0)
			return
		}
		m.busy = false
	}
}

// A single server with a 2 ms service time and four arrivals: the model
// schedules its own departures with After, and Run returns when no event
// is left.
func ExampleSim() {
	m := &server{service: 2 * sim.Millisecond, queue: sim.NewFIFO(0)}
	var s sim.Sim
	for id, at := range []sim.Time{0, 1 * sim.Millisecond, 1500 * sim.Microsecond, 5 * sim.Millisecond} {
		s.At(at, arrive, int32(id), 0)
	}
	s.Run(m)
	L, lambda, W := m.queue.Little(s.Now())
	fmt.Printf("handled %d events, now %v\n", s.Handled(), s.Now())
	fmt.Printf("L=%.4f λ=%.0f/s W=%.4fs λW=%.4f\n", L, lambda, W, lambda*W)
	// Output:
	// 2ms  job 0 done
	// 2ms  job 1 starts after waiting 1ms
	// 4ms  job 1 done
	// 4ms  job 2 starts after waiting 2.5ms
	// 6ms  job 2 done
	// 6ms  job 3 starts after waiting 1ms
	// 8ms  job 3 done
	// handled 8 events, now 8ms
	// L=0.5625 λ=375/s W=0.0015s λW=0.5625
}

// A FIFO measures its own length over time (L) and each entry's wait (W),
// so Little's law can be checked from two independent accounts.
func ExampleFIFO() {
	q := sim.NewFIFO(0)
	q.Push(0, 1)
	q.Push(1*sim.Second, 2)
	q.Push(2*sim.Second, 3)
	id, w, _ := q.Pop(3 * sim.Second)
	fmt.Println("served", id, "after", w)
	w, _ = q.Remove(4*sim.Second, 3) // gave up
	fmt.Println("abandoned 3 after", w)
	id, w, _ = q.Pop(6 * sim.Second)
	fmt.Println("served", id, "after", w)
	L, lambda, W := q.Little(6 * sim.Second)
	fmt.Printf("L=%.4g λ=%.4g/s W=%.4gs λW=%.4g max=%d\n", L, lambda, W, lambda*W, q.MaxLen())
	// Output:
	// served 1 after 3s
	// abandoned 3 after 2s
	// served 2 after 5s
	// L=1.667 λ=0.5/s W=3.333s λW=1.667 max=3
}

// Percentiles follow the nearest-rank rule: the answer is always one of the
// recorded samples.
func ExampleSamples_Percentile() {
	var s sim.Samples
	for _, ms := range []sim.Time{7, 1, 9, 3, 5, 2, 10, 4, 8, 6} {
		s.Add(ms * sim.Millisecond)
	}
	fmt.Println(s.Count(), s.Mean())
	fmt.Println(s.Percentile(50), s.Percentile(90), s.Percentile(91), s.Percentile(100))
	// Output:
	// 10 5.5ms
	// 5ms 9ms 10ms 10ms
}

// A stream is named by its seed and purpose, so its numbers are pinned:
// they do not change across Go releases, machines, or when another
// purpose starts drawing numbers.
func ExampleNewRand() {
	r := sim.NewRand(1, "service")
	d := sim.ExpDist(10 * sim.Millisecond)
	for range 3 {
		fmt.Println(d.Sample(r))
	}
	u := sim.NewRand(42, "arrivals")
	fmt.Printf("%.6f %d\n", u.Float64(), u.IntN(100))
	// Output:
	// 17.374824ms
	// 11.63012ms
	// 4.621385ms
	// 0.180762 33
}

// LognormalP99 fits a lognormal to a mean and a 99th percentile.
func ExampleLognormalP99() {
	d, err := sim.LognormalP99(10*sim.Millisecond, 50*sim.Millisecond)
	fmt.Println(d, err)
	fmt.Printf("SCV %.3f\n", d.SCV())
	_, err = sim.LognormalP99(10*sim.Millisecond, 5*sim.Millisecond)
	fmt.Println(err)
	// Output:
	// lognormal(mean 10ms, sigma 0.845) <nil>
	// SCV 1.044
	// no lognormal distribution has this mean and p99: p99 (5ms) must be above the mean (10ms)
}

// A Level integrates itself over virtual time: 0 busy for 1 s, 2 for 1 s,
// 4 for 2 s and 0 for 1 s averages to (0·1 + 2·1 + 4·2 + 0·1) / 5 = 2.
func ExampleLevel_Mean() {
	busy := sim.NewLevel(0)
	busy.Set(1*sim.Second, 2)
	busy.Add(2*sim.Second, 2)
	busy.Set(4*sim.Second, 0)
	fmt.Println(busy.Mean(5*sim.Second), busy.Area(5*sim.Second), busy.Max(), busy.Value())
	// Output:
	// 2 10 4 0
}
