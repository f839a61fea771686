package validate

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The machine's noise in a CPU-bound row's calibration. Processor sharing
// with constant CPU per statement gives every transaction nearly the same
// latency; the real machine does not. Two measured parts give the
// calibrated model the spread: the driver's and the backend's CPU per
// statement vary (a lognormal σ fitted to the direct round trips' p99,
// spreadPoint), and the machine as a whole runs faster or slower for tens
// of milliseconds at a time, every connection at once (the closed loop's
// statements per window, speedFactors, into system.Testbed.Speed).

// speedWindow is the window of the machine's speed (Testbed.Speed): long
// enough to count a few hundred statements, short beside a run's
// latencies' spread.
const speedWindow = 20 * time.Millisecond

// speedFactors is how fast a closed loop ran window by window: the
// statements that ended in each whole window of [from, to) over their
// mean. A count varies by chance too (about its square root, as if the
// ends were random): the factors are drawn in toward 1 by what chance
// alone explains, so that what is left is the machine's. Nil with fewer
// than 5 windows or no statements.
func speedFactors(ends []time.Duration, from, to, w time.Duration) []float64 {
	k := int((to - from) / w)
	if k < 5 {
		return nil
	}
	counts := make([]float64, k)
	for _, e := range ends {
		if e >= from {
			if i := int((e - from) / w); i < k {
				counts[i]++
			}
		}
	}
	var sum, sq float64
	for _, c := range counts {
		sum += c
	}
	mean := sum / float64(k)
	if mean == 0 {
		return nil
	}
	for _, c := range counts {
		sq += (c - mean) * (c - mean)
	}
	v := sq / float64(k) // the counts' variance; chance alone gives about mean
	shrink := 0.0
	if v > mean {
		shrink = math.Sqrt((v - mean) / v)
	}
	out := make([]float64, k)
	for i, c := range counts {
		out[i] = max(0.05, 1+(c/mean-1)*shrink)
	}
	return out
}

// spreadPoint is the direct point the CPU's spread is fitted to: the
// 8-connection one (or the most concurrent, with fewer), which keeps the
// cores busy as a run does; -1 if its round trips were not measured.
func spreadPoint(tb *Testbed) int {
	i := len(tb.Points) - 1
	for j, p := range tb.Points {
		if p.N == 8 {
			i = j
		}
	}
	if i < 1 || tb.Points[i].P50 <= 0 || tb.Points[i].P99 < tb.Points[i].P50 {
		return -1
	}
	return i
}

// msDur is a model's milliseconds as a duration.
func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// speedCell is the speed factors' 5th, 50th and 95th percentiles.
func speedCell(f []float64) string {
	if len(f) == 0 {
		return "—"
	}
	x := slices.Sorted(slices.Values(f))
	q := func(p float64) float64 { return x[min(len(x)-1, int(p*float64(len(x))))] }
	return fmt.Sprintf("%.2f / %.2f / %.2f (%d × %v)", q(0.05), q(0.5), q(0.95), len(x), speedWindow)
}

// medianP99 is the round trips' 50th and 99th percentiles (nearest rank;
// rt is sorted in place); zero without any.
func medianP99(rt []time.Duration) (p50, p99 time.Duration) {
	if len(rt) == 0 {
		return 0, 0
	}
	slices.Sort(rt)
	return rt[len(rt)/2], rt[min(len(rt)-1, len(rt)*99/100)]
}
