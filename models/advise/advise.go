// Package advise recommends a pool mode and pool size for one workload:
// the seed-001 decision tree, computed from simulations instead of drawn by
// hand. It is pure: Plan lists the systems to simulate, Decide turns their
// metrics into advice, and Run joins the two with a caller-supplied runner.
//
// The rules, in order:
//
//  1. A mode that breaks a session feature the application uses is dropped,
//     unless a pooler setting saves it: protocol-level prepared statements
//     survive transaction and statement pooling with max_prepared_statements
//     above 0, so such a mode is evaluated again with SavedMaxPrepared.
//     A workload with more than one statement per transaction uses
//     transactions, which statement pooling breaks.
//  2. Every remaining mode is simulated at every pool size (direct once:
//     the server's max_connections stays as the scenario says).
//  3. A point qualifies when no connection is refused, no client times out
//     in the wait queue, every transaction finishes, p99 latency is within
//     the SLO and throughput reaches the minimum (when those are given).
//  4. In each mode the answer is the smallest qualifying pool whose
//     throughput is within Tolerance of the mode's best qualifying
//     throughput (and, without an SLO, whose p99 is within P99Slack of the
//     best p99 among those pools).
//  5. Across modes, those whose best throughput is within Tolerance of the
//     overall best are contenders; the contender with the lowest p99 wins
//     (ties: direct, session, transaction, statement). The next in that
//     order is the runner-up.
//  6. When nothing qualifies, the advice names the binding constraint: the
//     one no point meets even alone, with the best value reached.
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
)

// SavedMaxPrepared is the max_prepared_statements a mode is re-evaluated
// with when protocol-level prepared statements need it (PgBouncer 1.24+'s
// default).
const SavedMaxPrepared = 200

// Tolerance is how close to the best throughput counts as "the best": a
// smaller pool (or a mode with a lower p99) within it is preferred.
const Tolerance = 0.05

// P99Slack applies without an SLO: a mode's pool is then the smallest
// whose p99 is within P99Slack of the best p99 among its pools near the
// best throughput (with an open workload every stable pool has the same
// throughput, and the smallest would sit at the edge of overload).
const P99Slack = 0.10

// Request is what to advise on.
type Request struct {
	Base     system.Config    // the workload and the server, as the scenario says
	Features []compat.Feature // session features the application uses
	// SLOP99 bounds p99 transaction latency (0: no bound); MinTPS bounds
	// throughput from below (0: no bound).
	SLOP99 time.Duration
	MinTPS float64
	// PoolSizes are the default_pool_size values to try in pooler modes.
	PoolSizes []int
	// ServerCores and Spindles feed the HikariCP rule of thumb.
	ServerCores, Spindles int
}

// featureAliases are the --features names (the short names and
// compat's own).
var featureAliases = map[string]compat.Feature{
	"prepared":     compat.ProtocolPrepared,
	"set":          compat.SetReset,
	"with_hold":    compat.WithHoldCursors,
	"advisory":     compat.AdvisoryLocks,
	"sql_prepare":  compat.SQLPrepare,
	"listen":       compat.Listen,
	"transactions": compat.Transactions,
	"temp_tables":  compat.TempTables,
}

// FeatureNames are the accepted short names, for help and errors.
const FeatureNames = "prepared, sql_prepare, set, listen, advisory_locks, with_hold, temp_tables, transactions"

// ParseFeatures reads a comma-separated feature list ("" is none).
func ParseFeatures(s string) ([]compat.Feature, error) {
	var out []compat.Feature
	seen := map[compat.Feature]bool{}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		f, ok := featureAliases[w]
		if !ok {
			var err error
			if f, err = compat.ParseFeature(w); err != nil {
				return nil, fmt.Errorf("unknown feature %q: want %s", w, FeatureNames)
			}
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// Option is a mode with the setting it is evaluated with.
type Option struct {
	Mode        poolmode.Mode
	MaxPrepared int
	// Saved is set when MaxPrepared was raised to SavedMaxPrepared so that
	// protocol-level prepared statements keep working.
	Saved bool
}

// Name is "transaction", or "transaction with max_prepared_statements=200".
func (o Option) Name() string {
	if o.Saved {
		return fmt.Sprintf("%s with max_prepared_statements=%d", o.Mode, o.MaxPrepared)
	}
	return o.Mode.String()
}

// Eval is one simulated point.
type Eval struct {
	Option
	PoolSize int // default_pool_size; 0 in direct mode
	Metrics  system.Metrics
	Fails    []string // the constraints it misses, empty when it qualifies
}

// Meets reports whether the point qualifies.
func (e *Eval) Meets() bool { return len(e.Fails) == 0 }

// Pool is the pool as words: "pool 12" or "direct (max_connections 20)".
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
	Evals      []*Eval
	Choice     *Eval // the mode's answer (rule 4), nil if none qualifies
	BestTPS    float64
	Closest    *Eval // when none qualifies: fewest misses, then best p99
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
	// Binding explains, when no point qualifies, which constraint binds.
	Binding []string
	Classic Classic
	Notes   []string
}

// features is the request's features plus those the workload implies.
func (r Request) features() ([]compat.Feature, []string) {
	fs := append([]compat.Feature(nil), r.Features...)
	var implied []string
	if r.Base.Workload.StmtsPerTxn > 1 {
		has := false
		for _, f := range fs {
			has = has || f == compat.Transactions
		}
		if !has {
			fs = append(fs, compat.Transactions)
			implied = append(implied, fmt.Sprintf("transactions (the workload runs %d statements per transaction)", r.Base.Workload.StmtsPerTxn))
		}
	}
	return fs, implied
}

// options decides, per mode, whether and how it is evaluated (rule 1).
func (r Request) options() []*Verdict {
	fs, _ := r.features()
	var out []*Verdict
	for _, m := range poolmode.Modes {
		v := &Verdict{Option: Option{Mode: m, MaxPrepared: r.Base.Pooler.MaxPreparedStatements}}
		for _, f := range fs {
			if !compat.Works(m, v.MaxPrepared, f) {
				v.Broken = append(v.Broken, f)
			}
		}
		v.Allowed = len(v.Broken) == 0
		if !v.Allowed {
			saved := true
			for _, f := range v.Broken {
				saved = saved && compat.Works(m, SavedMaxPrepared, f)
			}
			if saved {
				v.Allowed = true
				v.Option = Option{Mode: m, MaxPrepared: SavedMaxPrepared, Saved: true}
				v.SavedBy = fmt.Sprintf("max_prepared_statements=%d (the scenario has %d): %s pooling keeps protocol-level prepared statements only when it is above 0", SavedMaxPrepared, r.Base.Pooler.MaxPreparedStatements, m)
			}
		}
		var ws []string
		for _, f := range v.Broken {
			ws = append(ws, workaround(f))
		}
		v.Workaround = strings.Join(ws, "; ")
		out = append(out, v)
	}
	return out
}

func workaround(f compat.Feature) string {
	switch f {
	case compat.ProtocolPrepared:
		return "prepared: set max_prepared_statements above 0 (PgBouncer 1.21+), or turn off the driver's prepared-statement cache (e.g. prepareThreshold=0)"
	case compat.AdvisoryLocks:
		return "advisory_locks: only session or direct keep session-level advisory locks (or move the lock out of PostgreSQL, e.g. Redis Redlock)"
	case compat.SetReset:
		return "set: use SET LOCAL inside each transaction, or set the value at the start of every transaction"
	case compat.Listen:
		return "listen: give the listener its own direct or session connection"
	case compat.SQLPrepare:
		return "sql_prepare: use protocol-level prepared statements with max_prepared_statements above 0"
	case compat.WithHoldCursors:
		return "with_hold: close WITH HOLD cursors before the transaction ends, or use a session connection"
	case compat.TempTables:
		return "temp_tables: create temporary tables ON COMMIT DROP and use them within one transaction"
	case compat.Transactions:
		return "transactions: none - statement pooling refuses transaction blocks, so multi-statement transactions run as autocommit statements"
	}
	return f.String()
}

// poolLimit is the effective pool for a default_pool_size.
func poolLimit(c system.Config, size int) int {
	n := min(size, c.Server.MaxConnections)
	if c.Pooler.MaxDBConnections > 0 {
		n = min(n, c.Pooler.MaxDBConnections)
	}
	return n
}

// Plan lists the systems to simulate, one per (allowed mode, pool size),
// and the notes about pool sizes that were clipped.
func Plan(r Request) ([]*Eval, []system.Config, []string, error) {
	if len(r.PoolSizes) == 0 {
		return nil, nil, nil, errors.New("no pool sizes to try")
	}
	var notes []string
	var sizes []int
	seen := map[int]bool{}
	clipped := 0
	for _, s := range r.PoolSizes {
		if s < 1 {
			return nil, nil, nil, fmt.Errorf("pool size %d: want 1 or more", s)
		}
		n := poolLimit(r.Base, s)
		if n != s {
			clipped++
		}
		if !seen[n] {
			seen[n] = true
			sizes = append(sizes, n)
		}
	}
	sort.Ints(sizes)
	if clipped > 0 {
		notes = append(notes, fmt.Sprintf("%d pool sizes above the server's limit (%d) were evaluated at the limit", clipped, poolLimit(r.Base, math.MaxInt32)))
	}
	var evals []*Eval
	var cfgs []system.Config
	for _, v := range r.options() {
		if !v.Allowed {
			continue
		}
		if v.Mode == poolmode.Direct {
			c := r.Base
			c.Pooler.Mode = poolmode.Direct
			evals = append(evals, &Eval{Option: v.Option})
			cfgs = append(cfgs, c)
			continue
		}
		for _, s := range sizes {
			c := r.Base
			c.Pooler.Mode = v.Mode
			c.Pooler.DefaultPoolSize = s
			c.Pooler.MaxPreparedStatements = v.MaxPrepared
			evals = append(evals, &Eval{Option: v.Option, PoolSize: s})
			cfgs = append(cfgs, c)
		}
	}
	return evals, cfgs, notes, nil
}

// Run plans, simulates with run (which must return one result per config,
// in order) and decides.
func Run(r Request, run func([]system.Config) []system.Result) (*Advice, error) {
	evals, cfgs, notes, err := Plan(r)
	if err != nil {
		return nil, err
	}
	res := run(cfgs)
	if len(res) != len(cfgs) {
		return nil, fmt.Errorf("advise: runner returned %d results for %d systems", len(res), len(cfgs))
	}
	for i := range evals {
		evals[i].Metrics = res[i].Metrics
	}
	a := Decide(r, evals)
	a.Notes = append(notes, a.Notes...)
	return a, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// constraint is one condition of rule 3.
type constraint struct {
	// miss says how e misses it, or "" when it meets it.
	miss func(e *Eval) string
	// worst is the amount by which e misses it (lower is better), for the
	// binding constraint's best value.
	worst func(m *system.Metrics) float64
	// binds words the binding constraint, given the best point.
	binds func(best *Eval) string
}

func where(e *Eval) string {
	if e.Mode == poolmode.Direct {
		return e.Name()
	}
	return fmt.Sprintf("%s, pool %d", e.Name(), e.PoolSize)
}

// constraints are rule 3's conditions for this request.
func (r Request) constraints() []constraint {
	count := func(get func(m *system.Metrics) int64, what, binds string) constraint {
		return constraint{
			miss: func(e *Eval) string {
				if n := get(&e.Metrics); n > 0 {
					return fmt.Sprintf("%d %s", n, what)
				}
				return ""
			},
			worst: func(m *system.Metrics) float64 { return float64(get(m)) },
			binds: func(b *Eval) string { return fmt.Sprintf("%s, at best %d (%s)", binds, get(&b.Metrics), where(b)) },
		}
	}
	cs := []constraint{
		{
			miss: func(e *Eval) string {
				if n := e.Metrics.ConnRefused; n > 0 {
					limit := "max_client_conn"
					if e.Mode == poolmode.Direct {
						limit = "max_connections"
					}
					return fmt.Sprintf("%d connections refused (%s)", n, limit)
				}
				return ""
			},
			worst: func(m *system.Metrics) float64 { return float64(m.ConnRefused) },
			binds: func(b *Eval) string {
				return fmt.Sprintf("refusals: every option refuses connections, at best %d (%s)", b.Metrics.ConnRefused, where(b))
			},
		},
		count(func(m *system.Metrics) int64 { return m.WaitTimeouts }, "clients timed out waiting (query_wait_timeout)", "query_wait_timeout: every option times clients out"),
		count(func(m *system.Metrics) int64 { return m.AppTimeouts }, "application-pool acquire timeouts", "the application pool's acquire timeout: every option has timeouts there (the pooler cannot fix it; see app_pool)"),
		count(func(m *system.Metrics) int64 { return m.UnfinishedTxn }, "transactions unfinished", "unfinished transactions in every option"),
		{
			miss: func(e *Eval) string {
				if e.Metrics.OKTxns == 0 {
					return "no transaction completed"
				}
				return ""
			},
			worst: func(m *system.Metrics) float64 { return -float64(m.OKTxns) },
			binds: func(*Eval) string { return "no option completes a transaction" },
		},
	}
	if r.SLOP99 > 0 {
		cs = append(cs, constraint{
			miss: func(e *Eval) string {
				if e.Metrics.P99Ms > ms(r.SLOP99) {
					return fmt.Sprintf("p99 %.2f ms above the SLO %v", e.Metrics.P99Ms, r.SLOP99)
				}
				return ""
			},
			worst: func(m *system.Metrics) float64 { return m.P99Ms },
			binds: func(b *Eval) string {
				return fmt.Sprintf("the p99 SLO of %v: the lowest p99 any mode and pool size reaches is %.2f ms (%s)", r.SLOP99, b.Metrics.P99Ms, where(b))
			},
		})
	}
	if r.MinTPS > 0 {
		cs = append(cs, constraint{
			miss: func(e *Eval) string {
				if e.Metrics.TPS < r.MinTPS {
					return fmt.Sprintf("%.1f tps below the minimum %g", e.Metrics.TPS, r.MinTPS)
				}
				return ""
			},
			worst: func(m *system.Metrics) float64 { return -m.TPS },
			binds: func(b *Eval) string {
				return fmt.Sprintf("the minimum of %g tps: the most any mode and pool size reaches is %.1f tps (%s)", r.MinTPS, b.Metrics.TPS, where(b))
			},
		})
	}
	return cs
}

// fails lists the constraints e misses (rule 3).
func (r Request) fails(e *Eval) []string {
	var out []string
	for _, c := range r.constraints() {
		if m := c.miss(e); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// Decide turns simulated points into advice (rules 3 to 6).
func Decide(r Request, evals []*Eval) *Advice {
	fs, implied := r.features()
	a := &Advice{Features: fs, Implied: implied, Modes: r.options()}
	byOption := map[Option]*Verdict{}
	for _, v := range a.Modes {
		byOption[v.Option] = v
	}
	for _, e := range evals {
		e.Fails = r.fails(e)
		if v := byOption[e.Option]; v != nil && v.Allowed {
			v.Evals = append(v.Evals, e)
		}
	}
	var choices []*Verdict
	for _, v := range a.Modes {
		for _, e := range v.Evals {
			if e.Meets() {
				v.BestTPS = max(v.BestTPS, e.Metrics.TPS)
			}
			if v.Closest == nil || closer(e, v.Closest) {
				v.Closest = e
			}
		}
		near := func(e *Eval) bool { return e.Meets() && e.Metrics.TPS >= (1-Tolerance)*v.BestTPS }
		p99Goal := math.Inf(1)
		if r.SLOP99 == 0 {
			for _, e := range v.Evals {
				if near(e) {
					p99Goal = min(p99Goal, e.Metrics.P99Ms*(1+P99Slack))
				}
			}
		}
		for _, e := range v.Evals { // ascending pool sizes
			if near(e) && e.Metrics.P99Ms <= p99Goal {
				v.Choice = e
				break
			}
		}
		if v.Choice != nil {
			choices = append(choices, v)
		}
	}
	best := 0.0
	for _, v := range choices {
		best = max(best, v.BestTPS)
	}
	contender := func(v *Verdict) bool { return v.BestTPS >= (1-Tolerance)*best }
	sort.SliceStable(choices, func(i, j int) bool {
		ci, cj := contender(choices[i]), contender(choices[j])
		if ci != cj {
			return ci
		}
		if ci {
			return choices[i].Choice.Metrics.P99Ms < choices[j].Choice.Metrics.P99Ms
		}
		return choices[i].BestTPS > choices[j].BestTPS
	})
	if len(choices) > 0 {
		a.Answer = choices[0].Choice
	}
	if len(choices) > 1 {
		a.RunnerUp = choices[1].Choice
	}
	if a.Answer == nil {
		a.Binding = r.binding(evals)
	}
	a.Classic = r.classic(a)
	return a
}

// closer orders points for "closest to qualifying": fewer misses, then a
// lower p99, then more throughput.
func closer(a, b *Eval) bool {
	if len(a.Fails) != len(b.Fails) {
		return len(a.Fails) < len(b.Fails)
	}
	if a.Metrics.P99Ms != b.Metrics.P99Ms {
		return a.Metrics.P99Ms < b.Metrics.P99Ms
	}
	return a.Metrics.TPS > b.Metrics.TPS
}

// binding names the constraints no point meets even alone (rule 6).
func (r Request) binding(evals []*Eval) []string {
	if len(evals) == 0 {
		return []string{"no mode keeps the features in use"}
	}
	var out []string
	for _, c := range r.constraints() {
		var best *Eval
		met := false
		for _, e := range evals {
			if c.miss(e) == "" {
				met = true
				break
			}
			if best == nil || c.worst(&e.Metrics) < c.worst(&best.Metrics) {
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
			if closer(e, c) {
				c = e
			}
		}
		out = append(out, fmt.Sprintf("each constraint is met somewhere, but not all at once; the closest is %s: %s", where(c), strings.Join(c.Fails, ", ")))
	}
	return out
}

// classic computes the rules of thumb.
func (r Request) classic(a *Advice) Classic {
	c := Classic{Cores: r.ServerCores, Spindles: r.Spindles, Hikari: r.ServerCores*2 + r.Spindles}
	e := a.Answer
	if e == nil {
		for _, v := range a.Modes {
			if v.Closest != nil && (e == nil || closer(v.Closest, e)) {
				e = v.Closest
			}
		}
	}
	if e == nil {
		return c
	}
	w := r.Base.Workload
	q := w.Query.MeanValue().Milliseconds() + w.CPU.MeanValue().Milliseconds()
	think := w.Think.MeanValue().Milliseconds()
	hop := r.Base.Pooler.Hop.Milliseconds()
	c.TPS = e.Metrics.TPS
	c.ServiceMs = float64(w.StmtsPerTxn) * q
	c.HeldMs = c.ServiceMs + float64(w.StmtsPerTxn-1)*(think+2*hop)
	c.LittleBusy = c.TPS * c.ServiceMs / 1000
	c.LittleHeld = c.TPS * c.HeldMs / 1000
	c.SimulatedOpt = e.PoolSize
	return c
}
