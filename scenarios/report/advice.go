package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// AdviceInput is what advise prints: the scenario, the request, the
// advice and the study behind it.
type AdviceInput struct {
	Scenario string
	Request  advise.Request
	Advice   *advise.Advice
	Study    scenarios.Study
}

// BaseWords describes a workload in a line.
func BaseWords(c system.Config) string {
	w := c.Workload
	load := fmt.Sprintf("%d clients", w.Clients)
	if w.Open() {
		load = fmt.Sprintf("%g sessions/s for %v (%g transactions/s offered)", w.ArrivalRate, w.Duration, w.ArrivalRate*w.MeanTxnsPerSession())
	}
	if w.Persistent() {
		return fmt.Sprintf("%g requests/s for %v served by %d workers with a connection each (%g transactions/s offered), %g transactions per request on average, %d statements per transaction, server max_connections %d",
			w.ArrivalRate, w.Duration, w.Workers, w.OfferedTPS(), w.MeanTxnsPerSession(), w.StmtsPerTxn, c.Server.MaxConnections)
	}
	if w.RequestLevel() {
		return fmt.Sprintf("%s, %d requests per session of %g transactions on average, %d statements per transaction, server max_connections %d", load, w.RequestsPerSession, w.MeanTxnsPerSession()/float64(w.RequestsPerSession), w.StmtsPerTxn, c.Server.MaxConnections)
	}
	return fmt.Sprintf("%s, %d transactions per session, %d statements per transaction, server max_connections %d", load, w.TxnsPerSession, w.StmtsPerTxn, c.Server.MaxConnections)
}

func featureList(fs []compat.Feature) string {
	if len(fs) == 0 {
		return "none"
	}
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, ", ")
}

// ecell is metric name of e as a table cell (mean ± half-width with
// replications).
func ecell(e *advise.Eval, name string, decimals int) string {
	f, ok := system.FieldByName(name)
	if !ok {
		panic("report: no metric " + name)
	}
	r := scenarios.Row{Reps: e.Reps}
	return Cell(&r, f, decimals)
}

// figures is one configuration's numbers in a line.
func figures(e *advise.Eval, a *advise.Advice) string {
	s := fmt.Sprintf("%s tps steady, p50 %s ms, p99 %s ms, ", ecell(e, "tps_steady", 1), ecell(e, "p50_ms", 2), ecell(e, "p99_ms", 2))
	if a.Latency == "req_p99_ms" {
		s += fmt.Sprintf("request p50 %s ms, request p99 %s ms, ", ecell(e, "req_p50_ms", 2), ecell(e, "req_p99_ms", 2))
	}
	s += fmt.Sprintf("wait p99 %s ms, %s refused, %s timed out, %s server connections at peak",
		ecell(e, "wait_p99_ms", 2), ecell(e, "conn_refused", 0), ecell(e, "wait_timeouts", 0), ecell(e, "server_conns_peak", 0))
	if e.Metrics.ServerMemPeakMB > 0 {
		s += fmt.Sprintf(" (%.0f MB of server memory)", e.Metrics.ServerMemPeakMB)
	}
	return s
}

// answerWords is "transaction mode, default_pool_size=12 (with
// max_prepared_statements=200)".
func answerWords(e *advise.Eval, base system.Config) string {
	s := e.Mode.String() + " mode, " + e.Pool(base)
	if e.Mode == poolmode.Direct {
		s = "direct connections (no pooler), " + e.Pool(base)
	}
	if e.Saved {
		s += fmt.Sprintf(", with max_prepared_statements=%d", e.MaxPrepared)
	}
	return s
}

// latencyField is the metric the advice ranks by: p99_ms or req_p99_ms.
func latencyField(a *advise.Advice) string {
	if a.Latency == "" {
		return "p99_ms"
	}
	return a.Latency
}

// latencyWords names it: "of a transaction" or "of a request".
func latencyWords(a *advise.Advice) string {
	if a.Latency == "req_p99_ms" {
		return "of a request"
	}
	return "of a transaction"
}

func constraintWords(req advise.Request) string {
	s := "carries the load, no refusals, no timeouts (query_wait_timeout, app-pool acquire)"
	if req.SLOP99 > 0 {
		s += fmt.Sprintf(", %s p99 <= %v", req.LatencyWords(), req.SLOP99)
	}
	for _, g := range req.Guards {
		s += fmt.Sprintf(", class %s: no refusals, timeouts or unfinished transactions", g.Name)
		if g.SLO > 0 {
			s += fmt.Sprintf(" and p99 <= %v", g.SLO)
		}
	}
	if req.MinTPS > 0 {
		s += fmt.Sprintf(", >= %g tps steady", req.MinTPS)
	}
	return s
}

// adviceAssumptions are what the advice rests on: the scenario's
// assumptions for the modes it evaluated.
func adviceAssumptions(in AdviceInput) []string {
	var rows []scenarios.Row
	for _, v := range in.Advice.Modes {
		if len(v.Evals) > 0 {
			c := in.Request.Base
			c.Pooler.PoolMode = v.Mode
			c.Pooler.MaxPreparedStatements = v.MaxPrepared
			rows = append(rows, scenarios.Row{Config: c})
		}
	}
	return Assumptions(rows)
}

// loadWords says what load the configurations had to carry.
func loadWords(a *advise.Advice) string {
	if a.OfferedOpen {
		return fmt.Sprintf("the offered %.1f transactions/s (within %.0f%% and its CI), draining within %d mean sessions after arrivals stop", a.Offered, advise.LoadSlack*100, advise.DrainFactor)
	}
	if a.Offered > 0 {
		return fmt.Sprintf("within %.0f%% of the best steady throughput of any configuration, %.1f tps", advise.Tolerance*100, a.Offered)
	}
	return "no configuration completes its work without refusals or timeouts"
}

// sureWords says how sure the answer is.
func sureWords(a *advise.Advice, v *advise.Verdict) []string {
	e := a.Answer
	var out []string
	if a.Deterministic {
		out = append(out, "every draw of this workload is constant, so each configuration ran once and its figures are exact")
	} else {
		out = append(out, fmt.Sprintf("%d replications per configuration, the same seeds for every one (paired comparisons); figures are mean ± 95%% CI", a.Replications))
		out = append(out, fmt.Sprintf("the deciding p99 (%s): %s ms", latencyWords(a), ecell(e, latencyField(a), 2)))
	}
	if e.Mode != poolmode.Direct && v != nil {
		switch {
		case v.High == nil:
			out = append(out, fmt.Sprintf("pool size: %d; no pool tried is surely as good (the CIs straddle a constraint or the p99 margin everywhere): run more replications (--replications, --precision)", e.PoolSize))
		case v.Low == nil || (v.Low.PoolSize == e.PoolSize && v.High.PoolSize == e.PoolSize):
			out = append(out, fmt.Sprintf("pool size: %d, no other pool size tried is within the uncertainty", e.PoolSize))
		default:
			out = append(out, fmt.Sprintf("pool size: %d, uncertain between %d and %d (the smallest the CIs cannot exclude, the smallest they surely include)", e.PoolSize, v.Low.PoolSize, v.High.PoolSize))
		}
	}
	for _, t := range a.Tied {
		out = append(out, fmt.Sprintf("%s is statistically tied with it on the best p99 each reaches: %s; %s would need %s server connections at pool %d", t.Mode, a.TieNote, t.Mode, ecell(t, "server_conns_peak", 0), t.PoolSize))
	}
	return out
}

func verdictOf(a *advise.Advice, e *advise.Eval) *advise.Verdict {
	for _, v := range a.Modes {
		if e != nil && v.Option == e.Option {
			return v
		}
	}
	return nil
}

// WriteAdviceText writes the answer first, how sure it is, the reasons,
// each mode's verdict, the classic rules of thumb and every configuration
// evaluated.
func WriteAdviceText(w io.Writer, in AdviceInput) error {
	a, req := in.Advice, in.Request
	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	if a.Answer != nil {
		p("Answer: %s", answerWords(a.Answer, req.Base))
		p("How sure:")
		for _, s := range sureWords(a, verdictOf(a, a.Answer)) {
			p("  - %s.", s)
		}
		p("Assumptions:")
		for _, s := range adviceAssumptions(in) {
			p("  - %s.", s)
		}
	} else {
		p("Answer: no configuration qualifies - none of the modes and pool sizes tried meets the constraints (%s).", constraintWords(req))
		if c := a.Closest; c != nil {
			p("Closest: %s: %s.", answerWords(c, req.Base), strings.Join(c.Fails, "; "))
		}
		for _, s := range a.Binding {
			p("  binding: %s", s)
		}
		for _, s := range a.Help {
			p("What would help: %s.", s)
		}
		p("Assumptions:")
		for _, s := range adviceAssumptions(in) {
			p("  - %s.", s)
		}
	}
	p("")
	p("%s (seed %d): %s", in.Scenario, req.Base.Seed, BaseWords(req.Base))
	p("Features in use: %s; constraints: %s.", featureList(req.Features), constraintWords(req))
	p("The load to carry: %s.", loadWords(a))
	for _, s := range a.Implied {
		p("Implied by the workload: %s.", s)
	}
	p("")
	if e := a.Answer; e != nil {
		p("Why:")
		p("  - %s: %s.", answerWords(e, req.Base), figures(e, a))
		if v := verdictOf(a, e); v != nil && e.Mode != poolmode.Direct {
			p("  - the smallest pool of %s whose p99 (%s) is not significantly worse than its best (%.2f ms) by more than %.0f%%.", e.Mode, latencyWords(a), v.BestP99, advise.P99Slack*100)
		}
		if e.Saved {
			p("  - protocol-level prepared statements need max_prepared_statements above 0 in %s pooling; the scenario has %d.", e.Mode, req.Base.Pooler.MaxPreparedStatements)
		}
		if r := a.RunnerUp; r != nil {
			d := (e.Metrics.TPSSteady/r.Metrics.TPSSteady - 1) * 100
			p("  - against the runner-up at its own pool: %+.1f%% steady throughput, p99 (%s) %s ms vs %s ms.", d, latencyWords(a), ecell(e, latencyField(a), 2), ecell(r, latencyField(a), 2))
		}
		p("")
		if r := a.RunnerUp; r != nil {
			p("Runner-up: %s: %s.", answerWords(r, req.Base), figures(r, a))
		} else {
			p("Runner-up: none - no other mode qualifies.")
		}
		p("")
	}
	p("Modes:")
	for _, v := range a.Modes {
		p("  %-12s %s", v.Mode.String()+":", VerdictWords(v))
	}
	p("")
	c := a.Classic
	at := "the simulated optimum"
	if a.Answer == nil {
		at = "the closest configuration"
	}
	p("Classic starting points, beside %s:", at)
	if c.TPS > 0 {
		p("  - Little's law L = λW: %.1f tps x %.3f ms of server time per transaction = %.1f server connections busy on average;", c.TPS, c.ServiceMs, c.LittleBusy)
		p("    holding a server for the whole transaction (%.3f ms with think and hops) = %.1f connections.", c.HeldMs, c.LittleHeld)
	}
	p("  - HikariCP cores*2 + spindles: %d*2 + %d = %d connections (--server-cores, --spindles).", c.Cores, c.Spindles, c.Hikari)
	if a.Answer != nil {
		if a.Answer.Mode == poolmode.Direct {
			p("  - simulated: direct connections, %s server connections at peak.", ecell(a.Answer, "server_conns_peak", 0))
		} else {
			p("  - simulated: default_pool_size=%d (%s server connections at peak).", a.Answer.PoolSize, ecell(a.Answer, "server_conns_peak", 0))
		}
	}
	for _, n := range a.Notes {
		p("Note: %s.", n)
	}
	p("")
	p("Evaluated:")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  mode\tpool\tmax_prepared\ttps_steady\tp50_ms\tp99_ms\twait_p99_ms\trefused\ttimeouts\tserver_conns\tserver_mem_mb\tverdict")
	for _, v := range a.Modes {
		for _, e := range v.Evals {
			pool := strconv.Itoa(e.PoolSize)
			if e.Mode == poolmode.Direct {
				pool = "-"
			}
			verdict := "ok"
			if !e.Meets() {
				verdict = strings.Join(e.Fails, "; ")
			}
			if e == a.Answer {
				verdict += " <- answer"
			} else if e == a.RunnerUp {
				verdict += " <- runner-up"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\n", e.Mode, pool, e.MaxPrepared,
				ecell(e, "tps_steady", 1), ecell(e, "p50_ms", 2), ecell(e, "p99_ms", 2), ecell(e, "wait_p99_ms", 2),
				ecell(e, "conn_refused", 0), ecell(e, "wait_timeouts", 0), ecell(e, "server_conns_peak", 0), e.Metrics.ServerMemPeakMB, verdict)
		}
	}
	return tw.Flush()
}

// p99Words is "p99" or "request p99".
func p99Words(v *advise.Verdict) string {
	if v.Latency() == "req_p99_ms" {
		return "request p99"
	}
	return "p99"
}

// VerdictWords is one mode's verdict in a line.
func VerdictWords(v *advise.Verdict) string {
	if !v.Allowed {
		return fmt.Sprintf("dropped: breaks %s; no pooler setting saves it (%s)", featureList(v.Broken), v.Workaround)
	}
	var s string
	if v.Saved {
		s = "saved by " + v.SavedBy + "; "
	}
	where := func(e *advise.Eval) string {
		if e.Mode == poolmode.Direct {
			return ""
		}
		return fmt.Sprintf(" at pool %d", e.PoolSize)
	}
	if c := v.Choice; c != nil {
		return s + fmt.Sprintf("qualifies%s: %s tps steady, %s %s ms, wait p99 %s ms, %s server connections", where(c), ecell(c, "tps_steady", 1), p99Words(v), ecell(c, v.Latency(), 2), ecell(c, "wait_p99_ms", 2), ecell(c, "server_conns_peak", 0))
	}
	if e := v.Closest; e != nil {
		return s + fmt.Sprintf("fails everywhere; closest%s: %s (%s tps steady, %s %s ms)", where(e), strings.Join(e.Fails, ", "), ecell(e, "tps_steady", 1), p99Words(v), ecell(e, v.Latency(), 2))
	}
	return s + "not evaluated"
}

// adviceJSON is the --format json document.
type adviceJSON struct {
	Scenario      string         `json:"scenario"`
	Seed          uint64         `json:"seed"`
	Replications  int            `json:"replications"`
	Deterministic bool           `json:"deterministic"`
	Features      []string       `json:"features"`
	Implied       []string       `json:"implied"`
	SLOP99Ms      float64        `json:"slo_p99_ms"`
	Latency       string         `json:"slo_applies_to"`
	MinTPS        float64        `json:"min_tps"`
	PoolSizes     []int          `json:"pool_sizes"`
	Offered       float64        `json:"offered_tps"`
	OfferedOpen   bool           `json:"offered_is_arrivals"`
	Answer        *evalJSON      `json:"answer"`
	PoolLow       int            `json:"answer_pool_low"`
	PoolHigh      int            `json:"answer_pool_high"`
	Sure          []string       `json:"how_sure"`
	Assumptions   []string       `json:"assumptions"`
	RunnerUp      *evalJSON      `json:"runner_up"`
	Tied          []evalJSON     `json:"tied"`
	NoneMeets     bool           `json:"none_meets"`
	Closest       *evalJSON      `json:"closest"`
	Binding       []string       `json:"binding"`
	Help          []string       `json:"help"`
	Modes         []verdictJSON  `json:"modes"`
	Classic       advise.Classic `json:"classic"`
	Notes         []string       `json:"notes"`
	Evaluated     []evalJSON     `json:"evaluated"`
}

type evalJSON struct {
	Mode         string   `json:"mode"`
	PoolSize     int      `json:"pool_size"`
	MaxPrepared  int      `json:"max_prepared_statements"`
	Saved        bool     `json:"max_prepared_raised"`
	Meets        bool     `json:"meets"`
	Sure         bool     `json:"surely_meets"`
	Excluded     bool     `json:"surely_fails"`
	Fails        []string `json:"fails"`
	Replications int      `json:"replications"`
	Metrics      Metrics  `json:"metrics"`
}

type verdictJSON struct {
	Mode        string    `json:"mode"`
	MaxPrepared int       `json:"max_prepared_statements"`
	Allowed     bool      `json:"allowed"`
	Broken      []string  `json:"broken"`
	SavedBy     string    `json:"saved_by,omitempty"`
	Workaround  string    `json:"workaround,omitempty"`
	BestP99Ms   float64   `json:"best_p99_ms"`
	Choice      *evalJSON `json:"choice"`
	Closest     *evalJSON `json:"closest"`
	Verdict     string    `json:"verdict"`
}

func toEvalJSON(e *advise.Eval) *evalJSON {
	if e == nil {
		return nil
	}
	row := &scenarios.Row{Reps: e.Reps}
	return &evalJSON{Mode: e.Mode.String(), PoolSize: e.PoolSize, MaxPrepared: e.MaxPrepared, Saved: e.Saved, Meets: e.Meets(),
		Sure: e.Sure, Excluded: e.Excluded, Fails: append([]string{}, e.Fails...), Replications: len(e.Reps), Metrics: Metrics{row}}
}

// WriteAdviceJSON writes the advice as JSON: the answer, how sure, every
// mode's verdict and every configuration with its metrics (means and
// _ci95 half-widths with replications).
func WriteAdviceJSON(w io.Writer, in AdviceInput) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(adviceDoc(in))
}

// adviceDoc is the JSON document of one advice.
func adviceDoc(in AdviceInput) adviceJSON {
	a, req := in.Advice, in.Request
	out := adviceJSON{
		Scenario: in.Scenario, Seed: req.Base.Seed, Replications: a.Replications, Deterministic: a.Deterministic,
		Features: []string{}, Implied: append([]string{}, a.Implied...),
		SLOP99Ms: float64(req.SLOP99) / 1e6, Latency: latencyField(a), MinTPS: req.MinTPS, PoolSizes: req.PoolSizes, Offered: a.Offered, OfferedOpen: a.OfferedOpen,
		Answer: toEvalJSON(a.Answer), RunnerUp: toEvalJSON(a.RunnerUp), Tied: []evalJSON{}, NoneMeets: a.Answer == nil,
		Closest: toEvalJSON(a.Closest), Binding: append([]string{}, a.Binding...), Help: append([]string{}, a.Help...),
		Classic: a.Classic, Notes: append([]string{}, a.Notes...), Sure: []string{}, Evaluated: []evalJSON{},
		Assumptions: append([]string{}, adviceAssumptions(in)...),
	}
	if e := a.Answer; e != nil {
		v := verdictOf(a, e)
		out.Sure = sureWords(a, v)
		out.PoolLow, out.PoolHigh = e.PoolSize, e.PoolSize
		if v != nil && v.Low != nil {
			out.PoolLow = v.Low.PoolSize
		}
		if v != nil {
			out.PoolHigh = 0 // none tried is surely as good
			if v.High != nil {
				out.PoolHigh = v.High.PoolSize
			}
		}
	}
	for _, t := range a.Tied {
		out.Tied = append(out.Tied, *toEvalJSON(t))
	}
	for _, f := range a.Features {
		out.Features = append(out.Features, f.String())
	}
	for _, v := range a.Modes {
		vj := verdictJSON{Mode: v.Mode.String(), MaxPrepared: v.MaxPrepared, Allowed: v.Allowed, Broken: []string{}, SavedBy: v.SavedBy,
			Workaround: v.Workaround, BestP99Ms: v.BestP99, Choice: toEvalJSON(v.Choice), Closest: toEvalJSON(v.Closest), Verdict: VerdictWords(v)}
		for _, f := range v.Broken {
			vj.Broken = append(vj.Broken, f.String())
		}
		out.Modes = append(out.Modes, vj)
		for _, e := range v.Evals {
			out.Evaluated = append(out.Evaluated, *toEvalJSON(e))
		}
	}
	return out
}
