package scenarios

import (
	"context"
	"math"
	"runtime"
	"sync"

	"github.com/poolsim/poolsim/models/system"
)

// Row is one point's run. With replications, Metrics holds the study's
// estimates over them (means, counts rounded, and pooled percentiles: see
// Stat) and Reps every replication's metrics, in replication order; with
// one run, Reps holds that run.
type Row struct {
	Params []Param
	Config system.Config
	system.Result
	Reps system.Replicated
	// Deterministic is set when the point draws no random number that
	// matters (system.Config.Stochastic): it ran once, whatever the study
	// asked, because every replication would give the same figures.
	Deterministic bool
	// Incomplete is set on the points a canceled study did not finish;
	// their figures are not to be read.
	Incomplete bool
	// Classes are each client class's figures, for a point with classes
	// (system.Config.Classes), in the classes' order.
	Classes []ClassRow
	// Notes are what the study found that a reader of the row's figures
	// must know: runs too short for the precision asked (their start-up
	// may still be in the figures), a precision goal not reached.
	Notes []string

	stats []system.Stat // Stat's table, made at its first use
}

// ClassRow is one class's figures at a point: its replications and their
// estimates.
type ClassRow struct {
	Name    string
	Reps    system.Replicated
	Metrics system.Metrics
	stats   []system.Stat // Stat's table, made at its first use
}

// Stat is metric f's estimate over the class's replications and its 95 %
// half-width (system.Replicated.Stat). The first call reads every metric
// at once and keeps them: Reps must not change after it.
func (c *ClassRow) Stat(f system.Field) (estimate, half float64) {
	if c.stats == nil {
		c.stats = c.Reps.Stats()
	}
	s := c.stats[f.Pos()]
	return s.Estimate, s.Half
}

// Stat is metric f's estimate over the row's replications and the
// half-width of its 95 % confidence interval (0 with one run): a mean, or
// a percentile of the replications' samples together
// (system.Replicated.Stat). The first call reads every metric at once and
// keeps them: Reps must not change after it.
func (r *Row) Stat(f system.Field) (estimate, half float64) {
	if r.stats == nil {
		r.stats = r.Reps.Stats()
	}
	s := r.stats[f.Pos()]
	return s.Estimate, s.Half
}

// Study says how many independent replications each point runs.
type Study struct {
	// Replications per point; 0 and 1 mean one run with the scenario's
	// seed.
	Replications int
	// Precision, when above 0, keeps adding replications to a point until
	// the 95 % half-width of its tps and p99 is within Precision of their
	// estimates (0.02 for 2 %), or MaxReplications is reached (a note then
	// says so). Replications is then the first batch (DefaultFirstBatch
	// when it is below 2).
	Precision       float64
	MaxReplications int
}

// Defaults of a study with a precision goal.
const (
	DefaultFirstBatch      = 10
	DefaultMaxReplications = 200
	MaxReplications        = 100_000
)

// Progress reports work done: replications finished and the number known
// so far to be needed (it grows while a precision goal adds batches).
type Progress func(done, total int)

// Run simulates every point once, on up to workers goroutines at once (0 =
// one per CPU), and returns the rows in the points' order. Each point is an
// independent, deterministic run, so the rows do not depend on workers.
func Run(points []Point, workers int) []Row {
	rows, _ := RunStudy(context.Background(), points, Study{}, workers, nil)
	return rows
}

// RunStudy simulates every point's replications on up to workers
// goroutines at once (0 = one per CPU), all replications of all points
// sharing the workers, and returns the rows in the points' order. Work is
// handed out point by point (a point's pilot runs, then its replications),
// so the first points finish first. An open workload's first batch (10
// replications, or all when fewer) runs before the rest: the start-up
// check (startup.go) may lengthen its automatic warm-up and run it again.
// The rows do not depend on workers: replication i of every point runs
// with system.ReplicationSeed(seed, i), and the start-up check and the
// batches a precision goal adds depend only on the results. When
// ctx is done it stops within a moment and returns every row with ctx's
// error: the points it finished as usual, the others marked Incomplete.
// progress, when not nil, is called from the caller's goroutine.
func RunStudy(ctx context.Context, points []Point, st Study, workers int, progress Progress) ([]Row, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	first := max(st.Replications, 1)
	limit := first
	if st.Precision > 0 {
		if st.Replications < 2 {
			first = DefaultFirstBatch
		}
		limit = st.MaxReplications
		if limit <= 0 {
			limit = DefaultMaxReplications
		}
		limit = max(limit, first)
	}
	ps := make([]pointState, len(points))
	rows := make([]Row, len(points))
	total := 0
	for i, p := range points {
		rows[i] = Row{Params: p.Params, Config: p.Config}
		st := &ps[i]
		st.cfg, st.want, st.planned = p.Config, first, first
		if !p.Config.Stochastic() {
			rows[i].Deterministic = true
			st.want, st.planned = 1, 1
		}
		if st.planned >= 2 && p.Config.Open() {
			// The start-up check needs the first batch before the rest.
			st.check = true
			st.want = min(st.want, DefaultFirstBatch)
		}
		if p.Config.WarmupAuto() {
			st.pilots = make([]system.Pilot, system.Pilots)
		}
		rows[i].Reps = make(system.Replicated, st.want)
		for _, cl := range p.Config.Classes {
			rows[i].Classes = append(rows[i].Classes, ClassRow{Name: cl.Name, Reps: make(system.Replicated, st.want)})
		}
		total += len(st.pilots) + st.want
	}
	done := 0
	// next is the first job ready to run, point by point: a pilot not yet
	// started, or (once a point's warm-up is decided) a replication.
	cursor := 0 // points before it have nothing left to hand out
	next := func() (job, bool) {
		for i := cursor; i < len(ps); i++ {
			p := &ps[i]
			switch {
			case p.pilotsSent < len(p.pilots):
				p.pilotsSent++
				return job{point: i, rep: p.pilotsSent - 1, pilot: true}, true
			case p.pilotsDone < len(p.pilots):
				continue // its warm-up is not decided yet
			case p.sent < p.want:
				p.sent++
				return job{point: i, rep: p.sent - 1}, true
			}
			if i == cursor && p.got == p.sent {
				cursor++ // nothing in flight, nothing left (unless a batch is added, which moves cursor back)
			}
		}
		return job{}, false
	}
	do := func(j job) error {
		p := &ps[j.point]
		if j.pilot {
			pl, err := system.RunPilot(ctx, points[j.point].Config, j.rep)
			p.pilots[j.rep] = pl
			return err
		}
		c := p.cfg
		c.Seed = system.ReplicationSeed(c.Seed, j.rep)
		r, err := system.RunContext(ctx, c)
		m := r.Metrics
		if p.atLimit {
			m.WarmupAtLimit = 1
		}
		rows[j.point].Reps[j.rep] = m
		for k := range r.Classes {
			rows[j.point].Classes[k].Reps[j.rep] = r.Classes[k].Metrics
		}
		return err
	}
	ok := func(j job) {
		p := &ps[j.point]
		done++
		if j.pilot {
			p.pilotsDone++
			if p.pilotsDone == len(p.pilots) {
				cut, lim := system.WarmupFrom(p.cfg, p.pilots)
				p.cfg.SetWarmup(cut)
				p.atLimit = lim
			}
		} else {
			p.got++
			row := &rows[j.point]
			grow := func(more int) {
				total += more - p.want
				p.want = more
				row.Reps = append(row.Reps, make(system.Replicated, more-len(row.Reps))...)
				for k := range row.Classes {
					cr := &row.Classes[k]
					cr.Reps = append(cr.Reps, make(system.Replicated, more-len(cr.Reps))...)
				}
				cursor = min(cursor, j.point)
			}
			if p.got == p.want && p.check {
				// The first batch done: lengthen the warm-up if the
				// start-up could still be in its figures (the batch then
				// runs again with it), and go on to the replications
				// planned.
				p.check = false
				cut, capped, again, tau := startupCheck(p.cfg, row.Reps[:p.got], st, p.planned, p.pilots != nil)
				p.tau = tau
				if again {
					p.cfg.SetWarmup(cut)
					p.capped = capped
					p.sent, p.got = 0, 0
					total += p.want
				}
				if p.planned > p.want {
					grow(p.planned)
				}
				cursor = min(cursor, j.point)
			}
			if p.got == p.want && st.Precision > 0 && !row.Deterministic && p.want < limit && !precise(row.Reps, st.Precision) {
				// A batch done: with a precision goal, another if the
				// point is not yet known well enough.
				grow(min(limit, int(math.Ceil(float64(p.want)*1.5))))
			}
		}
		if progress != nil {
			progress(done, total)
		}
	}
	err := runJobs(ctx, workers, next, do, ok)
	for i := range rows {
		p := &ps[i]
		rows[i].Incomplete = p.pilotsDone < len(p.pilots) || p.got < p.want
		if rows[i].Incomplete {
			rows[i].Reps, rows[i].Classes = nil, nil
			continue
		}
		rows[i].Notes = notes(ps[i].cfg, rows[i].Reps, st, limit, ps[i].capped, ps[i].tau)
		if len(rows[i].Reps) == 1 {
			// One run: nothing to pool, and its distributions would only
			// take memory.
			rows[i].Reps[0].Dists = system.Dists{}
			for k := range rows[i].Classes {
				rows[i].Classes[k].Reps[0].Dists = system.Dists{}
			}
		}
		rows[i].stats = rows[i].Reps.Stats()
		rows[i].Metrics = rows[i].Reps[0]
		if len(rows[i].Reps) > 1 {
			rows[i].Metrics = system.MetricsOf(rows[i].stats)
		}
		for k := range rows[i].Classes {
			cr := &rows[i].Classes[k]
			cr.stats = cr.Reps.Stats()
			cr.Metrics = cr.Reps[0]
			if len(cr.Reps) > 1 {
				cr.Metrics = system.MetricsOf(cr.stats)
			}
		}
		rows[i].Compat = system.CompatFor(rows[i].Config)
	}
	return rows, err
}

// pointState is one point's progress through a study.
type pointState struct {
	cfg                    system.Config  // with its warm-up decided once the pilots are done
	pilots                 []system.Pilot // an automatic warm-up's pilot runs (nil without)
	pilotsSent, pilotsDone int
	want, sent, got        int     // replications needed so far, handed out, finished
	planned                int     // replications the study asks for before any precision goal adds more
	check                  bool    // the first batch is to be checked for its start-up before the rest run
	atLimit                bool    // MSER-5 cut as much as it may
	capped                 bool    // the start-up check lengthened the warm-up to the most it may be
	tau                    float64 // the correlation time's bound the start-up check went by (s)
}

// PrecisionFields are the metrics a precision goal applies to.
var PrecisionFields = []string{"tps", "p99_ms"}

// precise reports whether every precision field's half-width is within
// rel of its estimate (system.Replicated.Stat: p99_ms pooled).
func precise(reps system.Replicated, rel float64) bool {
	for _, name := range PrecisionFields {
		f, _ := system.FieldByName(name)
		est, half := reps.Stat(f)
		if len(reps) < 2 || half > rel*math.Abs(est) {
			return false
		}
	}
	return true
}

type job struct {
	point, rep int
	pilot      bool
}

// runJobs runs the jobs next hands out on the workers (each job writes
// only its own slot) and calls ok on this goroutine after each job that
// succeeded; next and ok run on this goroutine too, so they may share
// state without locks. It ends when next has nothing left and every job
// handed out is done. When ctx is done it stops handing out jobs, waits
// for those running and returns ctx's error.
func runJobs(ctx context.Context, workers int, next func() (job, bool), do func(job) error, ok func(job)) error {
	jobs := make(chan job)
	type result struct {
		j   job
		err error
	}
	finished := make(chan result, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				finished <- result{j, do(j)}
			}
		}()
	}
	var err error
	stop := ctx.Done()
	running := 0
	pending, have := next()
	for running > 0 || (have && err == nil) {
		var send chan job
		if have && err == nil && running < workers {
			send = jobs
		}
		select {
		case send <- pending:
			running++
			pending, have = next()
		case r := <-finished:
			running--
			if r.err == nil {
				ok(r.j)
			} else if err == nil {
				err = r.err
			}
			if !have {
				pending, have = next() // a finished job may have made more ready
			}
		case <-stop:
			err, stop = ctx.Err(), nil
		}
	}
	close(jobs)
	wg.Wait()
	return err
}
