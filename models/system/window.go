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
//     found automatically: see AutoWarmup) to the end of arrivals. Every time average, percentile and rate of
//     the row is the window's; the accounts (completed, refused, timed
//     out, attempted, wall, tps) stay the whole run's.
//   - closed workloads: from the first completed transaction to the moment
//     the first client that got in finishes its session, while every
//     client still takes part (tps_steady and its percentiles); every
//     other figure stays the whole run's, as the seed tables define them.
//
// The window is cut from snapshots of the statistics' accounts (a level's
// integral, a queue's departures, how many samples each recorder holds),
// taken at its two ends while the run goes on.

// snapshot is the statistics' accounts at one instant.
type snapshot struct {
	at       sim.Time
	levels   []sim.Mark
	queues   []sim.QueueMark
	counts   []int // samples held by each recorder
	ok       int64 // transactions completed
	waited   int64 // assignments that waited
	sessions int64 // sessions in the system
}

// window holds the snapshots of an open run and the bounds of a closed
// one's steady window.
type window struct {
	snaps []snapshot // open: at t = 0, at the end of the warm-up, at the end of arrivals (a pilot: at every grid point)

	// Closed: the first completion, and the first finished session of a
	// client that got in (with the completions up to it).
	firstDone   sim.Time
	haveFirst   bool
	finishAt    sim.Time
	finishOK    int64
	finishCount int
	finished    bool
}

// levels are the model's time-weighted levels, in a fixed order.
func (m *model) levels() []*sim.Level {
	ls := []*sim.Level{&m.linked, &m.executing, &m.srv.busy, &m.srv.jobs, &m.srv.cores}
	for i := range m.pools {
		ls = append(ls, &m.pools[i].cpu)
	}
	return ls
}

// Indexes into levels().
const (
	lvLinked = iota
	lvExecuting
	lvDirectBusy
	lvJobs
	lvCores
	lvPoolerCPU // the first pooler process's thread; one per process after it
)

// queues are the model's wait queues: the application pool's, then each
// pooler process's.
func (m *model) queues() []*sim.FIFO {
	qs := []*sim.FIFO{m.app.waitQ}
	for i := range m.pools {
		qs = append(qs, m.pools[i].waitQ)
	}
	return qs
}

// recorders are the model's per-event samples.
func (m *model) recorders() []*sim.Samples {
	r := &m.results
	out := []*sim.Samples{&r.lat}
	for i := range r.dec {
		out = append(out, &r.dec[i])
	}
	return append(out, &m.waits, &r.appWaits, &r.sessionLat, &r.reqLat)
}

// init schedules an open run's snapshots: at the warm-up's end and at the
// end of arrivals, or for a pilot at every point of the grid.
func (w *window) init(m *model, s *sim.Sim, pilot bool) {
	wl := m.cfg.Workload
	if !wl.Open() {
		return
	}
	w.snap(m, 0)
	d := wl.Duration
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
}

// snap takes a snapshot at now.
func (w *window) snap(m *model, now sim.Time) {
	sn := snapshot{at: now, ok: m.results.m.OKTxns, waited: m.waited, sessions: m.active}
	for _, l := range m.levels() {
		sn.levels = append(sn.levels, l.Mark(now))
	}
	for _, q := range m.queues() {
		sn.queues = append(sn.queues, q.Mark(now))
	}
	for _, r := range m.recorders() {
		sn.counts = append(sn.counts, r.Count())
	}
	w.snaps = append(w.snaps, sn)
}

// completed notes a completed transaction (closed runs).
func (w *window) completed(now sim.Time) {
	if !w.haveFirst {
		w.firstDone, w.haveFirst = now, true
	}
}

// sessionOver notes a finished session of a client that got in (closed
// runs): the first one closes the steady window.
func (w *window) sessionOver(m *model, now sim.Time) {
	if w.finished || m.cfg.Workload.Open() {
		return
	}
	w.finished = true
	w.finishAt, w.finishOK, w.finishCount = now, m.results.m.OKTxns, m.results.lat.Count()
}

// choose is an open run's window: the snapshot where the warm-up ends and
// the one at the end of arrivals.
func (w *window) choose(m *model) (from, to *snapshot) {
	to = &w.snaps[len(w.snaps)-1]
	from = &w.snaps[0]
	if m.cfg.Workload.Warmup > 0 {
		from = &w.snaps[1]
	}
	return from, to
}
