package system

import (
	"fmt"
	"math"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/queueing"
	"github.com/poolsim/poolsim/sim"
)

// The kinds of Paragraph: which law or analytic result it sets beside the
// simulation. A page picks its chart by the kind.
const (
	KindSteady       = "steady"        // which throughput and percentiles to read for what
	KindLittle       = "little"        // Little's law L = λW on one queue
	KindCPU          = "cpu"           // the utilisation law U = X·D / cores
	KindErlangC      = "erlang-c"      // M/M/c (Erlang C), M/M/c+D, or M/M/N for workers
	KindClosedBounds = "closed-bounds" // a closed system's asymptotic bounds and its knee N*
)

// Paragraph is one paragraph of Explain: its text, and the numbers it
// quotes, so that a page can chart what the text says. Every number is
// finite (a formula that does not exist leaves its check out).
type Paragraph struct {
	Kind   string  `json:"kind"`  // one of the Kind constants
	Title  string  `json:"title"` // what it is about, e.g. "The pooler's wait queue"
	Text   string  `json:"text"`  // plain sentences, unwrapped
	Inputs []Value `json:"inputs,omitempty"`
	Checks []Check `json:"checks,omitempty"`
}

// Value is one input a paragraph quotes (λ, W, R0, D_max, ...): a
// measured figure or a figure of the configuration.
type Value struct {
	Name  string  `json:"name"` // the symbol the text uses: "λ", "W", "R0"
	Unit  string  `json:"unit"` // "s", "/s", "" (a count or a fraction)
	Value float64 `json:"value"`
}

// Check is one quantity a paragraph gives twice: as the law or formula
// computes it and as the simulation measured it.
type Check struct {
	Name     string  `json:"name"` // "L", "P(wait)", "Wq", "U", "X"
	Unit     string  `json:"unit"`
	Law      string  `json:"law"` // how Computed is had: "λW", "Erlang C", "min(N/(R0+Z), 1/D_max)"
	Computed float64 `json:"computed"`
	Measured float64 `json:"measured"`
	// Bound: Computed is an upper bound on Measured (closed-system
	// bounds), not a prediction of it.
	Bound bool `json:"bound,omitempty"`
	// ErrorPct is 100 (Computed - Measured) / Measured (0 when Measured
	// is 0); PctOfBound is 100 Measured / Computed for a bound.
	ErrorPct   float64 `json:"error_pct"`
	PctOfBound float64 `json:"pct_of_bound,omitempty"`
}

// predicted is a check of a prediction.
func predicted(name, unit, law string, computed, measured float64) Check {
	c := Check{Name: name, Unit: unit, Law: law, Computed: computed, Measured: measured}
	if measured != 0 {
		c.ErrorPct = 100 * (computed - measured) / measured
	}
	return c
}

// bounded is a check of an upper bound.
func bounded(name, unit, law string, bound, measured float64) Check {
	c := Check{Name: name, Unit: unit, Law: law, Computed: bound, Measured: measured, Bound: true}
	if measured != 0 {
		c.ErrorPct = 100 * (bound - measured) / measured
	}
	if bound != 0 {
		c.PctOfBound = 100 * measured / bound
	}
	return c
}

// Finite drops the values and checks with a number that is not finite
// (JSON has none, and a chart cannot draw one).
func (p Paragraph) Finite() Paragraph {
	ok := func(xs ...float64) bool {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	var in []Value
	for _, v := range p.Inputs {
		if ok(v.Value) {
			in = append(in, v)
		}
	}
	var cs []Check
	for _, c := range p.Checks {
		if ok(c.Computed, c.Measured, c.ErrorPct, c.PctOfBound) {
			cs = append(cs, c)
		}
	}
	p.Inputs, p.Checks = in, cs
	return p
}

// Explain describes a run for a student of queueing: for each queue, the
// arrival rate λ, mean wait W and mean length L measured independently,
// Little's law L = λW with its error, and, where an analytic result
// applies, the formula's value beside the simulated one. Each paragraph's
// Text is plain sentences.
//
// With classes, classes holds each class's metrics in c.Classes' order
// (nil without classes): the queues, the CPU law and the application
// queues' Erlang C are then each pool's and each class's (classes.go).
func Explain(c Config, m Metrics, classes []Metrics) []Paragraph {
	if c.Multi() {
		return explainClasses(c, m, classes)
	}
	out := []Paragraph{steadyWords(c, m)}
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
	if p, ok := erlang(c, m); ok {
		out = append(out, p)
	}
	if p, ok := closedBounds(c, m); ok {
		out = append(out, p)
	}
	for i := range out {
		out[i] = out[i].Finite()
	}
	return out
}

// steadyWords says which throughput and percentiles to read for what: the
// steady window against the whole run.
func steadyWords(c Config, m Metrics) Paragraph {
	p := Paragraph{Kind: KindSteady, Title: "Steady state", Inputs: []Value{
		{"tps", "/s", m.TPS}, {"tps_steady", "/s", m.TPSSteady}, {"warmup", "s", m.WarmupMs / 1000}, {"steady", "s", m.SteadyMs / 1000}}}
	w := c.ClassList()[0].Workload // the run's window is cut by the first class's warm-up
	if c.Open() {
		p.Inputs = append(p.Inputs, Value{"offered", "/s", m.OfferedTPS}, Value{"drain", "s", m.DrainMs / 1000})
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
		p.Text = s
		return p
	}
	if m.SteadyMs == 0 {
		p.Text = fmt.Sprintf("Steady state: the first client was done at the first completion, so there is no window in which "+
			"every client runs; tps_steady is the whole run's (%.6g/s = ok/wall).", m.TPS)
		return p
	}
	p.Inputs = append(p.Inputs, Value{"p50_steady", "s", m.P50SteadyMs / 1000}, Value{"p99_steady", "s", m.P99SteadyMs / 1000})
	p.Text = fmt.Sprintf("Steady state: tps (%.6g/s) is ok/wall, as the seed tables define it; it counts the ragged end, when "+
		"clients finish one by one and fewer remain. tps_steady (%.6g/s) is the completion rate from the first "+
		"completion (%s) until the first client finished (%s later), while every client still ran: read it for "+
		"the throughput the configuration sustains, and p50/p99_steady (%.4g / %.4g ms) for its latency then.",
		m.TPS, m.TPSSteady, fmtSec(m.WarmupMs/1000), fmtSec(m.SteadyMs/1000), m.P50SteadyMs, m.P99SteadyMs)
	return p
}

func little(name, what string, L, lambda, W float64) Paragraph {
	title, _, _ := cutParen(name)
	p := Paragraph{Kind: KindLittle, Title: title}
	if lambda == 0 {
		p.Text = name + ": nobody passed through it."
		return p
	}
	lw := lambda * W
	errPct := 0.0
	if L > 0 {
		errPct = 100 * (lw - L) / L
	}
	p.Inputs = []Value{{"λ", "/s", lambda}, {"W", "s", W}}
	p.Checks = []Check{predicted("L", "", "λW", lw, L)}
	p.Text = fmt.Sprintf("%s: %.6g %s per second (λ), each after a mean wait of %s (W); "+
		"the queue's own time integral gives a mean length of %.6g (L). Little's law says L = λW: "+
		"%.6g/s × %.6g s = %.6g, against %.6g measured (error %.3f%%).",
		name, lambda, what, fmtSec(W), L, lambda, W, lw, L, errPct)
	return p
}

// cutParen splits "The queue (what waits)" at its parenthesis.
func cutParen(s string) (before, inside string, ok bool) {
	i := len(s)
	for j := range s {
		if s[j] == '(' {
			i = j
			break
		}
	}
	if i == len(s) {
		return s, "", false
	}
	before = s[:i]
	for len(before) > 0 && before[len(before)-1] == ' ' {
		before = before[:len(before)-1]
	}
	inside = s[i+1:]
	if n := len(inside); n > 0 && inside[n-1] == ')' {
		inside = inside[:n-1]
	}
	return before, inside, true
}

func cpuLaw(c Config, m Metrics) Paragraph {
	p := Paragraph{Kind: KindCPU, Title: "The server's CPU"}
	stmts := float64(m.OKTxns) * float64(c.Workload.StmtsPerTxn)
	wall := m.WallMs / 1000
	if c.Workload.Open() { // the window's rates, like the utilisation
		stmts, wall = m.TPSSteady*float64(c.Workload.StmtsPerTxn), 1
	}
	if wall <= 0 || stmts == 0 {
		p.Text = "The server's CPU: no transaction completed."
		return p
	}
	d := c.Workload.CPU.MeanValue().Seconds()
	u := stmts / wall * d / float64(c.Server.Cores)
	note := ""
	if c.Machine != nil {
		note = " The measured figure is the machine's (Config.Machine): whatever else it runs on the same cores is in it."
	}
	x := stmts / wall
	p.Inputs = []Value{{"cores", "", float64(c.Server.Cores)}, {"X", "/s", x}, {"D", "s", d}, {"L", "", m.CPUJobsL}, {"L/X", "s", m.CPUJobsL / x}}
	p.Checks = []Check{predicted("U", "", "X·D / cores", u, m.CPUUtil)}
	p.Text = fmt.Sprintf("The server's CPU (%d cores): statements completed at %.6g/s, each needing %s of CPU, "+
		"so the utilisation law U = X·D / cores predicts %.3f busy; the simulation measured %.3f "+
		"(start-ups and contention add to it). On average %.4g statements were running (L), so each "+
		"spent about L/X = %s on the CPU, of which its own work was %s.",
		c.Server.Cores, x, fmtSec(d), u, m.CPUUtil, m.CPUJobsL, fmtSec(m.CPUJobsL/x), fmtSec(d)) + note
	return p
}

// erlang compares an open workload whose sessions each need exactly one
// server assignment with M/M/c (Erlang C), or with M/M/c+D under
// query_wait_timeout; false when no such result applies.
func erlang(c Config, m Metrics) (Paragraph, bool) {
	w := c.Workload
	if w.Persistent() {
		return workersErlang(c, "", w, c.Pooler.PoolMode, c.poolLimit(), m), true
	}
	if !w.Open() || !c.Pooler.PoolMode.Pooled() || c.AppPool.Mode != NoAppPool || c.Server.Cores > 0 {
		return Paragraph{}, false
	}
	s, perTxn := hold(c, w, c.Pooler.PoolMode)
	if perTxn*w.MeanTxnsPerSession() != 1 {
		return Paragraph{}, false
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
	p := Paragraph{Kind: KindErlangC, Title: "Analytic check: M/M/c (Erlang C)",
		Inputs: []Value{{"λ", "/s", lambda}, {"c", "", float64(servers)}, {"S", "s", s}, {"A", "", a}, {"ρ", "", a / float64(servers)}}}
	head := fmt.Sprintf("Analytic check: sessions arrive as a Poisson stream at λ = %.6g/s and each holds one of c = %s for %s on average (offered load A = λS = %.4g Erlangs, ρ = %.3f); the holding time is %s.",
		lambda, count(servers, "server"), fmtSec(s), a, a/float64(servers), kind)
	if t := c.Pooler.QueryWaitTimeout; t > 0 {
		pt, ws := queueing.MMcD(servers, lambda, s, t.Seconds())
		simP := float64(m.WaitTimeouts) / math.Max(1, float64(m.Sessions))
		p.Title = "Analytic check: M/M/c+D (query_wait_timeout)"
		p.Inputs = append(p.Inputs, Value{"D", "s", t.Seconds()})
		p.Checks = []Check{predicted("P(timeout)", "", "M/M/c+D", pt, simP), predicted("W", "s", "M/M/c+D", ws, m.WaitMeanMs/1000)}
		p.Text = head + fmt.Sprintf(" With query_wait_timeout = %s, M/M/c+D gives P(timeout) = %.5f and a mean wait of the served of %s; the simulation gave %.5f and %s.",
			t, pt, fmtSec(ws), simP, fmtSec(m.WaitMeanMs/1000))
		return p, true
	}
	pw, wq, ok := queueing.ErlangC(servers, lambda, s)
	if !ok {
		p.Text = head + " The offered load is at or above the number of servers, so the queue grows without bound (Erlang C does not exist)."
		return p, true
	}
	p.Checks = []Check{predicted("P(wait)", "", "Erlang C", pw, m.WaitProb), predicted("Wq", "s", "Erlang C", wq, m.WaitW)}
	p.Text = head + fmt.Sprintf(" Erlang C gives P(wait) = %.4f and Wq = %s; the simulation gave P(wait) = %.4f and W = %s.",
		pw, fmtSec(wq), m.WaitProb, fmtSec(m.WaitW))
	return p, true
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
//
// class names the class ("" without classes), whose workload w goes
// through a pool of mode mode and pool servers per pooler process.
func workersErlang(c Config, class string, w Workload, mode poolmode.Mode, pool int, m Metrics) Paragraph {
	n := w.Workers
	q := w.Query.MeanValue().Seconds() + w.CPU.MeanValue().Seconds()
	hop := 0.0
	if mode.Pooled() {
		hop = 2 * c.Pooler.Hop.Seconds()
	}
	stmts := float64(w.StmtsPerTxn)
	txns := w.MeanTxnsPerSession()
	app := w.AppPause().MeanValue().Seconds()
	s := txns*(stmts*(q+hop)+(stmts-1)*app) + (txns-1)*app
	lambda := w.ArrivalRate
	title, who := "the application queue", "requests"
	if class != "" {
		title, who = "the application queue of class "+class, "the requests of class "+class
	}
	p := Paragraph{Kind: KindErlangC, Title: "Analytic check: " + title + " as M/M/N (Erlang C)",
		Inputs: []Value{{"λ", "/s", lambda}, {"N", "", float64(n)}, {"S", "s", s}, {"A", "", lambda * s}, {"ρ", "", lambda * s / float64(n)}}}
	head := fmt.Sprintf("Analytic check: %s arrive as a Poisson stream at λ = %.6g/s and each keeps one of N = %s busy for S = %s on average with nobody waiting for a server (offered load A = λS = %.4g Erlangs, ρ = %.3f).",
		who, lambda, count(n, "worker"), fmtSec(s), lambda*s, lambda*s/float64(n))
	if mode == poolmode.Session && pool < n {
		p.Title = "Analytic check: a session pool smaller than the workers"
		if class != "" {
			p.Title += " of class " + class
		}
		p.Text = head + fmt.Sprintf(" But the pool is in session mode with %s for %s that never disconnect: a worker keeps the server it first gets, so %s can never get one and every request they take waits for query_wait_timeout (%s; the simulation counted %s) - transaction pooling, or a pool of %d, serves them.",
			count(pool, "server"), count(n, "worker"), count(n-pool, "worker"), c.Pooler.QueryWaitTimeout, count(m.WaitTimeouts, "timeout"), n)
		return p
	}
	kind := "not one exponential statement, so M/M/N is an approximation"
	if w.Query.Kind == sim.Exp && w.CPU.MeanValue() == 0 && stmts == 1 && txns == 1 && hop == 0 {
		kind = "one exponential statement with no hop, so the queue is exactly M/M/N while the pool makes no worker wait"
	}
	pw, wq, ok := queueing.ErlangC(n, lambda, s)
	if !ok {
		p.Text = head + " The offered load is at or above the number of workers, so the application queue grows without bound (Erlang C does not exist)."
		return p
	}
	p.Checks = []Check{predicted("Wq", "s", "Erlang C", wq, m.AppWaitW)} // the application queue's P(wait) is not measured
	p.Inputs = append(p.Inputs, Value{"P(wait)", "", pw})
	p.Text = head + fmt.Sprintf(" The request's time is %s. Erlang C gives P(wait) = %.4f and Wq = %s for the application queue; the simulation gave W = %s.",
		kind, pw, fmtSec(wq), fmtSec(m.AppWaitW))
	return p
}

// count is n and noun, the noun in the plural unless n is 1: "1 client",
// "2 clients".
func count[T int | int64](n T, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// countOf is count for a mean (%.4g): "1 transaction", "2.5 transactions".
func countOf(x float64, noun string) string {
	if x == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%.4g %ss", x, noun)
}
