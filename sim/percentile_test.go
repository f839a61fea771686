package sim

import (
	"math"
	"slices"
	"testing"
)

// shuffled returns the samples 1..n in a random order.
func shuffled(r *Rand, n int) *Samples {
	v := make([]Time, n)
	for i := range v {
		v[i] = Time(i + 1)
	}
	for i := n - 1; i > 0; i-- {
		j := r.IntN(uint64(i + 1))
		v[i], v[j] = v[j], v[i]
	}
	var s Samples
	for _, x := range v {
		s.Add(x)
	}
	return &s
}

func TestPercentileNearestRank(t *testing.T) {
	r := NewRand(5, "pct")
	cases := []struct {
		n    int
		p    float64
		want Time // with samples 1..n the k-th smallest is k
	}{
		{1, 0, 1}, {1, 1, 1}, {1, 50, 1}, {1, 99.9, 1}, {1, 100, 1},
		{2, 50, 1}, {2, 50.1, 2},
		{10, 50, 5}, {10, 10, 1}, {10, 10.0001, 2}, {10, 90, 9}, {10, 91, 10},
		{20, 95, 19}, {20, 94.9, 19}, {20, 95.1, 20},
		{100, 99, 99}, {100, 99.5, 100}, {100, 1, 1}, {100, 0.5, 1},
		{1000, 95, 950}, {1000, 99, 990}, {1000, 99.9, 999}, {1000, 0.1, 1}, {1000, 50, 500},
		{7, 100, 7}, {7, 200, 7}, {7, 0, 1}, {7, -5, 1},
		{3, 100.0 / 3, 1}, {3, 200.0 / 3, 2},
	}
	for _, c := range cases {
		s := shuffled(r, c.n)
		if got := s.Percentile(c.p); got != c.want {
			t.Errorf("n=%d p%v = %d, want %d", c.n, c.p, got, c.want)
		}
	}
	var empty Samples
	if empty.Percentile(50) != 0 || empty.Mean() != 0 || empty.Max() != 0 || empty.Count() != 0 {
		t.Error("empty Samples is not all zero")
	}
}

// TestPercentileExactRank compares the rank with exact integer arithmetic
// for percentiles written with up to three decimals (p = P/1000), the way
// a user writes them (p99.9, p99.99 is P=99990), over many sample counts.
func TestPercentileExactRank(t *testing.T) {
	r := NewRand(6, "pct")
	ps := []int64{1, 500, 1000, 25000, 50000, 75000, 90000, 95000, 99000, 99500, 99900, 99990, 99999, 100000, 33333, 66667}
	for trial := 0; trial < 300; trial++ {
		n := int64(1 + r.IntN(3_000_000))
		if trial < 100 {
			n = int64(1 + r.IntN(2000))
		}
		for _, P := range ps {
			p := float64(P) / 1000
			// k = ceil(P·n / 100000)
			k := (P*n + 99999) / 100000
			k = min(max(k, 1), n)
			// The same formula as Percentile, without sorting n samples.
			got := int64(math.Ceil(p*float64(n)/100 - 1e-9))
			got = min(max(got, 1), n)
			if got != k {
				t.Errorf("n=%d p%v: rank %d, want %d", n, p, got, k)
			}
		}
	}
	// And one real case through Percentile with a fractional p.
	s := shuffled(r, 123457)
	for _, P := range ps {
		k := (P*123457 + 99999) / 100000
		if got := s.Percentile(float64(P) / 1000); got != Time(k) {
			t.Errorf("n=123457 p%v = %d, want %d", float64(P)/1000, got, k)
		}
	}
}

func TestSamplesMeanAndResort(t *testing.T) {
	var s Samples
	for _, v := range []Time{3, 1, 2} {
		s.Add(v)
	}
	if s.Mean() != 2 || s.Max() != 3 || s.Percentile(0) != 1 {
		t.Fatalf("Mean %v Max %v min %v", s.Mean(), s.Max(), s.Percentile(0))
	}
	// Adding after a query must re-sort.
	s.Add(0)
	s.Add(10)
	if s.Percentile(0) != 0 || s.Max() != 10 || s.Count() != 5 {
		t.Fatalf("after more Adds: min %v max %v count %d", s.Percentile(0), s.Max(), s.Count())
	}
	// Mean rounds to the nearest nanosecond: (0+1+2+3+10)/5 = 3.2 -> 3.
	if s.Mean() != 3 {
		t.Errorf("Mean %v, want 3", s.Mean())
	}
	var u Samples
	u.Add(1)
	u.Add(2)
	if u.Mean() != 2 { // 1.5 rounds half away from zero
		t.Errorf("Mean of 1,2 = %v, want 2", u.Mean())
	}
}

// TestPercentileExpOracle: the M/M/1 sojourn time is exponential with
// rate μ−λ (reference §2.2); with λ=0.8, μ=1 its quantiles are
// T_p = −ln(1−p)/(μ−λ). 1e6 samples must land within 1% (2% at p99.9).
func TestPercentileExpOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("1e6 samples")
	}
	const lambda, mu = 0.8, 1.0
	d := ExpDist(FromSeconds(1 / (mu - lambda)))
	r := NewRand(7, "sojourn")
	var s Samples
	for i := 0; i < 1_000_000; i++ {
		s.Add(d.Sample(r))
	}
	for _, c := range []struct{ p, want, tol float64 }{
		{50, 3.465735903, 0.01},
		{90, 11.51292546, 0.01},
		{95, 14.97866137, 0.01},
		{99, 23.02585093, 0.01},
		{99.9, 34.53877639, 0.02},
	} {
		if oracle := -math.Log(1-c.p/100) / (mu - lambda); math.Abs(oracle-c.want) > 1e-8 {
			t.Fatalf("oracle p%v = %v, reference says %v", c.p, oracle, c.want)
		}
		got := s.Percentile(c.p).Seconds()
		if rel := math.Abs(got-c.want) / c.want; rel > c.tol {
			t.Errorf("p%v = %.6gs, want %.6gs (off %.2f%%)", c.p, got, c.want, 100*rel)
		}
	}
	if got := s.Mean().Seconds(); math.Abs(got-5)/5 > 0.01 {
		t.Errorf("mean %v, want 5s", got)
	}
	// Percentile answers are recorded values.
	if !slices.Contains(s.flat, s.Percentile(99.9)) {
		t.Error("p99.9 is not a recorded sample")
	}
}

// TestPercentileSelection asks many percentiles in random order of
// recorders whose samples come in shapes that trouble a selection
// (sorted, reversed, all equal, few values, organ pipe, random with zeros
// and negatives), with samples added between the questions, and checks
// every answer against a sort.
func TestPercentileSelection(t *testing.T) {
	r := NewRand(12, "select")
	shapes := map[string]func(i, n int) Time{
		"sorted":   func(i, n int) Time { return Time(i + 1) },
		"reversed": func(i, n int) Time { return Time(n - i) },
		"equal":    func(i, n int) Time { return 7 },
		"few":      func(i, n int) Time { return Time(r.IntN(3)) - 1 },
		"organ":    func(i, n int) Time { return Time(min(i, n-i) + 1) },
		"random":   func(i, n int) Time { return Time(r.IntN(1000)) - 100 },
	}
	for name, f := range shapes {
		for _, n := range []int{1, 5, 17, 100, 5000, 70_000} {
			var s Samples
			var all []Time
			for round := 0; round < 3; round++ {
				for i := range n {
					x := f(i, n)
					s.Add(x)
					all = append(all, x)
				}
				sorted := slices.Clone(all)
				slices.Sort(sorted)
				for q := 0; q < 25; q++ {
					p := float64(r.IntN(100_001)) / 1000
					k := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
					k = min(max(k, 1), len(sorted))
					if got := s.Percentile(p); got != sorted[k-1] {
						t.Fatalf("%s n=%d round %d: p%v = %v, want %v", name, n, round, p, got, sorted[k-1])
					}
				}
				if s.Max() != sorted[len(sorted)-1] || s.Percentile(0) != sorted[0] {
					t.Fatalf("%s n=%d: max %v min %v, want %v %v", name, n, s.Max(), s.Percentile(0), sorted[len(sorted)-1], sorted[0])
				}
			}
		}
	}
}
