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
	for i, p := range points {
		rows[i] = Row{Params: p.Params, Config: p.Config}
		want[i] = first
		if !p.Config.Stochastic() {
			rows[i].Deterministic = true
			want[i] = 1
		}
	}
	done, total := 0, 0
	for _, n := range want {
		total += n
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
		if err := runJobs(ctx, points, rows, jobs, workers, func() {
			done++
			if progress != nil {
				progress(done, total)
			}
		}); err != nil {
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

// runJobs runs the jobs on the workers, writing each result into its row's
// replication slot; tick is called (on this goroutine) after each.
func runJobs(ctx context.Context, points []Point, rows []Row, jobs []job, workers int, tick func()) error {
	workers = min(workers, len(jobs))
	next := make(chan job)
	finished := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				c := points[j.point].Config
				c.Seed = system.ReplicationSeed(c.Seed, j.rep)
				rows[j.point].Reps[j.rep] = system.Run(c).Metrics
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
