package system

import (
	"fmt"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Tests of the pooler's thread: its cost per assignment and the order of
// its hand-over (lab/testbed runs the same thread on a test machine's
// cores).

func TestPoolerCPUPerAssign(t *testing.T) {
	// A message wakes the thread (w), an assignment follows the message
	// that led to it without sleeping.
	const p, a, q, w = 10 * sim.Microsecond, 5 * sim.Microsecond, 100 * sim.Microsecond, 7 * sim.Microsecond
	for _, tc := range []struct {
		mode poolmode.Mode
		// the hand count per transaction of 6 statements: the thread's
		// busy time, and the transaction's latency (one client: nothing
		// overlaps)
		busy, lat sim.Time
		assigns   int64
	}{
		{poolmode.Statement, 6 * (2*(w+p) + a), 6 * (2*(w+p) + a + q), 6},
		{poolmode.Transaction, 12*(w+p) + a, 12*(w+p) + a + 6*q, 1},
	} {
		const txns = 500
		c := closed(tc.mode, 1, txns, 6, q, 0)
		c.Pooler.CPUPerMsg = p
		c.Pooler.CPUPerAssign = a
		c.Pooler.Wakeup = w
		m := Run(c).Metrics
		if m.Assignments != tc.assigns*txns {
			t.Errorf("%v: %d assignments, want %d", tc.mode, m.Assignments, tc.assigns*txns)
		}
		within(t, tc.mode.String()+": tps", m.TPS, 1/tc.lat.Seconds(), 1e-9)
		within(t, tc.mode.String()+": the thread's utilisation", m.PoolerCPUMean, float64(tc.busy)/float64(tc.lat), 1e-9)
	}
}

func TestPoolerAssignFirst(t *testing.T) {
	// One server, two clients, 40 µs statements, 10 µs of the thread per
	// message and per assignment, no wake-up. PgBouncer's order: the
	// server's ReadyForQuery is relayed (10), then the server is handed to
	// the waiter (10), whose statement runs (40): a cycle of 60 µs. The
	// proxy's: the hand-over first, so the next statement waits for it
	// alone (50 µs), and the relay and the released client's next request
	// (10 + 10) run on the thread while the server works. With one client
	// nobody waits at a release, and both orders take request + assignment
	// + statement + relay, 70 µs.
	const p, q = 10 * sim.Microsecond, 40 * sim.Microsecond
	for _, tc := range []struct {
		clients int
		first   bool
		cycle   sim.Time
	}{{2, false, 60 * sim.Microsecond}, {2, true, 50 * sim.Microsecond}, {1, false, 70 * sim.Microsecond}, {1, true, 70 * sim.Microsecond}} {
		c := closed(poolmode.Transaction, tc.clients, 2000, 1, q, 0)
		c.Pooler.DefaultPoolSize = 1
		c.Pooler.Hop = 0
		c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign = p, p
		c.Pooler.AssignFirst = tc.first
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%d clients, assign first %v", tc.clients, tc.first)
		m := Run(c).Metrics
		within(t, name+": tps", m.TPS, 1/tc.cycle.Seconds(), 0.005)
		// A closed loop without think: every client is in a transaction
		// (Little's law), so the mean latency is the cycle times clients.
		within(t, name+": mean latency", m.MeanMs, float64(tc.clients)*tc.cycle.Seconds()*1e3, 0.005)
		if again := Run(c).Metrics; again != m {
			t.Errorf("%s: two runs differ", name)
		}
	}
	c := closed(poolmode.Transaction, 2, 10, 1, q, 0)
	c.Pooler.AssignFirst = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "cpu_per_assign") {
		t.Errorf("assign_first without cpu_per_assign: error %v, want one naming cpu_per_assign", err)
	}
}
