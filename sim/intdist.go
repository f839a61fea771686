package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// IntKind names an integer distribution.
type IntKind uint8

const (
	IntConst     IntKind = iota // always Min
	IntUniform                  // each of Min..Max (inclusive) equally likely
	IntEmpirical                // values with weights (a probability table)
)

var intKindNames = [...]string{IntConst: "const", IntUniform: "uniform", IntEmpirical: "empirical"}

func (k IntKind) String() string {
	if int(k) < len(intKindNames) {
		return intKindNames[k]
	}
	return fmt.Sprintf("IntKind(%d)", k)
}

// ParseIntKind reads an integer distribution's name.
func ParseIntKind(s string) (IntKind, error) {
	for i, n := range intKindNames {
		if n == s {
			return IntKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown integer distribution %q: want const, uniform or empirical", s)
}

// IntDist is a distribution of counts (transactions per request,
// statements per transaction). The zero value is the constant 0. A draw
// takes at most one Float64 from the stream (none for a constant) and
// inverts the distribution function.
type IntDist struct {
	Kind     IntKind
	Min, Max int       // const: Min (= Max); uniform: the inclusive range; empirical: the smallest and largest value
	Table    *IntTable // IntEmpirical only; shared and never changed
}

// IntTable is a probability table of whole numbers.
type IntTable struct {
	values []int
	cum    []float64 // cumulative weights
	mean   float64
}

// ConstInt is the distribution that is always n.
func ConstInt(n int) IntDist { return IntDist{Kind: IntConst, Min: n, Max: n} }

// UniformInt draws each of lo..hi (inclusive) with equal probability.
func UniformInt(lo, hi int) (IntDist, error) {
	if hi < lo {
		return IntDist{}, fmt.Errorf("uniform: max (%d) is below min (%d)", hi, lo)
	}
	return IntDist{Kind: IntUniform, Min: lo, Max: hi}, nil
}

// EmpiricalInt draws values[i] with probability weights[i]/Σweights.
// Values may repeat (their weights add up); weights must be finite and not
// negative, with a positive total.
func EmpiricalInt(values []int, weights []float64) (IntDist, error) {
	if len(values) == 0 {
		return IntDist{}, fmt.Errorf("%w: no values", ErrEmpirical)
	}
	if len(values) != len(weights) {
		return IntDist{}, fmt.Errorf("%w: %d values but %d weights", ErrEmpirical, len(values), len(weights))
	}
	if len(values) > MaxEmpirical {
		return IntDist{}, fmt.Errorf("%w: %d values, at most %d", ErrEmpirical, len(values), MaxEmpirical)
	}
	w := map[int]float64{}
	for i, v := range values {
		x := weights[i]
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return IntDist{}, fmt.Errorf("%w: weight %v of value %d: want a number at or above 0", ErrEmpirical, x, v)
		}
		w[v] += x
	}
	vs := make([]int, 0, len(w))
	for v, x := range w {
		if x > 0 {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return IntDist{}, fmt.Errorf("%w: every weight is 0", ErrEmpirical)
	}
	slices.Sort(vs)
	t := &IntTable{values: vs}
	total := 0.0
	for _, v := range vs {
		total += w[v]
		t.cum = append(t.cum, total)
		t.mean += float64(v) * w[v]
	}
	t.mean /= total
	if len(vs) == 1 {
		return ConstInt(vs[0]), nil
	}
	return IntDist{Kind: IntEmpirical, Min: vs[0], Max: vs[len(vs)-1], Table: t}, nil
}

// IntSamples is the bootstrap distribution of recorded counts: a draw is
// one of them, each with probability 1/len(samples).
func IntSamples(samples []int) (IntDist, error) {
	w := make([]float64, len(samples))
	for i := range w {
		w[i] = 1
	}
	return EmpiricalInt(samples, w)
}

// Sample draws one count from r.
func (d IntDist) Sample(r *Rand) int {
	switch d.Kind {
	case IntUniform:
		if d.Min == d.Max {
			return d.Min
		}
		n := float64(d.Max) - float64(d.Min) + 1
		return min(d.Min+int(r.Float64()*n), d.Max)
	case IntEmpirical:
		t := d.Table
		p := r.Float64() * t.cum[len(t.cum)-1]
		i := sort.Search(len(t.cum), func(i int) bool { return t.cum[i] > p })
		return t.values[min(i, len(t.values)-1)]
	default:
		return d.Min
	}
}

// Random reports whether Sample draws from the stream.
func (d IntDist) Random() bool { return d.Kind != IntConst && d.Min != d.Max }

// MeanValue is the distribution's mean.
func (d IntDist) MeanValue() float64 {
	switch d.Kind {
	case IntUniform:
		return (float64(d.Min) + float64(d.Max)) / 2
	case IntEmpirical:
		return d.Table.mean
	default:
		return float64(d.Min)
	}
}

// Prob is the probability that a draw is v.
func (d IntDist) Prob(v int) float64 {
	switch d.Kind {
	case IntUniform:
		if v < d.Min || v > d.Max {
			return 0
		}
		return 1 / (float64(d.Max) - float64(d.Min) + 1)
	case IntEmpirical:
		t := d.Table
		i, ok := slices.BinarySearch(t.values, v)
		if !ok {
			return 0
		}
		w := t.cum[i]
		if i > 0 {
			w -= t.cum[i-1]
		}
		return w / t.cum[len(t.cum)-1]
	default:
		if v == d.Min {
			return 1
		}
		return 0
	}
}

func (d IntDist) String() string {
	switch d.Kind {
	case IntUniform:
		return fmt.Sprintf("uniform(%d..%d)", d.Min, d.Max)
	case IntEmpirical:
		t := d.Table
		var b strings.Builder
		b.WriteString("empirical(")
		for i, v := range t.values {
			if i == 8 {
				fmt.Fprintf(&b, " ... %d values", len(t.values))
				break
			}
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d:%.3g", v, d.Prob(v))
		}
		fmt.Fprintf(&b, ", mean %.3g)", t.mean)
		return b.String()
	default:
		return fmt.Sprint(d.Min)
	}
}
