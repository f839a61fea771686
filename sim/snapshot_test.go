package sim

import (
	"encoding/json"
	"math"
	"testing"
)

// parts records mixed samples in k recorders of n·(i+1) each: the same
// values also in one recorder in histogram mode (all), and in one per part
// less each part (without[i]).
func parts(k, n int) (hs []Histogram, all *Samples, without []*Samples) {
	hs, all, without, _ = partsRaw(k, n)
	return hs, all, without
}

func partsRaw(k, n int) (hs []Histogram, all *Samples, without []*Samples, raw [][]Time) {
	all = &Samples{}
	all.SetExactLimit(1)
	for i := range k {
		v := mixed(uint64(10+i), n*(i+1)) // parts of unequal sizes
		raw = append(raw, v)
		var s Samples
		if i%2 == 1 {
			s.SetExactLimit(1) // both modes give the same histogram
		}
		for _, t := range v {
			s.Add(t)
			all.Add(t)
		}
		hs = append(hs, s.Histogram())
	}
	for i := range k {
		w := &Samples{}
		w.SetExactLimit(1)
		for j, v := range raw {
			if j != i {
				for _, t := range v {
					w.Add(t)
				}
			}
		}
		without = append(without, w)
	}
	return hs, all, without, raw
}

// The union of histograms reads the percentiles a recorder holding every
// sample reads in histogram mode, bucket for bucket, and so does the union
// without one of them; both within HistogramError of the exact value.
func TestMergedPercentiles(t *testing.T) {
	hs, all, without, raw := partsRaw(5, 4000)
	m := MergeHistograms(hs)
	if m.Count() != all.Count() {
		t.Fatalf("merged %d samples, want %d", m.Count(), all.Count())
	}
	for _, p := range []float64{0, 1, 10, 25, 50, 50.0001, 75, 95, 99, 99.9, 100} {
		if got, want := m.Percentile(p), all.Percentile(p); got != want {
			t.Errorf("p%v: merged %v, one recorder %v", p, got, want)
		}
		for i, w := range without {
			if got, want := m.PercentileWithout(i, p), w.Percentile(p); got != want {
				t.Errorf("p%v without part %d: %v, want %v", p, i, got, want)
			}
		}
	}
	var sum, ss float64
	for _, v := range raw {
		for _, x := range v {
			sum += float64(x)
		}
	}
	mean := sum / float64(all.Count())
	for _, v := range raw {
		for _, x := range v {
			ss += (float64(x) - mean) * (float64(x) - mean)
		}
	}
	variance := ss / float64(all.Count()-1)
	if got := m.Mean(); math.Abs(got-mean) > 0.01*math.Abs(mean) {
		t.Errorf("merged mean %v, exact %v", got, mean)
	}
	if got := m.Variance(); math.Abs(got-variance) > 0.01*variance {
		t.Errorf("merged variance %v, exact %v", got, variance)
	}
	if got := MergeHistograms(nil).Percentile(99); got != 0 {
		t.Errorf("nothing merged: p99 %v, want 0", got)
	}
	one := MergeHistograms(hs[:1])
	if got := one.PercentileWithout(0, 50); got != 0 {
		t.Errorf("the only part left out: %v, want 0", got)
	}
	var s Samples
	for _, v := range mixed(99, 50_000) {
		s.Add(v)
	}
	h := s.Histogram()
	for _, p := range []float64{5, 50, 99} {
		ex, got := s.Percentile(p), h.Percentile(p)
		if math.Abs(float64(got-ex)) > HistogramError*math.Abs(float64(ex))+0.5 {
			t.Errorf("p%v: histogram %v, exact %v", p, got, ex)
		}
	}
}

// A histogram codes only its occupied buckets: one value costs a few
// bytes however often it came, and the text form round-trips.
func TestHistogramCompactAndText(t *testing.T) {
	var s Samples
	for range 100_000 {
		s.Add(5 * Millisecond)
	}
	if h := s.Histogram(); h.Size() > 8 || h.Percentile(99) != 5*Millisecond {
		t.Errorf("100000 equal samples: %d bytes, p99 %v; want a few bytes and 5ms", h.Size(), h.Percentile(99))
	}
	hs, _, _ := parts(2, 3000)
	if again, _, _ := parts(2, 3000); again[0] != hs[0] || again[1] != hs[1] || hs[0] == hs[1] {
		t.Error("histograms of equal samples differ, or of different samples are equal (==)")
	}
	b, err := json.Marshal(hs)
	if err != nil {
		t.Fatal(err)
	}
	var back []Histogram
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for i := range hs {
		for _, p := range []float64{1, 50, 99} {
			if back[i].Percentile(p) != hs[i].Percentile(p) || back[i].Count() != hs[i].Count() {
				t.Errorf("histogram %d p%v after JSON: %v, want %v", i, p, back[i].Percentile(p), hs[i].Percentile(p))
			}
		}
	}
	for _, bad := range []string{`"!!"`, `"AQ"`, `"BQAAAAAA"`} {
		var h Histogram
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("%s read as a histogram", bad)
		}
	}
	var empty Histogram
	b, _ = json.Marshal(empty)
	var e2 Histogram
	if err := json.Unmarshal(b, &e2); err != nil || e2.Count() != 0 {
		t.Errorf("empty histogram: %v, %d samples", err, e2.Count())
	}
}

// For a mean the group jackknife is MeanCI; for a percentile of runs of
// correlated samples its interval covers the true value about 95 % of the
// time. Here: 300 trials of 10 groups, each an AR(1) series of 1,000
// strongly correlated values started at its centre, whose median is 0
// (the symmetric stationary distribution's centre).
func TestJackknifeCI(t *testing.T) {
	xs := []float64{3, 1, 4, 1, 5, 9, 2, 6}
	var loo []float64
	for i := range xs {
		var s float64
		for j, x := range xs {
			if j != i {
				s += x
			}
		}
		loo = append(loo, s/float64(len(xs)-1))
	}
	_, want, _ := MeanCI(xs)
	if got, ok := JackknifeCI(loo); !ok || math.Abs(got-want) > 1e-12 {
		t.Errorf("jackknife of the mean: %v (%v), want MeanCI's %v", got, ok, want)
	}
	if _, ok := JackknifeCI([]float64{1}); ok {
		t.Error("one group gave an interval")
	}
	r := NewRand(5, "jackknife")
	covered := 0
	const trials = 300
	for range trials {
		var hs []Histogram
		for range 10 {
			var s Samples
			x := 0.0
			for range 1000 {
				x = 0.95*x + r.NormFloat64()
				s.Add(Time(math.Round(1e6 * x)))
			}
			hs = append(hs, s.Histogram())
		}
		m := MergeHistograms(hs)
		est := float64(m.Percentile(50))
		loo := make([]float64, len(hs))
		for i := range hs {
			loo[i] = float64(m.PercentileWithout(i, 50))
		}
		half, _ := JackknifeCI(loo)
		if math.Abs(est) <= half {
			covered++
		}
	}
	if covered < trials*90/100 || covered > trials*99/100 {
		t.Errorf("the jackknife interval of the median covered %d of %d, want about 95 %%", covered, trials)
	}
	t.Logf("covered %d of %d", covered, trials)
}

// Smooth reads a percentile inside its bucket: within the bucket of the
// midpoint reading, equal to it for buckets one nanosecond wide, and it
// moves when samples in its bucket come or go while the midpoint stays.
func TestMergedSmooth(t *testing.T) {
	hs, _, _ := parts(4, 3000)
	m := MergeHistograms(hs)
	for _, p := range []float64{1, 30, 50, 90, 99, 99.9} {
		mid, sm := m.Percentile(p), m.Smooth(p)
		i := bucketOf(uint64(max(mid, -mid)))
		low, width := bucketBounds(i)
		if a := math.Abs(sm); mid != 0 && (a < float64(low) || a > float64(low+width)) {
			t.Errorf("p%v: smooth %v outside the bucket [%d, %d] of %v", p, sm, low, low+width, mid)
		}
	}
	var small Samples
	for v := range 300 {
		small.Add(Time(v))
	}
	sm := MergeHistograms([]Histogram{small.Histogram()})
	if sm.Smooth(50) != float64(sm.Percentile(50)) {
		t.Errorf("one-nanosecond buckets: smooth %v, percentile %v", sm.Smooth(50), sm.Percentile(50))
	}
	var a, b Samples
	a.Add(Millisecond)
	for range 100 {
		a.Add(10 * Millisecond)
	}
	a.Add(30 * Millisecond)
	b.Add(10 * Millisecond)
	b.Add(20 * Millisecond)
	both := MergeHistograms([]Histogram{a.Histogram(), b.Histogram()})
	if both.PercentileWithout(1, 50) != both.Percentile(50) || both.SmoothWithout(1, 50) == both.Smooth(50) {
		t.Errorf("leaving out a run of the same bucket: midpoints %v and %v, smooth %v and %v; want the midpoints equal and the smooth ones apart",
			both.PercentileWithout(1, 50), both.Percentile(50), both.SmoothWithout(1, 50), both.Smooth(50))
	}
}
