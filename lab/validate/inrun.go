package validate

import (
	"context"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/poolsim/poolsim/models/system"
)

// A pooled CPU-bound row's calibrated model runs each process's CPU per
// statement as measured over the run itself: the pool's servers' and
// PgBouncer's from /proc/PID/schedstat, the driver's (pgbench's rusage, or
// this process's) and, through the in-process proxy, this process's.
// These are counters of the kernel's, read before and after the run, not
// the run's throughput or latencies, which the model still has to
// produce: how much of the cores the processes keep busy at the row's
// pool size, and how long each statement waits.
//
// The through loop right before the run measures the same costs, but a
// shared machine's speed can drift between the two by more than the
// tolerances, and the drift is in what a transaction costs (the host's
// other work), not in how busy the cores are (figures: docs/validate.md).
// The report keeps the model from the loop alone (beforeRun) beside it,
// and splits the error.

// RunCPU is each process's CPU per statement over one run: the load
// driver's, the pooler's and the pool's servers' (all of them, per
// statement of the run), if OK.
type RunCPU struct {
	Driver, Pooler, Server time.Duration
	OK                     bool
	// Other is the cores busy with other work over the run (otherCores:
	// this process's instruments among it), the calibrated model's
	// background, if OtherOK.
	Other   float64
	OtherOK bool
}

// runWatch reads the processes' CPU counters before a pooled CPU-bound
// row's run; finish reads them again after it.
type runWatch struct {
	l       *lab
	pids    []int // PgBouncer's process (if the target is PgBouncer), then the pool's servers
	bouncer bool
	e0      []time.Duration
	ok      bool
	d0      []map[int]time.Duration // each pid's threads' run delay at the start
	self0   map[int]time.Duration   // this process's
	added   []int                   // the servers the run opened (finish finds them)
	inv0    int64                   // PgBouncer's involuntary context switches at the start, if invOK
	invOK   bool
	loopTID int           // the in-process proxy's event loop's thread, pinned (running.pinLoop); 0: none
	loop0   time.Duration // its CPU at the start, if loopOK
	loopOK  bool
}

// watchRun starts a run's CPU reading: PgBouncer's process (if the target
// is PgBouncer) and the pool's servers, which the through loop opened and
// the run keeps.
func (l *lab) watchRun(ctx context.Context, t *running) (*runWatch, error) {
	w := &runWatch{l: l, bouncer: t.bouncer != nil}
	if w.bouncer {
		w.pids = []int{t.bouncer.Pid()}
	}
	servers, err := l.serverPids(ctx)
	if err != nil {
		return nil, err
	}
	w.pids = append(w.pids, servers...)
	w.e0, w.ok = eachCPU(w.pids)
	for _, p := range w.pids {
		w.d0 = append(w.d0, threadDelays(p))
	}
	w.self0 = threadDelays(os.Getpid())
	if w.loopTID = t.loopTID; w.loopTID > 0 {
		w.loop0, w.loopOK = schedCPU(w.loopTID)
	}
	if w.bouncer {
		w.inv0, w.invOK = involuntary(w.pids[0])
	}
	return w, nil
}

// finish is the run's CPU per statement: stmts statements, self this
// process's CPU over the run less its instruments', driver pgbench's
// (with validate.driver pgbench), tb the row's testbed (through the in-process
// proxy with poolsim's own driver, this process is driver and pooler both:
// split as the through loop measured them). A server the run opened
// counts whole. busy is the machine's busy cores over the run's wall
// time: what the processes' CPU leaves of it is the run's other work.
func (w *runWatch) finish(ctx context.Context, stmts int64, self, driver time.Duration, pgbench bool, tb *Testbed, busy float64, wall time.Duration) RunCPU {
	first := 0 // the first server's index in pids
	if w.bouncer {
		first = 1
	}
	e1, ok := eachCPU(w.pids)
	if !w.ok || !ok || stmts <= 0 || len(w.pids) == first {
		return RunCPU{}
	}
	var server time.Duration
	for i := first; i < len(w.pids); i++ {
		server += e1[i] - w.e0[i]
	}
	if now, err := w.l.serverPids(ctx); err == nil {
		var added []int
		for _, p := range now {
			if !slices.Contains(w.pids[first:], p) {
				added = append(added, p)
			}
		}
		w.added = added
		if e, ok := eachCPU(added); ok {
			for _, d := range e {
				server += d
			}
		}
	}
	per := func(d time.Duration) time.Duration { return max(0, d/time.Duration(stmts)) }
	r := RunCPU{Server: per(server), OK: true}
	if !pgbench {
		driver = self // poolsim's own driver is this process
	}
	switch {
	case w.bouncer:
		r.Pooler, r.Driver = per(e1[0]-w.e0[0]), per(driver)
	case pgbench:
		// pgbench is a process of its own: this process is the proxy -
		// its event loop's thread, where it is pinned (the rest of the
		// process is other work), else the whole process.
		r.Pooler, r.Driver = per(self), per(driver)
		if w.loopOK {
			if l1, ok := schedCPU(w.loopTID); ok && l1 >= w.loop0 {
				r.Pooler = per(l1 - w.loop0)
			}
		}
	default:
		// This process drives the load and pools it: split as the loop
		// measured the two.
		if tb.Pooler+tb.Driver <= 0 {
			return RunCPU{}
		}
		f := float64(tb.Pooler) / float64(tb.Pooler+tb.Driver)
		all := per(self)
		r.Pooler = time.Duration(f * float64(all))
		r.Driver = all - r.Pooler
	}
	r.Other, r.OtherOK = otherCores(busy, (r.Driver+r.Pooler+r.Server)*time.Duration(stmts), wall, runtime.NumCPU()), busy > 0
	return r
}

// withRunCPU is testbed tb with the run's CPU per statement in place of
// the through loop's, and the run's other work as its background (tb
// itself if the run's CPU was not read).
func withRunCPU(tb *Testbed) *Testbed {
	if tb == nil || !tb.Run.OK {
		return tb
	}
	c := *withRunOther(tb)
	c.Driver, c.Pooler, c.Server = tb.Run.Driver, tb.Run.Pooler, tb.Run.Server
	return &c
}

// withRunOther is testbed tb with the run's other work as its background
// (tb itself if it was not read).
func withRunOther(tb *Testbed) *Testbed {
	if !tb.Run.OtherOK {
		return tb
	}
	c := *tb
	c.Background = tb.Run.Other
	return &c
}

// arrangementsAtRunCPU are a pool-1 row's two arrangements with their
// costs scaled, process by process, by the run's CPU per statement over
// what the two arrangements would have cost in the run's mix of them
// (share of its time together): the pinned loops' difference between the
// arrangements kept, the machine's drift since taken out. Each model is
// run again.
func arrangementsAtRunCPU(cfg system.Config, cal Calibration, share float64) (tog, apart *Arrangement) {
	tb := withRunOther(cal.Testbed) // the background of both, as their costs are the run's
	cal.Testbed = tb
	t, a := *tb.Together, *tb.Apart
	share = min(1, max(0, share))
	// The run's statements come from each arrangement in proportion to
	// time × rate.
	wt := 0.0
	if d := share*t.TPS + (1-share)*a.TPS; d > 0 {
		wt = share * t.TPS / d
	}
	scale := func(run, x, y time.Duration) float64 {
		mix := wt*float64(x) + (1-wt)*float64(y)
		if mix <= 0 {
			return 1
		}
		return float64(run) / mix
	}
	sd := scale(tb.Run.Driver, t.Driver, a.Driver)
	sp := scale(tb.Run.Pooler, t.Pooler, a.Pooler)
	ss := scale(tb.Run.Server, t.Server, a.Server)
	for _, x := range []*Arrangement{&t, &a} {
		x.Driver = time.Duration(sd * float64(x.Driver))
		x.Pooler = time.Duration(sp * float64(x.Pooler))
		x.Server = time.Duration(ss * float64(x.Server))
		x.Model, x.lat = runForMix(arrangementConfig(cfg, cal, x))
	}
	return &t, &a
}

// delays is the run's waits for a core per statement (rundelay.go): the
// pool's servers' (a server the run opened counting whole), the pooler's
// (PgBouncer's, or this process's through the in-process proxy) and the
// driver's (pgbench's, pg, or this process's). OK is false when any was
// not read. It follows finish, which found the servers the run opened.
func (w *runWatch) delays(stmts int64, pg pgbenchUse, pgbench bool) RunDelay {
	first := 0
	if w.bouncer {
		first = 1
	}
	if stmts <= 0 || len(w.pids) == first {
		return RunDelay{}
	}
	var server time.Duration
	for i := first; i < len(w.pids); i++ {
		now := threadDelays(w.pids[i])
		if now == nil || w.d0[i] == nil {
			return RunDelay{}
		}
		server += delaySince(w.d0[i], now)
	}
	for _, p := range w.added {
		server += delaySince(nil, threadDelays(p))
	}
	self := threadDelays(os.Getpid())
	if self == nil || w.self0 == nil || pgbench && !pg.DelayOK {
		return RunDelay{}
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(stmts) }
	r := RunDelay{Server: per(server), OK: true}
	switch {
	case w.bouncer:
		now := threadDelays(w.pids[0])
		if now == nil || w.d0[0] == nil {
			return RunDelay{}
		}
		r.Pooler = per(delaySince(w.d0[0], now))
		if n, ok := involuntary(w.pids[0]); ok && w.invOK && n >= w.inv0 {
			r.PoolerPreempts, r.PreemptsOK = float64(n-w.inv0)/float64(stmts), true
		}
		if pgbench {
			r.Driver = per(pg.Delay)
		} else {
			r.Driver = per(delaySince(w.self0, self))
		}
	case pgbench:
		r.Pooler, r.Driver = per(delaySince(w.self0, self)), per(pg.Delay)
		if _, ok := self[w.loopTID]; w.loopTID > 0 && ok {
			// The pinned loop's thread alone, as its CPU is.
			r.Pooler = per(max(0, self[w.loopTID]-w.self0[w.loopTID]))
		}
	default:
		r.Driver, r.SelfBoth = per(delaySince(w.self0, self)), true
	}
	return r
}
