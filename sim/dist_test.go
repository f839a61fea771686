package sim

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestDistMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("1e6 draws per distribution")
	}
	ln, err := LognormalP99(10*Millisecond, 40*Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []Dist{
		ConstDist(3 * Millisecond),
		ExpDist(10 * Millisecond),
		ExpDist(7 * Microsecond),
		UniformDist(2*Millisecond, 10*Millisecond),
		UniformDist(0, Second),
		LognormalDist(5*Millisecond, 0.5),
		ln,
	} {
		r := NewRand(uint64(i), "dist")
		m, v := moments(1_000_000, func() float64 {
			x := d.Sample(r)
			if x < 0 {
				t.Fatalf("%v: negative sample %v", d, x)
			}
			if d.Kind == Uniform && (x < d.Min || x > d.Max) {
				t.Fatalf("%v: sample %v out of range", d, x)
			}
			return float64(x)
		})
		mean := float64(d.MeanValue())
		scv := v / (m * m)
		if math.Abs(m-mean)/mean > 0.01 {
			t.Errorf("%v: sample mean %.6g, MeanValue %.6g", d, m, mean)
		}
		if want := d.SCV(); math.Abs(scv-want) > 0.03*math.Max(want, 0.1) {
			t.Errorf("%v: sample SCV %.4g, SCV() %.4g", d, scv, want)
		}
		t.Logf("%v: mean %.6g (want %.6g) SCV %.4g (want %.4g)", d, m, mean, scv, d.SCV())
	}
}

func TestDistBasics(t *testing.T) {
	r := NewRand(1, "basic")
	c := ConstDist(5 * Millisecond)
	before := *r
	if c.Sample(r) != 5*Millisecond || c.Random() || c.SCV() != 0 {
		t.Error("ConstDist")
	}
	if *r != before {
		t.Error("ConstDist drew from the stream")
	}
	u := UniformDist(Second, Second)
	if u.Sample(r) != Second || u.Random() || u.SCV() != 0 || u.MeanValue() != Second {
		t.Error("degenerate UniformDist")
	}
	if !ExpDist(1).Random() || !UniformDist(0, 1).Random() || !LognormalDist(1, 1).Random() {
		t.Error("Random false for a random distribution")
	}
	var zero Dist
	if zero.Sample(r) != 0 || zero.MeanValue() != 0 || zero.Random() {
		t.Error("zero Dist is not the constant 0")
	}
	if UniformDist(0, 0).SCV() != 0 {
		t.Error("SCV of uniform(0,0)")
	}
	for k := Const; k <= Empirical; k++ {
		got, err := ParseDistKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseDistKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := ParseDistKind("normal"); err == nil {
		t.Error("ParseDistKind accepted normal")
	}
	if s := DistKind(9).String(); s != "DistKind(9)" {
		t.Errorf("unknown kind prints %q", s)
	}
	for _, c := range []struct {
		d    Dist
		want string
	}{
		{ConstDist(Millisecond), "1ms"},
		{ExpDist(2 * Millisecond), "exp(mean 2ms)"},
		{UniformDist(Millisecond, 3*Millisecond), "uniform(1ms..3ms)"},
		{LognormalDist(Second, 0.5), "lognormal(mean 1s, sigma 0.5)"},
	} {
		if got := c.d.String(); got != c.want {
			t.Errorf("String = %q, want %q", got, c.want)
		}
	}
}

func TestLognormalP99(t *testing.T) {
	for _, c := range []struct{ mean, p99 Time }{
		{10 * Millisecond, 50 * Millisecond},
		{10 * Millisecond, 11 * Millisecond},
		{Millisecond, 3 * Millisecond},
		{2 * Millisecond, 29 * Millisecond}, // 14.5x, near the limit
	} {
		d, err := LognormalP99(c.mean, c.p99)
		if err != nil {
			t.Fatalf("LognormalP99(%v, %v): %v", c.mean, c.p99, err)
		}
		if d.Kind != Lognormal || d.Mean != c.mean || d.Sigma <= 0 || d.Sigma > z99 {
			t.Fatalf("LognormalP99(%v, %v) = %+v", c.mean, c.p99, d)
		}
		// Analytically: exp(μ + z99·σ) is the asked p99.
		mu := math.Log(c.mean.Seconds()) - d.Sigma*d.Sigma/2
		if got := math.Exp(mu + z99*d.Sigma); math.Abs(got-c.p99.Seconds()) > 1e-9*c.p99.Seconds() {
			t.Errorf("analytic p99 %v, want %v", got, c.p99.Seconds())
		}
		if testing.Short() {
			continue
		}
		r := NewRand(13, d.String())
		var s Samples
		for i := 0; i < 1_000_000; i++ {
			s.Add(d.Sample(r))
		}
		got := s.Percentile(99)
		if rel := math.Abs(float64(got-c.p99)) / float64(c.p99); rel > 0.02 {
			t.Errorf("%v: sampled p99 %v, asked %v (off %.2f%%)", d, got, c.p99, 100*rel)
		}
		// The mean's standard error is sqrt(SCV/n): 0.8% when σ = 2.
		tol := 5 * math.Sqrt(d.SCV()/1e6)
		if rel := math.Abs(float64(s.Mean()-c.mean)) / float64(c.mean); rel > tol {
			t.Errorf("%v: sampled mean %v, asked %v", d, s.Mean(), c.mean)
		}
	}
	limit := math.Exp(z99 * z99 / 2) // ≈ 14.97
	for _, c := range []struct{ mean, p99 Time }{
		{10 * Millisecond, 10 * Millisecond},
		{10 * Millisecond, 9 * Millisecond},
		{10 * Millisecond, 0},
		{0, 10 * Millisecond},
		{-Millisecond, 10 * Millisecond},
		{10 * Millisecond, 150 * Millisecond},
		{Second, FromSeconds(limit * 1.0001)},
	} {
		d, err := LognormalP99(c.mean, c.p99)
		if !errors.Is(err, ErrLognormalP99) {
			t.Errorf("LognormalP99(%v, %v) = %v, %v; want ErrLognormalP99", c.mean, c.p99, d, err)
		}
	}
	// Just inside the limit the shape is z99 (the double root).
	d, err := LognormalP99(Second, FromSeconds(limit*0.99999999))
	if err != nil || math.Abs(d.Sigma-z99) > 0.001 {
		t.Errorf("at the limit: %v, %v", d, err)
	}
	// The smaller shape: σ increases with p99/mean.
	var sig []float64
	for _, ratio := range []float64{1.1, 2, 5, 10, 14} {
		d, _ := LognormalP99(Second, FromSeconds(ratio))
		sig = append(sig, d.Sigma)
	}
	if !slices.IsSorted(sig) {
		t.Errorf("sigma not increasing with p99/mean: %v", sig)
	}
}
