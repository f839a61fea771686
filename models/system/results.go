package system

import (
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// results gathers what a run measures.
type results struct {
	m                     Metrics
	lat                   sim.Samples // transaction latency
	dec                   [8]sim.Samples
	procConns             []int64     // client connections each pooler process took
	appWaits              sim.Samples // one per app-pool acquisition
	sessionLat            sim.Samples // session durations, one per finished session of a client that got in
	reqLat                sim.Samples // request latency, one per request whose transactions all completed
	firstAttempt, lastTxn sim.Time
	attempted             bool
	hopTotal              sim.Time
	closed                []sim.Time // close times of connections maybe still in TIME_WAIT, oldest first
	closedHead            int
	partsOff              int64 // transactions whose parts do not add up to their latency (a bug)
}

// txnDone records a completed transaction.
func (r *results) txnDone(now sim.Time, u *user) {
	r.m.OKTxns++
	r.lat.Add(now - u.txnStart)
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

func (m *model) metrics(s *sim.Sim) Metrics {
	r := &m.results
	end := m.end
	mt := r.m
	mt.Events = int64(s.Handled())
	for i := range m.users {
		if u := &m.users[i]; !u.done {
			mt.UnfinishedTxn += int64(u.total - u.txn)
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
	from, to := m.steady(&mt, end)
	if wall > 0 {
		mt.ReqTPS = float64(mt.OKReqs) / wall.Seconds()
	}
	mt.ReqMeanMs = ms(r.reqLat.Mean())
	mt.ReqP50Ms, mt.ReqP99Ms = ms(r.reqLat.Percentile(50)), ms(r.reqLat.Percentile(99))
	mt.MeanMs = ms(r.lat.Mean())
	mt.P50Ms = ms(r.lat.Percentile(50))
	mt.P95Ms = ms(r.lat.Percentile(95))
	mt.P99Ms = ms(r.lat.Percentile(99))
	if m.cfg.Workload.Open() {
		mt.P50SteadyMs, mt.P99SteadyMs = mt.P50Ms, mt.P99Ms
	}
	mt.Assignments = int64(m.waits.Count())
	mt.WaitMeanMs = ms(m.waits.Mean())
	mt.WaitP50Ms = ms(m.waits.Percentile(50))
	mt.WaitP99Ms = ms(m.waits.Percentile(99))
	if mt.Assignments > 0 {
		mt.WaitProb = float64(to.waited-from.waited) / float64(mt.Assignments)
	}
	if mt.OKTxns > 0 {
		mt.HopMsPerTxn = ms(r.hopTotal) / float64(mt.OKTxns)
	}
	level := func(i int) float64 { return sim.Between(from.levels[i], to.levels[i]) }
	if m.mode == poolmode.Direct {
		slots := float64(m.cfg.Server.MaxConnections)
		mt.ServerLinked = level(lvDirectBusy) / slots
		mt.ServerBusy = level(lvExecuting) / slots
	} else {
		pool := float64(m.lim * len(m.pools))
		mt.ServerLinked = level(lvLinked) / pool
		mt.ServerBusy = level(lvExecuting) / pool
	}
	m.poolerMetrics(&mt, from, to)
	m.prepMetrics(&mt, wall)
	mt.AppWaitL, mt.AppWaitLambda, mt.AppWaitW = sim.LittleBetween(from.queues[0], to.queues[0])
	mt.AppWaitP99Ms = ms(r.appWaits.Percentile(99))
	d := &r.dec
	mt.DecAppWaitP50Ms, mt.DecAppWaitP99Ms = ms(d[0].Percentile(50)), ms(d[0].Percentile(99))
	mt.DecConnectP50Ms, mt.DecConnectP99Ms = ms(d[1].Percentile(50)), ms(d[1].Percentile(99))
	mt.DecWaitP50Ms, mt.DecWaitP99Ms = ms(d[2].Percentile(50)), ms(d[2].Percentile(99))
	mt.DecCPUQueueP50Ms, mt.DecCPUQueueP99Ms = ms(d[3].Percentile(50)), ms(d[3].Percentile(99))
	mt.DecServiceP50Ms, mt.DecServiceP99Ms = ms(d[4].Percentile(50)), ms(d[4].Percentile(99))
	mt.DecHopP50Ms, mt.DecHopP99Ms = ms(d[5].Percentile(50)), ms(d[5].Percentile(99))
	mt.DecThinkP50Ms, mt.DecThinkP99Ms = ms(d[6].Percentile(50)), ms(d[6].Percentile(99))
	mt.DecPoolerP50Ms, mt.DecPoolerP99Ms = ms(d[7].Percentile(50)), ms(d[7].Percentile(99))
	v := &m.srv
	mt.ServerConns = max(mt.ServerConns, v.open.Max())
	mt.ServerMemPeakMB = float64(v.open.Max()*m.cfg.Server.MemoryPerConn) / (1 << 20)
	if v.cfg.Cores > 0 {
		mt.CPUUtil = level(lvCores) / float64(v.cfg.Cores)
		mt.CPUJobsL = level(lvJobs)
	}
	linger := m.cfg.Workload.TimeWait
	for _, t := range r.closed[r.closedHead:] {
		if t+linger > end {
			mt.TimeWaitEnd++
		}
	}
	return mt
}

// steady fills the steady-window figures and returns the window's two
// snapshots. An open run's recorders keep only the window's samples
// afterwards (so every percentile read later is the window's); a closed
// run's window spans the whole run for everything but tps_steady and its
// percentiles.
func (m *model) steady(mt *Metrics, end sim.Time) (from, to *snapshot) {
	r := &m.results
	w := &m.window
	if m.cfg.Workload.Open() {
		wl := m.cfg.Workload
		from, to = w.choose(m)
		for i, rec := range m.recorders() {
			rec.Keep(from.counts[i], to.counts[i])
		}
		span := to.at - from.at
		mt.WarmupMs, mt.SteadyMs = ms(from.at), ms(span)
		if span > 0 {
			mt.TPSSteady = float64(to.ok-from.ok) / span.Seconds()
		}
		mt.OfferedTPS = wl.ArrivalRate * wl.MeanTxnsPerSession()
		if r.lastTxn > wl.Duration {
			mt.DrainMs = ms(r.lastTxn - wl.Duration)
		}
		mt.BacklogStart, mt.BacklogEnd = from.sessions, to.sessions
		mt.SessionMeanMs = ms(r.sessionLat.Mean())
		return from, to
	}
	mt.SessionMeanMs = ms(r.sessionLat.Mean())
	if w.haveFirst {
		finish, ok, n := end, mt.OKTxns, r.lat.Count()
		if w.finished {
			finish, ok, n = w.finishAt, w.finishOK, w.finishCount
		}
		mt.WarmupMs, mt.SteadyMs = ms(w.firstDone), ms(finish-w.firstDone)
		if finish > w.firstDone && ok > 1 {
			mt.TPSSteady = float64(ok-1) / (finish - w.firstDone).Seconds()
		} else {
			// No steady window: the first client was done at the first
			// completion (one transaction per session, say). The whole run
			// is all there is.
			mt.SteadyMs, mt.TPSSteady, n = 0, mt.TPS, r.lat.Count()
		}
		win := r.lat.Window(0, n)
		mt.P50SteadyMs, mt.P99SteadyMs = ms(win.Percentile(50)), ms(win.Percentile(99))
	}
	// The whole run: every level and queue starts at t = 0 with nothing
	// accounted.
	zero := snapshot{levels: make([]sim.Mark, len(m.levels())), queues: make([]sim.QueueMark, len(m.queues()))}
	w.snap(m, end)
	return &zero, &w.snaps[len(w.snaps)-1]
}

// poolerMetrics adds the wait queues of every pooler process (Little's law
// holds for their sum), the processes' threads, and a fleet's balance,
// budget and cancels.
func (m *model) poolerMetrics(mt *Metrics, from, to *snapshot) {
	var deps, waitSum float64
	for i := range m.pools {
		p := &m.pools[i]
		L, lambda, W := sim.LittleBetween(from.queues[1+i], to.queues[1+i])
		mt.WaitL += L
		deps += lambda
		waitSum += lambda * W
		mt.WaitMaxLen = max(mt.WaitMaxLen, p.waitQ.MaxLen())
		u := sim.Between(from.levels[lvPoolerCPU+i], to.levels[lvPoolerCPU+i])
		mt.PoolerCPUMax = max(mt.PoolerCPUMax, u)
		mt.PoolerCPUMean += u / float64(len(m.pools))
	}
	mt.WaitLambda = deps
	if deps > 0 {
		mt.WaitW = waitSum / deps
	}
	var most, all int64
	for _, n := range m.results.procConns {
		most = max(most, n)
		all += n
	}
	if all > 0 {
		mt.ProcImbalance = float64(most) / (float64(all) / float64(len(m.pools)))
	}
	c := m.cfg
	if c.Pooler.Mode.Pooled() {
		mt.ServerBudget = int64(m.lim * len(m.pools))
		mt.BudgetOver = max(0, mt.ServerBudget-int64(c.Server.MaxConnections))
	}
	// Cancel requests arrive on new connections, which the kernel hashes
	// to any process: one for another process is lost without peering.
	r := sim.NewRand(c.Seed, "cancel")
	n := uint64(len(m.pools))
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
