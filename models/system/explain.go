package system

import (
	"fmt"
	"math"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/queueing"
	"github.com/poolsim/poolsim/sim"
)

// Explain describes a run for a student of queueing: for each queue, the
// arrival rate λ, mean wait W and mean length L measured independently,
// Little's law L = λW with its error, and, where an analytic result
// applies, the formula's value beside the simulated one. Each string is
// one paragraph of plain sentences.
func Explain(c Config, m Metrics) []string {
	out := []string{steadyWords(c, m)}
	if c.Pooler.PoolMode.Pooled() {
		out = append(out, little("The pooler's wait queue (clients waiting for a server connection)",
			"departures (assignments and query_wait_timeout disconnects)", m.WaitL, m.WaitLambda, m.WaitW))
	}
	if c.AppPool.Mode == QueuePool {
		out = append(out, little("The application pool's wait queue (clients waiting for a pooled connection)",
			"departures (connections handed over and acquire timeouts)", m.AppWaitL, m.AppWaitLambda, m.AppWaitW))
	}
	if c.Workload.Persistent() {
		out = append(out, little("The application queue (requests waiting for a free worker)",
			"requests taken by a worker", m.AppWaitL, m.AppWaitLambda, m.AppWaitW))
	}
	if c.Server.Cores > 0 {
		out = append(out, cpuLaw(c, m))
	}
	if p := erlang(c, m); p != "" {
		out = append(out, p)
	}
	if p := closedBounds(c, m); p != "" {
		out = append(out, p)
	}
	return out
}

// steadyWords says which throughput and percentiles to read for what: the
// steady window against the whole run.
func steadyWords(c Config, m Metrics) string {
	w := c.Workload
	if w.Open() {
		how := fmt.Sprintf("set by workload.warmup (%v)", w.Warmup)
		if w.WarmupAuto {
			how = fmt.Sprintf("found by MSER-5 on the mean latency of %d pilot runs with their own seeds", Pilots)
		}
		s := fmt.Sprintf("Steady state: the first %s of the run (the warm-up, %s) is left out; every time average, "+
			"percentile and rate below and in the row is measured from there to the end of arrivals (%s). "+
			"Read tps_steady (%.6g/s, completions in that window) for the throughput the system sustains "+
			"against the %.6g/s offered; tps (%.6g/s = ok/wall) also counts the warm-up and the %s it took "+
			"to finish after arrivals stopped.",
			fmtSec(m.WarmupMs/1000), how, fmtSec(m.SteadyMs/1000), m.TPSSteady, m.OfferedTPS, m.TPS, fmtSec(m.DrainMs/1000))
		if m.WarmupAtLimit == 1 {
			s += " MSER-5 cut as much as it may (half the arrival period): the run may be too short for a steady state; lengthen workload.duration."
		}
		return s
	}
	if m.SteadyMs == 0 {
		return fmt.Sprintf("Steady state: the first client was done at the first completion, so there is no window in which "+
			"every client runs; tps_steady is the whole run's (%.6g/s = ok/wall).", m.TPS)
	}
	return fmt.Sprintf("Steady state: tps (%.6g/s) is ok/wall, as the seed tables define it; it counts the ragged end, when "+
		"clients finish one by one and fewer remain. tps_steady (%.6g/s) is the completion rate from the first "+
		"completion (%s) until the first client finished (%s later), while every client still ran: read it for "+
		"the throughput the configuration sustains, and p50/p99_steady (%.4g / %.4g ms) for its latency then.",
		m.TPS, m.TPSSteady, fmtSec(m.WarmupMs/1000), fmtSec(m.SteadyMs/1000), m.P50SteadyMs, m.P99SteadyMs)
}

func little(name, what string, L, lambda, W float64) string {
	if lambda == 0 {
		return name + ": nobody passed through it."
	}
	lw := lambda * W
	errPct := 0.0
	if L > 0 {
		errPct = 100 * (lw - L) / L
	}
	return fmt.Sprintf("%s: %.6g %s per second (λ), each after a mean wait of %s (W); "+
		"the queue's own time integral gives a mean length of %.6g (L). Little's law says L = λW: "+
		"%.6g/s × %.6g s = %.6g, against %.6g measured (error %.3f%%).",
		name, lambda, what, fmtSec(W), L, lambda, W, lw, L, errPct)
}

func cpuLaw(c Config, m Metrics) string {
	stmts := float64(m.OKTxns) * float64(c.Workload.StmtsPerTxn)
	wall := m.WallMs / 1000
	if c.Workload.Open() { // the window's rates, like the utilisation
		stmts, wall = m.TPSSteady*float64(c.Workload.StmtsPerTxn), 1
	}
	if wall <= 0 || stmts == 0 {
		return "The server's CPU: no transaction completed."
	}
	d := c.Workload.CPU.MeanValue().Seconds()
	u := stmts / wall * d / float64(c.Server.Cores)
	note := ""
	if c.Machine != nil {
		note = " The measured figure is the machine's (Config.Machine): whatever else it runs on the same cores is in it."
	}
	return fmt.Sprintf("The server's CPU (%d cores): statements completed at %.6g/s, each needing %s of CPU, "+
		"so the utilisation law U = X·D / cores predicts %.3f busy; the simulation measured %.3f "+
		"(start-ups and contention add to it). On average %.4g statements were running (L), so each "+
		"spent about L/X = %s on the CPU, of which its own work was %s.",
		c.Server.Cores, stmts/wall, fmtSec(d), u, m.CPUUtil, m.CPUJobsL, fmtSec(m.CPUJobsL/(stmts/wall)), fmtSec(d)) + note
}

// hold is the mean time one assignment keeps a server, and how many
// assignments a transaction makes.
func hold(c Config) (s, perTxn float64) {
	w := c.Workload
	q := w.Query.MeanValue().Seconds() + w.CPU.MeanValue().Seconds()
	gap := w.Think.MeanValue().Seconds() + 2*c.Pooler.Hop.Seconds()
	n := float64(w.StmtsPerTxn)
	switch c.Pooler.PoolMode {
	case poolmode.Statement:
		return q, n
	case poolmode.Transaction:
		return n*q + (n-1)*gap, 1
	default: // session and direct hold the server for the whole session
		t := float64(w.TxnsPerSession)
		return t*n*q + (t*n-1)*gap, 1 / t
	}
}

// erlang compares an open workload whose sessions each need exactly one
// server assignment with M/M/c (Erlang C), or with M/M/c+D under
// query_wait_timeout.
func erlang(c Config, m Metrics) string {
	w := c.Workload
	if w.Persistent() {
		return workersErlang(c, m)
	}
	if !w.Open() || !c.Pooler.PoolMode.Pooled() || c.AppPool.Mode != NoAppPool || c.Server.Cores > 0 {
		return ""
	}
	s, perTxn := hold(c)
	if perTxn*float64(w.TxnsPerSession) != 1 {
		return ""
	}
	servers := c.poolLimit()
	lambda := w.ArrivalRate
	a := lambda * s
	var kind string
	switch {
	case w.Query.Kind == sim.Exp && w.CPU.MeanValue() == 0 && w.StmtsPerTxn == 1:
		kind = "exponential, so the model is exactly M/M/c"
	default:
		kind = fmt.Sprintf("not exponential (squared coefficient of variation %.2g), so M/M/c is only an approximation", w.Query.SCV())
	}
	head := fmt.Sprintf("Analytic check: sessions arrive as a Poisson stream at λ = %.6g/s and each holds one of c = %d servers for %s on average (offered load A = λS = %.4g Erlangs, ρ = %.3f); the holding time is %s.",
		lambda, servers, fmtSec(s), a, a/float64(servers), kind)
	if t := c.Pooler.QueryWaitTimeout; t > 0 {
		p, ws := queueing.MMcD(servers, lambda, s, t.Seconds())
		sim := float64(m.WaitTimeouts) / math.Max(1, float64(m.Sessions))
		return head + fmt.Sprintf(" With query_wait_timeout = %s, M/M/c+D gives P(timeout) = %.5f and a mean wait of the served of %s; the simulation gave %.5f and %s.",
			t, p, fmtSec(ws), sim, fmtSec(m.WaitMeanMs/1000))
	}
	p, wq, ok := queueing.ErlangC(servers, lambda, s)
	if !ok {
		return head + " The offered load is at or above the number of servers, so the queue grows without bound (Erlang C does not exist)."
	}
	return head + fmt.Sprintf(" Erlang C gives P(wait) = %.4f and Wq = %s; the simulation gave P(wait) = %.4f and W = %s.",
		p, fmtSec(wq), m.WaitProb, fmtSec(m.WaitW))
}

// closedBounds gives a closed workload's asymptotic bounds: throughput at
// most N/(R0+Z) (nobody waits) and at most the bottleneck's capacity; the
// knee N* is where they cross.
func closedBounds(c Config, m Metrics) string {
	w := c.Workload
	if w.Open() || c.AppPool.Mode != NoAppPool {
		return ""
	}
	n := float64(w.StmtsPerTxn)
	q := w.Query.MeanValue().Seconds() + w.CPU.MeanValue().Seconds()
	z := w.Think.MeanValue().Seconds()
	hop := 0.0
	if c.Pooler.PoolMode.Pooled() {
		hop = 2 * c.Pooler.Hop.Seconds()
	}
	r0 := n*(q+hop) + (n-1)*z
	s, perTxn := hold(c)
	servers := c.poolLimit()
	name := "the pool's servers"
	if c.Pooler.PoolMode == poolmode.Direct {
		servers = c.Server.Usable()
		name = "the backends (max_connections)"
	}
	dmax := s * perTxn / float64(servers)
	if c.Server.Cores > 0 {
		if dc := n * w.CPU.MeanValue().Seconds() / float64(c.Server.Cores); dc > dmax {
			dmax, name = dc, "the server's CPU"
		}
	}
	clients := w.Clients
	if c.Pooler.PoolMode.Pooled() {
		clients = min(clients, c.Pooler.MaxClientConn)
	} else {
		clients = min(clients, c.Server.Usable())
	}
	xMax, knee := queueing.Bounds(clients, z, r0, dmax)
	return fmt.Sprintf("Bounds for a closed system: %d clients, each transaction taking at least R0 = %s with nobody waiting and followed by Z = %s of think time; "+
		"the bottleneck is %s, needing %s per transaction (D_max). Throughput is at most min(N/(R0+Z), 1/D_max) = %.6g/s, and the knee, "+
		"where adding clients stops adding throughput, is N* = (R0+Z)/D_max = %.4g clients. The simulation ran at %.6g/s (%.1f%% of the bound).",
		clients, fmtSec(r0), fmtSec(z), name, fmtSec(dmax), xMax, knee, m.TPS, 100*m.TPS/xMax)
}

func fmtSec(s float64) string {
	return sim.FromSeconds(s).String()
}

// workersErlang compares the application queue of a workers workload
// with M/M/N (Erlang C): Poisson requests, each holding one of the N
// workers for its own time - exactly M/M/N when a request is one
// exponential statement with no hop and no app time and the pool never
// makes a worker wait. A session pool smaller than the workers is said
// to starve the rest instead.
func workersErlang(c Config, m Metrics) string {
	w := c.Workload
	n := w.Workers
	q := w.Query.MeanValue().Seconds() + w.CPU.MeanValue().Seconds()
	hop := 0.0
	if c.Pooler.PoolMode.Pooled() {
		hop = 2 * c.Pooler.Hop.Seconds()
	}
	stmts := float64(w.StmtsPerTxn)
	txns := w.MeanTxnsPerSession()
	app := w.AppPause().MeanValue().Seconds()
	s := txns*(stmts*(q+hop)+(stmts-1)*app) + (txns-1)*app
	lambda := w.ArrivalRate
	head := fmt.Sprintf("Analytic check: requests arrive as a Poisson stream at λ = %.6g/s and each keeps one of N = %d workers busy for S = %s on average with nobody waiting for a server (offered load A = λS = %.4g Erlangs, ρ = %.3f).",
		lambda, n, fmtSec(s), lambda*s, lambda*s/float64(n))
	if pool := c.poolLimit(); c.Pooler.PoolMode == poolmode.Session && pool < n {
		return head + fmt.Sprintf(" But the pool is in session mode with %d servers for %d workers that never disconnect: a worker keeps the server it first gets, so %d workers can never get one and every request they take waits for query_wait_timeout (%s; the simulation counted %d timeouts) - transaction pooling, or a pool of %d, serves them.",
			pool, n, n-pool, c.Pooler.QueryWaitTimeout, m.WaitTimeouts, n)
	}
	kind := "not one exponential statement, so M/M/N is an approximation"
	if w.Query.Kind == sim.Exp && w.CPU.MeanValue() == 0 && stmts == 1 && txns == 1 && hop == 0 {
		kind = "one exponential statement with no hop, so the queue is exactly M/M/N while the pool makes no worker wait"
	}
	p, wq, ok := queueing.ErlangC(n, lambda, s)
	if !ok {
		return head + " The offered load is at or above the number of workers, so the application queue grows without bound (Erlang C does not exist)."
	}
	return head + fmt.Sprintf(" The request's time is %s. Erlang C gives P(wait) = %.4f and Wq = %s for the application queue; the simulation gave W = %s.",
		kind, p, fmtSec(wq), fmtSec(m.AppWaitW))
}
