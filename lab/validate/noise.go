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
// statements per window and its stalls, speedTimeline, into
// testbed.Machine.Speed).

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

// speedStep is the calibrated model's speed period: fine enough for a
// stall of a millisecond to stop the cores for about its length.
const speedStep = time.Millisecond

// stallMin is the shortest gap between a closed loop's consecutive
// statement ends that counts as a stall, stallTimes how many times the
// loop's 99th-percentile gap it must be as well, and stallBursty the
// 99th-percentile gap above which a loop's stalls are not looked for: its
// statements end in bursts (through PgBouncer at pool 32 with 50 clients,
// batches up to milliseconds apart: gaps of over 0.5 ms filled 36-51 % of
// a run, lab/bench/stalls.sh, its p99 gap 0.65-0.91 ms, and 1.6-2.4 ms in
// loops of a busier hour), and a stop of the machine cannot be told from
// the gaps between them.
const (
	stallMin    = 500 * time.Microsecond
	stallTimes  = 4
	stallBursty = time.Millisecond
)

// speedTimeline is the machine's speed, speedStep by speedStep, over a
// closed loop's window [from, to), in time order: each speedWindow's
// factor (speedFactors) with the loop's stalls cut out of it. A stall is
// a gap between consecutive statement ends longer than stallMin and
// stallTimes the 99th-percentile gap, in a loop whose 99th-percentile gap
// is at most stallBursty: nothing finished, every connection stopped at
// once (lab/bench/stalls.sh through PgBouncer at pools 1-2 with 50 clients:
// 7 to 20 stalls, 0.6-1.2 % of a run of 1.4-3.3 s, and the transactions
// at or above the p99 ended in 11-13 of its 141-332 10 ms windows), which
// a 20 ms window's count spreads over the window as a slowdown of a tenth
// and a run's p99 feels as a stop. A step's factor is
// its window's, over the share of the window not stalled (the window's
// speed outside its stalls), times the share of the step not stalled;
// none below 0.05, as speedFactors, or above 20. Nil as speedFactors.
func speedTimeline(ends []time.Duration, from, to time.Duration) []float64 {
	win := speedFactors(ends, from, to, speedWindow)
	if win == nil {
		return nil
	}
	per := int(speedWindow / speedStep)
	stalled := make([]time.Duration, len(win)*per)
	var in []time.Duration
	for _, e := range ends {
		if e >= from && e < to {
			in = append(in, e-from)
		}
	}
	slices.Sort(in)
	gaps := make([]time.Duration, max(0, len(in)-1))
	for i := range gaps {
		gaps[i] = in[i+1] - in[i]
	}
	typical, p99 := medianP99(slices.Clone(gaps))
	if len(gaps) > 1 && p99 <= stallBursty {
		limit := max(stallMin, stallTimes*p99)
		for i, g := range gaps {
			if g <= limit {
				continue
			}
			// The stop: from a typical gap after the last end to the next.
			for a, b := in[i]+typical, in[i+1]; a < b; {
				j := int(a / speedStep)
				if j >= len(stalled) {
					break
				}
				end := min(b, time.Duration(j+1)*speedStep)
				stalled[j] += end - a
				a = end
			}
		}
	}
	out := make([]float64, len(stalled))
	for w, f := range win {
		var s time.Duration
		for _, d := range stalled[w*per : (w+1)*per] {
			s += d
		}
		f /= max(0.05, 1-float64(s)/float64(speedWindow))
		for j := w * per; j < (w+1)*per; j++ {
			out[j] = min(20, max(0.05, f*(1-float64(stalled[j])/float64(speedStep))))
		}
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

// speedCell is the speed factors' 5th, 50th and 95th percentiles and
// how many steps ran at under half speed (mostly stalled).
func speedCell(f []float64) string {
	if len(f) == 0 {
		return "—"
	}
	x := slices.Sorted(slices.Values(f))
	q := func(p float64) float64 { return x[min(len(x)-1, int(p*float64(len(x))))] }
	slow := 0
	for _, v := range x {
		if v < 0.5 {
			slow++
		}
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f, %d under half (%d × %v)", q(0.05), q(0.5), q(0.95), slow, len(x), speedStep)
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
