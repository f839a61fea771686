package advise

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// Advise answers r: it searches every pool's modes and sizes, picks the
// configuration the objective prefers among those that meet every
// class's bars inside the budget, and checks it as a whole run. run
// simulates batches of configurations. On an interruption it returns what
// was finished (Advice.Incomplete) with the runner's error.
func Advise(r Request, run Runner) (*Advice, error) {
	e, err := newEngine(r, run)
	if err != nil {
		return nil, err
	}
	// First round: every other pool in the scenario's mode with a server
	// for every client connection, so that each pool is searched beside
	// the others carrying their whole load, whatever the file's order.
	ctx := make([]setting, len(e.pools))
	for i, p := range e.pools {
		ctx[i] = setting{mode: p.scenario, size: p.Cap, maxPrepared: e.base.Pooler.MaxPreparedStatements}
	}
	if err := e.round(0, ctx, e.pools); err != nil {
		return e.stop(err)
	}
	for k := 0; ; k++ {
		choice, fits := e.combine()
		failing, err := e.verify(k, choice)
		if err != nil {
			return e.stop(err)
		}
		e.a.Rounds = k + 1
		e.a.Answer = fits && len(failing) == 0
		if e.a.Answer || !fits || k+1 >= MaxRounds {
			e.finish(choice, fits)
			return e.a, nil
		}
		// Again, the pools whose classes missed a bar as a whole, each
		// with the others at this choice (all at once, so that no pool's
		// order matters).
		for i, ev := range choice {
			ctx[i] = setting{mode: ev.Mode, size: ev.Size, maxPrepared: ev.MaxPrepared}
		}
		if err := e.round(k+1, ctx, failing); err != nil {
			return e.stop(err)
		}
	}
}

// stop is an interrupted advise: what finished, marked incomplete.
func (e *engine) stop(err error) (*Advice, error) {
	e.a.Incomplete = true
	if e.a.Replications == math.MaxInt {
		e.a.Replications = 0
	}
	return e.a, err
}

// candidates are pool p's options for the objective: each allowed mode's
// smallest qualifying pool (FewestConnections), or every qualifying pool
// tried (BestLatency), cheapest first.
func (e *engine) candidates(p *poolInfo) []*Eval {
	var out []*Eval
	for _, v := range p.Verdicts {
		if !v.Allowed || v.Min == nil {
			continue
		}
		if e.r.Objective == FewestConnections {
			out = append(out, v.Min)
			continue
		}
		for _, ev := range v.Evals {
			if ev.Meets {
				out = append(out, ev)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *Eval) int {
		switch {
		case a.Spend != b.Spend:
			return a.Spend - b.Spend
		case lower(a.score(), b.score()):
			return -1
		case lower(b.score(), a.score()):
			return 1
		}
		return int(a.Mode) - int(b.Mode) // the mode that keeps more session features
	})
	return out
}

// combine picks every pool's option: the objective's best combination of
// the pools' candidates inside the budget; fits is false when a pool has
// none or the cheapest combination is over the budget (every pool then
// gets its cheapest candidate, or its closest configuration).
func (e *engine) combine() ([]*Eval, bool) {
	cands := make([][]*Eval, len(e.pools))
	choice := make([]*Eval, len(e.pools))
	fits := true
	fixed := 0
	for i, p := range e.pools {
		fixed += p.Listeners
		cands[i] = e.candidates(p)
		if len(cands[i]) == 0 {
			fits = false
			choice[i] = e.closest(p)
			continue
		}
		choice[i] = cands[i][0]
	}
	if !fits {
		return choice, false
	}
	sum := fixed
	for _, c := range choice {
		sum += c.Spend
	}
	if sum > e.a.Budget.Total {
		return choice, false
	}
	if e.r.Objective == BestLatency {
		best, bestScore, bestSpend := slices.Clone(choice), math.Inf(1), sum
		cur := make([]*Eval, len(e.pools))
		var walk func(i, spent int, score float64)
		walk = func(i, spent int, score float64) {
			if i == len(e.pools) {
				if lower(score, bestScore) || (!lower(bestScore, score) && spent < bestSpend) {
					copy(best, cur)
					bestScore, bestSpend = score, spent
				}
				return
			}
			for _, c := range pareto(cands[i]) {
				if spent+c.Spend <= e.a.Budget.Total && max(score, c.score()) <= bestScore {
					cur[i] = c
					walk(i+1, spent+c.Spend, max(score, c.score()))
				}
			}
		}
		walk(0, fixed, 0)
		choice = best
	}
	return choice, true
}

// lower reports whether score a is below b by more than rounding: the
// same figures reached through different sums compare equal.
func lower(a, b float64) bool { return a < b-1e-9*math.Abs(b) }

// pareto keeps the candidates (cheapest first) that lower the score.
func pareto(cs []*Eval) []*Eval {
	var out []*Eval
	best := math.Inf(1)
	for _, c := range cs {
		if s := c.score(); lower(s, best) {
			out = append(out, c)
			best = s
		}
	}
	return out
}

// closest is pool p's configuration nearest to qualifying, among its
// allowed modes.
func (e *engine) closest(p *poolInfo) *Eval {
	var best *Eval
	for _, v := range p.Verdicts {
		if v.Allowed && v.Closest != nil && (best == nil || closer(v.Closest, best)) {
			best = v.Closest
		}
	}
	return best
}

// verify simulates the choice as a whole, with the scenario's
// max_connections, and holds every class to its bars against its own
// pool's spare; it returns the pools of the classes that miss one.
func (e *engine) verify(k int, choice []*Eval) ([]*poolInfo, error) {
	ctx := make([]setting, len(e.pools))
	for i, p := range e.pools {
		ev := choice[i]
		if ev == nil { // nothing ran for this pool (all modes dropped)
			ctx[i] = setting{mode: p.scenario, size: p.Cap}
			continue
		}
		ctx[i] = setting{mode: ev.Mode, size: ev.Size, maxPrepared: ev.MaxPrepared}
	}
	outs, err := e.run([]system.Config{e.config(ctx, false)})
	if err != nil {
		return nil, err
	}
	if len(outs) != 1 || len(outs[0].Classes) != len(e.classes) {
		return nil, fmt.Errorf("%w: the whole configuration", ErrRunner)
	}
	o := outs[0]
	e.note(o)
	e.a.VerifyNotes = o.Notes
	v := &Eval{Pool: -1, Round: k, Classes: o.Classes, Total: o.Total, Meets: true}
	e.a.Verified, e.a.VerifyFails = v, nil
	var failing []*poolInfo
	for _, c := range e.classes {
		p := e.pools[c.pool]
		ev := choice[c.pool]
		c.Reps = o.Classes[c.idx]
		if ev == nil {
			c.Check = &Check{Class: c.Name, Fails: []string{"no mode keeps the features it uses"}}
			v.Meets = false
			continue
		}
		sp := e.verdictOf(p, ev).Spare
		ref := c.ref
		if ref == nil {
			ref = sp
		}
		c.Check = c.check(o.Classes[c.idx], ref.Classes[c.idx], sp.Classes[c.idx])
		v.Checks = append(v.Checks, c.Check)
		if !c.Check.Meets {
			v.Meets = false
			e.a.VerifyFails = append(e.a.VerifyFails, fmt.Sprintf("%s: %s", c.Name, strings.Join(c.Check.Fails, "; ")))
			if !slices.Contains(failing, p) {
				failing = append(failing, p)
			}
		}
	}
	return failing, nil
}

// verdictOf is the verdict ev belongs to.
func (e *engine) verdictOf(p *poolInfo, ev *Eval) *Verdict {
	for _, v := range p.Verdicts {
		if slices.Contains(v.Evals, ev) {
			return v
		}
	}
	panic("advise: an evaluation without its verdict")
}

// finish fills the advice from the final choice.
func (e *engine) finish(choice []*Eval, fits bool) {
	a := e.a
	ctx := make([]setting, len(e.pools))
	for i, p := range e.pools {
		p.Choice = choice[i]
		a.Spend += p.Spend()
		if ev := choice[i]; ev != nil {
			ctx[i] = setting{mode: ev.Mode, size: ev.Size, maxPrepared: ev.MaxPrepared}
		} else {
			ctx[i] = setting{mode: p.scenario, size: p.Cap}
		}
	}
	a.Final = e.config(ctx, false)
	a.Final.Pooler.MinPoolSize = 0 // every pool open from the start: min_pool_size at the largest pool's size
	for _, s := range ctx {
		if s.mode.Pooled() {
			a.Final.Pooler.MinPoolSize = max(a.Final.Pooler.MinPoolSize, s.size)
		}
	}
	peak := 0.0
	if a.Verified != nil && len(a.Verified.Total) > 0 {
		peak = slices.Max(a.Verified.Total.Values(fConnsPeak))
	}
	a.MaxClientConn = max(e.base.Pooler.MaxClientConn, int(math.Ceil(1.25*peak/10))*10)
	a.Final.Pooler.MaxClientConn = a.MaxClientConn
	// max_prepared_statements matters to the answer when a pool needs it
	// to keep protocol-level prepared statements, or a class prepares.
	for _, ev := range choice {
		if ev != nil && ev.Saved {
			a.MaxPrepared = ev.MaxPrepared
		}
	}
	for _, c := range e.classes {
		if c.w.PrepareThreshold > 0 && a.MaxPrepared == 0 {
			a.MaxPrepared = a.Final.Pooler.MaxPreparedStatements
		}
	}
	if e.base.Pooler.MaxDBConnections > 0 || e.base.Pooler.MaxUserConnections > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("the scenario's max_db_connections (%d) and max_user_connections (%d) were left off while searching: the pool sizes bound the servers, and --emit writes max_db_connections from them", e.base.Pooler.MaxDBConnections, e.base.Pooler.MaxUserConnections))
	}
	if a.MaxClientConn > e.base.Pooler.MaxClientConn {
		a.Notes = append(a.Notes, fmt.Sprintf("max_client_conn must be at least %d (the classes opened %.0f client connections at once; the scenario has %d)", a.MaxClientConn, peak, e.base.Pooler.MaxClientConn))
	}
	if a.Replications == math.MaxInt {
		a.Replications = 0
	}
	e.binding(choice, fits)
	e.frees()
	e.classic()
	a.Help = e.help(choice)
}

// binding says what binds: each pool's next smaller size, or why there is
// no answer.
func (e *engine) binding(choice []*Eval, fits bool) {
	a := e.a
	switch {
	case fits && a.Answer:
		if a.Objective == BestLatency {
			a.Binding = append(a.Binding, fmt.Sprintf("the budget: %d of %d server connections spent for the best latency inside it", a.Spend, a.Budget.Total))
		}
		for i, p := range e.pools {
			ev := choice[i]
			v := e.verdictOf(p, ev)
			switch {
			case ev.Mode == poolmode.Direct:
				a.Binding = append(a.Binding, fmt.Sprintf("%s: direct takes one server connection per client connection (%d)", p.Name, ev.Spend))
			case a.Objective == FewestConnections && v.Binds != "":
				a.Binding = append(a.Binding, fmt.Sprintf("%s: %s %s", p.Name, ev.Mode, v.Binds))
			case a.Objective == FewestConnections && ev.Size == 1:
				a.Binding = append(a.Binding, fmt.Sprintf("%s: a pool cannot be smaller than 1", p.Name))
			}
		}
	case fits:
		a.Binding = append(a.Binding, fmt.Sprintf("the pools meet their bars one at a time but not together, after %d rounds: %s", a.Rounds, strings.Join(a.VerifyFails, "; ")))
	default:
		over := true
		for i, p := range e.pools {
			if len(e.candidates(p)) == 0 {
				over = false
				what := "no mode keeps the session features its classes use"
				if ev := choice[i]; ev != nil {
					what = fmt.Sprintf("no mode and pool size meets every bar; the closest is %s: %s", ev.Where(), strings.Join(ev.Fails(), "; "))
				}
				a.Binding = append(a.Binding, fmt.Sprintf("%s: %s", p.Name, what))
			}
		}
		if over {
			a.Binding = append(a.Binding, fmt.Sprintf("the budget: the cheapest configuration that meets every bar needs %d server connections, and the budget is %d (max_connections %d less %d reserved for superusers less a headroom of %d)",
				a.Spend, a.Budget.Total, a.Budget.MaxConnections, a.Budget.SuperuserReserved, a.Budget.Headroom))
		}
	}
}

// frees is the change that frees a pool: for each pool kept off
// transaction pooling by features a change of the application frees, what
// transaction pooling would take after the change.
func (e *engine) frees() {
	for _, p := range e.pools {
		for _, v := range p.Verdicts {
			if !v.Hypothetical || v.Min == nil {
				continue
			}
			from := p.Spend()
			if p.Choice == nil || !e.a.Answer && len(e.candidates(p)) == 0 {
				from = 0
			}
			f := Freeing{Pool: p.Name, Classes: p.Classes, Changes: v.Assumed, From: from, To: v.Min.Spend + p.Listeners, Eval: v.Min}
			var flags []string
			for _, c := range p.classes {
				var as []string
				for _, ch := range v.Assumed {
					if slices.Contains(c.Need.Features, ch.Feature) {
						if ch.Name == "listen_direct" {
							f.Listen = true
							as = append(as, ch.Name+":N")
						} else {
							as = append(as, ch.Name)
						}
					}
				}
				if len(as) > 0 {
					flag := strings.Join(as, ",")
					if e.multi {
						flag = c.Name + "=" + flag
					}
					flags = append(flags, "--assume "+flag)
				}
			}
			f.Assume = strings.Join(flags, " ")
			if from == 0 || f.To < from {
				e.a.Frees = append(e.a.Frees, f)
			}
		}
	}
}

// help says what would make a configuration qualify when none does, from
// where the closest configuration's time goes.
func (e *engine) help(choice []*Eval) []string {
	if e.a.Answer || e.a.Verified == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	m := e.a.Verified.Total.Mean()
	s := e.base.Server
	for _, c := range e.classes {
		if c.Check == nil || c.Check.Meets {
			continue
		}
		short := false
		for _, f := range c.Check.Fails {
			short = short || strings.Contains(f, "even with a server for every connection") || strings.Contains(f, "backlog grows")
		}
		switch {
		case short && s.Cores > 0 && m.CPUUtil >= 0.9:
			add(fmt.Sprintf("the server's CPU is saturated (%.0f%% of %d cores busy): more cores or faster statements; a bigger pool only queues more work on the same cores", 100*m.CPUUtil, s.Cores))
		case short && m.PoolerCPUMax >= 0.9:
			add(fmt.Sprintf("the pooler's thread is saturated (%.0f%% busy): more pooler processes (pooler.processes) or a cheaper relay, not a bigger pool", 100*m.PoolerCPUMax))
		case short:
			add(fmt.Sprintf("class %s is not carried even with a server for every connection: the server needs more throughput (cores, faster statements)", c.Name))
		}
	}
	if e.a.Spend > e.a.Budget.Total {
		add(fmt.Sprintf("the budget is short by %d connections: the change that frees a pool (below), a smaller --headroom, or a larger max_connections (each PostgreSQL backend costs memory: server.memory_per_conn)", e.a.Spend-e.a.Budget.Total))
	}
	return out
}
