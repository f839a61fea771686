package testbed

import (
	"reflect"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Tests of Machine.DriverScan: the load driver's threads take their
// clients as pgbench's do.

func TestDriverScanPasses(t *testing.T) {
	// Each step: clients that became ready (results read in a poll pass,
	// or transactions to start), then the clients the thread takes, in
	// order, until it has nothing left.
	type step struct {
		ready, start []int32
		take         []int32
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a poll's results in client order", []step{
			{ready: []int32{9, 2, 5}, take: []int32{2, 5, 9}},
		}},
		{"the transactions that ended start in a pass of their own, before the next poll", []step{
			{ready: []int32{7, 3}, take: []int32{3}},
			// During 3's job: 3's and 7's transactions are to start, 1's
			// result comes. 7's result, polled before, comes first; then
			// the starts, 3 before 7, then the next poll: 1.
			{ready: []int32{1}, start: []int32{7, 3}, take: []int32{7, 3, 7, 1}},
		}},
		{"a result that comes during the pass waits for the next poll", []step{
			{ready: []int32{4, 6}, take: []int32{4}},
			{ready: []int32{2}, take: []int32{6, 2}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var th drvThread
			var got, want []int32
			for _, s := range tc.steps {
				th.q = append(th.q, s.ready...)
				th.starts = append(th.starts, s.start...)
				for range s.take {
					got = append(got, th.next(true))
				}
				want = append(want, s.take...)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("taken %v, want %v", got, want)
			}
			if len(th.q)+len(th.starts)+len(th.pass) != 0 {
				t.Errorf("left over: queue %v, starts %v, pass %v", th.q, th.starts, th.pass)
			}
		})
	}
	// Without scan the thread takes its clients as they became ready.
	th := drvThread{q: []int32{9, 2, 5}}
	if got := []int32{th.next(false), th.next(false), th.next(false)}; !reflect.DeepEqual(got, []int32{9, 2, 5}) {
		t.Errorf("first come, first served: taken %v, want [9 2 5]", got)
	}
}

// TestDriverScan: pgbench's passes leave the work unchanged, but the
// latency it reports leaves out the pass between a transaction's end and
// the next one's start.
func TestDriverScan(t *testing.T) {
	// pgbench -S -c 50 -j 2 through a transaction pooler of 16 on two
	// cores, about as measured.
	const clients = 50
	run := func(scan bool) metrics {
		c := cpuBound(poolmode.Transaction, clients, 400, 16*sim.Microsecond, 56*sim.Microsecond, 2)
		c.Pooler.DefaultPoolSize = 16
		c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign = 6*sim.Microsecond, 6*sim.Microsecond
		c.Testbed.PoolerOnCores = true
		c.Testbed.Scheduler = PerCore
		c.Testbed.DriverThreads = 2
		c.Testbed.DriverScan = scan
		m := Run(c).Metrics
		checkConservation(t, m)
		return m
	}
	fifo, scan := run(false), run(true)
	// The two threads' clients fare alike: nothing in the model keeps a
	// thread on the busier core.
	for _, m := range []metrics{fifo, scan} {
		if m.DriverThreadSpread < 1 || m.DriverThreadSpread > 1.05 {
			t.Errorf("the threads' mean latencies %.3f apart (slowest over fastest), want 1 to 1.05", m.DriverThreadSpread)
		}
	}
	within(t, "tps with scan against without", scan.TPS, fifo.TPS, 0.03)
	// A closed loop's mean latency is its cycle: clients over throughput
	// (Little), less what the latency leaves out.
	inLatency := func(m metrics) float64 { return m.MeanMs / 1e3 * m.TPS / clients }
	if f := inLatency(fifo); f < 0.98 {
		t.Errorf("without scan the latency is %.3f of the cycle, want about all of it", f)
	}
	if f, g := inLatency(scan), inLatency(fifo); f > g-0.03 {
		t.Errorf("with scan the latency is %.3f of the cycle, without %.3f: want the pass between transactions left out", f, g)
	}
}
