// Package advise recommends a pool mode and pool size for one workload:
// the seed-001 decision tree, computed from simulations instead of drawn by
// hand, and only where the simulations are sure. It is pure: Plan lists the
// systems to simulate, Decide turns their replications into advice, and Run
// joins the two with a caller-supplied runner.
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
//     the server's max_connections stays as the scenario says), each with
//     the same replications (the same seeds, so configurations compare
//     replication by replication: common random numbers).
//  3. A point qualifies when it carries the load - an open workload's
//     steady throughput is not short of the offered load (arrival rate ×
//     transactions per session) beyond its confidence interval and its
//     backlog drains within DrainFactor mean sessions after arrivals stop;
//     a closed workload's steady throughput is within Tolerance of the best
//     any configuration reaches - no connection is refused, no client times
//     out, every transaction finishes, and p99 latency (every wait the
//     application sees included) is within the SLO and the steady
//     throughput above the minimum, when those are given.
//  4. In each mode the answer is the smallest qualifying pool whose p99 is
//     not significantly worse than the mode's best qualifying p99 by more
//     than P99Slack (the paired 95 % interval of the difference decides).
//     Its uncertainty is the range of pools between the smallest one the
//     intervals cannot exclude and the smallest one they surely include.
//  5. Across modes the lowest best p99 (the best each mode reaches among
//     its qualifying pools) wins; when the paired interval of two modes'
//     best p99 includes zero they are tied, and the mode that keeps more
//     session features wins (direct, session, transaction, statement). The
//     next is the runner-up.
//  6. When nothing qualifies, the advice says so, names the binding
//     constraint and the closest configuration, and what would make one
//     qualify: more throughput of the kind that is short (cores, faster
//     statements, server connections, pooler processes), not a bigger pool
//     where a pool cannot help.
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

// Tolerance is how close to the best steady throughput a closed workload's
// configuration must come to carry the load.
const Tolerance = 0.05

// P99Slack is how much worse than the mode's best p99 a smaller pool may
// be (significantly, at 95 %) and still be preferred.
const P99Slack = 0.10

// LoadSlack is how far an open workload's steady throughput may fall below
// the offered load, beyond its confidence interval, and still carry it:
// the completions of a steady window count what arrived, up to its ends.
const LoadSlack = 0.02

// DrainFactor bounds the time an open workload takes to finish after its
// arrivals stop, in mean session durations: a backlog that took longer to
// drain was growing.
const DrainFactor = 10

// Request is what to advise on.
type Request struct {
	Base     system.Config    // the workload and the server, as the scenario says
	Features []compat.Feature // session features the application uses
	// SLOP99 bounds p99 latency (0: no bound): of a request when the
	// workload has a request level (Workload.RequestLevel), else of a
	// transaction (see Latency). MinTPS bounds throughput from below (0:
	// no bound).
	SLOP99 time.Duration
	MinTPS float64
	// Guards are other classes a configuration must not fail (with
	// several classes: see Pools), each with its own SLO.
	Guards []Guard
	// PoolSizes are the default_pool_size values to try in pooler modes.
	PoolSizes []int
	// ServerCores and Spindles feed the HikariCP rule of thumb.
	ServerCores, Spindles int
}

// Latency is the metric the SLO bounds and modes are ranked by: the p99
// of a request (req_p99_ms) when the workload has a request level, else
// of a transaction (p99_ms).
func (r Request) Latency() system.Field {
	if r.Base.Workload.RequestLevel() {
		return fReqP99
	}
	return fP99
}

// LatencyWords names Latency: "request" or "transaction".
func (r Request) LatencyWords() string {
	if r.Base.Workload.RequestLevel() {
		return "request"
	}
	return "transaction"
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
			c.Pooler.PoolMode = poolmode.Direct
			evals = append(evals, &Eval{Option: v.Option})
			cfgs = append(cfgs, c)
			continue
		}
		for _, s := range sizes {
			c := r.Base
			c.Pooler.PoolMode = v.Mode
			c.Pooler.DefaultPoolSize = s
			c.Pooler.MaxPreparedStatements = v.MaxPrepared
			evals = append(evals, &Eval{Option: v.Option, PoolSize: s})
			cfgs = append(cfgs, c)
		}
	}
	return evals, cfgs, notes, nil
}
