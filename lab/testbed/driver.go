package testbed

import (
	"slices"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// driver is the load driver's client-side work on the machine's cores
// (system.Clients): its CPU per statement (Machine.DriverCPU), a job per
// client before the statement is sent - with DriverThreads, one job at a
// time per thread; with DriverScan, as pgbench's threads take their
// clients: a pass in client order over the results a poll found, the next
// transactions started in a pass of their own and timed from there.
type driver struct {
	h       *system.Host
	run     func(job) // starts a job on the machine's scheduler
	cpu     sim.Dist
	streams sim.Streams // the "driver" family: common random numbers per statement
	scan    bool
	threads []drvThread
	clients []drvClient // by the model's client id
}

// drvClient is the driver's state of one client.
type drvClient struct {
	session uint64   // the client's session the state is of
	demand  sim.Time // the driver's CPU for the statement it is sending
	start   sim.Time // when that CPU job began
	end     sim.Time // with scan: the driver's CPU to read the transaction's last result
	reading bool     // with scan: the driver's job under way reads a result
}

// drvThread is one of the load driver's threads (Machine.DriverThreads):
// it prepares its clients' statements one at a time, the others queued.
type drvThread struct {
	busy    bool
	polling bool    // with scan: its job is a poll (pollCPU)
	q       []int32 // clients waiting for it, in the order they became ready
	// With scan: the clients whose transaction ended and which start the
	// next, and the pass under way, in client order.
	starts, pass []int32
	// Its clients' completed transactions and their latencies' sum
	// (Stats.DriverThreadSpread).
	txns   int64
	latSum sim.Time
}

// pollCPU is the CPU of a woken driver thread's poll (Machine.DriverScan):
// a job so short it only marks when the thread runs - its poll returns
// what has come by then.
const pollCPU = 100 * sim.Nanosecond

func newDriver(h *system.Host, t Machine, run func(job)) *driver {
	return &driver{h: h, run: run, cpu: t.DriverCPU, streams: sim.NewStreams(h.Seed(), "driver"), scan: t.DriverScan,
		threads: make([]drvThread, t.DriverThreads)}
}

// client is client u's state, new for a new session in its slot.
func (d *driver) client(u int32, session uint64) *drvClient {
	if n := int(u) + 1; n > len(d.clients) {
		d.clients = append(d.clients, make([]drvClient, n-len(d.clients))...)
	}
	c := &d.clients[u]
	if c.session != session {
		*c = drvClient{session: session}
	}
	return c
}

// Send runs the load driver's CPU for client u's next statement on the
// cores, and reports whether it did: the statement is sent when it is
// done (system.Clients). With scan the last statement of a transaction
// gets half of it here, sending; the other half reads its result (Read).
func (d *driver) Send(u int32) bool {
	w := d.h.Draw(&d.cpu, d.streams, u)
	if w <= 0 {
		return false
	}
	pos := d.h.Position(u)
	c := d.client(u, pos.Session)
	if d.scan && pos.Stmt+1 == pos.Stmts {
		c.end = w - w/2
		w /= 2
	}
	d.job(u, c, pos, w)
	return true
}

// Read reports whether client u's result, the last of its transaction,
// waits for the driver to read it (Machine.DriverScan): pgbench's thread
// reads it in its next pass, and ends the transaction there - the next
// one starts in the pass after (system.Clients).
func (d *driver) Read(u int32) bool {
	pos := d.h.Position(u)
	if pos.Stmt+1 != pos.Stmts && !pos.Failed {
		return false
	}
	c := d.client(u, pos.Session)
	if !d.scan || c.end <= 0 {
		return false
	}
	c.reading = true
	d.job(u, c, pos, c.end)
	c.end = 0
	return true
}

// Completed counts client u's transaction in its thread's
// (Stats.DriverThreadSpread; system.Clients).
func (d *driver) Completed(u int32, lat sim.Time) {
	if len(d.threads) > 0 {
		t := &d.threads[int(u)%len(d.threads)]
		t.txns++
		t.latSum += lat
	}
}

// job runs w of the driver's CPU for client u: at once, or on its thread
// (Machine.DriverThreads), one job at a time.
func (d *driver) job(u int32, c *drvClient, pos system.Position, w sim.Time) {
	c.demand, c.start = w, d.h.Now()
	if len(d.threads) > 0 {
		t := &d.threads[int(u)%len(d.threads)]
		if d.scan {
			if !c.reading && pos.Stmt == 0 {
				t.starts = append(t.starts, u)
			} else {
				t.q = append(t.q, u)
			}
			if !t.busy {
				// The thread wakes and polls: every client ready by
				// the time it runs is in its pass.
				t.busy, t.polling = true, true
				d.run(job{conn: u, kind: kDriver, left: float64(pollCPU)})
			}
			return
		}
		if t.busy {
			t.q = append(t.q, u)
			return
		}
		t.busy = true
	}
	d.run(job{conn: u, kind: kDriver, left: float64(w)})
}

// next starts driver thread k's next job, taken off its queue.
func (d *driver) next(k int) {
	u := d.threads[k].next(d.scan)
	c := &d.clients[u]
	if d.scan && !c.reading && d.h.Position(u).Stmt == 0 && d.h.Restart(u) {
		// pgbench's clock starts as its thread starts the transaction,
		// not as the last one ended: the pass between is not in its
		// latency.
		c.start = d.h.Now()
	}
	d.run(job{conn: u, kind: kDriver, left: float64(c.demand)})
}

// done is the driver done with client u's job: its own time counts as
// the client's, the rest as time lost to sharing the cores; the statement
// goes (or, reading a result, the client has it).
func (d *driver) done(u int32) {
	if len(d.threads) > 0 {
		k := int(u) % len(d.threads)
		t := &d.threads[k]
		if t.polling { // the thread's poll, not u's job: its pass starts
			t.polling = false
			d.next(k)
			return
		}
		// The thread goes on to its next client's statement first: it
		// keeps its core (per-core run queues) while the statement it
		// sent wakes the pooler.
		if len(t.q) > 0 || len(t.pass) > 0 || len(t.starts) > 0 {
			d.next(k)
		} else {
			t.busy = false
		}
	}
	c := &d.clients[u]
	own, waited := c.demand, d.h.Now()-c.start-c.demand
	if c.reading {
		c.reading = false
		d.h.Receive(u, own, waited)
		return
	}
	d.h.Send(u, own, waited)
}

// next takes the client whose statement the thread prepares next off its
// queue: the first to become ready, or with scan (as pgbench's thread,
// Machine.DriverScan) the next of the pass in client order. pgbench's
// thread polls its sockets and goes through the clients whose result that
// poll found, from the first to the last, reading each; a transaction's
// last result ends it, and the client starts its next in a second pass,
// made without polling, over the clients that ended; then it polls again.
// A result that comes during the passes waits for that poll. So a client
// early in the order sends its statement early in the pass and has the
// rest of the passes for the round trip to come back before the next
// poll; a late one has little.
func (t *drvThread) next(scan bool) int32 {
	if !scan {
		c := t.q[0]
		t.q = t.q[1:]
		return c
	}
	if len(t.pass) == 0 {
		if len(t.starts) > 0 {
			t.pass, t.starts = append(t.pass, t.starts...), t.starts[:0]
		} else { // poll
			t.pass, t.q = append(t.pass, t.q...), t.q[:0]
		}
		slices.Sort(t.pass)
	}
	c := t.pass[0]
	t.pass = t.pass[1:]
	return c
}

// spread is the slowest driver thread's clients' mean latency over the
// fastest's (Stats.DriverThreadSpread); 0 without two threads that
// completed transactions.
func (d *driver) spread() float64 {
	lo, hi := 0.0, 0.0
	for _, t := range d.threads {
		if t.txns == 0 {
			continue
		}
		x := float64(t.latSum) / float64(t.txns)
		if lo == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	if len(d.threads) < 2 || lo == 0 {
		return 0
	}
	return hi / lo
}

var _ system.Clients = (*driver)(nil)
