package sim

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// TestBuckets: buckets are contiguous and ordered, and every value is
// within HistogramError of its bucket's midpoint.
func TestBuckets(t *testing.T) {
	if HistogramError > 0.001 {
		t.Fatalf("HistogramError %v is above the 0.1 %% docs/run.md declares", HistogramError)
	}
	prev := 0
	for v := uint64(1); v < 1<<20; v++ {
		i := bucketOf(v)
		if i != prev && i != prev+1 {
			t.Fatalf("bucketOf(%d) = %d after %d: not contiguous", v, i, prev)
		}
		prev = i
	}
	r := NewRand(1, "buckets")
	for k := 0; k < 200_000; k++ {
		v := r.Uint64() >> r.IntN(64)
		if v == 0 {
			continue
		}
		mid := bucketMid(bucketOf(v))
		if d := math.Abs(float64(mid) - float64(v)); d > HistogramError*float64(v) {
			t.Fatalf("v=%d: midpoint %d is %.3g off (%.5f%%)", v, mid, d, 100*d/float64(v))
		}
		if v < 1<<subBits && mid != v {
			t.Fatalf("v=%d below 2^%d: midpoint %d, want the value itself", v, subBits, mid)
		}
		if bucketOf(v+1) < bucketOf(v) && v+1 != 0 {
			t.Fatalf("bucketOf not monotone at %d", v)
		}
	}
	if got := bucketOf(math.MaxInt64); got > 64<<subBits {
		t.Errorf("bucketOf(MaxInt64) = %d: more buckets than a power of two each", got)
	}
}

// mixed draws n samples of a mixture: exponential, lognormal with a long
// tail, zeros and a few negative values (a recorder takes any Time).
func mixed(seed uint64, n int) []Time {
	r := NewRand(seed, "mixed")
	e := ExpDist(2 * Millisecond)
	l, err := LognormalMedianP99(Millisecond, 40*Millisecond)
	if err != nil {
		panic(err)
	}
	out := make([]Time, n)
	for i := range out {
		switch r.IntN(10) {
		case 0, 1:
			out[i] = 0
		case 2:
			out[i] = -e.Sample(r)
		case 3, 4, 5:
			out[i] = Time(r.IntN(700)) // a bucket per nanosecond here
		case 6, 7:
			out[i] = e.Sample(r)
		default:
			out[i] = l.Sample(r)
		}
	}
	return out
}

// exactPct is the nearest-rank percentile of v by sorting a copy.
func exactPct(v []Time, p float64) Time {
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s))/100 - 1e-9))
	k = min(max(k, 1), len(s))
	return s[k-1]
}

var testPs = []float64{0, 0.1, 1, 5, 10, 20, 25, 30, 40, 50, 60, 75, 90, 95, 99, 99.9, 99.99, 100}

// within checks got against the exact percentile: equal below the limit,
// within HistogramError past it.
func within(t *testing.T, what string, got, want Time, exact bool) {
	t.Helper()
	if exact {
		if got != want {
			t.Errorf("%s = %d, want exactly %d", what, got, want)
		}
		return
	}
	if d := math.Abs(float64(got - want)); d > HistogramError*math.Abs(float64(want)) {
		t.Errorf("%s = %d, exact %d: off %.4f%%, more than %.4f%%", what, got, want, 100*d/math.Abs(float64(want)), 100*HistogramError)
	}
}

// TestSamplesPastLimit: the same samples through recorders with a limit
// above and below their count: below, every percentile is exact; above,
// within HistogramError; Count and Mean are exact in both.
func TestSamplesPastLimit(t *testing.T) {
	v := mixed(3, 200_000)
	for _, limit := range []int{1, 1000, 199_999, 200_000, ExactLimit} {
		var s Samples
		s.SetExactLimit(limit)
		var sum float64
		for _, x := range v {
			s.Add(x)
			sum += float64(x)
		}
		exact := limit >= len(v)
		if s.Exact() != exact {
			t.Fatalf("limit %d: Exact() = %v after %d samples", limit, s.Exact(), len(v))
		}
		if s.Count() != len(v) || s.Mean() != Time(math.Round(sum/float64(len(v)))) {
			t.Errorf("limit %d: count %d mean %v, want %d %v", limit, s.Count(), s.Mean(), len(v), Time(math.Round(sum/float64(len(v)))))
		}
		for _, p := range testPs {
			within(t, "p"+ftoa(p), s.Percentile(p), exactPct(v, p), exact)
		}
		if s.Max() != slices.Max(v) {
			t.Errorf("limit %d: Max %v, want %v", limit, s.Max(), slices.Max(v))
		}
	}
}

func ftoa(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) }

// TestSamplesWindows cuts windows at checkpoints taken before and after
// the switch to the histogram, and compares them with the exact windows.
func TestSamplesWindows(t *testing.T) {
	v := mixed(4, 50_000)
	cuts := []int{0, 7, 1000, 1001, 20_000, 33_333, 50_000}
	for _, limit := range []int{ExactLimit, 25_000, 500} {
		var s Samples
		s.SetExactLimit(limit)
		for i, x := range v {
			if slices.Contains(cuts, i) {
				if got := s.Checkpoint(); got != i {
					t.Fatalf("Checkpoint at %d returned %d", i, got)
				}
			}
			s.Add(x)
		}
		exact := limit >= len(v)
		for a := 0; a < len(cuts); a++ {
			for b := a + 1; b < len(cuts); b++ {
				lo, hi := cuts[a], cuts[b]
				w := s.Window(lo, hi)
				if w.Count() != hi-lo {
					t.Fatalf("limit %d window %d..%d: count %d", limit, lo, hi, w.Count())
				}
				var sum float64
				for _, x := range v[lo:hi] {
					sum += float64(x)
				}
				want := Time(math.Round(sum / float64(hi-lo)))
				if d := w.Mean() - want; d < -1 || d > 1 || (exact && d != 0) {
					t.Errorf("limit %d window %d..%d: mean %v, want %v", limit, lo, hi, w.Mean(), want)
				}
				for _, p := range []float64{1, 50, 95, 99, 100} {
					within(t, "window p"+ftoa(p), w.Percentile(p), exactPct(v[lo:hi], p), exact)
				}
			}
		}
		// Keep cuts in place, like Window.
		k := s
		k.Keep(1000, 33_333)
		for _, p := range []float64{50, 99} {
			within(t, "kept p"+ftoa(p), k.Percentile(p), exactPct(v[1000:33_333], p), exact)
		}
	}
}

// TestSamplesCutNotCheckpoint: a cut where no checkpoint was taken is a
// programming error once zeros are only counted, and panics.
func TestSamplesCutNotCheckpoint(t *testing.T) {
	var s Samples
	for _, x := range []Time{0, 3, 0, 5} {
		s.Add(x)
	}
	if msg := panicMessage(func() { s.Window(1, 3) }); msg == "" {
		t.Fatal("Window at positions that are not checkpoints did not panic")
	}
	var nz Samples // without zeros every position is known
	for _, x := range []Time{4, 3, 9, 5} {
		nz.Add(x)
	}
	if w := nz.Window(1, 3); w.Count() != 2 || w.Percentile(100) != 9 || w.Percentile(0) != 3 {
		t.Fatalf("window 1..3 of 4,3,9,5: count %d min %v max %v", w.Count(), w.Percentile(0), w.Percentile(100))
	}
}

// TestSamplesMerge: merging exact recorders is concatenation; merging
// past the limit gives exactly the histogram of all the samples, in
// either order, so replications or shards can be pooled.
func TestSamplesMerge(t *testing.T) {
	a, b := mixed(5, 30_000), mixed(6, 45_000)
	all := append(slices.Clone(a), b...)
	fill := func(v []Time, limit int) *Samples {
		var s Samples
		s.SetExactLimit(limit)
		for _, x := range v {
			s.Add(x)
		}
		return &s
	}
	for _, c := range []struct {
		name       string
		la, lb     int
		wantExact  bool
		compareAll int // limit of the all-in-one recorder to compare with
	}{
		{"exact+exact", ExactLimit, ExactLimit, true, ExactLimit},
		{"exact+exact over the limit", 50_000, ExactLimit, false, 50_000},
		{"hist+exact", 1000, ExactLimit, false, 1000},
		{"exact+hist", ExactLimit, 1000, false, 1000},
		{"hist+hist", 1000, 1000, false, 1000},
	} {
		s := fill(a, c.la)
		s.Merge(fill(b, c.lb))
		one := fill(all, c.compareAll)
		if s.Exact() != c.wantExact || s.Count() != len(all) {
			t.Fatalf("%s: exact %v count %d", c.name, s.Exact(), s.Count())
		}
		for _, p := range testPs {
			got := s.Percentile(p)
			within(t, c.name+" p"+ftoa(p), got, exactPct(all, p), c.wantExact)
			if !c.wantExact && got != one.Percentile(p) {
				t.Errorf("%s p%v: merged %v, one recorder %v", c.name, p, got, one.Percentile(p))
			}
		}
		r := fill(b, c.lb) // the other order (the receiver's limit applies)
		r.Merge(fill(a, c.la))
		for _, p := range testPs {
			if !c.wantExact && !r.Exact() && r.Percentile(p) != s.Percentile(p) {
				t.Errorf("%s p%v: B+A %v, A+B %v", c.name, p, r.Percentile(p), s.Percentile(p))
			}
		}
	}
}

// TestSamplesMergeThenAdd: a recorder goes on after a merge, also of one
// that holds only zeros.
func TestSamplesMergeThenAdd(t *testing.T) {
	var z, y Samples
	z.Add(0)
	z.Add(0)
	y.Add(5)
	y.Merge(&z)
	y.Merge(&Samples{})
	for i := range 200 {
		y.Add(Time(1000 + i))
	}
	// Sorted: 0, 0, 5, 1000..1199; rank ceil(p/100 x 203).
	if y.Count() != 203 || y.Percentile(0.5) != 0 || y.Percentile(1) != 5 || y.Percentile(1.5) != 1000 || y.Max() != 1199 {
		t.Fatalf("count %d p0.5 %v p1 %v p1.5 %v max %v", y.Count(), y.Percentile(0.5), y.Percentile(1), y.Percentile(1.5), y.Max())
	}
}

// TestSamplesBoundedMemory: past the limit a recorder allocates nothing
// per sample once its buckets cover the values' range.
func TestSamplesBoundedMemory(t *testing.T) {
	var s Samples
	s.SetExactLimit(100)
	v := mixed(7, 100_000)
	for _, x := range v {
		s.Add(x)
	}
	i := 0
	if n := testing.AllocsPerRun(100_000, func() { s.Add(v[i%len(v)]); i++ }); n != 0 {
		t.Errorf("%v allocations per sample past the limit, want 0", n)
	}
	if s.Exact() || len(s.h.pos)+len(s.h.neg) > 40<<subBits {
		t.Errorf("histogram of %d+%d buckets", len(s.h.pos), len(s.h.neg))
	}
}
