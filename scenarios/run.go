package scenarios

import (
	"runtime"
	"sync"

	"github.com/poolsim/poolsim/models/system"
)

// Row is one point's run.
type Row struct {
	Params []Param
	Config system.Config
	system.Result
}

// Run simulates every point, on up to workers goroutines at once (0 = one
// per CPU), and returns the rows in the points' order. Each point is an
// independent, deterministic run, so the rows do not depend on workers.
func Run(points []Point, workers int) []Row {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(points))
	rows := make([]Row, len(points))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p := points[i]
				rows[i] = Row{Params: p.Params, Config: p.Config, Result: system.Run(p.Config)}
			}
		}()
	}
	for i := range points {
		next <- i
	}
	close(next)
	wg.Wait()
	return rows
}
