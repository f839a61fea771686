package advise

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// Outcome is one configuration's replications: of the whole run and of
// each class (in Config.ClassList order). Deterministic is set when the
// configuration draws no random number (one run is exact).
type Outcome struct {
	Total         system.Replicated
	Classes       []system.Replicated
	Deterministic bool
	// Notes are what the study found that a reader of its figures must
	// know (runs too short for the precision asked, ...).
	Notes []string
}

// Runner simulates a batch of configurations, each with the same
// replications (the same seeds), and returns their outcomes in order. On
// an error (an interruption) it returns the outcomes it finished (a
// prefix, or entries with no replication for those it did not) with it.
type Runner func(cfgs []system.Config) ([]Outcome, error)

// ErrRunner is returned when the runner's results do not match the batch.
var ErrRunner = errors.New("advise: the runner returned results that do not match the configurations asked for")

// classInfo is a class as the search sees it.
type classInfo struct {
	*Class
	idx      int // index in the canonical ClassList
	pool     int // index of its pool
	lat      system.Field
	latWords string
	w        system.Workload
	// ref is the class's reference in the last round that searched its
	// pool: of its modes with servers to spare inside the budget, the run
	// with the most steady throughput.
	ref *Eval
}

// poolInfo is a pool as the search sees it.
type poolInfo struct {
	*Pool
	idx      int
	scenario poolmode.Mode // the scenario's mode: the others' setting in the first round
	classes  []*classInfo
}

// setting is one pool's mode and size in a configuration.
type setting struct {
	mode        poolmode.Mode
	size        int
	maxPrepared int
}

// engine runs one advise.
type engine struct {
	r       Request
	base    system.Config // classes and pools sorted by name: the search does not depend on the file's order
	multi   bool
	classes []*classInfo
	pools   []*poolInfo
	run     Runner
	a       *Advice
	lifted  int // max_connections and max_client_conn while pools are searched
}

// liftedMin is the least of the lifted limits.
const liftedMin = 1_000_000

// newEngine checks the request and lays out classes and pools.
func newEngine(r Request, run Runner) (*engine, error) {
	if err := r.Base.Validate(); err != nil {
		return nil, err
	}
	base := r.Base.Clone()
	e := &engine{r: r, run: run, multi: base.Multi()}
	if e.multi {
		specs := base.PoolList()
		for i := range base.Classes {
			if base.Classes[i].Pool == "" {
				base.Classes[i].Pool = specs[0].Name
			}
		}
		base.Pools = specs
		sort.SliceStable(base.Classes, func(i, j int) bool { return base.Classes[i].Name < base.Classes[j].Name })
		sort.SliceStable(base.Pools, func(i, j int) bool { return base.Pools[i].Name < base.Pools[j].Name })
	}
	e.base = base
	hr := r.Headroom
	if hr == (Headroom{}) {
		hr = DefaultHeadroom
	}
	s := base.Server
	b := Budget{MaxConnections: s.MaxConnections, SuperuserReserved: s.SuperuserReserved, Headroom: hr.Of(s.MaxConnections), HeadroomWords: hr.String()}
	b.Total = b.MaxConnections - b.SuperuserReserved - b.Headroom
	if b.Total < 1 {
		return nil, fmt.Errorf("the budget is %d server connections: max_connections %d less superuser_reserved_connections %d less a headroom of %d leaves none; lower --headroom or raise server.max_connections", b.Total, b.MaxConnections, b.SuperuserReserved, b.Headroom)
	}
	e.a = &Advice{Objective: r.Objective, Budget: b, Deterministic: true, Replications: math.MaxInt}
	if err := e.layout(); err != nil {
		return nil, err
	}
	total := 0
	for _, p := range e.pools {
		total += p.Cap
	}
	e.lifted = max(liftedMin, 2*total)
	return e, nil
}

// layout builds the classes and pools.
func (e *engine) layout() error {
	known := map[string]bool{}
	cls := e.base.ClassList()
	for _, cl := range cls {
		known[cl.Name] = true
	}
	var names []string
	for _, cl := range cls {
		names = append(names, cl.Name)
	}
	for _, m := range []map[string]bool{keys(e.r.Needs), keys(e.r.Assume)} {
		for name := range m {
			if !known[name] {
				if !e.multi {
					return fmt.Errorf("class %q: the scenario has no classes; give the flags without a class name", name)
				}
				return fmt.Errorf("no class %q (the classes are %s)", name, strings.Join(names, ", "))
			}
		}
	}
	specs := e.base.PoolList()
	for i, sp := range specs {
		p := &poolInfo{Pool: &Pool{Name: sp.Name, Database: sp.Database, User: sp.User}, idx: i, scenario: sp.Mode}
		if !e.multi {
			p.Name = "app"
		}
		e.pools = append(e.pools, p)
	}
	for i, cl := range cls {
		pi := 0
		for j, sp := range specs {
			if sp.Name == cl.Pool {
				pi = j
			}
		}
		w := cl.Workload
		c := &classInfo{Class: &Class{Name: cl.Name, Pool: e.pools[pi].Name, Need: e.r.Needs[cl.Name], Open: w.Open()}, idx: i, pool: pi, w: w}
		c.lat, c.latWords, c.Latency = fP99, "transaction", fP99.Name
		if w.RequestLevel() {
			c.lat, c.latWords, c.Latency = fReqP99, "request", fReqP99.Name
		}
		if c.Open {
			c.Offered = w.OfferedTPS()
		}
		c.Conns = clientConns(w, cl.AppPool)
		e.classes = append(e.classes, c)
		e.a.Classes = append(e.a.Classes, c.Class)
		p := e.pools[pi]
		p.classes = append(p.classes, c)
		p.Classes = append(p.Classes, cl.Name)
	}
	for _, p := range e.pools {
		e.a.Pools = append(e.a.Pools, p.Pool)
		if err := e.features(p); err != nil {
			return err
		}
		for _, c := range p.classes {
			if c.Conns == 0 {
				p.Cap += e.base.Server.MaxConnections // open arrivals, each its own session: up to the server's limit
			} else {
				p.Cap += c.Conns
			}
		}
		p.Cap = max(p.Cap, 1)
		e.verdicts(p)
	}
	return nil
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// clientConns is how many client connections a class opens at most: its
// clients or workers (or its application pool's limit), 0 when each
// arrival opens its own.
func clientConns(w system.Workload, app system.AppPool) int {
	if w.Persistent() {
		return w.Workers
	}
	if w.Open() {
		return 0
	}
	if app.Mode == system.QueuePool {
		return min(w.Clients, app.Size+app.MaxOverflow)
	}
	return w.Clients
}

// features gathers what a pool's classes use, less what --assume frees,
// and the listeners a listen_direct adds.
func (e *engine) features(p *poolInfo) error {
	for _, c := range p.classes {
		used := c.Need.Features
		for _, as := range e.r.Assume[c.Name] {
			if !slices.Contains(used, as.Change.Feature) {
				return fmt.Errorf("--assume %s=%s: class %s does not use %s (give --features %s=...)", c.Name, as, c.Name, as.Change.Feature, c.Name)
			}
			p.Listeners += as.Listeners
		}
		for _, f := range used {
			freed := slices.ContainsFunc(e.r.Assume[c.Name], func(a Assumption) bool { return a.Change.Feature == f })
			if !freed && !slices.Contains(p.Features, f) {
				p.Features = append(p.Features, f)
			}
		}
		if c.w.StmtsPerTxn > 1 && !slices.Contains(p.Features, compat.Transactions) {
			p.Features = append(p.Features, compat.Transactions)
			who := "its workload runs"
			if e.multi {
				who = "class " + c.Name + " runs"
			}
			p.Implied = append(p.Implied, fmt.Sprintf("transactions (%s %d statements per transaction)", who, c.w.StmtsPerTxn))
		}
	}
	return nil
}

// verdicts decides, per mode, whether and how pool p is evaluated: a mode
// that breaks a feature in use is dropped unless max_prepared_statements
// saves it; transaction pooling dropped only for features a change of the
// application frees is evaluated as a hypothesis (the change that frees a
// pool).
func (e *engine) verdicts(p *poolInfo) {
	maxPrep := e.base.Pooler.MaxPreparedStatements
	for _, m := range poolmode.Modes {
		v := &Verdict{Option: Option{Mode: m, MaxPrepared: maxPrep}}
		for _, f := range p.Features {
			if !compat.Works(m, maxPrep, f) {
				v.Broken = append(v.Broken, f)
			}
		}
		v.Allowed = len(v.Broken) == 0
		if !v.Allowed && !slices.ContainsFunc(v.Broken, func(f compat.Feature) bool { return !compat.Works(m, SavedMaxPrepared, f) }) {
			v.Allowed = true
			v.Option = Option{Mode: m, MaxPrepared: SavedMaxPrepared, Saved: true}
			v.SavedBy = fmt.Sprintf("max_prepared_statements=%d (the scenario has %d): %s pooling keeps protocol-level prepared statements only when it is above 0", SavedMaxPrepared, maxPrep, m)
		}
		if e.r.Modes != nil && !containsMode(e.r.Modes, m) {
			v.Allowed = false
		}
		if !v.Allowed && m == poolmode.Transaction && len(v.Broken) > 0 && (e.r.Modes == nil || containsMode(e.r.Modes, m)) {
			var chs []Change
			frees := true
			for _, f := range v.Broken {
				c, ok := ChangeFor(f)
				frees = frees && ok
				chs = append(chs, c)
			}
			if frees {
				v.Hypothetical = true
				v.Assumed = chs
				if slices.Contains(v.Broken, compat.ProtocolPrepared) {
					v.MaxPrepared = SavedMaxPrepared
				}
			}
		}
		p.Verdicts = append(p.Verdicts, v)
	}
}

// spend is the server connections pool p takes at an option: a pooled
// mode its pool size at every pooler process, direct one per client
// connection (the peak its classes opened, at most, over the
// replications).
func (e *engine) spend(p *poolInfo, mode poolmode.Mode, size int, classes []system.Replicated) int {
	if mode == poolmode.Direct {
		n := 0
		for _, c := range p.classes {
			if c.idx < len(classes) && len(classes[c.idx]) > 0 {
				n += int(slices.Max(classes[c.idx].Values(fConnsPeak)))
			} else {
				n += c.Conns
			}
		}
		return n
	}
	procs := max(1, e.base.Pooler.Processes)
	if e.base.Pooler.Budget == system.Divided {
		return (size + procs - 1) / procs * procs
	}
	return size * procs
}

// spareSize is pool p's size with servers to spare: a server for every
// client connection, as far as the budget allows.
func (e *engine) spareSize(p *poolInfo) int {
	n := e.a.Budget.Total
	if procs := max(1, e.base.Pooler.Processes); e.base.Pooler.Budget != system.Divided {
		n /= procs
	}
	return max(1, min(p.Cap, n))
}

// grid is the coarse pool sizes tried in pool p: the request's, or a
// logarithmic grid from 1 (ratio about 1.5), up to the spare size, which
// is always tried.
func (e *engine) grid(p *poolInfo) []int {
	var out []int
	top := e.spareSize(p)
	add := func(n int) {
		n = min(max(n, 1), top)
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(e.r.PoolSizes) > 0 {
		for _, n := range e.r.PoolSizes {
			add(n)
		}
	} else {
		for x := 1.0; x < float64(top); x = math.Max(x+1, math.Round(x*1.5)) {
			add(int(x))
		}
	}
	add(top)
	slices.Sort(out)
	return out
}

// set puts pool p at s in c.
func (e *engine) set(c *system.Config, p int, s setting) {
	if e.multi {
		c.Pools[p].Mode, c.Pools[p].ModeSet = s.mode, true
		if s.mode.Pooled() {
			c.Pools[p].Size = s.size
		}
	} else {
		c.Pooler.PoolMode = s.mode
		if s.mode.Pooled() {
			c.Pooler.DefaultPoolSize = s.size
		}
	}
	c.Pooler.MaxPreparedStatements = max(c.Pooler.MaxPreparedStatements, s.maxPrepared)
}

// config is the base with every pool at its setting, and every pool open
// from the start (min_pool_size at its size): advise asks about the steady
// state, where a pool that has run a while keeps the servers its load
// opened (server_idle_timeout is ten minutes), and --emit writes
// min_pool_size so that the deployment starts so too. lifted lifts
// max_connections so that no pool is held back by it while the pools are
// searched (the budget is checked on their sum instead); the answer is
// checked with the scenario's max_connections. max_client_conn is lifted
// always (the answer says what it must be), and max_db_connections and
// max_user_connections are off (the pool sizes bound the servers).
func (e *engine) config(ctx []setting, lifted bool) system.Config {
	c := e.base.Clone()
	for p, s := range ctx {
		e.set(&c, p, s)
	}
	if lifted {
		c.Server.MaxConnections, c.Server.SuperuserReserved = e.lifted, 0
	}
	c.Pooler.MaxClientConn = e.lifted
	c.Pooler.MaxDBConnections, c.Pooler.MaxUserConnections = 0, 0
	c.Pooler.MinPoolSize = e.lifted
	return c
}

// job is one configuration to simulate: pool p at verdict v's mode and
// size, the other pools at ctx.
type job struct {
	p    *poolInfo
	v    *Verdict
	size int
}

// evaluate simulates a batch of jobs in round k, the other pools at ctx.
func (e *engine) evaluate(k int, ctx []setting, jobs []job) error {
	if len(jobs) == 0 {
		return nil
	}
	cfgs := make([]system.Config, len(jobs))
	for i, j := range jobs {
		c := slices.Clone(ctx)
		c[j.p.idx] = setting{mode: j.v.Mode, size: j.size, maxPrepared: j.v.MaxPrepared}
		cfgs[i] = e.config(c, true)
	}
	outs, err := e.run(cfgs)
	if err == nil && len(outs) != len(jobs) {
		return fmt.Errorf("%w: %d results for %d configurations", ErrRunner, len(outs), len(jobs))
	}
	for i, j := range jobs {
		if i >= len(outs) || len(outs[i].Total) == 0 {
			continue
		}
		o := outs[i]
		if len(o.Classes) != len(e.classes) {
			return fmt.Errorf("%w: %d classes in a result, want %d", ErrRunner, len(o.Classes), len(e.classes))
		}
		ev := &Eval{Pool: j.p.idx, Option: j.v.Option, Size: j.size, Round: k, Classes: o.Classes, Total: o.Total}
		ev.Spend = e.spend(j.p, j.v.Mode, j.size, o.Classes)
		e.note(o)
		e.a.Evaluated = append(e.a.Evaluated, ev)
		j.v.Evals = append(j.v.Evals, ev)
	}
	return err
}

// note keeps how sure the figures are.
func (e *engine) note(o Outcome) {
	e.a.Replications = min(e.a.Replications, len(o.Total))
	e.a.Deterministic = e.a.Deterministic && o.Deterministic
}

// round searches pools ps with the other pools at ctx: every mode on the
// coarse grid, then each mode's smallest qualifying pool refined by
// bisection to the exact smallest.
func (e *engine) round(k int, ctx []setting, ps []*poolInfo) error {
	var jobs []job
	for _, p := range ps {
		for _, v := range p.Verdicts {
			if !v.Allowed && !v.Hypothetical {
				continue
			}
			v.Evals, v.Spare, v.Min, v.Closest, v.Binds = nil, nil, nil, nil, ""
			if v.Mode == poolmode.Direct {
				jobs = append(jobs, job{p, v, 0})
				continue
			}
			for _, n := range e.grid(p) {
				jobs = append(jobs, job{p, v, n})
			}
		}
	}
	err := e.evaluate(k, ctx, jobs)
	e.judgeAll(ps)
	for err == nil {
		jobs = jobs[:0]
		for _, p := range ps {
			for _, v := range p.Verdicts {
				if lo, hi, ok := v.gap(); ok {
					jobs = append(jobs, job{p, v, (lo + hi) / 2})
				}
			}
		}
		if len(jobs) == 0 {
			break
		}
		err = e.evaluate(k, ctx, jobs)
		e.judgeAll(ps)
	}
	return err
}

// gap is the interval a verdict's exact smallest pool lies in: lo the
// largest size tried below its smallest qualifying one (0 if none), hi
// that one; ok when sizes between them are untried.
func (v *Verdict) gap() (lo, hi int, ok bool) {
	if v.Min == nil || v.Mode == poolmode.Direct {
		return 0, 0, false
	}
	hi = v.Min.Size
	for _, ev := range v.Evals {
		if ev.Size < hi {
			lo = max(lo, ev.Size)
		}
	}
	return lo, hi, hi-lo > 1
}

// judgeAll judges every verdict of ps.
func (e *engine) judgeAll(ps []*poolInfo) {
	for _, p := range ps {
		for _, v := range p.Verdicts {
			v.Spare = nil
			for _, ev := range v.Evals {
				if v.Mode == poolmode.Direct || ev.Size == e.spareSize(p) {
					v.Spare = ev
				}
			}
		}
		e.refs(p)
		for _, v := range p.Verdicts {
			if v.Allowed || v.Hypothetical {
				e.judge(p, v)
			}
		}
	}
}

// refs sets the references of pool p's classes: among the allowed modes'
// spares that fit the budget (direct's is its client connections), the
// most steady throughput, each class on its own figures. A class's load
// bar then says what it loses to its pool, whatever the mode.
func (e *engine) refs(p *poolInfo) {
	for _, c := range p.classes {
		c.ref = nil
		for _, v := range p.Verdicts {
			sp := v.Spare
			if !v.Allowed || sp == nil || sp.Spend+p.Listeners > e.a.Budget.Total {
				continue
			}
			t, _ := stat(sp.Classes[c.idx], fTPSSteady)
			if c.ref == nil {
				c.ref = sp
			} else if best, _ := stat(c.ref.Classes[c.idx], fTPSSteady); t > best {
				c.ref = sp
			}
		}
	}
}

// judge holds every evaluation of v to its classes' bars and finds the
// smallest qualifying pool, its uncertainty, what binds it, and the
// closest when none qualifies.
func (e *engine) judge(p *poolInfo, v *Verdict) {
	slices.SortStableFunc(v.Evals, func(a, b *Eval) int { return a.Size - b.Size })
	v.Min, v.Closest, v.Low, v.High, v.Binds = nil, nil, 0, 0, ""
	if v.Spare == nil {
		return // interrupted before the spare ran
	}
	var below *Eval
	for _, ev := range v.Evals {
		e.checkEval(p, ev, v.Spare)
		if ev.Meets && v.Min == nil {
			v.Min = ev
		}
		if v.Min == nil {
			below = ev
		}
		if v.Low == 0 && !ev.Excluded {
			v.Low = max(ev.Size, 1)
		}
		if v.High == 0 && ev.Sure {
			v.High = max(ev.Size, 1)
		}
		if v.Closest == nil || closer(ev, v.Closest) {
			v.Closest = ev
		}
	}
	if v.Min != nil && below != nil && v.Mode != poolmode.Direct {
		v.Binds = fmt.Sprintf("at %d: %s", below.Size, strings.Join(below.Fails(), "; "))
	}
}

// checkEval holds ev's classes of pool p to their bars: the load against
// the class's reference (the most any mode carries with servers to spare
// inside the budget; where none fits, spare: its own mode's), the default
// latency bar against spare (what its own mode's pool size costs it).
func (e *engine) checkEval(p *poolInfo, ev, spare *Eval) {
	ev.Checks = ev.Checks[:0]
	ev.Meets, ev.Sure, ev.Excluded = true, true, false
	for _, c := range p.classes {
		ref := c.ref
		if ref == nil {
			ref = spare
		}
		ch := c.check(ev.Classes[c.idx], ref.Classes[c.idx], spare.Classes[c.idx])
		ev.Checks = append(ev.Checks, ch)
		ev.Meets = ev.Meets && ch.Meets
		ev.Sure = ev.Sure && ch.Sure
		ev.Excluded = ev.Excluded || ch.Excluded
	}
}

// score is how close an evaluation's classes come to their latency bars:
// the worst of them.
func (ev *Eval) score() float64 {
	s := 0.0
	for _, c := range ev.Checks {
		s = max(s, c.Score)
	}
	return s
}

// tps is the steady throughput of ev's run.
func (ev *Eval) tps() float64 { m, _ := stat(ev.Total, fTPSSteady); return m }

// closer orders evaluations for "closest to qualifying": fewer misses,
// then more steady throughput, then a lower latency score.
func closer(a, b *Eval) bool {
	if fa, fb := len(a.Fails()), len(b.Fails()); fa != fb {
		return fa < fb
	}
	if ta, tb := a.tps(), b.tps(); ta != tb {
		return ta > tb
	}
	return a.score() < b.score()
}

// EstimateRuns is about how many configurations advise will simulate for
// r (before replications): the first round's grid and a bisection of
// each mode, and the whole run; later rounds may add more.
func EstimateRuns(r Request) (int, error) {
	e, err := newEngine(r, nil)
	if err != nil {
		return 0, err
	}
	n := 1
	for _, p := range e.pools {
		g := len(e.grid(p))
		for _, v := range p.Verdicts {
			switch {
			case !v.Allowed && !v.Hypothetical:
			case v.Mode == poolmode.Direct:
				n++
			default:
				n += g + int(math.Ceil(math.Log2(float64(p.Cap)/2+1)))
			}
		}
	}
	return n, nil
}
