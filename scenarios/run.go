package scenarios

import (
	"context"
	"math"
	"runtime"
	"sync"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Row is one point's run. With replications, Metrics holds the means over
// them (counts rounded) and Reps every replication's metrics, in
// replication order; with one run, Reps holds that run.
type Row struct {
	Params []Param
	Config system.Config
	system.Result
	Reps system.Replicated
	// Deterministic is set when the point draws no random number that
	// matters (system.Config.Stochastic): it ran once, whatever the study
	// asked, because every replication would give the same figures.
	Deterministic bool
}

// Stat is metric f's mean over the row's replications and the half-width
// of its 95 % confidence interval (0 with one run).
func (r *Row) Stat(f system.Field) (mean, half float64) { return r.Reps.Stat(f) }

// Study says how many independent replications each point runs.
type Study struct {
	// Replications per point; 0 and 1 mean one run with the scenario's
	// seed.
	Replications int
	// Precision, when above 0, keeps adding replications to a point until
	// the 95 % half-width of its tps and p99 is within Precision of their
	// means (0.02 for 2 %), or MaxReplications is reached. Replications is
	// then the first batch (DefaultFirstBatch when it is below 2).
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
// sharing the workers, and returns the rows in the points' order. The rows
// do not depend on workers: replication i of every point runs with
// system.ReplicationSeed(seed, i), and the batches a precision goal adds
// depend only on the results. It stops early with ctx's error when ctx is
// done; progress, when not nil, is called from the caller's goroutine.
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
	rows := make([]Row, len(points))
	want := make([]int, len(points)) // replications each point needs so far
	cfgs := make([]system.Config, len(points))
	atLimit := make([]bool, len(points))
	var pilots []job
	for i, p := range points {
		rows[i] = Row{Params: p.Params, Config: p.Config}
		cfgs[i] = p.Config
		want[i] = first
		if !p.Config.Stochastic() {
			rows[i].Deterministic = true
			want[i] = 1
		}
		if w := p.Config.Workload; w.Open() && w.WarmupAuto {
			for k := range system.Pilots {
				pilots = append(pilots, job{point: i, rep: k})
			}
		}
	}
	done, total := 0, len(pilots)
	for _, n := range want {
		total += n
	}
	tick := func() {
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	// Automatic warm-ups first: each configuration's pilots, then one cut
	// for all its replications.
	if len(pilots) > 0 {
		runs := make([][]system.Pilot, len(points))
		for _, j := range pilots {
			if runs[j.point] == nil {
				runs[j.point] = make([]system.Pilot, system.Pilots)
			}
		}
		err := runJobs(ctx, pilots, workers, func(j job) {
			runs[j.point][j.rep] = system.RunPilot(points[j.point].Config, j.rep)
		}, tick)
		if err != nil {
			return nil, err
		}
		for i, ps := range runs {
			if ps != nil {
				cut, lim := system.WarmupFrom(cfgs[i], ps)
				cfgs[i].Workload.WarmupAuto, cfgs[i].Workload.Warmup = false, cut
				atLimit[i] = lim
			}
		}
	}
	for {
		var jobs []job
		for i := range rows {
			for r := len(rows[i].Reps); r < want[i]; r++ {
				jobs = append(jobs, job{point: i, rep: r})
			}
			rows[i].Reps = append(rows[i].Reps, make(system.Replicated, want[i]-len(rows[i].Reps))...)
		}
		if len(jobs) == 0 {
			break
		}
		err := runJobs(ctx, jobs, workers, func(j job) {
			c := cfgs[j.point]
			c.Seed = system.ReplicationSeed(c.Seed, j.rep)
			m := system.Run(c).Metrics
			if atLimit[j.point] {
				m.WarmupAtLimit = 1
			}
			rows[j.point].Reps[j.rep] = m
		}, tick)
		if err != nil {
			return nil, err
		}
		if st.Precision <= 0 {
			break
		}
		for i := range rows {
			if rows[i].Deterministic || want[i] >= limit || precise(rows[i].Reps, st.Precision) {
				continue
			}
			next := min(limit, int(math.Ceil(float64(want[i])*1.5)))
			total += next - want[i]
			want[i] = next
		}
	}
	for i := range rows {
		rows[i].Metrics = rows[i].Reps.Mean()
		rows[i].Compat = system.CompatFor(rows[i].Config)
	}
	return rows, nil
}

// PrecisionFields are the metrics a precision goal applies to.
var PrecisionFields = []string{"tps", "p99_ms"}

// precise reports whether every precision field's half-width is within
// rel of its mean.
func precise(reps system.Replicated, rel float64) bool {
	for _, name := range PrecisionFields {
		f, _ := system.FieldByName(name)
		xs := reps.Values(f)
		mean, half, ok := sim.MeanCI(xs)
		if !ok || half > rel*math.Abs(mean) {
			return false
		}
	}
	return true
}

type job struct{ point, rep int }

// runJobs runs do for every job on the workers (each job writes only its
// own slot); tick is called on this goroutine after each. When ctx is done
// it stops handing out jobs, waits for those running and returns ctx's
// error.
func runJobs(ctx context.Context, jobs []job, workers int, do func(job), tick func()) error {
	workers = min(workers, len(jobs))
	next := make(chan job)
	finished := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				do(j)
				finished <- struct{}{}
			}
		}()
	}
	var err error
	stop := ctx.Done()
	sent, got := 0, 0
	for got < sent || (sent < len(jobs) && err == nil) {
		var send chan job
		var j job
		if sent < len(jobs) && err == nil {
			send, j = next, jobs[sent]
		}
		select {
		case send <- j:
			sent++
		case <-finished:
			got++
			tick()
		case <-stop:
			err, stop = ctx.Err(), nil
		}
	}
	close(next)
	wg.Wait()
	return err
}
