package system

import (
	"math"
	"slices"

	"github.com/poolsim/poolsim/sim"
)

// Per-core run queues (testbed.scheduler: per_core).
//
// Processor sharing treats the cores as one pool: while any job waits,
// no core idles. Linux does not. Every core has its own queue; a woken
// thread is placed on one core as it wakes - the waker's, if the waker
// is about to sleep, else an idle core, else a queue - and stays there: a
// core that runs out of work does not take a thread from the other
// core's queue that has run within the last half millisecond (it is
// "cache hot", sched_migration_cost), which in a statement loop every
// thread has. So a core idles while the other has a queue, until the next
// wake-up lands on it. And a thread with more work keeps its core: a
// pooler's or a driver's thread with messages waiting runs them one after
// the other without leaving it (its batch), while the threads it woke
// wait.
//
// Measured through PgBouncer on this project's 2-vCPU machine (pgbench -S
// at 50 and 200 clients, pools of 4 to 32): the processes' CPU time added
// up to 88-98 % of the two cores, while they spent as long again waiting
// in run queues (schedstat's run delay) - idle cores beside queued
// threads. Straight to PostgreSQL (4-16 connections) 97-99 %.
//
// Each core runs the job at the head of its queue alone, until it ends or
// has had a time slice while another waits behind it, at the cores'
// speed - less the background's share when more cores are busy than it
// leaves - a backend's slowed by the USL factor of the backends' jobs in
// their CPU phase.

// pcore is one core: the job it runs and the jobs queued on it.
type pcore struct {
	on    bool
	job   cpuJob
	slice float64 // the job's work left in its time slice
	cont  bool    // q[0] is the thread that ran last going on: its slice goes on too
	q     []cpuJob
}

// entity is who runs a job, the thread that keeps a core or sleeps: a
// backend (a pooler's server, or a direct connection), a load driver's
// thread or a pooler process.
type entity uint64

func (v *server) entity(j cpuJob) entity {
	switch j.kind {
	case jobStatement:
		if j.srv >= 0 {
			return entity(3<<32 | uint64(uint32(j.srv)))
		}
	case jobDriver:
		t := int64(j.conn)
		if v.drvThreads > 0 {
			t %= int64(v.drvThreads)
		}
		return entity(1<<32 | uint64(uint32(t)))
	case jobPooler:
		return entity(2<<32 | uint64(uint32(j.conn)))
	}
	return entity(uint64(uint32(j.conn)))
}

// initCores sets up per-core run queues.
func (v *server) initCores(n int) {
	v.cpus = make([]pcore, n)
	v.idleAt = make([]sim.Time, n)
	v.ctx = -1
	v.prev, v.ran = map[entity]int{}, map[entity]sim.Time{}
	v.tailing, v.afterTail = map[int32]bool{}, map[int32]cpuJob{}
}

// idle reports whether core k has neither a job nor a queue.
func (v *server) idle(k int) bool { return !v.cpus[k].on && len(v.cpus[k].q) == 0 }

// allowed reports whether job j may run on core k (testbed.affinity):
// the driver's threads anywhere; the pooler's thread and the backends on
// core 0 (together), or the pooler on core 0 and the backends elsewhere
// (apart).
func (v *server) allowed(j cpuJob, k int) bool {
	if v.affinity == Free || j.kind == jobDriver {
		return true
	}
	if j.kind == jobPooler || v.affinity == Together {
		return k == 0
	}
	return k != 0
}

// place chooses job j's core. A pooler's or driver's thread that keeps
// its core after a job (the core whose job has just finished, v.ctx, the
// same entity: it had more work queued) goes first in that core's queue;
// a backend's next statement comes after a sleep (its result went to the
// client first), a wake-up like any other - unless it reaches the backend
// still running the tail of its last (testbed.server_tail), when it runs
// next on that core (runCores, tailOn). Otherwise, as Linux's
// wake-up: the waker's core if it is free (the waker sleeps), its own
// last core if idle, another idle core; with none idle, the waker's core
// if nothing queues there, else the shortest queue (its last core first
// among equals). With testbed.idle_scan false there is no look for
// another idle core: with neither the waker's core nor its own last one
// idle, a thread goes to the waker's core if nothing queues there, else
// to its own last core, as Linux's wake-up does when the cores are busy
// (SIS_UTIL: the scan for an idle core shrinks as the last-level cache's
// cores fill, and stops altogether above about 60 % busy on two).
func (v *server) place(j cpuJob) {
	if j.kind == jobDriver && (v.credit >= 1 && v.preemptOn(j, jobPooler) || v.srvCredit >= 1 && v.preemptOn(j, jobStatement)) {
		return
	}
	e := v.entity(j)
	w := v.ctx
	if w >= 0 && e == v.ctxEnt && !j.kind.backend() {
		c := &v.cpus[w]
		c.q = append(c.q, cpuJob{})
		copy(c.q[1:], c.q)
		c.q[0], c.cont = j, true
		return
	}
	p, seen := v.prev[e]
	if !seen {
		p = -1
	}
	ok := func(k int) bool { return k >= 0 && v.allowed(j, k) }
	k := -1
	switch {
	case ok(w) && v.idle(w):
		k = w
	case ok(p) && v.idle(p):
		k = p
	case v.noScan:
		// No scan for another idle core (testbed.idle_scan false): the
		// waker's core if nothing queues there, else the thread's own
		// last core, busy or not.
		switch {
		case ok(w) && len(v.cpus[w].q) == 0:
			k = w
		case ok(p):
			k = p
		case ok(w):
			k = w
		}
	default:
		for i := range v.cpus {
			if ok(i) && v.idle(i) {
				k = i
				break
			}
		}
	}
	if k < 0 {
		if ok(w) && len(v.cpus[w].q) == 0 {
			k = w
		} else {
			for i := range v.cpus {
				if ok(i) && (k < 0 || len(v.cpus[i].q) < len(v.cpus[k].q) || (len(v.cpus[i].q) == len(v.cpus[k].q) && i == p)) {
					k = i
				}
			}
		}
	}
	c := &v.cpus[k]
	switch {
	case v.wakeCurve != nil && (j.kind.backend() || j.kind == jobPooler) && k != w && v.idle(k):
		// Woken onto an idle core (not the waker's): it waits for the
		// core to wake, the longer the longer it idled
		// (testbed.wake_curve).
		j.wake = float64(wakeAt(v.wakeCurve, v.last-v.idleAt[k]))
	case j.kind.backend() && w >= 0 && k != w && v.idle(k):
		// A backend woken from another core onto an idle one waits for
		// that core to wake (testbed.wakeup).
		j.wake = v.wakeup
	}
	j.queued = v.last
	c.q = append(c.q, j)
	if c.on && math.IsInf(c.slice, 1) {
		c.slice = float64(timeSlice)
	}
}

// preemptOn runs driver job j at once on a core where a job of kind
// runs - a pooler's thread (testbed.pooler_preempt) or a backend's
// statement (testbed.server_preempt) - if there is one: that job, its
// work not done, waits at the head of the core's queue behind it. It
// spends one of that kind's credit and reports whether it did.
func (v *server) preemptOn(j cpuJob, kind jobKind) bool {
	for k := range v.cpus {
		c := &v.cpus[k]
		if !c.on || c.job.kind != kind || c.job.wake > 0 || !v.allowed(j, k) {
			continue
		}
		if kind == jobPooler {
			v.credit--
			v.preempted++
		} else {
			v.srvCredit--
			v.srvPreempted++
		}
		p := c.job
		p.queued, p.resumed, j.queued = v.last, true, v.last
		c.q = slices.Insert(c.q, 0, j, p)
		c.on, c.cont = false, false
		v.ran[v.entity(p)] = v.last
		return true
	}
	return false
}

// runCores adds a job: placed on a core's queue, started at once unless
// a finished job's handling is under way (cpuDoneCores starts the cores
// when it is done, so that a thread that keeps its core is not passed).
func (v *server) runCores(j cpuJob) {
	if v.tail > 0 && j.kind == jobStatement && v.tailing[j.srv] {
		// Its backend is still on its core after the last response: the
		// statement runs there next, with no wake-up (cpuDoneCores).
		v.afterTail[j.srv] = j
		return
	}
	if j.kind.backend() {
		v.nb++
	}
	v.nq++
	v.place(j)
	if v.ctx < 0 {
		v.dispatch()
	}
}

// timeSlice is how long a job runs before the next on its core's queue
// gets the core (it goes to the back): Linux's base slice, 0.75 ms. The
// statements' and the threads' jobs are microseconds and never reach it;
// a backend's start-up (milliseconds) does.
var timeSlice = 750 * sim.Microsecond

// migrationCost is how long after it last ran a thread is "cache hot"
// and stays on its core's queue when another core runs out of work
// (Linux's sched_migration_cost, 0.5 ms).
const migrationCost = 500 * sim.Microsecond

// dispatch starts the head of each free core's queue. A core with none
// takes the first job from another core's queue whose thread has not run
// for migrationCost (Linux's balancing on a newly idle core): a pool's
// backends that run every few hundred microseconds stay where they are,
// a large pool's, each idle longer, move - unless testbed.idle_balance
// is false, which keeps every queued thread where it is.
func (v *server) dispatch() {
	now := v.last
	for k := range v.cpus {
		c := &v.cpus[k]
		if c.on {
			continue
		}
		if len(c.q) == 0 && (v.noSteal || !v.steal(k, now)) {
			continue
		}
		if !c.cont { // a thread that keeps its core has not waited
			c.slice = float64(timeSlice)
			v.rqWait[c.q[0].kind] += now - c.q[0].queued
			if !c.q[0].resumed { // a preempted job's wait adds to its one start
				v.rqJobs[c.q[0].kind]++
			}
			c.q[0].resumed = false
		}
		c.on, c.job, c.cont = true, c.q[0], false
		c.q = c.q[1:]
		v.prev[v.entity(c.job)] = k
	}
}

// steal moves to idle core k the first job queued on another core whose
// thread last ran migrationCost or more ago, and reports whether it did;
// with testbed.idle_balance a duration, at most once per that.
func (v *server) steal(k int, now sim.Time) bool {
	if v.stealEvery > 0 && v.lastSteal >= 0 && now-v.lastSteal < v.stealEvery {
		return false
	}
	for o := range v.cpus {
		q := v.cpus[o].q
		if o == k || len(q) == 0 {
			continue
		}
		for i, j := range q {
			if !v.allowed(j, k) {
				continue
			}
			if t, ok := v.ran[v.entity(j)]; ok && now-t < migrationCost {
				continue
			}
			v.cpus[o].q = append(q[:i], q[i+1:]...)
			v.cpus[k].q = append(v.cpus[k].q, j)
			v.lastSteal = now
			return true
		}
	}
	return false
}

// coreRates are a backend's job's and another job's rates of work on a
// core of their own: the cores' speed, less the background's share when
// more cores are busy than it leaves to the test (as processor sharing
// takes it), a backend's slowed by the USL factor of the backends' jobs.
func (v *server) coreRates() (backend, other float64) {
	share := v.spd
	if f := float64(v.onCores()); f > v.avail {
		share *= v.avail / f
	}
	k := float64(max(v.nb, 1))
	return share / (1 + v.cfg.Contention*(k-1) + v.cfg.Coherency*k*(k-1)), share
}

// onCores is how many cores are running a job.
func (v *server) onCores() int {
	n := 0
	for k := range v.cpus {
		if v.cpus[k].on {
			n++
		}
	}
	return n
}

// advanceCores brings the running jobs' work left up to now, window by
// window of the cores' speed.
func (v *server) advanceCores(now sim.Time) {
	for v.last < now {
		end := now
		if v.speeds != nil && v.spdEnd < end {
			end = v.spdEnd
		}
		dt := float64(end - v.last)
		rb, ro := v.coreRates()
		for k := range v.cpus {
			c := &v.cpus[k]
			if !c.on {
				continue
			}
			d := dt
			if c.job.wake > 0 { // the core wakes first: time, not work
				w := min(d, c.job.wake)
				c.job.wake -= w
				d -= w
			}
			r := c.job.rate(rb, ro)
			c.job.left -= d * r
			c.slice -= d * r
		}
		v.last = end
		if v.speeds != nil && end == v.spdEnd {
			v.nextSpeed()
		}
	}
}

// nextCores is how long until the first running job finishes, in whole
// nanoseconds rounded up (or until the speed changes).
func (v *server) nextCores() (sim.Time, bool) {
	rb, ro := v.coreRates()
	first := math.Inf(1)
	for _, c := range v.cpus {
		if !c.on {
			continue
		}
		first = min(first, c.job.wake+max(min(c.job.left, c.slice), 0)/c.job.rate(rb, ro))
		if c.job.wake > 0 { // the core's wake-up ends: it is busy from then on (countCores)
			first = min(first, c.job.wake)
		}
	}
	if math.IsInf(first, 1) {
		return 0, false
	}
	next := sim.Time(math.Ceil(first))
	if v.speeds != nil {
		next = min(next, v.spdEnd-v.last)
	}
	return next, true
}

// countCores sets the levels: jobs and others count the jobs in their
// CPU phase, running or queued; used the cores busy with them, at most
// those the background leaves - not a core still waking for its job
// (testbed.wake_curve, testbed.wakeup): it idles until the thread runs,
// as /proc/stat counts it, which validate's fit of the idle balancing
// sets beside the model's busy cores.
func (v *server) countCores(now sim.Time) {
	v.jobs.Set(now, int64(v.nb))
	v.others.Set(now, int64(v.nq-v.nb))
	n := 0
	for k := range v.cpus {
		if c := &v.cpus[k]; c.on && c.job.wake <= 0 {
			n++
		}
	}
	v.used.Set(now, int64(math.Round(1e6*min(float64(n), v.avail))))
}

// coresFullCores is coresFull with run queues: no core is idle, the
// waker's own counted busy (a thread woken from a timer, not by a job,
// counts one core busy as coresFull does).
func (v *server) coresFullCores() bool {
	busy := 0
	for k := range v.cpus {
		if !v.idle(k) || k == v.ctx {
			busy++
		}
	}
	if v.ctx < 0 {
		busy++
	}
	return busy >= len(v.cpus)
}

// tailOn keeps core c for the backend of its finished statement job j
// (testbed.server_tail), and reports whether it did. A statement with CPU
// left after its response puts that tail first in the core's queue, going
// on without a wait, while the model takes the response; a tail that ends
// with a statement waiting for its server hands the core to that
// statement the same way. Either way the backend keeps its core and stays
// among the jobs in their CPU phase. What the tail is, and where it was
// measured: Testbed.ServerTail.
func (v *server) tailOn(c *pcore, j cpuJob) bool {
	switch {
	case j.after > 0:
		c.q = slices.Insert(c.q, 0, cpuJob{conn: j.conn, srv: j.srv, kind: jobStatement, left: j.after, tail: true, queued: v.last})
		v.tailing[j.srv] = true
	case j.tail:
		delete(v.tailing, j.srv)
		next, ok := v.afterTail[j.srv]
		if !ok {
			return false
		}
		delete(v.afterTail, j.srv)
		next.queued = v.last
		c.q = slices.Insert(c.q, 0, next)
	default:
		return false
	}
	c.cont = true
	v.ran[v.entity(j)] = v.last
	return true
}

// cpuDoneCores takes the finished jobs off their cores, hands each to
// the model (handle) with its core as the waker's, then starts the cores.
func (v *server) cpuDoneCores(handle func(cpuJob)) {
	fin := v.fin[:0]
	for k := range v.cpus {
		c := &v.cpus[k]
		if c.on && c.job.left > 0.5 && c.slice <= 0.5 {
			// Its slice is over: the next in the queue runs (dispatch
			// gives it a slice), it waits behind; alone, it goes on
			// until a job queues behind it (place gives it a slice then).
			if len(c.q) == 0 {
				c.slice = math.Inf(1)
				continue
			}
			c.job.queued = v.last
			c.q = append(c.q, c.job)
			c.on = false
			v.ran[v.entity(c.job)] = v.last
			continue
		}
		if c.on && c.job.left <= 0.5 { // within half a nanosecond: done
			c.on = false
			if v.tailOn(c, c.job) {
				if !c.job.tail { // the statement's response: the model's
					fin = append(fin, k)
				}
				continue
			}
			v.idleAt[k] = v.last
			v.ran[v.entity(c.job)] = v.last
			if c.job.kind.backend() {
				v.nb--
			}
			v.nq--
			if !c.job.tail { // a tail's end is nothing to the model: its backend sleeps
				fin = append(fin, k)
			}
		}
	}
	for _, k := range fin {
		j := v.cpus[k].job
		if (v.preempt > 0 || v.srvPreempt > 0) && j.kind == jobStatement && j.srv >= 0 {
			v.pooledDone++
		}
		if v.preempt > 0 && j.kind == jobStatement && j.srv >= 0 {
			// A pooled statement's response: testbed.pooler_preempt's
			// credit grows, held to one preemption's worth more than a
			// statement's so that none pile up while no driver wakes.
			v.credit = min(v.credit+v.preempt, 1+v.preempt)
		}
		if v.srvPreempt > 0 && j.kind == jobStatement && j.srv >= 0 {
			v.srvCredit = min(v.srvCredit+v.srvPreempt, 1+v.srvPreempt)
		}
		v.ctx, v.ctxEnt = k, v.entity(j)
		handle(j)
	}
	v.ctx, v.fin = -1, fin
	v.dispatch()
}
