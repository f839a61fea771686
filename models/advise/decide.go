package advise

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Eval is one simulated configuration and its replications.
type Eval struct {
	Option
	PoolSize int // default_pool_size; 0 in direct mode
	Reps     system.Replicated
	Metrics  system.Metrics // the means over Reps
	// With classes (Pools): Reps are the deciding class's, Classes every
	// class's (in Config.ClassList order) and Total the whole run's.
	Classes  []system.Replicated
	Total    system.Replicated
	Fails    []string // the constraints it misses on the means; empty when it qualifies
	Unsure   []string // the constraints its intervals straddle
	Excluded bool     // it misses a constraint beyond its interval
	Sure     bool     // it meets every constraint beyond its interval
	// WorseBy is the paired difference of its p99 and (1 + P99Slack) times
	// its mode's best qualifying p99, in ms, with its 95 % half-width
	// (qualifying points only).
	WorseBy, WorseByHalf float64
}

// Meets reports whether the point qualifies (on the means).
func (e *Eval) Meets() bool { return len(e.Fails) == 0 }

// Pool is the pool as words: "default_pool_size=12" or "no pool
// (max_connections 20)".
func (e *Eval) Pool(base system.Config) string {
	if e.Mode == poolmode.Direct {
		return fmt.Sprintf("no pool (max_connections %d)", base.Server.MaxConnections)
	}
	return fmt.Sprintf("default_pool_size=%d", e.PoolSize)
}

// Verdict is one mode's outcome.
type Verdict struct {
	Option
	Allowed bool
	// Broken lists the features in use that the mode breaks with the
	// scenario's settings; SavedBy says which setting saves them (then
	// Allowed is true and Option.Saved is set), Workaround what the
	// application could change instead.
	Broken     []compat.Feature
	SavedBy    string
	Workaround string
	Evals      []*Eval // ascending pool sizes
	Choice     *Eval   // the mode's answer (rule 4), nil if none qualifies
	// Low and High bound the pool sizes the intervals cannot tell apart
	// from the choice (rule 4): Low the smallest not surely excluded, High
	// the smallest surely fine (nil: none of those tried).
	Low, High *Eval
	BestP99   float64 // the best qualifying p99 (ms) of the deciding latency
	lat       system.Field
	Closest   *Eval // when none qualifies: fewest misses, then most throughput, then lowest p99
}

// Classic are the rules of thumb beside the simulated optimum. Little's
// law at the answer (or the closest point): L = X * S with S the server
// time per transaction (statements x mean query and CPU time), and with S
// the time a transaction holds its server in transaction mode (statements,
// and the think and hops between them). HikariCP: cores*2 + spindles.
type Classic struct {
	TPS          float64 `json:"tps"`
	ServiceMs    float64 `json:"server_ms_per_txn"`
	LittleBusy   float64 `json:"little_busy_conns"`
	HeldMs       float64 `json:"held_ms_per_txn"`
	LittleHeld   float64 `json:"little_held_conns"`
	Cores        int     `json:"cores"`
	Spindles     int     `json:"spindles"`
	Hikari       int     `json:"hikari_conns"`
	SimulatedOpt int     `json:"simulated_pool_size"` // the answer's pool size (0: direct or none)
}

// Advice is the outcome.
type Advice struct {
	Features []compat.Feature
	Implied  []string // features added from the workload itself, with why
	Modes    []*Verdict
	Answer   *Eval
	RunnerUp *Eval
	// Tied lists the modes whose p99 the intervals cannot tell from the
	// answer's; TieNote says how the tie was broken.
	Tied    []*Eval
	TieNote string
	// How sure: replications per configuration (the least of them), and
	// whether every configuration was deterministic (one run is exact).
	Replications  int
	Deterministic bool
	// Offered is the load to carry: an open workload's arrival rate times
	// transactions per session, or a closed one's best steady throughput.
	Offered     float64
	OfferedOpen bool
	// Binding explains, when no point qualifies, which constraint binds;
	// Closest is the configuration that comes nearest; Help says what
	// would make one qualify.
	Binding []string
	Closest *Eval
	Help    []string
	Classic Classic
	Notes   []string
	// Latency is the metric the SLO and the ranking read: p99_ms
	// (transactions) or req_p99_ms (requests).
	Latency string
}

// ErrRunner is returned when the runner's results do not match the plan.
var ErrRunner = errors.New("advise: the runner returned a result per configuration that does not match the plan")

// Run plans, simulates with run (which must return every configuration's
// replications, in order, the same number for each) and decides.
func Run(r Request, run func([]system.Config) ([]system.Replicated, error)) (*Advice, error) {
	evals, cfgs, notes, err := Plan(r)
	if err != nil {
		return nil, err
	}
	res, err := run(cfgs)
	if err != nil {
		return nil, err
	}
	if len(res) != len(cfgs) {
		return nil, fmt.Errorf("%w: %d results for %d systems", ErrRunner, len(res), len(cfgs))
	}
	for i, e := range evals {
		if len(res[i]) == 0 {
			return nil, fmt.Errorf("%w: configuration %d has no replication", ErrRunner, i)
		}
		e.Reps = res[i]
		e.Metrics = res[i].Mean()
	}
	a := Decide(r, evals)
	a.Notes = append(notes, a.Notes...)
	return a, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// field reads a metric by its JSON name.
func field(name string) system.Field {
	f, ok := system.FieldByName(name)
	if !ok {
		panic("advise: no metric " + name)
	}
	return f
}

var (
	fTPSSteady = field("tps_steady")
	fP99       = field("p99_ms")
	fReqP99    = field("req_p99_ms")
	fDrain     = field("drain_ms")
	fSession   = field("session_mean_ms")
	fRefused   = field("conn_refused")
)

// stat is a metric's mean and 95 % half-width over e's replications.
func stat(e *Eval, f system.Field) (mean, half float64) { return e.Reps.Stat(f) }

// paired is the mean and 95 % half-width of a[i] − k·b[i] over the
// replications both have (the same seeds: common random numbers).
func paired(a, b *Eval, f system.Field, k float64) (mean, half float64) {
	n := min(len(a.Reps), len(b.Reps))
	xa, xb := a.Reps[:n].Values(f), b.Reps[:n].Values(f)
	for i := range xb {
		xb[i] *= k
	}
	mean, half, _ = sim.PairedCI(xa, xb)
	return mean, half
}

// check is one condition of rule 3. test says how e misses it on the
// means ("" when it meets it), and whether the intervals make the miss,
// or the meeting, sure.
type check struct {
	test  func(e *Eval) (miss string, sureMiss, sureMet bool)
	worst func(e *Eval) float64 // how badly it misses (lower is better), for the binding constraint
	binds func(best *Eval) string
}

func where(e *Eval) string {
	if e.Mode == poolmode.Direct {
		return e.Name()
	}
	return fmt.Sprintf("%s, pool %d", e.Name(), e.PoolSize)
}

// count is a check that a count is zero in every replication.
func count(name, what, binds string) check {
	f := field(name)
	return check{
		test: func(e *Eval) (string, bool, bool) {
			xs := e.Reps.Values(f)
			lo, hi := xs[0], xs[0]
			for _, x := range xs {
				lo, hi = min(lo, x), max(hi, x)
			}
			if mean, _ := stat(e, f); mean > 0 {
				return fmt.Sprintf("%s %s", num(mean, len(xs)), what), lo > 0, false
			}
			return "", false, hi == 0
		},
		worst: func(e *Eval) float64 { m, _ := stat(e, f); return m },
		binds: func(b *Eval) string {
			m, _ := stat(b, f)
			return fmt.Sprintf("%s, at best %s (%s)", binds, num(m, len(b.Reps)), where(b))
		},
	}
}

// num is a count: whole for one run, a mean with a decimal otherwise.
func num(x float64, reps int) string {
	if reps <= 1 || x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// checks are rule 3's conditions for this request; best is the closed
// workload's best steady throughput configuration (nil for an open one).
func (r Request) checks(best *Eval) []check {
	cs := []check{
		{
			test: func(e *Eval) (string, bool, bool) {
				c := count("conn_refused", "connections refused", "")
				miss, sm, ok := c.test(e)
				if miss != "" {
					limit := "max_client_conn"
					if e.Mode == poolmode.Direct {
						limit = "max_connections"
					}
					miss += " (" + limit + ")"
				}
				return miss, sm, ok
			},
			worst: func(e *Eval) float64 { m, _ := stat(e, fRefused); return m },
			binds: func(b *Eval) string {
				m, _ := stat(b, fRefused)
				return fmt.Sprintf("refusals: every option refuses connections, at best %s (%s)", num(m, len(b.Reps)), where(b))
			},
		},
		count("wait_timeouts", "clients timed out waiting (query_wait_timeout)", "query_wait_timeout: every option times clients out"),
		count("app_timeouts", "application-pool acquire timeouts", "the application pool's acquire timeout: every option has timeouts there (the pooler cannot fix it; see app_pool)"),
		count("unfinished_txns", "transactions unfinished", "unfinished transactions in every option"),
		{
			test: func(e *Eval) (string, bool, bool) {
				if e.Metrics.OKTxns == 0 {
					return "no transaction completed", true, false
				}
				return "", false, true
			},
			worst: func(e *Eval) float64 { return -float64(e.Metrics.OKTxns) },
			binds: func(*Eval) string { return "no option completes a transaction" },
		},
	}
	w := r.Base.Workload
	if w.Open() {
		offered := w.ArrivalRate * w.MeanTxnsPerSession()
		need := offered * (1 - LoadSlack)
		cs = append(cs, check{
			test: func(e *Eval) (string, bool, bool) {
				m, h := stat(e, fTPSSteady)
				if m < need {
					return fmt.Sprintf("carries %.1f of the %.1f tps offered", m, offered), m+h < need, false
				}
				return "", false, m-h >= need
			},
			worst: func(e *Eval) float64 { m, _ := stat(e, fTPSSteady); return -m },
			binds: func(b *Eval) string {
				m, _ := stat(b, fTPSSteady)
				return fmt.Sprintf("the offered load of %.1f tps: the most any option carries is %.1f tps, %.0f%% of it (%s)", offered, m, 100*m/offered, where(b))
			},
		}, check{
			test: func(e *Eval) (string, bool, bool) {
				ratios := make([]float64, len(e.Reps))
				lo, hi := math.Inf(1), 0.0
				for i := range e.Reps {
					x := &e.Reps[i]
					ratios[i] = x.DrainMs / max(x.SessionMeanMs, 1e-9)
					lo, hi = min(lo, ratios[i]), max(hi, ratios[i])
				}
				m, _, _ := sim.MeanCI(ratios)
				if m > DrainFactor {
					d, _ := stat(e, fDrain)
					s, _ := stat(e, fSession)
					return fmt.Sprintf("its backlog grows: %.0f ms to finish after arrivals stop, %.0f mean sessions", d, d/max(s, 1e-9)), lo > DrainFactor, false
				}
				return "", false, hi <= DrainFactor
			},
			worst: func(e *Eval) float64 { d, _ := stat(e, fDrain); return d },
			binds: func(b *Eval) string {
				d, _ := stat(b, fDrain)
				return fmt.Sprintf("a growing backlog: every option takes long to finish after arrivals stop, at best %.0f ms (%s)", d, where(b))
			},
		})
	} else if best != nil {
		cs = append(cs, check{
			test: func(e *Eval) (string, bool, bool) {
				m, h := paired(e, best, fTPSSteady, 1-Tolerance)
				if m < 0 {
					bm, _ := stat(best, fTPSSteady)
					em, _ := stat(e, fTPSSteady)
					return fmt.Sprintf("%.1f tps steady, below %.0f%% of the best %.1f (%s)", em, 100*(1-Tolerance), bm, where(best)), m+h < 0, false
				}
				return "", false, m-h >= 0
			},
			worst: func(e *Eval) float64 { m, _ := stat(e, fTPSSteady); return -m },
			binds: func(b *Eval) string { return "throughput" },
		})
	}
	if r.SLOP99 > 0 {
		slo := ms(r.SLOP99)
		lat, what := r.Latency(), r.LatencyWords()
		cs = append(cs, check{
			test: func(e *Eval) (string, bool, bool) {
				m, h := stat(e, lat)
				if m > slo {
					return fmt.Sprintf("%s p99 %.2f ms above the SLO %v", what, m, r.SLOP99), m-h > slo, false
				}
				return "", false, m+h <= slo
			},
			worst: func(e *Eval) float64 { m, _ := stat(e, lat); return m },
			binds: func(b *Eval) string {
				m, _ := stat(b, lat)
				return fmt.Sprintf("the %s p99 SLO of %v: the lowest %s p99 any mode and pool size reaches is %.2f ms (%s)", what, r.SLOP99, what, m, where(b))
			},
		})
	}
	cs = append(cs, r.guards()...)
	if r.MinTPS > 0 {
		cs = append(cs, check{
			test: func(e *Eval) (string, bool, bool) {
				m, h := stat(e, fTPSSteady)
				if m < r.MinTPS {
					return fmt.Sprintf("%.1f tps steady, below the minimum %g", m, r.MinTPS), m+h < r.MinTPS, false
				}
				return "", false, m-h >= r.MinTPS
			},
			worst: func(e *Eval) float64 { m, _ := stat(e, fTPSSteady); return -m },
			binds: func(b *Eval) string {
				m, _ := stat(b, fTPSSteady)
				return fmt.Sprintf("the minimum of %g tps: the most any mode and pool size reaches is %.1f tps steady (%s)", r.MinTPS, m, where(b))
			},
		})
	}
	return cs
}

// apply runs the checks on e.
func apply(cs []check, e *Eval) {
	e.Fails, e.Unsure, e.Excluded, e.Sure = nil, nil, false, true
	for _, c := range cs {
		miss, sureMiss, sureMet := c.test(e)
		if miss != "" {
			e.Fails = append(e.Fails, miss)
		}
		if sureMiss {
			e.Excluded = true
		}
		if !sureMet {
			e.Sure = false
			if !sureMiss {
				e.Unsure = append(e.Unsure, strings.TrimSpace(miss))
			}
		}
	}
}

// Decide turns simulated configurations into advice (rules 3 to 6).
func Decide(r Request, evals []*Eval) *Advice {
	fs, implied := r.features()
	a := &Advice{Features: fs, Implied: implied, Modes: r.options(), Deterministic: true, Latency: r.Latency().Name}
	for _, v := range a.Modes {
		v.lat = r.Latency()
	}
	byOption := map[Option]*Verdict{}
	for _, v := range a.Modes {
		byOption[v.Option] = v
	}
	a.Replications = math.MaxInt
	for _, e := range evals {
		if v := byOption[e.Option]; v != nil && v.Allowed {
			v.Evals = append(v.Evals, e)
		}
		a.Replications = min(a.Replications, len(e.Reps))
		if len(e.Reps) > 1 {
			a.Deterministic = false
		}
	}
	if len(evals) == 0 {
		a.Replications = 0
	}
	// A closed workload's load is the best steady throughput of a
	// configuration that refuses, times out and leaves unfinished nothing.
	var best *Eval
	w := r.Base.Workload
	if w.Open() {
		a.Offered, a.OfferedOpen = w.ArrivalRate*w.MeanTxnsPerSession(), true
	} else {
		basic := r.checks(nil)
		for _, e := range evals {
			apply(basic, e)
			if e.Meets() && (best == nil || e.Metrics.TPSSteady > best.Metrics.TPSSteady) {
				best = e
			}
		}
		if best != nil {
			a.Offered = best.Metrics.TPSSteady
		}
	}
	cs := r.checks(best)
	for _, e := range evals {
		apply(cs, e)
	}
	var choices []*Verdict
	for _, v := range a.Modes {
		for _, e := range v.Evals {
			if v.Closest == nil || closer(e, v.Closest, w.Open()) {
				v.Closest = e
			}
		}
		v.choose()
		if v.Choice != nil {
			choices = append(choices, v)
		}
	}
	a.rank(choices)
	if a.Answer == nil {
		a.Binding = r.binding(cs, evals)
		for _, e := range evals {
			if a.Closest == nil || closer(e, a.Closest, w.Open()) {
				a.Closest = e
			}
		}
		a.Help = r.help(a)
	}
	a.Classic = r.classic(a)
	return a
}

// Latency is the metric the verdict ranks by (p99_ms or req_p99_ms).
func (v *Verdict) Latency() string {
	if v.lat.Name == "" {
		return fP99.Name
	}
	return v.lat.Name
}

// choose is rule 4 for one mode.
func (v *Verdict) choose() {
	bestE := v.best()
	if bestE == nil {
		return
	}
	v.BestP99 = v.lat.Get(&bestE.Metrics)
	for _, e := range v.Evals { // ascending pool sizes
		m, h := paired(e, bestE, v.lat, 1+P99Slack)
		notWorse := m-h <= 0 // not significantly worse than the best by more than P99Slack
		surelyNot := m+h <= 0
		if e.Meets() {
			e.WorseBy, e.WorseByHalf = m, h
			if v.Choice == nil && notWorse {
				v.Choice = e
			}
		}
		if v.Low == nil && !e.Excluded && notWorse {
			v.Low = e
		}
		if v.High == nil && e.Sure && surelyNot {
			v.High = e
		}
	}
	if v.Low != nil && v.Choice != nil && v.Low.PoolSize > v.Choice.PoolSize {
		v.Low = v.Choice
	}
}

// rank is rule 5: modes are compared on the best p99 each reaches among
// its qualifying pools (what the mode can do, not where its smallest
// acceptable pool happens to fall); modes the paired intervals cannot tell
// apart from the lowest are tied, and the tie goes to the mode that keeps
// the most session features (direct, session, transaction, statement).
func (a *Advice) rank(choices []*Verdict) {
	if len(choices) == 0 {
		return
	}
	sort.SliceStable(choices, func(i, j int) bool { return choices[i].BestP99 < choices[j].BestP99 })
	lead := choices[0].best()
	tied := []*Verdict{choices[0]}
	for _, v := range choices[1:] {
		m, h := paired(v.best(), lead, v.lat, 1)
		if !sim.Differs(m, h) {
			tied = append(tied, v)
		}
	}
	win := tied[0]
	for _, v := range tied[1:] {
		if v.Mode < win.Mode {
			win = v
		}
	}
	a.Answer = win.Choice
	for _, v := range tied {
		if v != win {
			a.Tied = append(a.Tied, v.Choice)
		}
	}
	if len(a.Tied) > 0 {
		a.TieNote = fmt.Sprintf("the best p99 each mode reaches cannot be told apart at 95%%, so the mode that keeps more session features is preferred (%s)", win.Mode)
	}
	for _, v := range choices {
		if v != win {
			a.RunnerUp = v.Choice
			break
		}
	}
}

// best is the mode's qualifying configuration with the lowest p99.
func (v *Verdict) best() *Eval {
	var b *Eval
	for _, e := range v.Evals {
		if e.Meets() && (b == nil || v.lat.Get(&e.Metrics) < v.lat.Get(&b.Metrics)) {
			b = e
		}
	}
	return b
}

// closer orders points for "closest to qualifying": for an open workload
// more steady throughput first (the load is what it must carry), then
// fewer misses, then more steady throughput, then a lower p99.
func closer(a, b *Eval, open bool) bool {
	if open && a.Metrics.TPSSteady != b.Metrics.TPSSteady {
		return a.Metrics.TPSSteady > b.Metrics.TPSSteady
	}
	if len(a.Fails) != len(b.Fails) {
		return len(a.Fails) < len(b.Fails)
	}
	if a.Metrics.TPSSteady != b.Metrics.TPSSteady {
		return a.Metrics.TPSSteady > b.Metrics.TPSSteady
	}
	return a.Metrics.P99Ms < b.Metrics.P99Ms
}

// binding names the constraints no point meets even alone (rule 6).
func (r Request) binding(cs []check, evals []*Eval) []string {
	if len(evals) == 0 {
		return []string{"no mode keeps the features in use"}
	}
	var out []string
	for _, c := range cs {
		var best *Eval
		met := false
		for _, e := range evals {
			if miss, _, _ := c.test(e); miss == "" {
				met = true
				break
			}
			if best == nil || c.worst(e) < c.worst(best) {
				best = e
			}
		}
		if !met {
			out = append(out, c.binds(best))
		}
	}
	if len(out) == 0 {
		c := evals[0]
		for _, e := range evals {
			if closer(e, c, r.Base.Workload.Open()) {
				c = e
			}
		}
		out = append(out, fmt.Sprintf("each constraint is met somewhere, but not all at once; the closest is %s: %s", where(c), strings.Join(c.Fails, ", ")))
	}
	return out
}

// help says what would make a configuration qualify when none does (rule
// 6), from where the closest configuration's time goes.
func (r Request) help(a *Advice) []string {
	e := a.Closest
	if e == nil {
		return nil
	}
	m := &e.Metrics
	var out []string
	short := false
	for _, f := range e.Fails {
		short = short || strings.HasPrefix(f, "carries ") || strings.HasPrefix(f, "its backlog grows")
	}
	if short && a.OfferedOpen && m.TPSSteady > 0 {
		ratio := a.Offered / m.TPSSteady
		busy := m.ServerBusy * float64(max(e.PoolSize, 1))
		if e.Mode == poolmode.Direct {
			busy = m.ServerBusy * float64(r.Base.Server.MaxConnections)
		}
		switch {
		case r.Base.Server.Cores > 0 && m.CPUUtil >= 0.9:
			out = append(out, fmt.Sprintf("the server's CPU is saturated (%.0f%% of %d cores busy) and carries %.0f%% of the load: it needs about %.1fx the throughput - about %d cores, or statements %.1fx faster; a bigger pool only queues more work on the same cores",
				100*m.CPUUtil, r.Base.Server.Cores, 100/ratio, ratio, int(math.Ceil(float64(r.Base.Server.Cores)*ratio)), ratio))
		case m.PoolerCPUMax >= 0.9:
			out = append(out, fmt.Sprintf("the pooler's thread is saturated (%.0f%% busy): more pooler processes (pooler.processes) or a cheaper relay, not a bigger pool", 100*m.PoolerCPUMax))
		case m.ServerBusy >= 0.9:
			out = append(out, fmt.Sprintf("every server connection is busy (%.0f%%) and carries %.0f%% of the load: it needs about %.0f servers' worth of throughput (%.0f busy now) - more connections if the server has the capacity (max_connections %d), else more cores or faster statements",
				100*m.ServerBusy, 100/ratio, math.Ceil(busy*ratio), busy, r.Base.Server.MaxConnections))
		default:
			out = append(out, fmt.Sprintf("the closest configuration carries %.0f%% of the offered load: it needs about %.1fx the throughput", 100/ratio, ratio))
		}
	}
	if short {
		for _, f := range e.Fails {
			if strings.Contains(f, "refused") || strings.Contains(f, "timed out") {
				out = append(out, "its refusals and timeouts follow from the backlog: clients pile up while the load is not carried, so raising max_client_conn or query_wait_timeout only lengthens the queue")
				break
			}
		}
		return out
	}
	for _, f := range e.Fails {
		switch {
		case strings.Contains(f, "max_client_conn"):
			out = append(out, "raise pooler.max_client_conn to at least the number of clients")
		case strings.Contains(f, "max_connections"):
			out = append(out, "direct connections refuse clients beyond max_connections: a pooler mode, or more max_connections")
		case strings.Contains(f, "query_wait_timeout"):
			out = append(out, "clients wait longer than query_wait_timeout: more server connections if the server keeps up, else more server capacity")
		case strings.Contains(f, "above the SLO"):
			out = append(out, "the SLO is below the lowest p99 reached: faster statements or fewer waits inside a transaction, or a looser SLO")
		}
	}
	return out
}

// classic computes the rules of thumb.
func (r Request) classic(a *Advice) Classic {
	c := Classic{Cores: r.ServerCores, Spindles: r.Spindles, Hikari: r.ServerCores*2 + r.Spindles}
	e := a.Answer
	if e == nil {
		e = a.Closest
	}
	if e == nil {
		return c
	}
	w := r.Base.Workload
	q := w.Query.MeanValue().Milliseconds() + w.CPU.MeanValue().Milliseconds()
	think := w.Think.MeanValue().Milliseconds()
	hop := r.Base.Pooler.Hop.Milliseconds()
	c.TPS = e.Metrics.TPSSteady
	c.ServiceMs = float64(w.StmtsPerTxn) * q
	c.HeldMs = c.ServiceMs + float64(w.StmtsPerTxn-1)*(think+2*hop)
	c.LittleBusy = c.TPS * c.ServiceMs / 1000
	c.LittleHeld = c.TPS * c.HeldMs / 1000
	c.SimulatedOpt = e.PoolSize
	return c
}
