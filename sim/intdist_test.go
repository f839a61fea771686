package sim

import (
	"errors"
	"math"
	"testing"
)

func TestIntDist(t *testing.T) {
	uni, err := UniformInt(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	emp, err := EmpiricalInt([]int{3, 1, 2, 1}, []float64{1, 3, 2, 2})
	if err != nil {
		t.Fatal(err)
	}
	samp, err := IntSamples([]int{2, 2, 2, 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d    IntDist
		mean float64
		prob map[int]float64
	}{
		{ConstInt(4), 4, map[int]float64{4: 1}},
		{uni, 2, map[int]float64{1: 1. / 3, 2: 1. / 3, 3: 1. / 3}},
		{emp, (1*5 + 2*2 + 3*1) / 8., map[int]float64{1: 5. / 8, 2: 2. / 8, 3: 1. / 8}},
		{samp, 11 / 4., map[int]float64{2: .75, 5: .25}},
	} {
		if got := c.d.MeanValue(); math.Abs(got-c.mean) > 1e-12 {
			t.Errorf("%v: MeanValue = %v, want %v", c.d, got, c.mean)
		}
		const n = 200_000
		r := NewRand(1, c.d.String())
		count := map[int]int{}
		sum := 0
		for i := 0; i < n; i++ {
			v := c.d.Sample(r)
			count[v]++
			sum += v
		}
		for v, p := range c.prob {
			if got := c.d.Prob(v); math.Abs(got-p) > 1e-12 {
				t.Errorf("%v: Prob(%d) = %v, want %v", c.d, v, got, p)
			}
			got := float64(count[v]) / n
			if math.Abs(got-p) > 5*math.Sqrt(p*(1-p)/n)+1e-12 {
				t.Errorf("%v: %d drawn %.4f of the time, want %.4f", c.d, v, got, p)
			}
		}
		if len(count) != len(c.prob) {
			t.Errorf("%v: drew %v", c.d, count)
		}
		if m := float64(sum) / n; math.Abs(m-c.mean) > 0.01*c.mean {
			t.Errorf("%v: sampled mean %v, want %v", c.d, m, c.mean)
		}
	}
	// A constant draws nothing; the others one Float64 each.
	r, ref := NewRand(2, "c"), NewRand(2, "c")
	ConstInt(3).Sample(r)
	if *r != *ref {
		t.Error("ConstInt drew from the stream")
	}
	for _, d := range []IntDist{uni, emp} {
		d.Sample(r)
		ref.Float64()
		if *r != *ref {
			t.Errorf("%v: a draw took more than one Float64", d)
		}
	}
	if ConstInt(2).Random() || !uni.Random() || !emp.Random() {
		t.Error("Random")
	}
	if one, _ := EmpiricalInt([]int{3, 4}, []float64{2, 0}); one.Kind != IntConst || one.Min != 3 {
		t.Errorf("a table with one value of positive weight is %v, want the constant 3", one)
	}
	for _, k := range []IntKind{IntConst, IntUniform, IntEmpirical} {
		if got, err := ParseIntKind(k.String()); err != nil || got != k {
			t.Errorf("ParseIntKind(%q) = %v, %v", k, got, err)
		}
	}
	if _, err := ParseIntKind("poisson"); err == nil {
		t.Error("ParseIntKind accepted poisson")
	}
	for _, c := range []struct {
		d    IntDist
		want string
	}{{ConstInt(2), "2"}, {uni, "uniform(1..3)"}, {samp, "empirical(2:0.75 5:0.25, mean 2.75)"}} {
		if got := c.d.String(); got != c.want {
			t.Errorf("String = %q, want %q", got, c.want)
		}
	}
}

func TestIntDistErrors(t *testing.T) {
	if _, err := UniformInt(3, 1); err == nil {
		t.Error("UniformInt(3, 1) accepted")
	}
	for name, f := range map[string]func() error{
		"none":       func() error { _, err := EmpiricalInt(nil, nil); return err },
		"mismatch":   func() error { _, err := EmpiricalInt([]int{1}, []float64{1, 2}); return err },
		"negative":   func() error { _, err := EmpiricalInt([]int{1, 2}, []float64{1, -2}); return err },
		"NaN":        func() error { _, err := EmpiricalInt([]int{1}, []float64{math.NaN()}); return err },
		"all zero":   func() error { _, err := EmpiricalInt([]int{1, 2}, []float64{0, 0}); return err },
		"no samples": func() error { _, err := IntSamples(nil); return err },
	} {
		if err := f(); !errors.Is(err, ErrEmpirical) {
			t.Errorf("%s: %v, want ErrEmpirical", name, err)
		}
	}
}
