package validate

import (
	"slices"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// What the live run needs for an open workload of requests - the workers
// kind above all (workload.workers): the model's arrivals, and the app
// pauses inside a request calibrated as the think is elsewhere.

// arrivalStream names the seeded stream of a single-class open workload's
// arrivals: the model's, so that the live run has the model's requests
// (and, with their transaction counts drawn from the model's stream too,
// the model's transactions); "" for a closed workload.
func arrivalStream(c system.Config) string {
	if !c.Workload.Open() {
		return ""
	}
	return "arrivals"
}

// appCalibrated reports whether the workload's pauses to calibrate are
// its app pauses (requests with workload.app), not its thinks.
func appCalibrated(c system.Config) bool {
	return c.Workload.RequestLevel() && c.Workload.AppSet
}

// appAsThink is c with its app pause as the think the calibration loop
// times (appCalibrated), as a class's is (multiOnce).
func appAsThink(c system.Config) system.Config {
	if appCalibrated(c) {
		c.Workload.Think = c.Workload.App
	}
	return c
}

// calibratedPauses gives w the pauses a calibration measured: its think,
// or - with cal.App - its app pause, and its think the same overshoot.
func calibratedPauses(w *system.Workload, cal Calibration) {
	if !cal.App {
		w.Think = cal.Think
		return
	}
	w.App = cal.Think
	if n := w.Think.MeanValue(); n > 0 {
		over := float64(cal.ThinkMean - cal.ThinkNominal)
		w.Think = scaleDist(w.Think, (float64(n.Duration())+over)/float64(n.Duration()))
	}
}

// workersNotes explain how a workers workload runs live.
func workersNotes(points []scenarios.Point) []string {
	if !slices.ContainsFunc(points, func(p scenarios.Point) bool {
		return slices.ContainsFunc(p.Config.ClassList(), func(cl system.Class) bool { return cl.Workload.Persistent() })
	}) {
		return nil
	}
	return []string{
		"Workers (workload.workers): each worker is a goroutine with one connection of its own. They all connect before time zero (a barrier and the 200 ms pause, as closed clients) and are idle in index order, as the model's connect at t = 0; from time zero the requests arrive at the model's arrival times (its seeded stream), each with the model's draw of transactions, and wait in a FIFO queue for the longest-idle worker. A request's latency runs from its scheduled arrival, so the queue's wait counts; a refusal or query_wait_timeout fails the request and the worker connects again for its next. When arrivals stop the workers finish the queue and disconnect.",
		"The model's percentiles of an open workload are its steady window's (after the warm-up, up to the end of arrivals); the measured ones are over every request and transaction of the run, the drain after the arrivals included.",
	}
}
