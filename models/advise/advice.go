package advise

import (
	"fmt"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// Option is a mode with the settings it is evaluated with.
type Option struct {
	Mode        poolmode.Mode
	MaxPrepared int
	// Saved is set when MaxPrepared was raised to SavedMaxPrepared so that
	// protocol-level prepared statements keep working.
	Saved bool
	// Assumed lists the changes to the application this option needs
	// (the change that frees a pool): empty for what the application can
	// do as it is.
	Assumed []Change
}

// Name is "transaction", or "transaction with max_prepared_statements=200".
func (o Option) Name() string {
	if o.Saved {
		return fmt.Sprintf("%s with max_prepared_statements=%d", o.Mode, o.MaxPrepared)
	}
	return o.Mode.String()
}

// Eval is one simulated configuration of one pool: a mode and size, the
// other pools as its round had them, and every class's replications.
type Eval struct {
	Pool int // the pool's index in Advice.Pools
	Option
	Size  int // the pool's pool_size; 0 in direct mode
	Round int // the round that ran it (0: the first)
	// Classes are every class's replications (in Advice.Classes order),
	// Total the whole run's.
	Classes []system.Replicated
	Total   system.Replicated
	// Checks are the pool's own classes against their bars.
	Checks []*Check
	// Meets: every class of the pool meets every bar (on the means; a
	// load is short only beyond its interval). Sure: beyond every
	// interval; Excluded: some bar is missed beyond its interval.
	Meets, Sure, Excluded bool
	// Spend is the server connections the pool takes at this option.
	Spend int
}

// Where is "transaction, pool 12" or "direct".
func (e *Eval) Where() string {
	if e.Mode == poolmode.Direct {
		return e.Name()
	}
	return fmt.Sprintf("%s, pool %d", e.Name(), e.Size)
}

// Fails is every class's misses, each prefixed with its class when the
// pool has several.
func (e *Eval) Fails() []string {
	var out []string
	for _, c := range e.Checks {
		for _, f := range c.Fails {
			if len(e.Checks) > 1 {
				f = c.Class + ": " + f
			}
			out = append(out, f)
		}
	}
	return out
}

// Check is one class against its bars at one configuration.
type Check struct {
	Class                 string
	Fails                 []string // the bars it misses
	Unsure                []string // the bars its intervals straddle
	Meets, Sure, Excluded bool
	// Score is how close it comes to its latency bar: its latency (or
	// wait) over the bar; below 1 meets it.
	Score float64
}

// Verdict is one mode of one pool.
type Verdict struct {
	Option
	Allowed bool
	// Broken lists the features in use that the mode breaks; SavedBy says
	// which pooler setting saves them (then Allowed is set). A mode that
	// needs a change of the application (Option.Assumed) is evaluated
	// only to say what the change would save (Hypothetical).
	Broken       []compat.Feature
	SavedBy      string
	Hypothetical bool
	Evals        []*Eval // the last round's, ascending sizes
	Spare        *Eval   // the mode with a server for every client connection: the reference of the load and default latency bars
	Min          *Eval   // the smallest pool meeting every bar (exact), nil if none
	// Low and High bound the pool sizes the intervals cannot tell apart
	// from Min: Low the smallest not surely failing, High the smallest
	// surely meeting (0: none evaluated).
	Low, High int
	Closest   *Eval // when none meets: fewest misses, then most throughput
	// Binds is what the next smaller pool misses (why Min is not smaller).
	Binds string
}

// Workaround is what the application could change to keep the features
// this mode breaks.
func (v *Verdict) Workaround() string {
	var ws []string
	for _, f := range v.Broken {
		if c, ok := ChangeFor(f); ok {
			ws = append(ws, f.String()+": "+c.What)
		} else {
			ws = append(ws, f.String()+": none - statement pooling refuses transaction blocks, so multi-statement transactions run as autocommit statements")
		}
	}
	return strings.Join(ws, "; ")
}

// Pool is one pool of the answer.
type Pool struct {
	Name, Database, User string
	Classes              []string
	Features             []compat.Feature // what its classes use (after --assume)
	Implied              []string         // features added from the workload itself, with why
	Cap                  int              // its classes' client connections (a pool larger is never full)
	Verdicts             []*Verdict       // every mode, direct first
	Choice               *Eval            // its answer (or, with no answer, its closest)
	Listeners            int              // dedicated direct LISTEN connections (--assume listen_direct)
}

// Spend is the pool's server connections at its choice.
func (p *Pool) Spend() int {
	if p.Choice == nil {
		return p.Listeners
	}
	return p.Choice.Spend + p.Listeners
}

// Class is one class at the answer.
type Class struct {
	Name string
	Pool string
	Need Need
	// Latency is the metric its latency bar reads: req_p99_ms when it runs
	// requests, else p99_ms.
	Latency string
	Open    bool
	Offered float64 // an open class's arrivals × transactions (tps)
	Conns   int     // client connections it opens (0: one per arrival)
	// Reps are its replications at the answer (or the closest), Check its
	// bars there.
	Reps  system.Replicated
	Check *Check
	// Classic are the rules of thumb for it.
	Classic Classic
}

// Budget is what the pools may spend of the server's connections.
type Budget struct {
	MaxConnections    int
	SuperuserReserved int
	Headroom          int
	HeadroomWords     string // "10%" or "5"
	Total             int    // max_connections − reserved − headroom
}

// Freeing is the change that frees a pool: what would let it use
// transaction pooling, and what that saves.
type Freeing struct {
	Pool    string
	Classes []string
	Changes []Change
	// From and To are the pool's spend without and with the change (To
	// without listeners); Eval is the hypothetical option's smallest pool.
	From, To int
	Eval     *Eval
	Assume   string // the --assume that answers for the changed app
	// Listen is set when the change moves LISTEN to dedicated direct
	// connections, one per application process, not counted in To.
	Listen bool
}

// Advice is the outcome.
type Advice struct {
	Objective Objective
	Budget    Budget
	Pools     []*Pool  // in the scenario's order
	Classes   []*Class // in the scenario's order
	// Answer is set when a configuration meets every class's bars inside
	// the budget; Spend is what it (or the closest) spends.
	Answer bool
	Spend  int
	// Binding says which constraint binds: why the answer is not smaller
	// (each pool's next smaller size), or why there is none.
	Binding []string
	// Verified is the answer (or the closest) simulated as a whole;
	// VerifyFails lists the classes that miss a bar there.
	Verified    *Eval
	VerifyFails []string
	// VerifyNotes are the study's notes on that run (runs too short...).
	VerifyNotes []string
	Frees       []Freeing
	Help        []string
	// MaxClientConn is what the answer needs of max_client_conn: the
	// scenario's, or more when the classes open more connections.
	MaxClientConn int
	MaxPrepared   int
	Rounds        int
	Replications  int
	Deterministic bool
	// Incomplete is set when the run was interrupted: Evaluated holds
	// what finished.
	Incomplete bool
	Evaluated  []*Eval
	Notes      []string
	Hikari     Hikari
	// Final is the answer's configuration (pools at their choices, the
	// scenario's limits): what --emit writes.
	Final system.Config
}

// Split is the answer in a line: "web: transaction, 12; jobs: session, 40".
func (a *Advice) Split() string {
	var parts []string
	for _, p := range a.Pools {
		w := p.Name + ": "
		if len(a.Pools) == 1 {
			w = ""
		}
		switch {
		case p.Choice == nil:
			w += "nothing qualifies"
		case p.Choice.Mode == poolmode.Direct:
			w += fmt.Sprintf("direct (%d connections)", p.Choice.Spend)
		default:
			w += fmt.Sprintf("%s, %d", p.Choice.Name(), p.Choice.Size)
		}
		if p.Listeners > 0 {
			w += fmt.Sprintf(" + %d direct LISTEN", p.Listeners)
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, "; ")
}

// SavedMaxPrepared is the max_prepared_statements a mode is re-evaluated
// with when protocol-level prepared statements need it (PgBouncer 1.24+'s
// default).
const SavedMaxPrepared = 200

// The bars' constants.
const (
	// Tolerance is how close to its throughput with servers to spare a
	// closed class must come to carry its load.
	Tolerance = 0.05
	// LoadSlack is how far an open class's steady throughput may fall
	// below what it carries with servers to spare (paired: the same
	// arrivals), beyond its interval.
	LoadSlack = 0.02
	// P99Slack is the default latency bar of a class without an SLO or a
	// maximum wait: its p99 at most this much above its p99 with servers
	// to spare.
	P99Slack = 0.10
	// DrainFactor bounds the time an open class takes to finish after its
	// arrivals stop, in mean session durations: a backlog that took longer
	// to drain was growing.
	DrainFactor = 10
	// MaxRounds bounds the rounds of the joint search.
	MaxRounds = 3
)

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
