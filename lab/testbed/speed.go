package testbed

import "github.com/poolsim/poolsim/sim"

// speed is the cores' speed over a run (Machine.Speed): the factor f of
// the current window, which ends at end, and the next window's index;
// without factors, always 1.
type speed struct {
	f       float64
	factors []float64
	period  sim.Time
	end     sim.Time
	next    int
}

// init starts the speed: the factors in their order from a start drawn
// from the seed's "testbed speed" stream, or a constant 1.
func (v *speed) init(t Machine, seed uint64) {
	v.f = 1
	if len(t.Speed) == 0 {
		return
	}
	v.factors, v.period = t.Speed, t.SpeedPeriod
	if v.period == 0 {
		v.period = DefaultSpeedPeriod
	}
	v.next = int(sim.NewRand(seed, "testbed speed").IntN(uint64(len(v.factors))))
	v.end = 0
	v.step()
}

// step moves to the next window's factor: the list's next, after its
// last its first again. A machine's slow stretches outlast a window
// (lab/bench/stalls.sh: pgbench's transactions per 20 ms window through
// PgBouncer correlate 0.56-0.82 with the next window's), so the factors
// keep their order.
func (v *speed) step() {
	v.f = v.factors[v.next]
	v.next = (v.next + 1) % len(v.factors)
	v.end += v.period
}

// until is the end of the stretch from the last update towards now at
// one speed: now, or the current window's end if that comes first.
func (v *speed) until(now sim.Time) sim.Time {
	if v.factors != nil && v.end < now {
		return v.end
	}
	return now
}

// passed moves on to the next window if at is the current one's end.
func (v *speed) passed(at sim.Time) {
	if v.factors != nil && at == v.end {
		v.step()
	}
}

// cap holds a plan made at last to the current window's end: the plan is
// made again there.
func (v *speed) cap(next, last sim.Time) sim.Time {
	if v.factors != nil {
		return min(next, v.end-last)
	}
	return next
}
