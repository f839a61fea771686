package system

import (
	"github.com/poolsim/poolsim/sim"
)

// The steady window. A run starts cold - empty pools, empty queues, no
// server connection - and a closed run ends ragged, its clients finishing
// one by one. Neither is the steady state a capacity question is about,
// so besides the whole-run accounts the model measures a window:
//
//   - open workloads: from the end of the warm-up (Workload.Warmup, or
//     found automatically: see AutoWarmup) to the end of arrivals. Every
//     time average, percentile and rate of the row is the window's; the
//     accounts (completed, refused, timed out, attempted, wall, tps) stay
//     the whole run's.
//   - closed workloads: from the first completed transaction to the moment
//     the first client that got in finishes its session, while every
//     client still takes part (tps_steady and its percentiles); every
//     other figure stays the whole run's, as the seed tables define them.
//
// The window is cut from snapshots of the statistics' accounts (a level's
// integral, a queue's departures, how many samples each recorder holds),
// taken at its two ends while the run goes on. With classes, every class's
// results are cut at the same instants as the run's.

// snapshot is the statistics' accounts at one instant.
type snapshot struct {
	at       sim.Time
	levels   []sim.Mark
	queues   []sim.QueueMark
	sets     []setMark // the run's results, then each class's (none in a pilot)
	sessions int64     // sessions in the system

	// A pilot's: the run's transaction latencies completed since the
	// snapshot before, their sum (ns, added in order) and count.
	latSum, latN float64
}

// setMark is one set of results at a snapshot.
type setMark struct {
	counts []int // samples held by each recorder: its checkpoint
	ok     int64 // transactions completed
	waited int64 // assignments that waited
}

// window holds the snapshots of an open run and the bounds of a closed
// one's steady window.
type window struct {
	pilot bool       // a pilot run: snapshots on the grid, latency sums only
	snaps []snapshot // open: at t = 0, at the end of the warm-up, at the end of arrivals (a pilot: at every grid point)

	// Closed: the first completion and the first finished session of a
	// client that got in, with every result set's accounts at both.
	firstDone sim.Time
	haveFirst bool
	finishAt  sim.Time
	finished  bool
	atFirst   []setMark
	atFinish  []setMark

	from, to *snapshot // the window, once bounds has cut it

	// An open run's snapshot in the middle of its steady window (nil until
	// taken), for the study to compare the window's second half with the
	// whole (Replicated.StartBias). It is taken at midAt by the first
	// event at or after it, not by an event of its own, so a run's events
	// are the same with it as without.
	mid   *snapshot
	midAt sim.Time // 0: none to take

	// A pilot's: when the pools had first caught up with the start - the
	// first moment, after a backend was started, that no backend start-up
	// (a pool's server login, a direct client's backend) runs or waits and
	// no client waits at a pool or an application pool; filled is false
	// until then.
	fillEnd sim.Time
	filled  bool
}

// caughtUp notes, in a pilot, the first moment the pools have caught up
// with the start (window.fillEnd): checked before every event, so the
// state is the one left since the last.
func (w *window) caughtUp(m *model, now sim.Time) {
	if !w.pilot || w.filled || m.srv.open.Max() == 0 || m.srv.startup.Busy() > 0 {
		return
	}
	for i := range m.pools {
		if m.pools[i].wait.Len() > 0 {
			return
		}
	}
	for i := range m.classes {
		if m.classes[i].app.waitQ.Len() > 0 {
			return
		}
	}
	w.fillEnd, w.filled = now, true
}

// levels are the model's time-weighted levels, in a fixed order: see the
// lv constants.
func (m *model) levels() []*sim.Level {
	ls := []*sim.Level{&m.linked, &m.executing, &m.srv.busy}
	for i := range m.procs {
		ls = append(ls, &m.procs[i].cpu)
	}
	for i := range m.specLinked {
		ls = append(ls, &m.specLinked[i])
	}
	for i := range m.specExec {
		ls = append(ls, &m.specExec[i])
	}
	return append(ls, m.cpuLevels...)
}

// Indexes into levels().
const (
	lvLinked = iota
	lvExecuting
	lvDirectBusy
	lvPoolerCPU // the first pooler process's thread; one per process after it
)

// lvSpecLinked and lvSpecExec index spec k's levels (multi only), lvCPU
// the first of the run's CPU's.
func (m *model) lvSpecLinked(k int) int { return lvPoolerCPU + len(m.procs) + k }
func (m *model) lvSpecExec(k int) int   { return lvPoolerCPU + len(m.procs) + len(m.specs) + k }
func (m *model) lvCPU() int             { return lvPoolerCPU + len(m.procs) + len(m.specLinked) + len(m.specExec) }

// queues are the model's wait queues: each class's application pool's,
// then every pool's.
func (m *model) queues() []*sim.QueueStats {
	var qs []*sim.QueueStats
	for i := range m.classes {
		qs = append(qs, m.classes[i].app.waitQ.Stats())
	}
	for i := range m.pools {
		qs = append(qs, &m.pools[i].wait)
	}
	return qs
}

// poolQueue is the index in queues() of pool i's wait queue.
func (m *model) poolQueue(i int) int { return len(m.classes) + i }

// sets are the result sets: the run's, then each class's (multi only).
func (m *model) sets() []*results {
	out := []*results{&m.results}
	for i := range m.classes {
		if r := m.classes[i].res; r != nil {
			out = append(out, r)
		}
	}
	return out
}

// init schedules an open run's snapshots: at the warm-up's end and at the
// end of arrivals, or for a pilot at every point of the grid.
func (w *window) init(m *model, s *sim.Sim, pilot bool) {
	c := m.cfg
	if !c.Open() {
		return
	}
	w.pilot = pilot
	w.snap(m, 0)
	d := c.Duration()
	wl := c.ClassList()[0].Workload
	switch {
	case pilot:
		for k := 1; k <= PilotGrid; k++ {
			s.At(sim.Time(int64(d)*int64(k)/PilotGrid), evSnapshot, 0, 0)
		}
	case wl.Warmup > 0:
		s.At(wl.Warmup, evSnapshot, 0, 0)
		s.At(d, evSnapshot, 0, 0)
	default:
		s.At(d, evSnapshot, 0, 0)
	}
	if !pilot {
		w.midAt = wl.Warmup + (d-wl.Warmup)/2
	}
}

// due takes the middle snapshot when now has reached it: called before
// every event is handled, so the accounts are those just before the
// first event at or after midAt, which is what they were at midAt.
func (w *window) due(m *model, now sim.Time) {
	w.caughtUp(m, now)
	if w.midAt > 0 && now >= w.midAt {
		w.snap(m, w.midAt)
		last := w.snaps[len(w.snaps)-1]
		w.snaps, w.mid = w.snaps[:len(w.snaps)-1], &last
		w.midAt = 0
	}
}

// marks is every result set's accounts now.
func (m *model) marks() []setMark {
	var out []setMark
	for _, r := range m.sets() {
		sm := setMark{ok: r.m.OKTxns, waited: r.waited, counts: make([]int, 0, nRecorders)}
		for _, rec := range r.recorders() {
			sm.counts = append(sm.counts, rec.Checkpoint())
		}
		out = append(out, sm)
	}
	return out
}

// snap takes a snapshot at now.
func (w *window) snap(m *model, now sim.Time) {
	sn := snapshot{at: now, sessions: m.active}
	if w.pilot {
		r := &m.results
		sn.latSum, sn.latN = r.latSum, r.latN
		r.latSum, r.latN = 0, 0
	} else {
		sn.sets = m.marks()
	}
	for _, l := range m.levels() {
		sn.levels = append(sn.levels, l.Mark(now))
	}
	for _, q := range m.queues() {
		sn.queues = append(sn.queues, q.Mark(now))
	}
	w.snaps = append(w.snaps, sn)
}

// completed notes a completed transaction (closed runs).
func (w *window) completed(m *model, now sim.Time) {
	if !w.haveFirst {
		w.firstDone, w.haveFirst = now, true
		if !m.cfg.Open() {
			w.atFirst = m.marks()
		}
	}
}

// sessionOver notes a finished session of a client that got in (closed
// runs): the first one closes the steady window.
func (w *window) sessionOver(m *model, now sim.Time) {
	if w.finished || m.cfg.Open() {
		return
	}
	w.finished = true
	w.finishAt, w.atFinish = now, m.marks()
}

// choose is an open run's window: the snapshot where the warm-up ends and
// the one at the end of arrivals.
func (w *window) choose(m *model) (from, to *snapshot) {
	to = &w.snaps[len(w.snaps)-1]
	from = &w.snaps[0]
	if m.cfg.ClassList()[0].Workload.Warmup > 0 {
		from = &w.snaps[1]
	}
	return from, to
}

// bounds cuts the window once the run is over: an open run's from the end
// of the warm-up to the end of arrivals; a closed run's time averages span
// the whole run (from nothing accounted at t = 0 to end).
func (w *window) bounds(m *model, end sim.Time) (from, to *snapshot) {
	if m.cfg.Open() {
		w.from, w.to = w.choose(m)
		return w.from, w.to
	}
	zero := snapshot{levels: make([]sim.Mark, len(m.levels())), queues: make([]sim.QueueMark, len(m.queues())),
		sets: make([]setMark, len(m.sets()))}
	w.snap(m, end)
	w.from, w.to = &zero, &w.snaps[len(w.snaps)-1]
	return w.from, w.to
}

// cut is the window bounds cut.
func (w *window) cut(*model) (from, to *snapshot) { return w.from, w.to }
