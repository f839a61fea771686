package advise

import (
	"fmt"
	"math"
	"slices"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// A class's bars. Every class of every pool is held to the same rules,
// on its own figures:
//
//   - nothing fails: no connection refused, no client timed out (the
//     pooler's query_wait_timeout, the application pool's acquire), no
//     transaction left unfinished, and some transaction completes;
//   - it carries its load, judged against its reference: the run, among
//     its pool's modes with a server for every client connection as far as
//     the budget allows ("servers to spare": the spare), that carries it
//     most; replication by replication (the same seeds, so the same
//     arrivals): an open class's steady throughput is not short of the
//     reference's by more than LoadSlack beyond its interval, the
//     reference itself carries the offered load (arrival rate ×
//     transactions), and the backlog drains within DrainFactor mean
//     sessions after arrivals stop; a closed class's is within Tolerance
//     of the reference's, beyond its interval; and no open class's request
//     waits for a server as long as half the run (starved connections);
//   - its latency: p99 (of a request when it runs requests, else of a
//     transaction) within --slo-p99, and its p99 wait for a server within
//     --max-wait, on the means; a class given neither is held to a p99 at
//     most P99Slack above its own mode's spare (paired): what a smaller
//     pool costs it;
//   - its steady throughput at least --min-tps.

var (
	fTPSSteady = field("tps_steady")
	fP99       = field("p99_ms")
	fReqP99    = field("req_p99_ms")
	fWaitP99   = field("wait_p99_ms")
	fDrain     = field("drain_ms")
	fSession   = field("session_mean_ms")
	fReqMean   = field("req_mean_ms")
	fWaitMax   = field("wait_max_ms")
	fSteady    = field("steady_ms")
	fOK        = field("ok_txns")
	fConnsPeak = field("client_conns_peak")
)

// field reads a metric by its JSON name.
func field(name string) system.Field {
	f, ok := system.FieldByName(name)
	if !ok {
		panic("advise: no metric " + name)
	}
	return f
}

// stat is a metric's mean and 95 % half-width over the replications.
func stat(x system.Replicated, f system.Field) (mean, half float64) { return x.Stat(f) }

// paired is a − k·b and its 95 % half-width over the replications both
// have (the same seeds: common random numbers): a mean of the paired
// differences, or for a percentile the difference of the pooled
// percentiles with its jackknife (system.Replicated.Paired).
func paired(a, b system.Replicated, f system.Field, k float64) (est, half float64) {
	return a.Paired(b, f, k)
}

// num is a count: whole for one run, a mean with a decimal otherwise.
func num(x float64, reps int) string {
	if reps <= 1 || x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// counts are the failures no class may have.
var counts = []struct {
	f    system.Field
	what string
}{
	{field("conn_refused"), "connections refused"},
	{field("wait_timeouts"), "clients timed out waiting (query_wait_timeout)"},
	{field("app_timeouts"), "application-pool acquire timeouts"},
	{field("unfinished_txns"), "transactions unfinished"},
}

// checker builds a Check.
type checker struct {
	c *Check
}

// miss records a bar missed on the means (sure: beyond its interval).
func (k checker) miss(sure bool, format string, args ...any) {
	k.c.Fails = append(k.c.Fails, fmt.Sprintf(format, args...))
	if sure {
		k.c.Excluded = true
	}
	k.c.Sure = false
}

// unsure records a bar met on the means whose interval straddles it.
func (k checker) unsure(format string, args ...any) {
	k.c.Unsure = append(k.c.Unsure, fmt.Sprintf(format, args...))
	k.c.Sure = false
}

// check holds class cl's replications x (at some configuration) to its
// bars, against its references with servers to spare: ref for the load
// (the most any mode carries), spare for the default latency bar (its own
// mode's).
func (cl *classInfo) check(x, ref, spare system.Replicated) *Check {
	c := &Check{Class: cl.Name, Sure: true}
	k := checker{c}
	reps := len(x)
	for _, n := range counts {
		xs := x.Values(n.f)
		if m, _ := stat(x, n.f); m > 0 {
			k.miss(slices.Min(xs) > 0, "%s %s", num(m, reps), n.what)
		} else if slices.Max(xs) > 0 {
			k.unsure("%s", n.what)
		}
	}
	if m, _ := stat(x, fOK); m == 0 {
		k.miss(true, "no transaction completed")
	}
	cl.checkLoad(k, x, ref)
	cl.checkLatency(k, x, spare)
	if n := cl.Need.MinTPS; n > 0 {
		m, h := stat(x, fTPSSteady)
		switch {
		case m < n:
			k.miss(m+h < n, "%.1f tps steady, below the minimum %g", m, n)
		case m-h < n:
			k.unsure("%.1f ± %.1f tps steady against the minimum %g", m, h, n)
		}
	}
	c.Meets = len(c.Fails) == 0
	return c
}

// checkLoad is the load bar.
func (cl *classInfo) checkLoad(k checker, x, spare system.Replicated) {
	if !cl.Open {
		m, h := paired(x, spare, fTPSSteady, 1-Tolerance)
		if m < 0 {
			xm, _ := stat(x, fTPSSteady)
			sm, _ := stat(spare, fTPSSteady)
			if m+h < 0 {
				k.miss(true, "%.1f tps steady, below %.0f%% of the %.1f it reaches with a server for every connection", xm, 100*(1-Tolerance), sm)
			} else {
				k.unsure("%.1f tps steady against %.0f%% of %.1f with servers to spare", xm, 100*(1-Tolerance), sm)
			}
		}
		return
	}
	// Starved connections: a wait for a server as long as half the run is
	// not a queue that moves - some connections never get a server while
	// others keep theirs (a session pool smaller than the workers' persistent
	// connections); a short run hides it in the percentiles, and in
	// production each such wait ends in query_wait_timeout.
	if w, s := slices.Max(x.Values(fWaitMax)), slices.Min(x.Values(fSteady)); s > 0 && w > s/2 {
		k.miss(true, "a request waited %.1f s for a server, half the run or more: some connections never get one while others keep theirs (in production each such wait ends in query_wait_timeout)", w/1000)
	}
	need := cl.Offered * (1 - LoadSlack)
	if sm, sh := stat(spare, fTPSSteady); sm+sh < need {
		k.miss(true, "even with a server for every connection it carries %.1f of the %.1f tps offered", sm, cl.Offered)
	}
	m, h := paired(x, spare, fTPSSteady, 1-LoadSlack)
	if m < 0 {
		xm, _ := stat(x, fTPSSteady)
		sm, _ := stat(spare, fTPSSteady)
		if m+h < 0 {
			k.miss(true, "carries %.1f tps, short of the %.1f it carries with servers to spare (of %.1f offered)", xm, sm, cl.Offered)
		} else {
			k.unsure("carries %.1f tps against %.1f with servers to spare", xm, sm)
		}
	}
	// The drain is measured in what each arrival is: a session, or for
	// workers a request (their sessions last the whole run).
	unit, what := fSession, "sessions"
	if cl.w.Persistent() {
		unit, what = fReqMean, "requests"
	}
	ratios := make([]float64, len(x))
	lo, hi := math.Inf(1), 0.0
	for i := range x {
		ratios[i] = x[i].DrainMs / max(unit.Get(&x[i]), 1e-9)
		lo, hi = min(lo, ratios[i]), max(hi, ratios[i])
	}
	if m, _, _ := sim.MeanCI(ratios); m > DrainFactor {
		d, _ := stat(x, fDrain)
		s, _ := stat(x, unit)
		k.miss(lo > DrainFactor, "its backlog grows: %.0f ms to finish after arrivals stop, %.0f mean %s", d, d/max(s, 1e-9), what)
	} else if hi > DrainFactor {
		k.unsure("its backlog drains slowly in some replications")
	}
}

// checkLatency is the latency bar: the SLO and the maximum wait, or
// without either the spare's p99 and P99Slack.
func (cl *classInfo) checkLatency(k checker, x, spare system.Replicated) {
	c := k.c
	if slo := cl.Need.SLOP99; slo > 0 {
		bar := ms(slo)
		m, h := stat(x, cl.lat)
		c.Score = m / bar
		switch {
		case m > bar:
			k.miss(m-h > bar, "%s p99 %.2f ms above its SLO %v", cl.latWords, m, slo)
		case m+h > bar:
			k.unsure("%s p99 %.2f ± %.2f ms against its SLO %v", cl.latWords, m, h, slo)
		}
	}
	if mw := cl.Need.MaxWait; mw > 0 {
		bar := ms(mw)
		m, h := stat(x, fWaitP99)
		c.Score = max(c.Score, m/bar)
		switch {
		case m > bar:
			k.miss(m-h > bar, "wait for a server p99 %.2f ms above its maximum %v", m, mw)
		case m+h > bar:
			k.unsure("wait for a server p99 %.2f ± %.2f ms against its maximum %v", m, h, mw)
		}
	}
	if cl.Need.SLOP99 > 0 || cl.Need.MaxWait > 0 {
		return
	}
	m, h := paired(x, spare, cl.lat, 1+P99Slack)
	xm, _ := stat(x, cl.lat)
	sm, _ := stat(spare, cl.lat)
	c.Score = xm / max((1+P99Slack)*sm, 1e-12)
	switch {
	case m > 0:
		k.miss(m-h > 0, "%s p99 %.2f ms, more than %.0f%% above its %.2f ms with servers to spare (the bar without --slo-p99 or --max-wait)", cl.latWords, xm, 100*P99Slack, sm)
	case m+h > 0:
		k.unsure("%s p99 %.2f ms against %.0f%% above its %.2f ms with servers to spare", cl.latWords, xm, 100*P99Slack, sm)
	}
}
