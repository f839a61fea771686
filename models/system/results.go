package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// results gathers what a run (or, with classes, one class) measures.
type results struct {
	m                     Metrics
	lat                   sim.Samples // transaction latency
	dec                   [8]sim.Samples
	waits                 sim.Samples // pooler waits, one per assignment
	waited                int64       // assignments that waited
	procConns             []int64     // client connections each pooler process took
	appWaits              sim.Samples // one per app-pool acquisition
	sessionLat            sim.Samples // session durations, one per finished session of a client that got in
	reqLat                sim.Samples // request latency, one per request whose transactions all completed
	firstAttempt, lastTxn sim.Time
	attempted             bool
	hopTotal              sim.Time
	closed                []sim.Time // close times of connections maybe still in TIME_WAIT, oldest first
	closedHead            int
	partsOff              int64   // transactions whose parts do not add up to their latency (a bug)
	latSum, latN          float64 // latencies since the last snapshot (a pilot's)
	clientConns           int64   // client connections open now (ClientConnsPeak is their peak)
}

// connsOpen counts d client connections opened (or closed, d < 0).
func (r *results) connsOpen(d int64) {
	r.clientConns += d
	r.m.ClientConnsPeak = max(r.m.ClientConnsPeak, r.clientConns)
}

func (r *results) init(procs int) { r.procConns = make([]int64, procs) }

// recorders are the per-event samples, in a fixed order (the latency
// first).
func (r *results) recorders() [nRecorders]*sim.Samples {
	d := &r.dec
	return [...]*sim.Samples{&r.lat, &d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &d[6], &d[7], &r.waits, &r.appWaits, &r.sessionLat, &r.reqLat}
}

// nRecorders is how many recorders a set of results has.
const nRecorders = 13

// setExactLimit sets every recorder's exact limit.
func (m *model) setExactLimit(n int) {
	for _, r := range m.sets() {
		for _, rec := range r.recorders() {
			rec.SetExactLimit(n)
		}
	}
}

// txnDone records a completed transaction.
func (r *results) txnDone(now sim.Time, u *user) {
	r.m.OKTxns++
	lat := now - u.txnStart
	r.lat.Add(lat)
	r.latSum += float64(lat)
	r.latN++
	p := u.part
	sum := sim.Time(0)
	for i, v := range [...]sim.Time{p.appWait, p.connect, p.wait, p.cpuQueue, p.service, p.hop, p.think, p.pooler} {
		r.dec[i].Add(v)
		sum += v
	}
	if sum != now-u.txnStart {
		r.partsOff++
	}
	r.hopTotal += p.hop
	r.lastTxn = now
}

func (r *results) appWait(w sim.Time) { r.appWaits.Add(w) }

// reqDone records a completed request's latency.
func (r *results) reqDone(lat sim.Time) {
	r.m.OKReqs++
	r.reqLat.Add(lat)
}

// timeWait records a connection closed by its client at now; it lingers
// for linger.
func (r *results) timeWait(now, linger sim.Time) {
	for r.closedHead < len(r.closed) && r.closed[r.closedHead]+linger <= now {
		r.closedHead++
	}
	if r.closedHead > 1024 && r.closedHead*2 > len(r.closed) {
		r.closed = append(r.closed[:0], r.closed[r.closedHead:]...)
		r.closedHead = 0
	}
	r.closed = append(r.closed, now)
	r.m.TimeWaitPeak = max(r.m.TimeWaitPeak, int64(len(r.closed)-r.closedHead))
}

// scope is what a set of metrics covers: the whole run, or one class
// (its results, its pool spec's levels and queues, its application pool).
type scope struct {
	set   int      // index of the result set (0: the run's)
	r     *results //
	class int      // the class, or -1 for the whole run
}

func (m *model) metrics(s *sim.Sim) Metrics {
	end := m.end
	from, to := m.window.bounds(m, end)
	mt := m.measure(s, scope{set: 0, r: &m.results, class: -1}, from, to, end)
	return mt
}

// classMetrics are class i's figures over the same window as the run's
// (metrics must have run first: it cut the window).
func (m *model) classMetrics(s *sim.Sim, i int) Metrics {
	set := 1 + i
	from, to := m.window.cut(m)
	return m.measure(s, scope{set: set, r: m.classes[i].res, class: i}, from, to, m.end)
}

// measure computes the metrics of scope sc over the window from..to.
func (m *model) measure(s *sim.Sim, sc scope, from, to *snapshot, end sim.Time) Metrics {
	r := sc.r
	mt := r.m
	mt.Events = int64(s.Handled())
	for i := range m.users {
		if u := &m.users[i]; !u.done && (sc.class < 0 || int(u.cls) == sc.class) {
			mt.UnfinishedTxn += int64(u.total - u.txn)
		}
	}
	for i := range m.classes { // workers: requests still in the application queue
		if sc.class < 0 || i == sc.class {
			mt.UnfinishedTxn += m.classes[i].queuedTxns
		}
	}
	wall := r.lastTxn - r.firstAttempt
	if mt.OKTxns == 0 {
		wall = 0
	}
	mt.WallMs = ms(wall)
	if wall > 0 {
		mt.TPS = float64(mt.OKTxns) / wall.Seconds()
	}
	steadyLat, late := m.steady(&mt, sc, from, to, end)
	if wall > 0 {
		mt.ReqTPS = float64(mt.OKReqs) / wall.Seconds()
	}
	mt.ReqMeanMs = ms(r.reqLat.Mean())
	mt.ReqP50Ms, mt.ReqP99Ms = ms(r.reqLat.Percentile(50)), ms(r.reqLat.Percentile(99))
	mt.MeanMs = ms(r.lat.Mean())
	mt.P50Ms = ms(r.lat.Percentile(50))
	mt.P95Ms = ms(r.lat.Percentile(95))
	mt.P99Ms = ms(r.lat.Percentile(99))
	if m.cfg.Open() {
		mt.P50SteadyMs, mt.P99SteadyMs = mt.P50Ms, mt.P99Ms
	}
	mt.Assignments = int64(r.waits.Count())
	mt.WaitMeanMs = ms(r.waits.Mean())
	mt.WaitP50Ms = ms(r.waits.Percentile(50))
	mt.WaitP99Ms = ms(r.waits.Percentile(99))
	if mt.Assignments > 0 {
		mt.WaitProb = float64(to.sets[sc.set].waited-from.sets[sc.set].waited) / float64(mt.Assignments)
	}
	if mt.OKTxns > 0 {
		mt.HopMsPerTxn = ms(r.hopTotal) / float64(mt.OKTxns)
	}
	level := func(i int) float64 { return sim.Between(from.levels[i], to.levels[i]) }
	linked, busy, slots := m.serverShares(sc, level)
	if slots > 0 {
		mt.ServerLinked, mt.ServerBusy = linked/slots, busy/slots
	}
	m.poolerMetrics(&mt, sc, from, to)
	if sc.class < 0 {
		m.prepMetrics(&mt, wall)
	}
	if sc.class >= 0 || len(m.classes) == 1 {
		q := max(sc.class, 0)
		mt.AppWaitL, mt.AppWaitLambda, mt.AppWaitW = sim.LittleBetween(from.queues[q], to.queues[q])
	} else { // the run's: every class's application pool
		var waitSum float64
		for i := range m.classes {
			L, lambda, W := sim.LittleBetween(from.queues[i], to.queues[i])
			mt.AppWaitL += L
			mt.AppWaitLambda += lambda
			waitSum += lambda * W
		}
		if mt.AppWaitLambda > 0 {
			mt.AppWaitW = waitSum / mt.AppWaitLambda
		}
	}
	mt.AppWaitP99Ms = ms(r.appWaits.Percentile(99))
	r.decomposition(&mt)
	// The server's own figures are the same for every class.
	v := &m.srv
	mt.ServerConns = max(m.results.m.ServerConns, v.open.Max())
	mt.ServerMemPeakMB = float64(v.open.Max()*m.cfg.Server.MemoryPerConn) / (1 << 20)
	if v.cfg.Cores > 0 {
		cpu := CPU(&m.ps)
		if m.port != nil {
			cpu = m.port
		}
		mt.CPUUtil, mt.CPUJobsL = cpu.Measure(func(i int) float64 { return level(m.lvCPU() + i) })
	}
	mt.Dists = r.dists(steadyLat, late)
	for i, cl := range m.classes {
		if sc.class >= 0 && i != sc.class {
			continue
		}
		if sc.class < 0 && i > 0 {
			break // the run's TIME_WAIT: with classes, the first class's linger
		}
		linger := cl.cfg.Workload.TimeWait
		for _, t := range r.closed[r.closedHead:] {
			if t+linger > end {
				mt.TimeWaitEnd++
			}
		}
	}
	return mt
}

// decomposition fills the p50 and p99 of each part of the completed
// transactions' latencies.
func (r *results) decomposition(mt *Metrics) {
	d := &r.dec
	mt.DecAppWaitP50Ms, mt.DecAppWaitP99Ms = ms(d[0].Percentile(50)), ms(d[0].Percentile(99))
	mt.DecConnectP50Ms, mt.DecConnectP99Ms = ms(d[1].Percentile(50)), ms(d[1].Percentile(99))
	mt.DecWaitP50Ms, mt.DecWaitP99Ms = ms(d[2].Percentile(50)), ms(d[2].Percentile(99))
	mt.DecCPUQueueP50Ms, mt.DecCPUQueueP99Ms = ms(d[3].Percentile(50)), ms(d[3].Percentile(99))
	mt.DecServiceP50Ms, mt.DecServiceP99Ms = ms(d[4].Percentile(50)), ms(d[4].Percentile(99))
	mt.DecHopP50Ms, mt.DecHopP99Ms = ms(d[5].Percentile(50)), ms(d[5].Percentile(99))
	mt.DecThinkP50Ms, mt.DecThinkP99Ms = ms(d[6].Percentile(50)), ms(d[6].Percentile(99))
	mt.DecPoolerP50Ms, mt.DecPoolerP99Ms = ms(d[7].Percentile(50)), ms(d[7].Percentile(99))
}

// serverShares are the mean server connections linked to a client and
// executing a statement over the window, and the slots they are a share
// of: the pool sizes (max_connections for a direct pool).
func (m *model) serverShares(sc scope, level func(int) float64) (linked, busy, slots float64) {
	if !m.multi {
		if m.specs[0].Mode == poolmode.Direct {
			return level(lvDirectBusy), level(lvExecuting), float64(m.cfg.Server.Usable())
		}
		return level(lvLinked), level(lvExecuting), float64(m.specLim[0] * len(m.procs))
	}
	direct := false
	for k, sp := range m.specs {
		if sc.class >= 0 && k != m.classes[sc.class].spec {
			continue
		}
		linked += level(m.lvSpecLinked(k))
		busy += level(m.lvSpecExec(k))
		if sp.Mode == poolmode.Direct {
			direct = true
		} else {
			slots += float64(m.specLim[k] * len(m.procs))
		}
	}
	if direct {
		slots += float64(m.cfg.Server.Usable())
	}
	return linked, busy, slots
}

// steady fills the steady-window figures of scope sc. An open run's
// recorders keep only the window's samples afterwards (so every
// percentile read later is the window's); a closed run's window spans the
// whole run for everything but tps_steady and its percentiles. It returns
// the latencies p50_steady and p99_steady were read from (nil: none), and
// an open run's distributions over the second half of its window.
func (m *model) steady(mt *Metrics, sc scope, from, to *snapshot, end sim.Time) (*sim.Samples, *[nDists]sim.Histogram) {
	r := sc.r
	w := &m.window
	c := m.cfg
	mt.SessionMeanMs = ms(r.sessionLat.Mean())
	if c.Open() {
		late := r.lateHalf(sc.set, w.mid, to)
		for i, rec := range r.recorders() {
			rec.Keep(from.sets[sc.set].counts[i], to.sets[sc.set].counts[i])
		}
		mt.SessionMeanMs = ms(r.sessionLat.Mean())
		span := to.at - from.at
		mt.WarmupMs, mt.SteadyMs = ms(from.at), ms(span)
		if span > 0 {
			mt.TPSSteady = float64(to.sets[sc.set].ok-from.sets[sc.set].ok) / span.Seconds()
		}
		if sc.class < 0 {
			mt.OfferedTPS = c.OfferedTPS()
		} else {
			mt.OfferedTPS = m.classes[sc.class].cfg.Workload.OfferedTPS()
		}
		if d := c.Duration(); r.lastTxn > d {
			mt.DrainMs = ms(r.lastTxn - d)
		}
		mt.BacklogStart, mt.BacklogEnd = from.sessions, to.sessions
		return &r.lat, late
	}
	if !w.haveFirst {
		return nil, nil
	}
	finish, ok, n := end, mt.OKTxns, r.lat.Count()
	var ok0 int64 = 1
	if w.finished {
		finish, ok, n = w.finishAt, w.atFinish[sc.set].ok, w.atFinish[sc.set].counts[0]
	}
	if w.atFirst != nil {
		ok0 = w.atFirst[sc.set].ok
	}
	mt.WarmupMs, mt.SteadyMs = ms(w.firstDone), ms(finish-w.firstDone)
	if finish > w.firstDone && ok-ok0 > 0 {
		mt.TPSSteady = float64(ok-ok0) / (finish - w.firstDone).Seconds()
	} else {
		// No steady window: the first client was done at the first
		// completion (one transaction per session, say). The whole run
		// is all there is.
		mt.SteadyMs, mt.TPSSteady, n = 0, mt.TPS, r.lat.Count()
	}
	win := r.lat.Window(0, n)
	mt.P50SteadyMs, mt.P99SteadyMs = ms(win.Percentile(50)), ms(win.Percentile(99))
	return &win, nil
}

// dists are the distributions r's percentile metrics were read from
// (steadyLat: those of p50_steady and p99_steady), after the window cut,
// with late, the second half's, which steady made.
func (r *results) dists(steadyLat *sim.Samples, late *[nDists]sim.Histogram) Dists {
	var w [nDists]sim.Histogram
	recs := r.recorders()
	for k, i := range distRecorders {
		if i >= 0 {
			w[k] = recs[i].Histogram()
		}
	}
	switch steadyLat {
	case nil:
	case &r.lat:
		w[distLatSteady] = w[distLat]
	default:
		w[distLatSteady] = steadyLat.Histogram()
	}
	return newDists(&w, late)
}

// distRecorders are the recorders behind Dists (by distXxx; -1 for
// distLatSteady, which is a window of the first), as indexes into
// recorders().
var distRecorders = [nDists]int{distLat: 0, distLatSteady: -1, distWait: 9, distReq: 12, distAppWait: 10,
	distDec: 1, distDec + 1: 2, distDec + 2: 3, distDec + 3: 4, distDec + 4: 5, distDec + 5: 6, distDec + 6: 7, distDec + 7: 8}

// lateHalf is the second half of an open run's steady window, from the
// snapshot at its middle to its end, as histograms of every Dists
// distribution (nil without a middle snapshot). It must be read before
// the recorders are cut to the window.
func (r *results) lateHalf(set int, mid, to *snapshot) *[nDists]sim.Histogram {
	if mid == nil {
		return nil
	}
	recs := r.recorders()
	late := &[nDists]sim.Histogram{}
	for d, i := range distRecorders {
		if i < 0 {
			continue
		}
		win := recs[i].Window(mid.sets[set].counts[i], to.sets[set].counts[i])
		late[d] = win.Histogram()
	}
	late[distLatSteady] = late[distLat]
	return late
}

// poolerMetrics adds the wait queues of every pooler process (Little's law
// holds for their sum), the processes' threads, and a fleet's balance,
// budget and cancels.
func (m *model) poolerMetrics(mt *Metrics, sc scope, from, to *snapshot) {
	var deps, waitSum float64
	for i := range m.pools {
		p := &m.pools[i]
		if sc.class >= 0 && p.spec != m.classes[sc.class].spec {
			continue
		}
		q := m.poolQueue(i)
		L, lambda, W := sim.LittleBetween(from.queues[q], to.queues[q])
		mt.WaitL += L
		deps += lambda
		waitSum += lambda * W
		mt.WaitMaxLen = max(mt.WaitMaxLen, p.wait.MaxLen())
	}
	for i := range m.procs {
		u := sim.Between(from.levels[lvPoolerCPU+i], to.levels[lvPoolerCPU+i])
		mt.PoolerCPUMax = max(mt.PoolerCPUMax, u)
		mt.PoolerCPUMean += u / float64(len(m.procs))
	}
	mt.WaitLambda = deps
	if deps > 0 {
		mt.WaitW = waitSum / deps
	}
	if sc.class >= 0 {
		return // the fleet's balance, budget and cancels are the run's
	}
	var most, all int64
	for _, n := range m.results.procConns {
		most = max(most, n)
		all += n
	}
	if all > 0 {
		mt.ProcImbalance = float64(most) / (float64(all) / float64(len(m.procs)))
	}
	c := m.cfg
	for k, sp := range m.specs {
		if sp.Mode.Pooled() {
			mt.ServerBudget += int64(m.specLim[k] * len(m.procs))
		}
	}
	mt.BudgetOver = max(0, mt.ServerBudget-int64(c.Server.Usable()))
	// Cancel requests arrive on new connections, which the kernel hashes
	// to any process: one for another process is lost without peering.
	r := sim.NewRand(c.Seed, "cancel")
	n := uint64(len(m.procs))
	for range c.Pooler.Cancels {
		owner, landed := r.IntN(n), r.IntN(n)
		if owner == landed {
			continue
		}
		if c.Pooler.Peering {
			mt.CancelsForwarded++
		} else {
			mt.CancelsLost++
		}
	}
}
