package testbed

import (
	"math"
	"slices"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Per-core run queues (Machine.Scheduler: PerCore).
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

// perCore is the per-core scheduler of a run: the cores' queues and what
// the scheduler remembers of the threads, with the machine's settings
// for it.
type perCore struct {
	*cores
	cpus   []pcore
	ctx    int                 // the core whose finished job the model is handling; -1 otherwise
	ctxEnt entity              // that job's entity
	prev   map[entity]int      // each entity's last core
	ran    map[entity]sim.Time // when each entity last left a core
	fin    []int               // Tick's buffer
	nq     int                 // jobs in their CPU phase, running or queued
	idleAt []sim.Time          // when each core last finished a job

	drvThreads int         // Machine.DriverThreads
	affinity   Affinity    // Machine.Affinity
	wakeup     float64     // Machine.Wakeup, ns
	wakeCurve  []WakePoint // Machine.WakeCurve
	noSteal    bool        // Machine.NoIdleBalance
	noScan     bool        // Machine.NoIdleScan
	stealEvery sim.Time    // Machine.IdleBalanceEvery (0: at every chance)
	lastSteal  sim.Time    // when a core last took a queued thread (-1: never)

	// A backend's tail (Machine.ServerTail): the share of a pooled
	// statement's CPU its backend runs after the response, keeping its
	// core; the servers whose backend runs one now; and the statement
	// that reached such a server meanwhile, which runs next on that core.
	tail      float64
	tailing   map[int32]bool
	afterTail map[int32]job

	// The pooler and the backends taken off their cores by a woken
	// driver's thread (Machine.PoolerPreempt, ServerPreempt): the rates
	// per pooled statement and the credits not yet spent.
	preempt, credit, srvPreempt, srvCredit float64
}

// pcore is one core: the job it runs and the jobs queued on it.
type pcore struct {
	on    bool
	job   job
	slice float64 // the job's work left in its time slice
	cont  bool    // q[0] is the thread that ran last going on: its slice goes on too
	q     []job
}

// entity is who runs a job, the thread that keeps a core or sleeps: a
// backend (a pooler's server, or a direct connection), a load driver's
// thread or a pooler process.
type entity uint64

func newPerCore(c *cores, t Machine) *perCore {
	n := c.srv.Cores
	v := &perCore{cores: c, cpus: make([]pcore, n), idleAt: make([]sim.Time, n), ctx: -1,
		prev: map[entity]int{}, ran: map[entity]sim.Time{}, tailing: map[int32]bool{}, afterTail: map[int32]job{},
		drvThreads: t.DriverThreads, affinity: t.Affinity, wakeup: float64(t.Wakeup), wakeCurve: t.WakeCurve,
		noSteal: t.NoIdleBalance, noScan: t.NoIdleScan, stealEvery: t.IdleBalanceEvery, lastSteal: -1,
		tail: t.ServerTail, preempt: t.PoolerPreempt, srvPreempt: t.ServerPreempt}
	c.pc = v
	return v
}

func (v *perCore) entity(j job) entity {
	switch j.kind {
	case kStatement:
		if j.srv >= 0 {
			return entity(3<<32 | uint64(uint32(j.srv)))
		}
	case kDriver:
		t := int64(j.conn)
		if v.drvThreads > 0 {
			t %= int64(v.drvThreads)
		}
		return entity(1<<32 | uint64(uint32(t)))
	case kPooler:
		return entity(2<<32 | uint64(uint32(j.conn)))
	}
	return entity(uint64(uint32(j.conn)))
}

// idle reports whether core k has neither a job nor a queue.
func (v *perCore) idle(k int) bool { return !v.cpus[k].on && len(v.cpus[k].q) == 0 }

// allowed reports whether job j may run on core k (Machine.Affinity):
// the driver's threads anywhere; the pooler's thread and the backends on
// core 0 (together), or the pooler on core 0 and the backends elsewhere
// (apart).
func (v *perCore) allowed(j job, k int) bool {
	if v.affinity == Free || j.kind == kDriver {
		return true
	}
	if j.kind == kPooler || v.affinity == Together {
		return k == 0
	}
	return k != 0
}

// Run starts a model's job (system.CPU): a pooled statement's backend
// sends its result with Machine.ServerTail of its work still to run.
func (v *perCore) Run(j system.Job) sim.Time {
	x := fromModel(j)
	if v.tail > 0 && x.kind == kStatement && x.srv >= 0 {
		// Its backend sends the response with the tail still to run:
		// the client's statement is the part before.
		x.after = math.Round(v.tail * x.left)
		x.left -= x.after
		j.Work -= sim.Time(x.after)
	}
	v.add(x)
	return j.Work
}

// add starts a job: the others' work brought up to now, the job placed,
// the levels counted and the next completion planned.
func (v *perCore) add(j job) {
	now := v.h.Now()
	v.advance(now)
	v.enqueue(j)
	v.count(now)
	v.plan()
}

// enqueue puts a job on a core's queue, started at once unless a finished
// job's handling is under way (Tick starts the cores when it is done, so
// that a thread that keeps its core is not passed).
func (v *perCore) enqueue(j job) {
	if v.tail > 0 && j.kind == kStatement && v.tailing[j.srv] {
		// Its backend is still on its core after the last response: the
		// statement runs there next, with no wake-up (Tick).
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

// place chooses job j's core. A pooler's or driver's thread that keeps
// its core after a job (the core whose job has just finished, v.ctx, the
// same entity: it had more work queued) goes first in that core's queue;
// a backend's next statement comes after a sleep (its result went to the
// client first), a wake-up like any other - unless it reaches the backend
// still running the tail of its last (Machine.ServerTail), when it runs
// next on that core (enqueue, tailOn). Otherwise, as Linux's wake-up: the
// waker's core if it is free (the waker sleeps), its own last core if
// idle, another idle core; with none idle, the waker's core if nothing
// queues there, else the shortest queue (its last core first among
// equals). With Machine.NoIdleScan there is no look for another idle
// core: with neither the waker's core nor its own last one idle, a thread
// goes to the waker's core if nothing queues there, else to its own last
// core, as Linux's wake-up does when the cores are busy (SIS_UTIL: the
// scan for an idle core shrinks as the last-level cache's cores fill, and
// stops altogether above about 60 % busy on two).
func (v *perCore) place(j job) {
	if j.kind == kDriver && (v.credit >= 1 && v.preemptOn(j, kPooler) || v.srvCredit >= 1 && v.preemptOn(j, kStatement)) {
		return
	}
	e := v.entity(j)
	w := v.ctx
	if w >= 0 && e == v.ctxEnt && !j.kind.backend() {
		c := &v.cpus[w]
		c.q = append(c.q, job{})
		copy(c.q[1:], c.q)
		c.q[0], c.cont = j, true
		return
	}
	k := v.choose(j, e, w)
	c := &v.cpus[k]
	switch {
	case v.wakeCurve != nil && (j.kind.backend() || j.kind == kPooler) && k != w && v.idle(k):
		// Woken onto an idle core (not the waker's): it waits for the
		// core to wake, the longer the longer it idled
		// (Machine.WakeCurve).
		j.wake = float64(wakeAt(v.wakeCurve, v.last-v.idleAt[k]))
	case j.kind.backend() && w >= 0 && k != w && v.idle(k):
		// A backend woken from another core onto an idle one waits for
		// that core to wake (Machine.Wakeup).
		j.wake = v.wakeup
	}
	j.queued = v.last
	c.q = append(c.q, j)
	if c.on && math.IsInf(c.slice, 1) {
		c.slice = float64(timeSlice)
	}
}

// choose is the core job j of entity e, woken by core w (-1: by none),
// is placed on (place).
func (v *perCore) choose(j job, e entity, w int) int {
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
		// No scan for another idle core (Machine.NoIdleScan): the
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
	if k >= 0 {
		return k
	}
	if ok(w) && len(v.cpus[w].q) == 0 {
		return w
	}
	for i := range v.cpus {
		if ok(i) && (k < 0 || len(v.cpus[i].q) < len(v.cpus[k].q) || (len(v.cpus[i].q) == len(v.cpus[k].q) && i == p)) {
			k = i
		}
	}
	return k
}

// preemptOn runs driver job j at once on a core where a job of kind k
// runs - a pooler's thread (Machine.PoolerPreempt) or a backend's
// statement (Machine.ServerPreempt) - if there is one: that job, its
// work not done, waits at the head of the core's queue behind it. It
// spends one of that kind's credit and reports whether it did.
func (v *perCore) preemptOn(j job, k kind) bool {
	for i := range v.cpus {
		c := &v.cpus[i]
		if !c.on || c.job.kind != k || c.job.wake > 0 || !v.allowed(j, i) {
			continue
		}
		if k == kPooler {
			v.credit--
			v.stats.preempted++
		} else {
			v.srvCredit--
			v.stats.srvPreempted++
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
// a large pool's, each idle longer, move - unless Machine.NoIdleBalance
// keeps every queued thread where it is.
func (v *perCore) dispatch() {
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
			v.stats.rqWait[c.q[0].kind] += now - c.q[0].queued
			if !c.q[0].resumed { // a preempted job's wait adds to its one start
				v.stats.rqJobs[c.q[0].kind]++
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
// with Machine.IdleBalanceEvery, at most once per that.
func (v *perCore) steal(k int, now sim.Time) bool {
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

// rates are a backend's job's and another job's rates of work on a core
// of their own: the cores' speed, less the background's share when more
// cores are busy than it leaves to the test (as processor sharing takes
// it), a backend's slowed by the USL factor of the backends' jobs.
func (v *perCore) rates() (backend, other float64) {
	share := v.spd.f
	if f := float64(v.onCores()); f > v.avail {
		share *= v.avail / f
	}
	return v.uslRates(share)
}

// onCores is how many cores are running a job.
func (v *perCore) onCores() int {
	n := 0
	for k := range v.cpus {
		if v.cpus[k].on {
			n++
		}
	}
	return n
}

// advance brings the running jobs' work left up to now, window by
// window of the cores' speed.
func (v *perCore) advance(now sim.Time) {
	for v.last < now {
		end := v.spd.until(now)
		dt := float64(end - v.last)
		rb, ro := v.rates()
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
		v.spd.passed(end)
	}
}

// plan plans the Tick of the first running job to finish, in whole
// nanoseconds rounded up (or of the speed's change).
func (v *perCore) plan() {
	rb, ro := v.rates()
	first := math.Inf(1)
	for _, c := range v.cpus {
		if !c.on {
			continue
		}
		first = min(first, c.job.wake+max(min(c.job.left, c.slice), 0)/c.job.rate(rb, ro))
		if c.job.wake > 0 { // the core's wake-up ends: it is busy from then on (count)
			first = min(first, c.job.wake)
		}
	}
	if math.IsInf(first, 1) {
		v.h.Unplan()
		return
	}
	v.h.Plan(v.spd.cap(sim.Time(math.Ceil(first)), v.last))
}

// count sets the levels: jobs counts the backends' jobs in their CPU
// phase, running or queued; used the cores busy with them, at most those
// the background leaves - not a core still waking for its job
// (Machine.WakeCurve, Wakeup): it idles until the thread runs, as
// /proc/stat counts it, which validate's fit of the idle balancing sets
// beside the model's busy cores.
func (v *perCore) count(now sim.Time) {
	v.jobs.Set(now, int64(v.nb))
	n := 0
	for k := range v.cpus {
		if c := &v.cpus[k]; c.on && c.job.wake <= 0 {
			n++
		}
	}
	v.setUsed(now, n)
}

// PoolerWakeup is the pooler thread's wake-up (system.CPU): none with a
// wake curve (the core it lands on sets it, place) or with no core idle
// as it wakes - the waker's own counted busy (a thread woken from a
// timer, not by a job, counts one core busy) - else wakeup.
func (v *perCore) PoolerWakeup(wakeup sim.Time) sim.Time {
	if v.wakeCurve != nil {
		return 0
	}
	busy := 0
	for k := range v.cpus {
		if !v.idle(k) || k == v.ctx {
			busy++
		}
	}
	if v.ctx < 0 {
		busy++
	}
	if busy >= len(v.cpus) {
		return 0
	}
	return wakeup
}

// Tick takes the finished jobs off their cores, hands each on with its
// core as the waker's, then starts the cores, counts and plans again
// (system.CPU).
func (v *perCore) Tick() {
	now := v.h.Now()
	v.advance(now)
	fin := v.fin[:0]
	for k := range v.cpus {
		if v.endSlice(k) {
			fin = append(fin, k)
		}
	}
	for _, k := range fin {
		j := v.cpus[k].job
		v.credits(j)
		v.ctx, v.ctxEnt = k, v.entity(j)
		v.finish(j)
	}
	v.ctx, v.fin = -1, fin
	v.dispatch()
	v.count(now)
	v.plan()
}

// endSlice takes core k's job off it if its slice is over (it goes to
// the back of the queue, or alone runs on) or its work is done, and
// reports whether a job the model or the driver must hear of finished.
func (v *perCore) endSlice(k int) bool {
	c := &v.cpus[k]
	if c.on && c.job.left > 0.5 && c.slice <= 0.5 {
		// Its slice is over: the next in the queue runs (dispatch gives
		// it a slice), it waits behind; alone, it goes on until a job
		// queues behind it (place gives it a slice then).
		if len(c.q) == 0 {
			c.slice = math.Inf(1)
			return false
		}
		c.job.queued = v.last
		c.q = append(c.q, c.job)
		c.on = false
		v.ran[v.entity(c.job)] = v.last
		return false
	}
	if !c.on || c.job.left > 0.5 { // within half a nanosecond: done
		return false
	}
	c.on = false
	if v.tailOn(c, c.job) {
		return !c.job.tail // the statement's response: the model's
	}
	v.idleAt[k] = v.last
	v.ran[v.entity(c.job)] = v.last
	if c.job.kind.backend() {
		v.nb--
	}
	v.nq--
	return !c.job.tail // a tail's end is nothing to the model: its backend sleeps
}

// credits counts a pooled statement's response for the preemptions: the
// credits of Machine.PoolerPreempt and ServerPreempt grow, each held to
// one preemption's worth more than a statement's so that none pile up
// while no driver wakes.
func (v *perCore) credits(j job) {
	if j.kind != kStatement || j.srv < 0 {
		return
	}
	if v.preempt > 0 || v.srvPreempt > 0 {
		v.stats.pooledDone++
	}
	if v.preempt > 0 {
		v.credit = min(v.credit+v.preempt, 1+v.preempt)
	}
	if v.srvPreempt > 0 {
		v.srvCredit = min(v.srvCredit+v.srvPreempt, 1+v.srvPreempt)
	}
}

// tailOn keeps core c for the backend of its finished statement job j
// (Machine.ServerTail), and reports whether it did. A statement with CPU
// left after its response puts that tail first in the core's queue, going
// on without a wait, while the model takes the response; a tail that ends
// with a statement waiting for its server hands the core to that
// statement the same way. Either way the backend keeps its core and stays
// among the jobs in their CPU phase.
func (v *perCore) tailOn(c *pcore, j job) bool {
	switch {
	case j.after > 0:
		c.q = slices.Insert(c.q, 0, job{conn: j.conn, srv: j.srv, kind: kStatement, left: j.after, tail: true, queued: v.last})
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

var _ system.CPU = (*perCore)(nil)
