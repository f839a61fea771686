package system

import (
	"fmt"
	"strconv"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Assumptions are the things an answer about c rests on that a reader
// could otherwise not see: the defaults in effect that change numbers,
// whose behaviour the pooler follows, and what the model leaves out. Each
// is one sentence, the ones that matter most for c first.
func Assumptions(c Config) []string {
	p, s := c.Pooler, c.Server
	var out []string
	pooled := false
	for _, pl := range c.PoolModes() {
		pooled = pooled || pl.Pooled()
	}
	if pooled {
		out = append(out, "the pooler behaves as PgBouncer 1.18 to 1.24: a client gets a server at its first statement, waiters are served first come first served, idle servers last in first out, one server login at a time per pool")
		if p.TimeoutCheck > 0 {
			out = append(out, fmt.Sprintf("query_wait_timeout (%v) is checked every %v, as PgBouncer's janitor does (pooler.timeout_check)", p.QueryWaitTimeout, p.TimeoutCheck))
		} else {
			out = append(out, fmt.Sprintf("query_wait_timeout (%v) fires at the exact instant (pooler.timeout_check 0s); PgBouncer checks it every 1/3 s", p.QueryWaitTimeout))
		}
		if p.CPUPerMsg == 0 && p.Wakeup == 0 && p.CPUPerAssign == 0 {
			out = append(out, "the pooler's own CPU is left out (pooler.cpu_per_msg 0): it relays messages instantly, where one PgBouncer process is a single thread (seed 002 saw one saturate near 86,000 one-statement transactions/s)")
		}
		if p.Hop == 0 {
			out = append(out, "no latency between client and pooler (pooler.hop 0s)")
		} else {
			out = append(out, fmt.Sprintf("every message takes %v each way between client and pooler (pooler.hop); the pooler-server hop is left out", p.Hop))
		}
		for _, m := range c.PoolModes() {
			if m == poolmode.Transaction || m == poolmode.Statement {
				out = append(out, fmt.Sprintf("max_prepared_statements is %d (PgBouncer 1.24's default is 200; PgBouncer 1.18, which poolsim validate runs, has no such setting and breaks protocol-level prepared statements in transaction pooling)", p.MaxPreparedStatements))
				break
			}
		}
		if p.ResetCost == 0 {
			out = append(out, "server_reset_query (DISCARD ALL) costs nothing before a session-mode server is reused (pooler.reset_cost 0s)")
		}
	}
	if s.Cores == 0 {
		out = append(out, "the server's CPU is not modelled (server.cores 0): statement time is a fixed delay, so adding connections never slows the statements; set server.cores (and contention, coherency) for a CPU-bound server")
	} else {
		out = append(out, fmt.Sprintf("the server has %d cores shared by running statements' workload.cpu (processor sharing, USL contention %.3g, coherency %.3g)", s.Cores, s.Contention, s.Coherency))
	}
	if c.Machine != nil {
		out = append(out, c.Machine.Describe(c))
	}
	if s.Connect.MeanValue() == 0 {
		out = append(out, "opening a backend costs nothing (server.connect 0s); PostgreSQL takes milliseconds per connection")
	}
	for _, cl := range c.ClassList() {
		w := cl.Workload
		who := ""
		if c.Multi() {
			who = "class " + cl.Name + ": "
		}
		switch {
		case w.Persistent():
			out = append(out, fmt.Sprintf("%s%s from t = 0 (connecting as closed clients do); requests arrive for %v (Poisson, %g/s) and queue in the application, FIFO, for the longest-idle worker; request latency counts that queue; a connection closed under a worker fails its request and the worker reconnects at its next; the figures are the steady window up to the end of arrivals", who, verb(w.Workers, "worker", "holds one connection", "hold one connection each"), w.Duration, w.ArrivalRate))
		case w.Open():
			warm := fmt.Sprintf("a %v warm-up", w.Warmup)
			if w.WarmupAuto {
				warm = fmt.Sprintf("a warm-up found by MSER-5 on %d pilot runs", Pilots)
			}
			out = append(out, fmt.Sprintf("%sarrivals for %v (Poisson, %g sessions/s); the figures are the steady window after %s, up to the end of arrivals", who, w.Duration, w.ArrivalRate, warm))
		case w.RequestLevel():
			out = append(out, fmt.Sprintf("%s%s %s of %s on average, waiting workload.think before each (the first too, so they start spread out); tps_steady covers the time while every client still runs, tps the whole run",
				who, verb(w.Clients, "client", "runs", "each run"), count(w.RequestsPerSession, "request"), countOf(w.MeanTxnsPerSession()/float64(w.RequestsPerSession), "transaction")))
		default:
			out = append(out, fmt.Sprintf("%s%s at t = 0 and %s %s; tps_steady covers the time while every client still runs, tps the whole run", who, verb(w.Clients, "client", "connects", "connect"), eachRuns(w.Clients), countOf(w.MeanTxnsPerSession(), "transaction")))
		}
	}
	if n := c.mostSamples(); n > sim.ExactLimit {
		out = append(out, fmt.Sprintf("percentiles are exact up to %s samples of a figure; past that (this run may record up to %s) a figure's samples go into a histogram and its percentiles are within %.2g%% of the exact value, its counts and means still exact",
			grouped(sim.ExactLimit), grouped(int64(n)), 100*sim.HistogramError))
	}
	if n := c.Pooler.MinPoolSize; n > 0 {
		out = append(out, fmt.Sprintf("min_pool_size %d: every pool starts opening its servers at time zero, one login at a time, up to min_pool_size or its size, and keeps them (PgBouncer's janitor tops a pool up while clients are connected)", n))
	}
	clients := "the clients' own CPU, "
	if c.Machine != nil { // the machine says what it runs
		clients = ""
	}
	out = append(out, "left out: network bandwidth and packet loss, disk and WAL beyond workload.query, locks between transactions, autovacuum and checkpoints, TLS, "+clients+"reserve_pool, server_lifetime and server_idle_timeout reconnects")
	return out
}

// mostSamples bounds the samples any one recorder of a run of c takes: one
// per statement (waits for a server in statement mode), summed over the
// classes (the run's recorders take every class's).
func (c Config) mostSamples() float64 {
	var n float64
	for _, cl := range c.ClassList() {
		w := cl.Workload
		sessions := float64(w.Clients)
		if w.Open() {
			sessions = w.ArrivalRate * w.Duration.Seconds()
		}
		n += sessions * w.MeanTxnsPerSession() * float64(max(w.StmtsPerTxn, 1))
	}
	return n
}

// grouped writes n with thousands separators.
func grouped[T int | int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// verb is n clients (workers, ...) and the verb agreeing with them: "1
// client runs", "2 clients each run".
func verb(n int, noun, one, many string) string {
	if n == 1 {
		return "1 " + noun + " " + one
	}
	return fmt.Sprintf("%d %ss %s", n, noun, many)
}

// eachRuns is "runs" for one client, "each runs" for several.
func eachRuns(n int) string {
	if n == 1 {
		return "runs"
	}
	return "each runs"
}
