package advise

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// Several pools under one budget. A scenario with client classes has one
// pool per (database, user) at the pooler, each with its own mode and
// size, and every pool draws on the server's max_connections and cores.
// Pools advises each pool in turn, in the scenario's order: the pool's
// modes and sizes are simulated with every other pool as it stands (the
// scenario's setting for those not yet decided, the answer for those
// decided), and Decide picks the pool's answer from its lead class's
// figures - the class with an SLO, else the one with the most clients -
// while every class is guarded: a configuration that makes any class
// refuse connections, time out or leave transactions unfinished, or miss
// the SLO of a class on the same pool, does not qualify. The last pool's
// answer is the whole configuration, simulated as a whole, and every
// class's SLO is checked on it again.
//
// One pass in order is a coordinate search, not a joint optimum: a pool
// decided early saw the later pools at the scenario's settings. The
// answer says so, and the final check shows whether the combination holds.

// Guard is a class every configuration must not fail: no refusals, no
// timeouts, no unfinished transactions, and its SLO when it has one.
type Guard struct {
	Name  string
	Index int           // the class's index in Config.ClassList
	SLO   time.Duration // 0: no SLO checked for it
	// RequestLevel is set when the class runs requests (its SLO bounds
	// req_p99_ms, else p99_ms).
	RequestLevel bool
}

func (g Guard) latency() (system.Field, string) {
	if g.RequestLevel {
		return fReqP99, "request"
	}
	return fP99, "transaction"
}

// guards are the checks of r.Guards on every evaluated configuration's
// per-class replications.
func (r Request) guards() []check {
	var cs []check
	for _, g := range r.Guards {
		reps := func(e *Eval) system.Replicated {
			if g.Index < len(e.Classes) {
				return e.Classes[g.Index]
			}
			return nil
		}
		for _, c := range [][2]string{
			{"conn_refused", "connections refused"},
			{"wait_timeouts", "clients timed out waiting (query_wait_timeout)"},
			{"app_timeouts", "application-pool acquire timeouts"},
			{"unfinished_txns", "transactions unfinished"},
		} {
			f := field(c[0])
			what := c[1]
			cs = append(cs, check{
				test: func(e *Eval) (string, bool, bool) {
					rs := reps(e)
					if len(rs) == 0 {
						return "", false, true
					}
					xs := rs.Values(f)
					lo, hi := slices.Min(xs), slices.Max(xs)
					if m, _ := rs.Stat(f); m > 0 {
						return fmt.Sprintf("class %s: %s %s", g.Name, num(m, len(xs)), what), lo > 0, false
					}
					return "", false, hi == 0
				},
				worst: func(e *Eval) float64 { m, _ := reps(e).Stat(f); return m },
				binds: func(b *Eval) string {
					m, _ := reps(b).Stat(f)
					return fmt.Sprintf("class %s: every option leaves it with %s, at best %s (%s)", g.Name, what, num(m, len(b.Reps)), where(b))
				},
			})
		}
		if g.SLO > 0 {
			lat, words := g.latency()
			slo := ms(g.SLO)
			cs = append(cs, check{
				test: func(e *Eval) (string, bool, bool) {
					rs := reps(e)
					if len(rs) == 0 {
						return "", false, true
					}
					m, h := rs.Stat(lat)
					if m > slo {
						return fmt.Sprintf("class %s: %s p99 %.2f ms above its SLO %v", g.Name, words, m, g.SLO), m-h > slo, false
					}
					return "", false, m+h <= slo
				},
				worst: func(e *Eval) float64 { m, _ := reps(e).Stat(lat); return m },
				binds: func(b *Eval) string {
					m, _ := reps(b).Stat(lat)
					return fmt.Sprintf("class %s's %s p99 SLO of %v: the lowest it reaches is %.2f ms (%s)", g.Name, words, g.SLO, m, where(b))
				},
			})
		}
	}
	return cs
}

// Need is what one class asks of the advice: the session features it uses
// and its p99 SLO (of a request when it runs requests, else of a
// transaction).
type Need struct {
	Features []compat.Feature
	SLOP99   time.Duration
}

// PoolsRequest is what to advise on when the scenario has several pools.
type PoolsRequest struct {
	Base  system.Config   // with Classes and Pools
	Needs map[string]Need // by class name; a class not named needs nothing
	// PoolSizes are the pool_size values to try in each pool.
	PoolSizes             []int
	ServerCores, Spindles int
}

// PoolPart is one pool's advice.
type PoolPart struct {
	Pool    system.PoolSpec // as the scenario had it (mode and size resolved)
	Classes []string        // the classes that connect to it
	Lead    string          // the class whose figures decide
	Request Request         // the request Decide saw
	Advice  *Advice
	// Kept is set when no configuration of the pool qualified: the pool
	// keeps the scenario's setting for the pools after it.
	Kept bool
}

// ClassCheck is one class at the final configuration.
type ClassCheck struct {
	Name    string
	Pool    string
	Reps    system.Replicated
	Metrics system.Metrics
	SLO     time.Duration
	Latency string // p99_ms or req_p99_ms
	Fails   []string
}

// PoolsAdvice is the advice for every pool and the configuration they make
// together.
type PoolsAdvice struct {
	Parts []*PoolPart
	Final system.Config // every pool at its answer (or kept)
	// Classes are every class's figures at Final and what each misses.
	Classes []ClassCheck
	// Budget is the server connections the pools may open together (the
	// sum of their sizes, times the pooler's processes; a direct pool
	// counts its peak) against the server's max_connections.
	Budget, MaxConnections int
	Replications           int
	Deterministic          bool
	Notes                  []string
}

// Outcome is one configuration's replications: of the whole run and of
// each class (in Config.ClassList order).
type Outcome struct {
	Total   system.Replicated
	Classes []system.Replicated
}

// ErrNoPools is returned by Pools for a configuration without classes.
var ErrNoPools = errors.New("advise: the scenario has no classes and pools (use Run)")

// Pools advises every pool of r.Base in turn (see the comment at the top
// of this file); run simulates a batch of configurations.
func Pools(r PoolsRequest, run func([]system.Config) ([]Outcome, error)) (*PoolsAdvice, error) {
	if !r.Base.Multi() {
		return nil, ErrNoPools
	}
	if len(r.PoolSizes) == 0 {
		return nil, errors.New("no pool sizes to try")
	}
	classes := r.Base.ClassList()
	for name := range r.Needs {
		if !slices.ContainsFunc(classes, func(c system.Class) bool { return c.Name == name }) {
			var names []string
			for _, c := range classes {
				names = append(names, c.Name)
			}
			return nil, fmt.Errorf("no class %q (the classes are %s)", name, strings.Join(names, ", "))
		}
	}
	cur := r.Base.Clone()
	specs := cur.PoolList()
	// The resolved specs become the scenario's pools, so that changing one
	// pool's mode or size leaves the others as they were.
	cur.Pools = specs
	out := &PoolsAdvice{MaxConnections: r.Base.Server.MaxConnections, Replications: math.MaxInt, Deterministic: true}
	var last *Eval
	for p, spec := range specs {
		part := &PoolPart{Pool: spec}
		var guards []Guard
		lead := -1
		for i, cl := range classes {
			need := r.Needs[cl.Name]
			g := Guard{Name: cl.Name, Index: i, RequestLevel: cl.Workload.RequestLevel()}
			if poolIndex(cur, cl) == p {
				part.Classes = append(part.Classes, cl.Name)
				g.SLO = need.SLOP99
				if lead < 0 || (need.SLOP99 > 0 && r.Needs[classes[lead].Name].SLOP99 == 0) ||
					((need.SLOP99 > 0) == (r.Needs[classes[lead].Name].SLOP99 > 0) && cl.Workload.Clients+int(cl.Workload.ArrivalRate) > classes[lead].Workload.Clients+int(classes[lead].Workload.ArrivalRate)) {
					lead = i
				}
			}
			guards = append(guards, g)
		}
		if lead < 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("pool %s: no class connects to it; left as the scenario has it", spec.Name))
			out.Parts = append(out.Parts, part)
			continue
		}
		part.Lead = classes[lead].Name
		sub := Request{Base: cur.Clone(), PoolSizes: r.PoolSizes, ServerCores: r.ServerCores, Spindles: r.Spindles}
		sub.Base.Workload, sub.Base.AppPool = classes[lead].Workload, classes[lead].AppPool
		sub.Base.Pooler.PoolMode = spec.Mode
		sub.SLOP99 = r.Needs[part.Lead].SLOP99
		for _, name := range part.Classes {
			for _, f := range r.Needs[name].Features {
				if !slices.Contains(sub.Features, f) {
					sub.Features = append(sub.Features, f)
				}
			}
		}
		for _, g := range guards {
			if g.Index != lead {
				sub.Guards = append(sub.Guards, g)
			}
		}
		part.Request = sub
		evals, cfgs := planPool(sub, cur, p)
		res, err := run(cfgs)
		if err != nil {
			return nil, err
		}
		if len(res) != len(cfgs) {
			return nil, fmt.Errorf("%w: %d results for %d systems", ErrRunner, len(res), len(cfgs))
		}
		for i, e := range evals {
			if len(res[i].Total) == 0 || len(res[i].Classes) != len(classes) {
				return nil, fmt.Errorf("%w: configuration %d has no replication or not every class", ErrRunner, i)
			}
			e.Classes = res[i].Classes
			e.Reps = e.Classes[lead]
			e.Metrics = e.Reps.Mean()
			e.Total = res[i].Total
		}
		part.Advice = Decide(sub, evals)
		out.Replications = min(out.Replications, part.Advice.Replications)
		out.Deterministic = out.Deterministic && part.Advice.Deterministic
		if e := part.Advice.Answer; e != nil {
			setPool(&cur, p, e)
			last = e
		} else {
			part.Kept = true
			// The scenario's own setting stays: its run, if it was tried.
			last = nil
			for _, e := range evals {
				if sameConfig(e, cur, p) {
					last = e
				}
			}
		}
		out.Parts = append(out.Parts, part)
	}
	out.Final = cur
	if last == nil {
		// The final configuration was not among the last pool's runs (its
		// own setting was not tried): run it.
		res, err := run([]system.Config{cur})
		if err != nil {
			return nil, err
		}
		if len(res) != 1 || len(res[0].Classes) != len(classes) {
			return nil, fmt.Errorf("%w: the final configuration", ErrRunner)
		}
		last = &Eval{Classes: res[0].Classes, Total: res[0].Total}
	}
	for i, cl := range classes {
		cc := ClassCheck{Name: cl.Name, Reps: last.Classes[i], Metrics: last.Classes[i].Mean(), SLO: r.Needs[cl.Name].SLOP99}
		cc.Pool = specs[poolIndex(cur, cl)].Name
		g := Guard{Name: cl.Name, Index: i, SLO: cc.SLO, RequestLevel: cl.Workload.RequestLevel()}
		lat, _ := g.latency()
		cc.Latency = lat.Name
		e := &Eval{Classes: last.Classes, Reps: last.Classes[i]}
		for _, c := range (Request{Guards: []Guard{g}}).guards() {
			if miss, _, _ := c.test(e); miss != "" {
				cc.Fails = append(cc.Fails, strings.TrimPrefix(miss, "class "+cl.Name+": "))
			}
		}
		out.Classes = append(out.Classes, cc)
	}
	procs := max(1, cur.Pooler.Processes)
	for i, s := range cur.PoolList() {
		if s.Mode == poolmode.Direct {
			// A direct class opens a connection per client (closed) or
			// per session in flight (open: its peak).
			for j, cl := range classes {
				if poolIndex(cur, cl) == i {
					if cl.Workload.Open() {
						out.Budget += int(last.Classes[j].Mean().ServerConns)
					} else {
						out.Budget += cl.Workload.Clients
					}
				}
			}
			continue
		}
		out.Budget += s.Size * procs
	}
	if len(specs) > 1 {
		out.Notes = append(out.Notes, "pools were decided one at a time in the scenario's order, each with the pools before it at their answers and those after it as the scenario has them; the final configuration was simulated as a whole")
	}
	return out, nil
}

// poolIndex is the index of the pool class cl connects to.
func poolIndex(c system.Config, cl system.Class) int {
	if cl.Pool == "" {
		return 0
	}
	for i, p := range c.Pools {
		if p.Name == cl.Pool {
			return i
		}
	}
	return 0
}

// setPool sets pool p of c to e's mode, size and max_prepared_statements.
func setPool(c *system.Config, p int, e *Eval) {
	c.Pools[p].Mode, c.Pools[p].ModeSet = e.Mode, true
	if e.Mode != poolmode.Direct {
		c.Pools[p].Size = e.PoolSize
	}
	c.Pooler.MaxPreparedStatements = max(c.Pooler.MaxPreparedStatements, e.MaxPrepared)
}

// sameConfig reports whether e is pool p of c as it stands.
func sameConfig(e *Eval, c system.Config, p int) bool {
	s := c.Pools[p]
	return e.Mode == s.Mode && (e.Mode == poolmode.Direct || e.PoolSize == s.Size) && e.MaxPrepared == c.Pooler.MaxPreparedStatements
}

// planPool lists pool p's configurations: every allowed mode at every
// pool size (direct once), the other pools as cur has them.
func planPool(r Request, cur system.Config, p int) ([]*Eval, []system.Config) {
	var sizes []int
	for _, s := range r.PoolSizes {
		n := poolLimit(cur, s)
		if !slices.Contains(sizes, n) {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	var evals []*Eval
	var cfgs []system.Config
	for _, v := range r.options() {
		if !v.Allowed {
			continue
		}
		for i, s := range sizes {
			if v.Mode == poolmode.Direct && i > 0 {
				break
			}
			c := cur.Clone()
			e := &Eval{Option: v.Option, PoolSize: s}
			if v.Mode == poolmode.Direct {
				e.PoolSize = 0
			}
			c.Pooler.MaxPreparedStatements = max(c.Pooler.MaxPreparedStatements, v.MaxPrepared)
			e.MaxPrepared = c.Pooler.MaxPreparedStatements
			setPool(&c, p, e)
			evals = append(evals, e)
			cfgs = append(cfgs, c)
		}
	}
	return evals, cfgs
}

// Split is the answer in a line: "web: transaction, 40; report: session,
// 3; 43 of 200 server connections".
func (a *PoolsAdvice) Split() string {
	var parts []string
	for i, s := range a.Final.PoolList() {
		w := fmt.Sprintf("%s: %s, %d", s.Name, s.Mode, s.Size)
		if s.Mode == poolmode.Direct {
			w = fmt.Sprintf("%s: direct", s.Name)
		}
		if i < len(a.Parts) && a.Parts[i].Kept {
			w += " (kept: nothing qualified)"
		}
		parts = append(parts, w)
	}
	return fmt.Sprintf("%s; %d of %d server connections", strings.Join(parts, "; "), a.Budget, a.MaxConnections)
}
