package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// AdviceInput is what advise prints: the scenario, the advice and the
// study behind it.
type AdviceInput struct {
	Scenario string
	Seed     uint64
	Advice   *advise.Advice
	Study    scenarios.Study
}

// BaseWords describes a scenario's base workload in a line.
func BaseWords(c system.Config) string {
	var parts []string
	for _, cl := range c.ClassList() {
		s := classLoad(cl.Workload)
		if cl.Name != "" {
			s = cl.Name + ": " + s
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s; server max_connections %d", strings.Join(parts, "; "), c.Server.MaxConnections)
}

// classLoad is a class's load in words.
func classLoad(w system.Workload) string {
	load := fmt.Sprintf("%d clients", w.Clients)
	if w.Open() {
		load = fmt.Sprintf("%g sessions/s for %v (%.4g transactions/s offered)", w.ArrivalRate, w.Duration, w.ArrivalRate*w.MeanTxnsPerSession())
	}
	if w.Persistent() {
		return fmt.Sprintf("%g requests/s for %v served by %d workers with a connection each (%.4g transactions/s offered), %.3g transactions per request on average, %d statements per transaction",
			w.ArrivalRate, w.Duration, w.Workers, w.OfferedTPS(), w.MeanTxnsPerSession(), w.StmtsPerTxn)
	}
	if w.RequestLevel() {
		return fmt.Sprintf("%s, %d requests per session of %.3g transactions on average, %d statements per transaction", load, w.RequestsPerSession, w.MeanTxnsPerSession()/float64(w.RequestsPerSession), w.StmtsPerTxn)
	}
	return fmt.Sprintf("%s, %d transactions per session, %d statements per transaction", load, w.TxnsPerSession, w.StmtsPerTxn)
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

// rcell is metric name of replications x as a table cell (mean ±
// half-width with replications).
func rcell(x system.Replicated, name string, decimals int) string {
	f, ok := system.FieldByName(name)
	if !ok {
		panic("report: no metric " + name)
	}
	r := scenarios.Row{Reps: x}
	return Cell(&r, f, decimals)
}

// choiceWords is "transaction mode, default_pool_size=12" (one pool) or
// "transaction, 12", with max_prepared_statements when it was raised.
func choiceWords(e *advise.Eval, single bool) string {
	var s string
	switch {
	case e.Mode == poolmode.Direct && single:
		s = fmt.Sprintf("direct connections (no pooler), %d server connections", e.Spend)
	case e.Mode == poolmode.Direct:
		s = fmt.Sprintf("direct, %d connections", e.Spend)
	case single:
		s = fmt.Sprintf("%s mode, default_pool_size=%d", e.Mode, e.Size)
	default:
		s = fmt.Sprintf("%s, %d", e.Mode, e.Size)
	}
	if e.Saved {
		s += fmt.Sprintf(", with max_prepared_statements=%d", e.MaxPrepared)
	}
	return s
}

// AnswerLine is the answer in one line.
func AnswerLine(a *advise.Advice) string {
	single := len(a.Pools) == 1
	var parts []string
	for _, p := range a.Pools {
		w := ""
		if !single {
			w = p.Name + ": "
		}
		if p.Choice == nil {
			w += "no mode keeps its features"
		} else {
			w += choiceWords(p.Choice, single)
		}
		if p.Listeners > 0 {
			w += fmt.Sprintf(" + %d direct LISTEN connections", p.Listeners)
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, "; ")
}

// barWords are a class's bars in words.
func barWords(c *advise.Class) string {
	var s []string
	if c.Open {
		s = append(s, fmt.Sprintf("carries its %.4g tps offered", c.Offered))
	} else {
		s = append(s, fmt.Sprintf("within %.0f%% of its throughput with servers to spare", 100*advise.Tolerance))
	}
	lat := "transaction"
	if c.Latency == "req_p99_ms" {
		lat = "request"
	}
	if c.Need.SLOP99 > 0 {
		s = append(s, fmt.Sprintf("%s p99 <= %v", lat, c.Need.SLOP99))
	}
	if c.Need.MaxWait > 0 {
		s = append(s, fmt.Sprintf("wait p99 <= %v", c.Need.MaxWait))
	}
	if c.Need.SLOP99 == 0 && c.Need.MaxWait == 0 {
		s = append(s, fmt.Sprintf("%s p99 within %.0f%% of servers to spare", lat, 100*advise.P99Slack))
	}
	if c.Need.MinTPS > 0 {
		s = append(s, fmt.Sprintf(">= %g tps", c.Need.MinTPS))
	}
	s = append(s, "nothing refused, timed out or unfinished")
	return strings.Join(s, ", ")
}

// classFigures is one class's figures in a line.
func classFigures(c *advise.Class) string {
	x := c.Reps
	s := fmt.Sprintf("%s tps steady, p50 %s ms, p99 %s ms", rcell(x, "tps_steady", 1), rcell(x, "p50_ms", 2), rcell(x, "p99_ms", 2))
	if c.Latency == "req_p99_ms" {
		s += fmt.Sprintf(", request p50 %s ms, request p99 %s ms", rcell(x, "req_p50_ms", 2), rcell(x, "req_p99_ms", 2))
	}
	return s + fmt.Sprintf(", wait p99 %s ms, %s refused, %s timed out, %s client connections at peak",
		rcell(x, "wait_p99_ms", 2), rcell(x, "conn_refused", 0), rcell(x, "wait_timeouts", 0), rcell(x, "client_conns_peak", 0))
}

// className is "web" or, for a scenario without classes, "the workload".
func className(c *advise.Class) string {
	if c.Name == "" {
		return "the workload"
	}
	return c.Name
}

// budgetWords is the budget and what the answer spends of it.
func budgetWords(a *advise.Advice) string {
	b := a.Budget
	return fmt.Sprintf("max_connections %d - superuser_reserved_connections %d - headroom %d (%s, --headroom) = %d server connections; the answer spends %d",
		b.MaxConnections, b.SuperuserReserved, b.Headroom, b.HeadroomWords, b.Total, a.Spend)
}

// objectiveWords says what the answer makes best.
func objectiveWords(o advise.Objective) string {
	if o == advise.BestLatency {
		return "the best latency inside the budget (the class closest to its latency bar as far from it as can be), then the fewest server connections"
	}
	return "the fewest server connections, summed over the pools, that meet every class's bars inside the budget (--objective latency: the best latency inside it)"
}

// sureWords says how sure the answer is.
func sureWords(a *advise.Advice) []string {
	var out []string
	if a.Deterministic {
		out = append(out, "every draw of this workload is constant, so each configuration ran once and its figures are exact")
	} else {
		out = append(out, fmt.Sprintf("%d replications per configuration, the same seeds for every one (paired comparisons); figures are means and pooled percentiles ± 95%% CI", a.Replications))
	}
	for _, p := range a.Pools {
		e := p.Choice
		if e == nil || e.Mode == poolmode.Direct {
			continue
		}
		v := verdictOf(p, e)
		name := "pool size"
		if len(a.Pools) > 1 {
			name = p.Name + ": pool size"
		}
		switch {
		case v == nil:
		case v.High == 0:
			out = append(out, fmt.Sprintf("%s %d; no size tried surely meets every bar (the intervals straddle one everywhere): run more replications (--replications, --precision)", name, e.Size))
		case v.Low == e.Size && v.High == e.Size:
			out = append(out, fmt.Sprintf("%s %d, the exact smallest: %d does not meet every bar", name, e.Size, e.Size-1))
		default:
			out = append(out, fmt.Sprintf("%s %d, the smallest meeting every bar on the means; the intervals cannot tell %d to %d apart from it", name, e.Size, min(v.Low, e.Size), max(v.High, e.Size)))
		}
	}
	for _, n := range a.VerifyNotes {
		out = append(out, "the whole run: "+strings.TrimSuffix(n, "."))
	}
	switch {
	case a.Verified == nil:
	case len(a.VerifyFails) == 0:
		out = append(out, fmt.Sprintf("checked as a whole run, with the scenario's max_connections (round %d): every class meets its bars", a.Rounds))
	default:
		out = append(out, fmt.Sprintf("checked as a whole run after %d rounds: %s", a.Rounds, strings.Join(a.VerifyFails, "; ")))
	}
	return out
}

func verdictOf(p *advise.Pool, e *advise.Eval) *advise.Verdict {
	for _, v := range p.Verdicts {
		for _, x := range v.Evals {
			if x == e {
				return v
			}
		}
	}
	return nil
}

// verdictWords is one mode of one pool in a line.
func verdictWords(a *advise.Advice, p *advise.Pool, v *advise.Verdict) string {
	if !v.Allowed && !v.Hypothetical {
		if len(v.Broken) == 0 {
			return "not considered (--modes)"
		}
		return fmt.Sprintf("dropped: breaks %s (%s)", featureList(v.Broken), v.Workaround())
	}
	var s string
	if v.Hypothetical {
		s = fmt.Sprintf("dropped: breaks %s; after the change that frees it: ", featureList(v.Broken))
	} else if v.Saved {
		s = "saved by " + v.SavedBy + "; "
	}
	chosen := ""
	if p.Choice != nil && v.Min == p.Choice {
		chosen = "  <- the answer"
	}
	if e := v.Min; e != nil {
		if over := e.Spend + p.Listeners - a.Budget.Total; over > 0 && e.Mode == poolmode.Direct {
			return s + fmt.Sprintf("qualifies with %d server connections (one per client connection), %d over the budget", e.Spend, over)
		}
		if e.Mode == poolmode.Direct {
			return s + fmt.Sprintf("qualifies with %s (one per client connection)%s", conns(e.Spend), chosen)
		}
		r := ""
		if v.Low > 0 && v.High > 0 && (v.Low < e.Size || v.High > e.Size) {
			r = fmt.Sprintf(" (the intervals cannot tell %d to %d apart)", min(v.Low, e.Size), max(v.High, e.Size))
		}
		return s + fmt.Sprintf("qualifies from pool %d%s, %s%s", e.Size, r, conns(e.Spend), chosen)
	}
	if e := v.Closest; e != nil {
		return s + fmt.Sprintf("no size qualifies; closest at %s: %s", e.Where(), strings.Join(e.Fails(), "; "))
	}
	return s + "not evaluated (interrupted)"
}

// WriteAdviceText writes the answer first, the budget and what binds, how
// sure, every class at the answer, the change that frees a pool, each
// pool's modes, the classic rules of thumb and the assumptions.
func WriteAdviceText(w io.Writer, in AdviceInput) error {
	a := in.Advice
	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	if a.Incomplete {
		p("INCOMPLETE: interrupted after %d configurations; nothing below is an answer. What finished:", len(a.Evaluated))
		writeEvaluated(b, a)
		_, err := io.WriteString(w, b.String())
		return err
	}
	switch {
	case a.Answer:
		p("Answer: %s.", AnswerLine(a))
	default:
		p("Answer: no configuration qualifies.")
		p("Closest: %s.", AnswerLine(a))
	}
	p("Budget: %s.", budgetWords(a))
	p("Objective: %s.", objectiveWords(a.Objective))
	if len(a.Binding) > 0 {
		p("What binds:")
		for _, s := range a.Binding {
			p("  - %s.", s)
		}
	}
	p("How sure:")
	for _, s := range sureWords(a) {
		p("  - %s.", s)
	}
	p("Every class at this configuration (simulated as a whole):")
	for _, c := range a.Classes {
		where := ""
		if len(a.Pools) > 1 {
			where = " (pool " + c.Pool + ")"
		}
		p("  - %s%s: %s.", className(c), where, classFigures(c))
		p("    bars: %s.", barWords(c))
		if c.Check != nil && len(c.Check.Fails) > 0 {
			p("    MISSES: %s.", strings.Join(c.Check.Fails, "; "))
		}
	}
	if len(a.Frees) > 0 {
		p("The change that frees a pool:")
		for _, f := range a.Frees {
			p("  - %s.", freeingWords(a, f))
		}
	}
	for _, h := range a.Help {
		p("What would help: %s.", h)
	}
	p("Pools:")
	for _, pl := range a.Pools {
		p("  %s (database %s, user %s; classes %s; features: %s):", pl.Name, pl.Database, pl.User, classesWords(pl), featureList(pl.Features))
		for _, im := range pl.Implied {
			p("    implied by the workload: %s", im)
		}
		for _, v := range pl.Verdicts {
			p("    %-12s %s", v.Mode.String()+":", verdictWords(a, pl, v))
		}
	}
	p("Classic starting points, beside the simulated answer:")
	for _, c := range a.Classes {
		k := c.Classic
		if k.TPS == 0 {
			continue
		}
		capped := ""
		if k.Capped {
			capped = fmt.Sprintf(" (capped at its %d client connections)", k.Conns)
		}
		p("  - %s: Little's law L = λW at %.1f tps: %.3f ms of server time per transaction = %.1f connections busy; holding a server for the whole transaction (%.3f ms with the application's time and hops between statements) = %.1f held%s.",
			className(c), k.TPS, k.ServiceMs, k.LittleBusy, k.HeldMs, k.LittleHeld, capped)
	}
	h := a.Hikari
	src := "server.cores"
	switch {
	case h.FromFlag:
		src = "--server-cores"
	case h.Assumed:
		src = "server.cores is not set: 2 assumed; give --server-cores"
	}
	p("  - HikariCP cores*2 + spindles, for the whole server: %d*2 + %d = %d connections (%s, --spindles).", h.Cores, h.Spindles, h.Conns, src)
	p("  - simulated: %d server connections.", a.Spend)
	p("Assumptions:")
	for _, s := range Assumptions([]scenarios.Row{{Config: a.Final}}) {
		p("  - %s.", s)
	}
	for _, n := range a.Notes {
		p("Note: %s.", n)
	}
	p("Evaluated: %d configurations (--format json lists each with its figures).", len(a.Evaluated))
	_, err := io.WriteString(w, b.String())
	return err
}

func classesWords(p *advise.Pool) string {
	if len(p.Classes) == 1 && p.Classes[0] == "" {
		return "the workload"
	}
	return strings.Join(p.Classes, ", ")
}

// freeingWords is one change that frees a pool, in words.
func freeingWords(a *advise.Advice, f advise.Freeing) string {
	var what, names []string
	for _, c := range f.Changes {
		what = append(what, c.What)
		names = append(names, c.Feature.String())
	}
	s := fmt.Sprintf("%s: %s keeps it off transaction pooling", f.Pool, strings.Join(names, " and "))
	if f.From > 0 {
		s += fmt.Sprintf(" (%s)", conns(f.From))
	}
	s += fmt.Sprintf("; %s: transaction pooling at pool %d, %s", strings.Join(what, "; and "), f.Eval.Size, conns(f.To))
	switch {
	case f.Listen && f.From > f.To+1:
		s += fmt.Sprintf(", plus one direct connection per application process that LISTENs: fewer in all when fewer than %d processes LISTEN", f.From-f.To)
	case f.Listen:
		s += ", plus one direct connection per application process that LISTENs"
	case f.From > 0:
		s += fmt.Sprintf(", %d fewer", f.From-f.To)
	}
	return s + fmt.Sprintf(". The answer for the changed application: %s", f.Assume)
}

// conns is "1 server connection" or "12 server connections".
func conns(n int) string {
	if n == 1 {
		return "1 server connection"
	}
	return fmt.Sprintf("%d server connections", n)
}

// writeEvaluated lists evaluated configurations in lines.
func writeEvaluated(b *strings.Builder, a *advise.Advice) {
	for _, e := range a.Evaluated {
		pool := ""
		if len(a.Pools) > 1 && e.Pool >= 0 {
			pool = a.Pools[e.Pool].Name + ": "
		}
		state := "qualifies"
		if !e.Meets {
			state = strings.Join(e.Fails(), "; ")
		}
		if e.Checks == nil {
			state = "not judged yet"
		}
		fmt.Fprintf(b, "  - %s%s: %s tps steady, p99 %s ms, wait p99 %s ms: %s\n", pool, e.Where(), rcell(e.Total, "tps_steady", 1), rcell(e.Total, "p99_ms", 2), rcell(e.Total, "wait_p99_ms", 2), state)
	}
}

// The --format json document.
type adviceJSON struct {
	Scenario      string        `json:"scenario"`
	Seed          uint64        `json:"seed"`
	Incomplete    bool          `json:"incomplete"`
	Answer        bool          `json:"answer"`
	Split         string        `json:"split"`
	Objective     string        `json:"objective"`
	Budget        advise.Budget `json:"budget"`
	Spend         int           `json:"spend"`
	Binding       []string      `json:"binding"`
	Replications  int           `json:"replications"`
	Deterministic bool          `json:"deterministic"`
	Sure          []string      `json:"how_sure"`
	Rounds        int           `json:"rounds"`
	VerifyFails   []string      `json:"whole_run_misses"`
	MaxClientConn int           `json:"max_client_conn"`
	MaxPrepared   int           `json:"max_prepared_statements"`
	Pools         []poolJSON    `json:"pools"`
	Classes       []classJSON   `json:"classes"`
	Frees         []freeJSON    `json:"frees"`
	Help          []string      `json:"help"`
	Hikari        advise.Hikari `json:"hikari"`
	Assumptions   []string      `json:"assumptions"`
	Notes         []string      `json:"notes"`
	Evaluated     []evalJSON    `json:"evaluated"`
	Verified      *evalJSON     `json:"whole_run"`
}

type poolJSON struct {
	Name      string        `json:"name"`
	Database  string        `json:"database"`
	User      string        `json:"user"`
	Classes   []string      `json:"classes"`
	Features  []string      `json:"features"`
	Implied   []string      `json:"implied"`
	Mode      string        `json:"mode"`
	Size      int           `json:"pool_size"`
	Spend     int           `json:"server_conns"`
	Listeners int           `json:"listen_conns"`
	Low       int           `json:"pool_low"`
	High      int           `json:"pool_high"`
	Verdicts  []verdictJSON `json:"modes"`
}

type verdictJSON struct {
	Mode         string    `json:"mode"`
	MaxPrepared  int       `json:"max_prepared_statements"`
	Allowed      bool      `json:"allowed"`
	Hypothetical bool      `json:"after_change"`
	Broken       []string  `json:"broken"`
	SavedBy      string    `json:"saved_by,omitempty"`
	Workaround   string    `json:"workaround,omitempty"`
	Min          *evalJSON `json:"smallest"`
	Low          int       `json:"pool_low"`
	High         int       `json:"pool_high"`
	Binds        string    `json:"binds,omitempty"`
	Verdict      string    `json:"verdict"`
}

type classJSON struct {
	Name     string         `json:"name"`
	Pool     string         `json:"pool"`
	Latency  string         `json:"slo_applies_to"`
	SLOP99Ms float64        `json:"slo_p99_ms"`
	MaxWait  float64        `json:"max_wait_ms"`
	MinTPS   float64        `json:"min_tps"`
	Offered  float64        `json:"offered_tps"`
	Bars     string         `json:"bars"`
	Meets    bool           `json:"meets"`
	Fails    []string       `json:"fails"`
	Metrics  Metrics        `json:"metrics"`
	Classic  advise.Classic `json:"classic"`
}

type freeJSON struct {
	Pool    string   `json:"pool"`
	Changes []string `json:"changes"`
	From    int      `json:"server_conns_now"`
	To      int      `json:"server_conns_after"`
	Size    int      `json:"pool_size_after"`
	Assume  string   `json:"assume"`
	Words   string   `json:"words"`
}

type evalJSON struct {
	Pool         string   `json:"pool"`
	Mode         string   `json:"mode"`
	PoolSize     int      `json:"pool_size"`
	MaxPrepared  int      `json:"max_prepared_statements"`
	Saved        bool     `json:"max_prepared_raised"`
	AfterChange  []string `json:"after_change,omitempty"`
	Round        int      `json:"round"`
	Spend        int      `json:"server_conns"`
	Meets        bool     `json:"meets"`
	Sure         bool     `json:"surely_meets"`
	Excluded     bool     `json:"surely_fails"`
	Fails        []string `json:"fails"`
	Replications int      `json:"replications"`
	Metrics      Metrics  `json:"metrics"`
}

func toEvalJSON(a *advise.Advice, e *advise.Eval) *evalJSON {
	if e == nil {
		return nil
	}
	pool := ""
	if e.Pool >= 0 && e.Pool < len(a.Pools) {
		pool = a.Pools[e.Pool].Name
	}
	out := &evalJSON{Pool: pool, Mode: e.Mode.String(), PoolSize: e.Size, MaxPrepared: e.MaxPrepared, Saved: e.Saved, Round: e.Round, Spend: e.Spend,
		Meets: e.Meets, Sure: e.Sure, Excluded: e.Excluded, Fails: append([]string{}, e.Fails()...), Replications: len(e.Total), Metrics: Metrics{&scenarios.Row{Reps: e.Total}}}
	if e.Pool < 0 {
		out.Mode = "whole run"
	}
	for _, c := range e.Assumed {
		out.AfterChange = append(out.AfterChange, c.Name)
	}
	return out
}

// WriteAdviceJSON writes the advice as JSON: the answer, the budget, how
// sure, every pool's modes, every class at the answer, and every
// configuration evaluated with its metrics (means and _ci95 half-widths
// with replications).
func WriteAdviceJSON(w io.Writer, in AdviceInput) error {
	a := in.Advice
	out := adviceJSON{Scenario: in.Scenario, Seed: in.Seed, Incomplete: a.Incomplete, Answer: a.Answer, Split: AnswerLine(a), Objective: a.Objective.String(),
		Budget: a.Budget, Spend: a.Spend, Binding: nonNil(a.Binding), Replications: a.Replications, Deterministic: a.Deterministic,
		Sure: nonNil(sureWords(a)), Rounds: a.Rounds, VerifyFails: nonNil(a.VerifyFails), MaxClientConn: a.MaxClientConn, MaxPrepared: a.MaxPrepared,
		Pools: []poolJSON{}, Classes: []classJSON{}, Frees: []freeJSON{}, Help: nonNil(a.Help), Hikari: a.Hikari,
		Notes: nonNil(a.Notes), Evaluated: []evalJSON{}, Verified: toEvalJSON(a, a.Verified)}
	out.Assumptions = []string{}
	if !a.Incomplete {
		out.Assumptions = nonNil(Assumptions([]scenarios.Row{{Config: a.Final}}))
	}
	for _, p := range a.Pools {
		pj := poolJSON{Name: p.Name, Database: p.Database, User: p.User, Classes: nonNil(p.Classes), Implied: nonNil(p.Implied), Features: []string{}, Listeners: p.Listeners, Spend: p.Spend()}
		for _, f := range p.Features {
			pj.Features = append(pj.Features, f.String())
		}
		if e := p.Choice; e != nil {
			pj.Mode, pj.Size = e.Mode.String(), e.Size
			if v := verdictOf(p, e); v != nil {
				pj.Low, pj.High = v.Low, v.High
			}
		}
		for _, v := range p.Verdicts {
			vj := verdictJSON{Mode: v.Mode.String(), MaxPrepared: v.MaxPrepared, Allowed: v.Allowed, Hypothetical: v.Hypothetical, Broken: []string{}, SavedBy: v.SavedBy,
				Workaround: v.Workaround(), Min: toEvalJSON(a, v.Min), Low: v.Low, High: v.High, Binds: v.Binds, Verdict: verdictWords(a, p, v)}
			for _, f := range v.Broken {
				vj.Broken = append(vj.Broken, f.String())
			}
			pj.Verdicts = append(pj.Verdicts, vj)
		}
		out.Pools = append(out.Pools, pj)
	}
	for _, c := range a.Classes {
		cj := classJSON{Name: c.Name, Pool: c.Pool, Latency: c.Latency, SLOP99Ms: float64(c.Need.SLOP99) / 1e6, MaxWait: float64(c.Need.MaxWait) / 1e6,
			MinTPS: c.Need.MinTPS, Offered: c.Offered, Bars: barWords(c), Fails: []string{}, Metrics: Metrics{&scenarios.Row{Reps: c.Reps}}, Classic: c.Classic}
		if c.Check != nil {
			cj.Meets, cj.Fails = c.Check.Meets, nonNil(c.Check.Fails)
		}
		out.Classes = append(out.Classes, cj)
	}
	for _, f := range a.Frees {
		fj := freeJSON{Pool: f.Pool, From: f.From, To: f.To, Size: f.Eval.Size, Assume: f.Assume, Words: freeingWords(a, f)}
		for _, c := range f.Changes {
			fj.Changes = append(fj.Changes, c.Name)
		}
		out.Frees = append(out.Frees, fj)
	}
	for _, e := range a.Evaluated {
		out.Evaluated = append(out.Evaluated, *toEvalJSON(a, e))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func nonNil(s []string) []string { return append([]string{}, s...) }
