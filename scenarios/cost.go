package scenarios

import (
	"slices"

	"github.com/poolsim/poolsim/models/system"
)

// StudyCost is what running a study of points is expected to take,
// estimated before it runs from each point's size (system.Config.Estimate).
type StudyCost struct {
	Runs      int     // simulations: replications and pilot runs
	Txns      float64 // transactions simulated in all
	Events    float64
	Seconds   float64 // wall time on workers cores of this machine
	PeakBytes float64 // the largest runs held at once, one per worker
	AtLeast   bool    // a precision goal may add replications beyond the estimate
}

// DistsBytes is what a replication of a replicated point keeps for the
// study's pooled percentiles (system.Metrics.Dists): 36 kB for
// web-app.yaml's 20 s, 56 kB for erlang-c.yaml's 200 s, 150 kB for a
// million transactions (go test ./models/system -bench ReplicationDists).
const DistsBytes = 64 << 10

// EstimateStudy estimates a study before it runs; it allocates nothing in
// proportion to the study's size.
func EstimateStudy(points []Point, st Study, workers int) StudyCost {
	if workers <= 0 {
		workers = 1
	}
	var c StudyCost
	reps := max(st.Replications, 1)
	if st.Precision > 0 {
		c.AtLeast = true
		if st.Replications < 2 {
			reps = DefaultFirstBatch
		}
	}
	var longest, kept float64
	var sizes []float64
	for _, p := range points {
		one := p.Config.Estimate()
		n := reps
		if !p.Config.Stochastic() {
			n = 1
		}
		if n > 1 {
			kept += float64(n)
		}
		if p.Config.WarmupAuto() {
			n += system.Pilots
		}
		c.Runs += n
		c.Txns += one.Txns * float64(n)
		c.Events += one.Events * float64(n)
		longest = max(longest, one.Events/system.EventsPerSecond)
		sizes = append(sizes, one.Bytes)
	}
	slices.Sort(sizes)
	for i := 0; i < workers && i < len(sizes); i++ {
		c.PeakBytes += sizes[len(sizes)-1-i]
	}
	c.PeakBytes += float64(c.Runs) * 2048 // every replication's metrics, kept
	c.PeakBytes += kept * DistsBytes      // and a replicated point's distributions
	c.Seconds = max(c.Events/system.EventsPerSecond/float64(workers), longest)
	return c
}
