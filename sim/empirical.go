package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// EmpiricalTable is a distribution of durations read from data: recorded
// samples, each value drawn with its share of the samples (the bootstrap),
// or a histogram, each bucket drawn with its share of the counts and the
// value spread uniformly inside the bucket. A draw takes exactly one
// Float64 from the stream and inverts the distribution function, so the
// same table and stream give the same durations on every machine. An
// EmpiricalTable is never changed after it is built and may be shared.
type EmpiricalTable struct {
	lo, hi []Time    // segment i spans [lo[i], hi[i]]; a recorded value has lo == hi
	cum    []float64 // cumulative weights; cum[len-1] is the total
	mean   float64   // nanoseconds
	m2     float64   // E[X²], nanoseconds²
	what   string    // "1000 samples", "12 buckets"
}

// Bucket is one histogram bucket: Count values at or below Upper and above
// the previous bucket's Upper (or the histogram's lower bound).
type Bucket struct {
	Upper Time
	Count int64
}

// ErrEmpirical is wrapped by every error about an empirical table.
var ErrEmpirical = errors.New("empirical distribution")

// MaxEmpirical bounds the samples or buckets of one table (80 MB of samples).
const MaxEmpirical = 10_000_000

// NewEmpiricalSamples builds the bootstrap distribution of samples: a draw
// is one of them, each with probability 1/len(samples). The order of the
// samples does not matter. It needs at least one sample, none negative.
func NewEmpiricalSamples(samples []Time) (*EmpiricalTable, error) {
	if len(samples) == 0 {
		return nil, fmt.Errorf("%w: no samples", ErrEmpirical)
	}
	if len(samples) > MaxEmpirical {
		return nil, fmt.Errorf("%w: %d samples, at most %d", ErrEmpirical, len(samples), MaxEmpirical)
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	if s[0] < 0 {
		return nil, fmt.Errorf("%w: sample %v is negative", ErrEmpirical, s[0])
	}
	e := &EmpiricalTable{what: plural(len(s), "sample")}
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		e.add(s[i], s[i], float64(j-i))
		i = j
	}
	e.finish()
	return e, nil
}

// NewEmpiricalHistogram builds the distribution of a histogram whose first
// bucket starts at lower: bucket i holds Count values spread uniformly over
// (Upper[i-1], Upper[i]]. Uppers must rise strictly from above lower,
// counts must not be negative, and at least one must be above 0.
func NewEmpiricalHistogram(lower Time, buckets []Bucket) (*EmpiricalTable, error) {
	if len(buckets) == 0 {
		return nil, fmt.Errorf("%w: no buckets", ErrEmpirical)
	}
	if len(buckets) > MaxEmpirical {
		return nil, fmt.Errorf("%w: %d buckets, at most %d", ErrEmpirical, len(buckets), MaxEmpirical)
	}
	if lower < 0 {
		return nil, fmt.Errorf("%w: lower bound %v is negative", ErrEmpirical, lower)
	}
	e := &EmpiricalTable{what: plural(len(buckets), "bucket")}
	prev := lower
	for i, b := range buckets {
		if b.Upper <= prev {
			if i == 0 {
				return nil, fmt.Errorf("%w: bucket 1: upper bound %v must be above the lower bound %v", ErrEmpirical, b.Upper, lower)
			}
			return nil, fmt.Errorf("%w: bucket %d: upper bound %v must be above the previous bucket's %v (bounds rise strictly)", ErrEmpirical, i+1, b.Upper, prev)
		}
		if b.Count < 0 {
			return nil, fmt.Errorf("%w: bucket %d: count %d is negative", ErrEmpirical, i+1, b.Count)
		}
		if b.Count > 0 {
			e.add(prev, b.Upper, float64(b.Count))
		}
		prev = b.Upper
	}
	if len(e.cum) == 0 {
		return nil, fmt.Errorf("%w: every bucket count is 0", ErrEmpirical)
	}
	e.finish()
	return e, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (e *EmpiricalTable) add(lo, hi Time, w float64) {
	total := 0.0
	if n := len(e.cum); n > 0 {
		total = e.cum[n-1]
	}
	e.lo, e.hi, e.cum = append(e.lo, lo), append(e.hi, hi), append(e.cum, total+w)
	a, b := float64(lo), float64(hi)
	e.mean += w * (a + b) / 2
	e.m2 += w * (a*a + a*b + b*b) / 3
}

func (e *EmpiricalTable) finish() {
	total := e.cum[len(e.cum)-1]
	e.mean /= total
	e.m2 /= total
}

// at is the inverse distribution function at cumulative weight p; strict
// picks the first segment whose cumulative weight is above p (a draw),
// otherwise at or above it (a quantile by the nearest-rank rule).
func (e *EmpiricalTable) at(p float64, strict bool) Time {
	n := len(e.cum)
	i := sort.Search(n, func(i int) bool {
		if strict {
			return e.cum[i] > p
		}
		return e.cum[i] >= p
	})
	i = min(i, n-1)
	lo, hi := e.lo[i], e.hi[i]
	if lo == hi {
		return lo
	}
	start := 0.0
	if i > 0 {
		start = e.cum[i-1]
	}
	frac := min(max((p-start)/(e.cum[i]-start), 0), 1)
	return lo + Time(math.Round(float64(hi-lo)*frac))
}

// Sample draws one duration: one Float64 from r, inverted.
func (e *EmpiricalTable) Sample(r *Rand) Time { return e.at(r.Float64()*e.cum[len(e.cum)-1], true) }

// Quantile is the q-quantile (0 <= q <= 1): for samples the nearest-rank
// sample (the smallest with at least a fraction q at or below it), for a
// histogram the value a fraction q of the counts lie below, interpolated
// inside its bucket.
func (e *EmpiricalTable) Quantile(q float64) Time {
	q = min(max(q, 0), 1)
	if q == 0 {
		return e.lo[0]
	}
	return e.at(q*e.cum[len(e.cum)-1], false)
}

// Mean is the distribution's mean.
func (e *EmpiricalTable) Mean() Time { return Time(math.Round(e.mean)) }

// SCV is the squared coefficient of variation Var/Mean² (0 when the mean is 0).
func (e *EmpiricalTable) SCV() float64 {
	if e.mean == 0 {
		return 0
	}
	return max(e.m2-e.mean*e.mean, 0) / (e.mean * e.mean)
}

// Random reports whether a draw can give more than one value.
func (e *EmpiricalTable) Random() bool { return len(e.cum) > 1 || e.lo[0] != e.hi[0] }

func (e *EmpiricalTable) String() string {
	return fmt.Sprintf("empirical(%s, mean %v, p50 %v, p99 %v)", e.what, e.Mean(), e.Quantile(0.5), e.Quantile(0.99))
}
