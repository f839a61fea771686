package sim

import (
	"errors"
	"math"
	"testing"
)

// draws samples n values of d and returns them as recorded Samples.
func draws(d Dist, seed uint64, n int) *Samples {
	r := NewRand(seed, d.String())
	var s Samples
	for i := 0; i < n; i++ {
		s.Add(d.Sample(r))
	}
	return &s
}

func TestLognormalMedianP99(t *testing.T) {
	for _, c := range []struct{ p50, p99 Time }{
		{2 * Millisecond, 25 * Millisecond}, // issue 12's statements
		{10 * Millisecond, 11 * Millisecond},
		{Millisecond, 400 * Millisecond},
	} {
		d, err := LognormalMedianP99(c.p50, c.p99)
		if err != nil {
			t.Fatalf("LognormalMedianP99(%v, %v): %v", c.p50, c.p99, err)
		}
		for _, q := range []struct {
			q    float64
			want Time
		}{{0.5, c.p50}, {0.99, c.p99}} {
			if got := d.Quantile(q.q); math.Abs(float64(got-q.want)) > 1e-6*float64(q.want) {
				t.Errorf("%v: Quantile(%v) = %v, want %v", d, q.q, got, q.want)
			}
		}
		if testing.Short() {
			continue
		}
		s := draws(d, 7, 1_000_000)
		for _, q := range []struct {
			p    float64
			want Time
		}{{50, c.p50}, {99, c.p99}} {
			got := s.Percentile(q.p)
			if rel := math.Abs(float64(got-q.want)) / float64(q.want); rel > 0.02 {
				t.Errorf("%v: sampled p%v %v, asked %v (off %.2f%%)", d, q.p, got, q.want, 100*rel)
			}
		}
	}
	for _, c := range []struct{ p50, p99 Time }{
		{5 * Millisecond, 5 * Millisecond},
		{5 * Millisecond, 2 * Millisecond},
		{0, 2 * Millisecond},
	} {
		if d, err := LognormalMedianP99(c.p50, c.p99); !errors.Is(err, ErrLognormalMedian) {
			t.Errorf("LognormalMedianP99(%v, %v) = %v, %v; want ErrLognormalMedian", c.p50, c.p99, d, err)
		}
	}
	// p50 with sigma: the median is exact, the mean is p50·e^(σ²/2).
	d := LognormalMedianSigma(4*Millisecond, 1)
	if got := d.Quantile(0.5); math.Abs(float64(got-4*Millisecond)) > 10 {
		t.Errorf("LognormalMedianSigma median %v", got)
	}
	if want := FromSeconds(0.004 * math.Exp(0.5)); d.Mean != want {
		t.Errorf("LognormalMedianSigma mean %v, want %v", d.Mean, want)
	}
}

func TestEmpiricalSamples(t *testing.T) {
	raw := []Time{5, 1, 3, 3, 2, 4, 3, 10, 1, 8} // ns; unsorted, with repeats
	e, err := NewEmpiricalSamples(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.Mean(), Time(4); got != want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
	// Nearest rank, as Samples.Percentile.
	var rec Samples
	for _, x := range raw {
		rec.Add(x)
	}
	for _, p := range []float64{1, 10, 25, 30, 50, 70, 90, 99, 100} {
		if got, want := e.Quantile(p/100), rec.Percentile(p); got != want {
			t.Errorf("Quantile(%v) = %v, nearest rank %v", p/100, got, want)
		}
	}
	// Every draw is one of the samples, with its share of them.
	d := EmpiricalDist(e)
	if d.Kind != Empirical || d.MeanValue() != 4 || !d.Random() {
		t.Errorf("EmpiricalDist = %+v", d)
	}
	const n = 200_000
	r := NewRand(3, "empirical")
	count := map[Time]int{}
	for i := 0; i < n; i++ {
		count[d.Sample(r)]++
	}
	share := map[Time]float64{1: .2, 2: .1, 3: .3, 4: .1, 5: .1, 8: .1, 10: .1}
	if len(count) != len(share) {
		t.Errorf("drew %d distinct values, want %d: %v", len(count), len(share), count)
	}
	for v, p := range share {
		got := float64(count[v]) / n
		if math.Abs(got-p) > 5*math.Sqrt(p*(1-p)/n) {
			t.Errorf("value %v drawn %.4f of the time, want %.2f", v, got, p)
		}
	}
	one, _ := NewEmpiricalSamples([]Time{7 * Millisecond})
	if EmpiricalDist(one).Random() {
		t.Error("a single sample is random")
	}
}

func TestEmpiricalHistogram(t *testing.T) {
	// 50 values in (0,1ms], 30 in (1,2ms], 0 in (2,4ms], 20 in (4,10ms].
	e, err := NewEmpiricalHistogram(0, []Bucket{{Millisecond, 50}, {2 * Millisecond, 30}, {4 * Millisecond, 0}, {10 * Millisecond, 20}})
	if err != nil {
		t.Fatal(err)
	}
	// mean = .5·0.5 + .3·1.5 + .2·7 = 2.1ms
	if got := e.Mean(); got != 2100*Microsecond {
		t.Errorf("Mean = %v, want 2.1ms", got)
	}
	for _, c := range []struct {
		q    float64
		want Time
	}{{0.25, 500 * Microsecond}, {0.5, Millisecond}, {0.65, 1500 * Microsecond}, {0.8, 2 * Millisecond}, {0.9, 7 * Millisecond}, {1, 10 * Millisecond}} {
		if got := e.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if testing.Short() {
		return
	}
	d := EmpiricalDist(e)
	s := draws(d, 11, 1_000_000)
	for _, p := range []float64{10, 50, 65, 90, 99} {
		got, want := s.Percentile(p), e.Quantile(p/100)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.01 {
			t.Errorf("sampled p%v %v, table %v", p, got, want)
		}
	}
	if rel := math.Abs(float64(s.Mean()-d.MeanValue())) / float64(d.MeanValue()); rel > 0.01 {
		t.Errorf("sampled mean %v, table %v", s.Mean(), d.MeanValue())
	}
	var sum, sq float64
	r := NewRand(11, d.String()) // the same draws again
	for range 1_000_000 {
		x := d.Sample(r)
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	m := sum / 1e6
	if scv := (sq/1e6 - m*m) / (m * m); math.Abs(scv-d.SCV()) > 0.02*d.SCV() {
		t.Errorf("sampled SCV %.4f, table %.4f", scv, d.SCV())
	}
}

func TestEmpiricalOneFloatPerDraw(t *testing.T) {
	e, _ := NewEmpiricalHistogram(Millisecond, []Bucket{{2 * Millisecond, 1}, {3 * Millisecond, 2}})
	d := EmpiricalDist(e)
	r, ref := NewRand(5, "x"), NewRand(5, "x")
	for i := 0; i < 1000; i++ {
		u := ref.Float64()
		got := d.Sample(r)
		// The inverse CDF at u, computed by hand: 1/3 of the weight in
		// (1ms, 2ms], 2/3 in (2ms, 3ms].
		want := FromSeconds(0.001 + 0.003*u)
		if u >= 1.0/3 {
			want = FromSeconds(0.002 + 0.0015*(u-1.0/3))
		}
		if math.Abs(float64(got-want)) > 1 {
			t.Fatalf("draw %d: %v, want %v (u = %v)", i, got, want, u)
		}
	}
	if *r != *ref {
		t.Error("the draws took more than one Float64 each")
	}
}

func TestEmpiricalErrors(t *testing.T) {
	for name, f := range map[string]func() error{
		"no samples":       func() error { _, err := NewEmpiricalSamples(nil); return err },
		"negative sample":  func() error { _, err := NewEmpiricalSamples([]Time{1, -1}); return err },
		"no buckets":       func() error { _, err := NewEmpiricalHistogram(0, nil); return err },
		"falling bounds":   func() error { _, err := NewEmpiricalHistogram(0, []Bucket{{2, 1}, {2, 1}}); return err },
		"bound below min":  func() error { _, err := NewEmpiricalHistogram(5, []Bucket{{5, 1}}); return err },
		"negative count":   func() error { _, err := NewEmpiricalHistogram(0, []Bucket{{2, -1}, {3, 2}}); return err },
		"all counts zero":  func() error { _, err := NewEmpiricalHistogram(0, []Bucket{{2, 0}}); return err },
		"negative minimum": func() error { _, err := NewEmpiricalHistogram(-1, []Bucket{{2, 1}}); return err },
	} {
		if err := f(); !errors.Is(err, ErrEmpirical) {
			t.Errorf("%s: %v, want ErrEmpirical", name, err)
		}
	}
}

func TestDistQuantile(t *testing.T) {
	if testing.Short() {
		t.Skip("1e6 draws per distribution")
	}
	ln, _ := LognormalP99(10*Millisecond, 40*Millisecond)
	for i, d := range []Dist{
		ExpDist(10 * Millisecond),
		UniformDist(2*Millisecond, 10*Millisecond),
		LognormalDist(5*Millisecond, 0.5),
		ln,
	} {
		s := draws(d, uint64(i), 1_000_000)
		for _, p := range []float64{10, 50, 90, 99} {
			got, want := s.Percentile(p), d.Quantile(p/100)
			if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.02 {
				t.Errorf("%v: sampled p%v %v, Quantile %v", d, p, got, want)
			}
		}
	}
	if got := ConstDist(3).Quantile(0.7); got != 3 {
		t.Errorf("const quantile %v", got)
	}
}
