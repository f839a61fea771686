package sim

import (
	"errors"
	"fmt"
	"math"
)

// DistKind names a duration distribution.
type DistKind uint8

const (
	Const     DistKind = iota // always Mean
	Exp                       // exponential with mean Mean
	Uniform                   // uniform on [Min, Max]
	Lognormal                 // lognormal with mean Mean and shape Sigma
	Empirical                 // an empirical table (samples or a histogram)
)

var distNames = [...]string{Const: "const", Exp: "exp", Uniform: "uniform", Lognormal: "lognormal", Empirical: "empirical"}

func (k DistKind) String() string {
	if int(k) < len(distNames) {
		return distNames[k]
	}
	return fmt.Sprintf("DistKind(%d)", k)
}

// ParseDistKind reads a distribution name.
func ParseDistKind(s string) (DistKind, error) {
	for i, n := range distNames {
		if n == s {
			return DistKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown distribution %q: want const, exp, uniform, lognormal or empirical", s)
}

// Dist is a distribution of non-negative durations. The zero value is the
// constant 0.
type Dist struct {
	Kind     DistKind
	Mean     Time    // const, exp, lognormal
	Min, Max Time    // uniform
	Sigma    float64 // lognormal shape (σ of the underlying normal)
	// Table is the empirical distribution (Kind Empirical); it is shared,
	// never changed after it is built, and nil for every other kind, so a
	// Dist stays a small comparable value.
	Table *EmpiricalTable
}

// z99 is the standard normal 99th percentile.
const z99 = 2.3263478740408408

// ConstDist is the distribution that is always d.
func ConstDist(d Time) Dist { return Dist{Kind: Const, Mean: d} }

// ExpDist is the exponential distribution with the given mean.
func ExpDist(mean Time) Dist { return Dist{Kind: Exp, Mean: mean} }

// UniformDist is uniform on [min, max].
func UniformDist(min, max Time) Dist { return Dist{Kind: Uniform, Min: min, Max: max} }

// LognormalDist is the lognormal distribution with the given mean and
// shape sigma.
func LognormalDist(mean Time, sigma float64) Dist {
	return Dist{Kind: Lognormal, Mean: mean, Sigma: sigma}
}

// ErrLognormalP99 is returned when no lognormal has the mean and p99 asked.
var ErrLognormalP99 = errors.New("no lognormal distribution has this mean and p99")

// LognormalP99 is the lognormal distribution with the given mean and 99th
// percentile. It needs p99 > mean and p99 <= mean·e^(z²/2) (about 15x the
// mean); it takes the smaller of the two shapes that fit.
func LognormalP99(mean, p99 Time) (Dist, error) {
	if mean <= 0 || p99 <= mean {
		return Dist{}, fmt.Errorf("%w: p99 (%v) must be above the mean (%v)", ErrLognormalP99, p99, mean)
	}
	// ln p99 = μ + zσ and ln mean = μ + σ²/2  ⇒  σ² − 2zσ + 2 ln(p99/mean) = 0.
	d := z99*z99 - 2*math.Log(float64(p99)/float64(mean))
	if d < 0 {
		return Dist{}, fmt.Errorf("%w: p99 (%v) is more than %.1fx the mean (%v)", ErrLognormalP99, p99, math.Exp(z99*z99/2), mean)
	}
	return LognormalDist(mean, z99-math.Sqrt(d)), nil
}

// EmpiricalDist is the distribution of an empirical table.
func EmpiricalDist(t *EmpiricalTable) Dist { return Dist{Kind: Empirical, Mean: t.Mean(), Table: t} }

// ErrLognormalMedian is returned when no lognormal has the median and p99
// asked (a lognormal's p99 is above its median).
var ErrLognormalMedian = errors.New("no lognormal distribution has this p50 and p99")

// LognormalMedianP99 is the lognormal distribution with the given median
// (p50) and 99th percentile: σ = ln(p99/p50)/z₀.₉₉, mean = p50·e^(σ²/2).
// It needs 0 < p50 < p99.
func LognormalMedianP99(p50, p99 Time) (Dist, error) {
	if p50 <= 0 {
		return Dist{}, fmt.Errorf("%w: p50 (%v) must be above 0", ErrLognormalMedian, p50)
	}
	if p99 <= p50 {
		return Dist{}, fmt.Errorf("%w: p99 (%v) must be above p50 (%v), since a lognormal's p99 is always above its median", ErrLognormalMedian, p99, p50)
	}
	return LognormalMedianSigma(p50, math.Log(float64(p99)/float64(p50))/z99), nil
}

// LognormalMedianSigma is the lognormal distribution with the given median
// (p50 > 0) and shape sigma: its mean is p50·e^(σ²/2).
func LognormalMedianSigma(p50 Time, sigma float64) Dist {
	return LognormalDist(FromSeconds(p50.Seconds()*math.Exp(sigma*sigma/2)), sigma)
}

// NormQuantile is the standard normal's q-quantile Φ⁻¹(q), 0 < q < 1.
func NormQuantile(q float64) float64 { return math.Sqrt2 * math.Erfinv(2*q-1) }

// Sample draws one duration from r.
func (d Dist) Sample(r *Rand) Time {
	switch d.Kind {
	case Empirical:
		return d.Table.Sample(r)
	case Exp:
		return FromSeconds(d.Mean.Seconds() * r.ExpFloat64())
	case Uniform:
		return d.Min + FromSeconds((d.Max-d.Min).Seconds()*r.Float64())
	case Lognormal:
		mu := math.Log(d.Mean.Seconds()) - d.Sigma*d.Sigma/2
		return FromSeconds(math.Exp(mu + d.Sigma*r.NormFloat64()))
	default:
		return d.Mean
	}
}

// Random reports whether Sample draws from the stream at all.
func (d Dist) Random() bool {
	switch d.Kind {
	case Const:
		return false
	case Uniform:
		return d.Min != d.Max
	case Empirical:
		return d.Table.Random()
	}
	return true
}

// MeanValue is the distribution's mean.
func (d Dist) MeanValue() Time {
	if d.Kind == Uniform {
		return (d.Min + d.Max) / 2
	}
	return d.Mean
}

// SCV is the squared coefficient of variation Var/Mean² (0 for a constant,
// 1 for an exponential), as used by the Pollaczek–Khinchine formula.
func (d Dist) SCV() float64 {
	switch d.Kind {
	case Exp:
		return 1
	case Uniform:
		m := d.MeanValue().Seconds()
		if m == 0 {
			return 0
		}
		w := (d.Max - d.Min).Seconds()
		return w * w / 12 / (m * m)
	case Lognormal:
		return math.Exp(d.Sigma*d.Sigma) - 1
	case Empirical:
		return d.Table.SCV()
	default:
		return 0
	}
}

// Quantile is the distribution's q-quantile (0 <= q <= 1), exact for every
// kind: the duration below which a fraction q of the draws fall.
func (d Dist) Quantile(q float64) Time {
	q = min(max(q, 0), 1)
	switch d.Kind {
	case Exp:
		if q == 1 {
			return Time(math.MaxInt64)
		}
		return FromSeconds(-d.Mean.Seconds() * math.Log1p(-q))
	case Uniform:
		return d.Min + FromSeconds((d.Max-d.Min).Seconds()*q)
	case Lognormal:
		if q == 0 {
			return 0
		}
		if q == 1 {
			return Time(math.MaxInt64)
		}
		mu := math.Log(d.Mean.Seconds()) - d.Sigma*d.Sigma/2
		return FromSeconds(math.Exp(mu + d.Sigma*NormQuantile(q)))
	case Empirical:
		return d.Table.Quantile(q)
	default:
		return d.Mean
	}
}

func (d Dist) String() string {
	switch d.Kind {
	case Exp:
		return fmt.Sprintf("exp(mean %v)", d.Mean)
	case Uniform:
		return fmt.Sprintf("uniform(%v..%v)", d.Min, d.Max)
	case Lognormal:
		return fmt.Sprintf("lognormal(mean %v, sigma %.3g)", d.Mean, d.Sigma)
	case Empirical:
		return d.Table.String()
	default:
		return d.Mean.String()
	}
}
