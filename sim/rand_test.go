package sim

import (
	"math"
	"math/bits"
	"testing"
)

// TestRandPinned pins the numbers a fixed stream draws today: any change
// to seeding, the generator or a variate formula changes every simulation
// result and must fail here.
func TestRandPinned(t *testing.T) {
	r := NewRand(42, "arrivals")
	for i, want := range []uint64{0x2e466cd1037d97fd, 0x56b0d787ef363d94, 0x066738753c9ea3e8, 0x42fb50d9ff0970a1} {
		if got := r.Uint64(); got != want {
			t.Errorf("Uint64 #%d = %#x, want %#x", i, got, want)
		}
	}
	r = NewRand(0, "")
	for i, want := range []uint64{0x21382ef092ed7068, 0x5b54c052757adf62} {
		if got := r.Uint64(); got != want {
			t.Errorf("seed 0 Uint64 #%d = %#x, want %#x", i, got, want)
		}
	}
	r = NewRand(42, "arrivals")
	want := [][4]float64{
		{0.18076210120078984, 0.41345074891722916, -0.01645715065825394, 0},
		{0.9235141136741366, 0.3497153286060617, -0.3547274746732592, 0},
		{0.07778848740846067, 2.0993076533976076, 2.2431960681829684, 1},
	}
	for i, w := range want {
		got := [4]float64{r.Float64(), r.ExpFloat64(), r.NormFloat64(), float64(r.IntN(10))}
		if got != w {
			t.Errorf("draw %d: Float64, ExpFloat64, NormFloat64, IntN(10) = %v, want %v", i, got, w)
		}
	}
	r = NewRand(1, "service")
	d := ExpDist(10 * Millisecond)
	for i, w := range []Time{17374824, 11630120, 4621385} {
		if got := d.Sample(r); got != w {
			t.Errorf("ExpDist sample %d = %d, want %d", i, got, w)
		}
	}
}

// TestGeneratorVectors checks splitmix64 and xoshiro256** against the
// published reference outputs (Vigna's C code).
func TestGeneratorVectors(t *testing.T) {
	x := uint64(0)
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		var out uint64
		x, out = splitmix64(x)
		if out != want {
			t.Errorf("splitmix64(0) #%d = %#x, want %#x", i, out, want)
		}
	}
	r := Rand{s: [4]uint64{1, 2, 3, 4}}
	for i, want := range []uint64{11520, 0, 1509978240, 1215971899390074240} {
		if got := r.Uint64(); got != want {
			t.Errorf("xoshiro256**{1,2,3,4} #%d = %d, want %d", i, got, want)
		}
	}
}

func TestRandStreams(t *testing.T) {
	first := func(seed uint64, name string) [4]uint64 {
		r := NewRand(seed, name)
		return [4]uint64{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
	}
	if a, b := first(7, "think"), first(7, "think"); a != b {
		t.Fatal("the same seed and name gave different streams")
	}
	seen := map[[4]uint64]string{}
	for _, seed := range []uint64{0, 1, 2, 7} {
		for _, name := range []string{"", "a", "b", "ab", "ba", "think", "service", "arrivals"} {
			f := first(seed, name)
			if prev, ok := seen[f]; ok {
				t.Errorf("seed %d %q gives the same stream as %s", seed, name, prev)
			}
			seen[f] = name
		}
	}
}

func TestFloat64Range(t *testing.T) {
	r := NewRand(8, "float")
	const n = 1_000_000
	var sum float64
	lo, hi := 1.0, 0.0
	for i := 0; i < n; i++ {
		f := r.Float64()
		if !(f >= 0 && f < 1) {
			t.Fatalf("Float64 = %v", f)
		}
		sum += f
		lo, hi = min(lo, f), max(hi, f)
	}
	if m := sum / n; math.Abs(m-0.5) > 0.002 {
		t.Errorf("mean %v, want 0.5", m)
	}
	if lo > 1e-5 || hi < 1-1e-5 {
		t.Errorf("range [%v, %v] does not reach the ends", lo, hi)
	}
	// The largest value Float64 can produce is below 1.
	if top := float64(uint64(math.MaxUint64)>>11) * (1.0 / (1 << 53)); top >= 1 {
		t.Errorf("largest Float64 %v >= 1", top)
	}
}

func TestMul64(t *testing.T) {
	r := NewRand(9, "mul")
	check := func(a, b uint64) {
		hi, lo := mul64(a, b)
		whi, wlo := bits.Mul64(a, b)
		if hi != whi || lo != wlo {
			t.Fatalf("mul64(%#x, %#x) = %#x %#x, want %#x %#x", a, b, hi, lo, whi, wlo)
		}
	}
	edge := []uint64{0, 1, 2, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for _, a := range edge {
		for _, b := range edge {
			check(a, b)
		}
	}
	for i := 0; i < 100000; i++ {
		check(r.Uint64(), r.Uint64())
	}
}

func TestIntN(t *testing.T) {
	r := NewRand(10, "intn")
	if r.IntN(1) != 0 {
		t.Fatal("IntN(1) != 0")
	}
	// Uniform over 10 buckets: chi-square with 9 degrees of freedom; the
	// 99.99th percentile is 33.7.
	const n, k = 1_000_000, 10
	var count [k]int
	for i := 0; i < n; i++ {
		v := r.IntN(k)
		if v >= k {
			t.Fatalf("IntN(%d) = %d", k, v)
		}
		count[v]++
	}
	var chi2 float64
	for _, c := range count {
		d := float64(c) - n/k
		chi2 += d * d / (n / k)
	}
	if chi2 > 33.7 {
		t.Errorf("IntN(10) counts %v: chi² %.1f", count, chi2)
	}
	// Huge n, where rejection matters: 3·2^62 rejects a quarter of draws
	// and a biased modulo would put 2/3 of the mass below n/2.
	const big = 3 << 62
	below := 0
	for i := 0; i < 100000; i++ {
		v := r.IntN(big)
		if v >= big {
			t.Fatalf("IntN(%d) = %d", uint64(big), v)
		}
		if v < big/2 {
			below++
		}
	}
	if f := float64(below) / 100000; math.Abs(f-0.5) > 0.01 {
		t.Errorf("IntN(3·2^62): %.3f below the middle, want 0.5", f)
	}
	for _, m := range []uint64{2, 3, 7, 1000, 1<<63 + 1, math.MaxUint64} {
		for i := 0; i < 1000; i++ {
			if v := r.IntN(m); v >= m {
				t.Fatalf("IntN(%d) = %d", m, v)
			}
		}
	}
}

// moments returns the mean and variance of n draws.
func moments(n int, draw func() float64) (mean, variance float64) {
	var sum, sum2 float64
	for i := 0; i < n; i++ {
		x := draw()
		sum += x
		sum2 += x * x
	}
	mean = sum / float64(n)
	return mean, sum2/float64(n) - mean*mean
}

func TestExpFloat64(t *testing.T) {
	r := NewRand(11, "exp")
	m, v := moments(1_000_000, func() float64 {
		x := r.ExpFloat64()
		if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			t.Fatalf("ExpFloat64 = %v", x)
		}
		return x
	})
	// Standard errors: 0.001 for the mean, about 0.003 for the variance.
	if math.Abs(m-1) > 0.005 || math.Abs(v-1) > 0.02 {
		t.Errorf("ExpFloat64 mean %v var %v, want 1 1", m, v)
	}
}

func TestNormFloat64(t *testing.T) {
	r := NewRand(12, "norm")
	var tail int
	m, v := moments(1_000_000, func() float64 {
		x := r.NormFloat64()
		if math.IsInf(x, 0) || math.IsNaN(x) {
			t.Fatalf("NormFloat64 = %v", x)
		}
		if x > z99 {
			tail++
		}
		return x
	})
	if math.Abs(m) > 0.005 || math.Abs(v-1) > 0.01 {
		t.Errorf("NormFloat64 mean %v var %v, want 0 1", m, v)
	}
	// P(Z > z99) = 1%: checks the shape, not just two moments.
	if f := float64(tail) / 1e6; math.Abs(f-0.01) > 0.0005 {
		t.Errorf("P(Z > 2.326) = %v, want 0.01", f)
	}
}

func TestStreamsAt(t *testing.T) {
	f := NewStreams(7, "query")
	a, b := f.At(3, 9), f.At(3, 9)
	for range 10 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("the same key gave two streams")
		}
	}
	// Neighbouring keys, other families and other seeds differ.
	seen := map[uint64]string{}
	for _, c := range []struct {
		name string
		r    Rand
	}{
		{"(3,9)", f.At(3, 9)}, {"(3,10)", f.At(3, 10)}, {"(4,9)", f.At(4, 9)}, {"(9,3)", f.At(9, 3)},
		{"(0,0)", f.At(0, 0)}, {"think (3,9)", NewStreams(7, "think").At(3, 9)}, {"seed 8 (3,9)", NewStreams(8, "query").At(3, 9)},
	} {
		v := c.r.Uint64()
		if other, dup := seen[v]; dup {
			t.Errorf("streams %s and %s start alike", c.name, other)
		}
		seen[v] = c.name
	}
	// The first draws across keys are uniform: a chi-square over 16 bins.
	var bins [16]int
	for i := range uint64(16000) {
		r := f.At(i/100, i%100)
		bins[r.Uint64()>>60]++
	}
	var chi float64
	for _, n := range bins {
		d := float64(n) - 1000
		chi += d * d / 1000
	}
	if chi > 37.7 { // 15 degrees of freedom, p = 0.001
		t.Errorf("first draws over keys: chi-square %.1f over 16 bins", chi)
	}
}
