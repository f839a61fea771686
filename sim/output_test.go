package sim

import (
	"math"
	"testing"
)

func TestTQuantile(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.7062}, {2, 4.3027}, {4, 2.7764}, {9, 2.2622}, {19, 2.0930}, {29, 2.0452}, {1000, 1.9623}, {1e6, 1.9600}} {
		if got := TQuantile(c.df); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("TQuantile(%d) = %.4f, want %.4f", c.df, got, c.want)
		}
	}
	if !math.IsInf(TQuantile(0), 1) {
		t.Error("TQuantile(0) should be +Inf")
	}
}

func TestMeanCI(t *testing.T) {
	m, h, ok := MeanCI([]float64{1, 2, 3, 4, 5})
	// sd = sqrt(2.5), t(4) = 2.7764: half = 2.7764*1.5811/2.2361 = 1.9632.
	if !ok || m != 3 || math.Abs(h-1.9632) > 1e-3 {
		t.Errorf("MeanCI(1..5) = %v ± %v (%v), want 3 ± 1.963", m, h, ok)
	}
	if m, h, ok := MeanCI([]float64{7}); ok || m != 7 || h != 0 {
		t.Errorf("one observation: %v ± %v (%v), want 7 ± 0, not ok", m, h, ok)
	}
	if _, _, ok := MeanCI(nil); ok {
		t.Error("no observation gave an interval")
	}
}

// The interval covers the true mean about 95 % of the time: 2,000 seeded
// trials of 10 normal observations each.
func TestMeanCICoverage(t *testing.T) {
	r := NewRand(3, "coverage")
	covered := 0
	const trials = 2000
	for range trials {
		xs := make([]float64, 10)
		for i := range xs {
			xs[i] = 5 + 2*r.NormFloat64()
		}
		m, h, _ := MeanCI(xs)
		if math.Abs(m-5) <= h {
			covered++
		}
	}
	// Binomial(2000, 0.95): sd 9.7; allow four of them.
	if covered < 1861 || covered > 1939 {
		t.Errorf("covered %d of %d, want about 1900", covered, trials)
	}
}

func TestPairedCI(t *testing.T) {
	// Large shared noise, a small constant difference: the paired interval
	// sees the difference, the separate ones would not.
	r := NewRand(4, "paired")
	a, b := make([]float64, 10), make([]float64, 10)
	for i := range a {
		noise := 100 * r.NormFloat64()
		a[i] = 50 + noise + 0.1*r.NormFloat64()
		b[i] = 49 + noise + 0.1*r.NormFloat64()
	}
	m, h, ok := PairedCI(a, b)
	if !ok || !Differs(m, h) || math.Abs(m-1) > 0.2 {
		t.Errorf("paired difference %v ± %v: want about 1, real", m, h)
	}
	ma, ha, _ := MeanCI(a)
	mb, hb, _ := MeanCI(b)
	if math.Abs(ma-mb) > ha+hb {
		t.Errorf("unpaired intervals %v ± %v and %v ± %v should overlap under this noise", ma, ha, mb, hb)
	}
}

func TestMSER5(t *testing.T) {
	r := NewRand(5, "mser")
	// A transient of 500 observations decaying from 10 to 1, then 4,500
	// stationary around 1.
	xs := make([]float64, 5000)
	for i := range xs {
		level := 1.0
		if i < 500 {
			level = 1 + 9*float64(500-i)/500
		}
		xs[i] = level + 0.2*r.NormFloat64()
	}
	d, atLimit := MSER5(xs)
	if d%MSERBatch != 0 || d < 350 || d > 700 || atLimit {
		t.Errorf("MSER5 deleted %d (at limit %v), want about 500", d, atLimit)
	}
	// A stationary series loses little.
	for i := range xs {
		xs[i] = 1 + 0.2*r.NormFloat64()
	}
	if d, _ := MSER5(xs); d > 500 {
		t.Errorf("stationary series: deleted %d of 5000", d)
	}
	// A series that keeps rising (no steady state) truncates at the limit.
	for i := range xs {
		xs[i] = float64(5000-i) + r.NormFloat64()
	}
	if _, atLimit := MSER5(xs); !atLimit {
		t.Error("a falling series should hit the truncation limit")
	}
	if d, _ := MSER5(xs[:7]); d != 0 {
		t.Errorf("a series of one batch was truncated by %d", d)
	}
}
