package testbed

import (
	"math"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// kind says whose CPU work a job is. Statements and start-ups are the
// backends': only they are slowed by the USL's contention and coherency.
type kind uint8

const (
	kStatement kind = iota // a backend running a statement
	kStartup               // a backend starting
	kDriver                // the load driver preparing a client's statement
	kPooler                // a pooler process's thread (Machine.PoolerOnCores)
)

func (k kind) backend() bool { return k <= kStartup }

// job is a job's CPU work left, in nanoseconds.
type job struct {
	conn int32 // the connection, a pool's login id (negative), the client (driver) or the pooler process
	// srv is the pooler's server whose backend runs a statement: with
	// per-core queues that backend is the thread (its process), whoever
	// the client; -1 in direct mode, where the connection is its own.
	srv  int32
	kind kind
	left float64
	// after is the statement's CPU its backend runs after it has sent
	// the response (Machine.ServerTail); tail marks that part's job.
	after float64
	tail  bool
	// wake is how long the job waits, on its core, for that core to wake
	// before its work starts (Machine.Wakeup, WakeCurve; per-core queues
	// only), in nanoseconds of time, not work.
	wake float64
	// queued is when the job joined its core's queue (per-core queues);
	// resumed marks a job preempted before it was done (preemptOn).
	queued  sim.Time
	resumed bool
}

// rate is the job's rate of the two a scheduler gives: a backend's
// (slowed by the USL) or another's.
func (j job) rate(backend, other float64) float64 {
	if j.kind.backend() {
		return backend
	}
	return other
}

// modelKinds maps the model's job kinds to the machine's.
var modelKinds = [...]kind{system.JobStatement: kStatement, system.JobStartup: kStartup, system.JobPooler: kPooler}

// fromModel is the model's job j as the machine's.
func fromModel(j system.Job) job {
	return job{conn: j.ID, srv: j.Server, kind: modelKinds[j.Kind], left: float64(j.Work)}
}

// toModel is job j handed back to the model (it reads the kind and ids).
func (j job) toModel() system.Job {
	k := system.JobStatement
	switch j.kind {
	case kStartup:
		k = system.JobStartup
	case kPooler:
		k = system.JobPooler
	}
	return system.Job{Kind: k, ID: j.conn, Server: j.srv}
}

// cores is one run's CPU on the machine, what its two schedulers share:
// the cores left to the test, their speed, the backend jobs that set the
// USL's factor, the levels, the load driver, and how a finished job is
// handed on. The scheduler is processor sharing (shared) unless pc is
// set (perCore).
type cores struct {
	h     *system.Host
	srv   system.Server
	avail float64 // cores left to the test: cores − Machine.Background
	bg    float64
	spd   speed
	last  sim.Time // when the jobs' work left was last brought up to date
	nb    int      // backend jobs in their CPU phase

	running []job // shared: the jobs in their CPU phase, in arrival order
	done    []job // shared: Tick's buffer

	// jobs counts the backends' jobs in their CPU phase; used the cores
	// busy with the test's jobs, min(all jobs, avail), in millionths of
	// a core.
	jobs, used sim.Level

	drv   *driver  // the load driver's client-side work; nil without
	pc    *perCore // per-core run queues; nil with processor sharing
	stats counts
}

func newCores(h *system.Host, t Machine) *cores {
	c := &cores{h: h, srv: h.Server(), bg: t.Background, jobs: sim.NewLevel(0), used: sim.NewLevel(0)}
	c.avail = float64(c.srv.Cores) - t.Background
	c.spd.init(t, h.Seed())
	return c
}

// run starts a machine's own job (the driver's) on the scheduler.
func (c *cores) run(j job) {
	if c.pc != nil {
		c.pc.add(j)
		return
	}
	(*shared)(c).add(j)
}

// finish hands on a job whose work is done: the driver's to the driver,
// the others back to the model.
func (c *cores) finish(j job) {
	if j.kind == kDriver {
		c.drv.done(j.conn)
		return
	}
	c.h.Finished(j.toModel())
}

// uslRates are a backend's job's and another job's rates at a share of
// a core: a backend's slowed by the USL factor of the backends' jobs.
func (c *cores) uslRates(share float64) (backend, other float64) {
	k := float64(max(c.nb, 1))
	return share / c.srv.USLFactor(k), share
}

// Levels are the backend jobs and the cores in use (system.CPU).
func (c *cores) Levels() []*sim.Level { return []*sim.Level{&c.jobs, &c.used} }

// Measure is the cores' mean utilisation by all the test's jobs and the
// background together, and the backend jobs' mean (system.CPU).
func (c *cores) Measure(level func(int) float64) (util, backendJobs float64) {
	return (level(1)/1e6 + c.bg) / float64(c.srv.Cores), level(0)
}

// setUsed counts n cores busy with the test's jobs, at most those the
// background leaves.
func (c *cores) setUsed(now sim.Time, n int) {
	c.used.Set(now, int64(math.Round(1e6*min(float64(n), c.avail))))
}

// shared is processor sharing of the cores among all the test's jobs:
// each of n jobs running gets min(1, (cores − background)/n) of a core,
// at the cores' speed, a backend's slowed by the USL factor of the
// backend jobs.
type shared cores

// Run starts a model's job (system.CPU).
func (s *shared) Run(j system.Job) sim.Time {
	s.add(fromModel(j))
	return j.Work
}

// add starts a job: the others' work brought up to now, the job added,
// the levels counted and the next completion planned.
func (s *shared) add(j job) {
	now := s.h.Now()
	s.advance(now)
	if j.kind.backend() {
		s.nb++
	}
	s.running = append(s.running, j)
	s.count(now)
	s.plan()
}

// rates are the CPU work a backend's job and another job receive per
// unit of time with the jobs running now: their share of the cores left
// to the test, at the cores' speed.
func (s *shared) rates() (backend, other float64) {
	share := 1.0
	if n := float64(len(s.running)); n > s.avail {
		share = s.avail / n
	}
	share *= s.spd.f
	return (*cores)(s).uslRates(share)
}

// advance brings the running jobs' work up to now with two rates: every
// job of a kind loses the same work, so rounding stays monotonic within
// a kind. With a varying speed the time is taken window by window.
func (s *shared) advance(now sim.Time) {
	for s.last < now {
		end := s.spd.until(now)
		if len(s.running) > 0 {
			dt := float64(end - s.last)
			rb, ro := s.rates()
			db, do := dt*rb, dt*ro
			for i := range s.running {
				s.running[i].left -= s.running[i].rate(db, do)
			}
		}
		s.last = end
		s.spd.passed(end)
	}
}

// count sets the levels: the backends' jobs, and the cores they and the
// others keep busy together.
func (s *shared) count(now sim.Time) {
	s.jobs.Set(now, int64(s.nb))
	(*cores)(s).setUsed(now, len(s.running))
}

// plan plans the Tick of the first running job to finish at the current
// rates, found by a scan (there are at most a few hundred), in whole
// nanoseconds rounded up - or of the speed's change, if that comes first.
func (s *shared) plan() {
	if len(s.running) == 0 {
		s.h.Unplan()
		return
	}
	rb, ro := s.rates()
	first := math.Inf(1)
	for _, j := range s.running {
		first = min(first, max(j.left, 0)/j.rate(rb, ro))
	}
	s.h.Plan(s.spd.cap(sim.Time(math.Ceil(first)), s.last))
}

// Tick finishes the jobs whose work is done (within half a nanosecond),
// plans the next, then hands them on (system.CPU).
func (s *shared) Tick() {
	now := s.h.Now()
	s.advance(now)
	finished := s.done[:0]
	kept := s.running[:0]
	nb := 0
	for _, j := range s.running {
		if j.left <= 0.5 {
			finished = append(finished, j)
			continue
		}
		if j.kind.backend() {
			nb++
		}
		kept = append(kept, j)
	}
	s.running, s.done, s.nb = kept, finished, nb
	s.count(now)
	s.plan()
	for _, j := range finished {
		(*cores)(s).finish(j)
	}
}

// PoolerWakeup is the pooler thread's wake-up when a core left to the
// test is idle as it wakes, none when every one is busy: the jobs running
// and the waker's own (a message is sent by a job that has just finished
// its CPU - the backend's statement, the driver's - and is still on its
// core as it wakes the receiver). A thread woken then shares the busy
// cores at once; with a core idle it waits for that core to wake
// (system.CPU).
func (s *shared) PoolerWakeup(wakeup sim.Time) sim.Time {
	if float64(len(s.running)+1) >= s.avail {
		return 0
	}
	return wakeup
}

// Levels and Measure are the cores' (system.CPU).
func (s *shared) Levels() []*sim.Level                           { return (*cores)(s).Levels() }
func (s *shared) Measure(level func(int) float64) (u, j float64) { return (*cores)(s).Measure(level) }

var _ system.CPU = (*shared)(nil)
