// Package usl is Gunther's Universal Scalability Law: the throughput of a
// system at concurrency N,
//
//	X(N) = λN / (1 + σ(N−1) + κN(N−1)),
//
// where λ is the throughput at N = 1, σ the contention (serialisation,
// queueing) coefficient and κ the coherency (crosstalk) coefficient that
// makes throughput fall past a peak. With κ = 0 it is Amdahl's law. See
// docs/queueing-oracles.md §6.
//
// Fit estimates σ, κ and λ from measured (concurrency, throughput) points
// by nonlinear least squares, the same estimator as codahale/usl and R's
// usl package with three parameters.
//
// Latency follows from Little's law with no think time: R(N) = N/X(N).
// The inverse functions are written for κ > 0, where the throughput curve
// is double-valued: one throughput below the peak is reached at two
// concurrencies, so LatencyAtThroughput returns both latencies. (The
// codahale/usl versions of these two functions are exact only for κ = 0,
// and its ThroughputAtLatency has a sign error; they are not ported.)
package usl

import (
	"fmt"
	"math"
)

// Model is a USL curve. The zero Model has zero throughput everywhere.
type Model struct {
	Sigma  float64 // σ, contention, ≥ 0
	Kappa  float64 // κ, coherency, ≥ 0
	Lambda float64 // λ, throughput at N = 1 (per unit of time of the data)
}

// Point is one measurement: throughput X at concurrency N.
type Point struct {
	N float64 // concurrency, > 0
	X float64 // throughput, > 0
}

// denom is 1 + σ(N−1) + κN(N−1), the slowdown relative to linear scaling.
func (m Model) denom(n float64) float64 {
	return 1 + m.Sigma*(n-1) + m.Kappa*n*(n-1)
}

// X is the throughput at concurrency n.
func (m Model) X(n float64) float64 { return m.Lambda * n / m.denom(n) }

// R is the latency at concurrency n with no think time, N/X(N) by Little's
// law: (1 + σ(N−1) + κN(N−1))/λ, in the reciprocal of the throughput's
// unit of time (seconds for throughput per second).
func (m Model) R(n float64) float64 { return m.denom(n) / m.Lambda }

// Peak is the concurrency at which throughput is highest and that
// throughput: N_max = √((1−σ)/κ) and X(N_max). N_max is real, not rounded;
// see BestN for the best whole concurrency.
//
// Peak looks at N ≥ 1. When σ ≥ 1 − κ (adding the second client already
// lowers throughput) it returns n = 1, x = λ.
//
// With κ = 0 there is no peak: throughput rises for ever towards Amdahl's
// ceiling λ/σ. Peak then returns n = +Inf and x = λ/σ, which is +Inf when
// σ is 0 too (linear scaling).
func (m Model) Peak() (n, x float64) {
	if m.Kappa == 0 {
		if m.Sigma == 0 {
			if m.Lambda == 0 {
				return math.Inf(1), 0
			}
			return math.Inf(1), math.Inf(1)
		}
		return math.Inf(1), m.Lambda / m.Sigma
	}
	n = math.Sqrt((1 - m.Sigma) / m.Kappa)
	if !(n > 1) { // also catches NaN when σ > 1
		n = 1
	}
	return n, m.X(n)
}

// BestN is the whole concurrency, at least 1, with the highest throughput:
// whichever of ⌊N_max⌋ and ⌈N_max⌉ gives more. It returns +Inf when there
// is no peak (κ = 0). codahale/usl's MaxConcurrency is ⌊N_max⌋, which is
// the same or one less.
func (m Model) BestN() float64 {
	n, _ := m.Peak()
	if math.IsInf(n, 1) {
		return n
	}
	lo, hi := math.Floor(n), math.Ceil(n)
	if lo < 1 {
		lo = 1
	}
	if m.X(hi) > m.X(lo) {
		return hi
	}
	return lo
}

// ConcurrencyAtLatency is the concurrency N ≥ 1 at which the latency R(N)
// is r: the positive root of κN² + (σ−κ)N + 1 − σ − λr = 0. R rises with N
// for σ, κ ≥ 0, so the root is unique. It returns NaN when r < R(1) = 1/λ
// or when the model cannot reach r (κ = σ = 0 and r ≠ 1/λ).
func (m Model) ConcurrencyAtLatency(r float64) float64 {
	if !(r >= 1/m.Lambda) || math.IsInf(r, 0) {
		return math.NaN()
	}
	c := 1 - m.Sigma - m.Lambda*r
	if m.Kappa == 0 {
		if m.Sigma == 0 {
			if c == 0 {
				return 1
			}
			return math.NaN()
		}
		return -c / m.Sigma
	}
	lo, hi, ok := quadRoots(m.Kappa, m.Sigma-m.Kappa, c)
	if !ok {
		return math.NaN()
	}
	return math.Max(lo, hi)
}

// ThroughputAtLatency is the throughput at the concurrency where the
// latency is r: N(r)/r with N from ConcurrencyAtLatency.
func (m Model) ThroughputAtLatency(r float64) float64 {
	return m.ConcurrencyAtLatency(r) / r
}

// ConcurrencyAtThroughput is the two concurrencies at which the model has
// throughput x: lo on the rising side of the curve, hi on the retrograde
// side past the peak. They are the roots of
// xκN² + (x(σ−κ) − λ)N + x(1−σ) = 0. With κ = 0 there is one root and hi
// is +Inf. ok is false, and lo and hi NaN, when x is above the peak
// throughput or not positive. lo can be below 1 when x < λ.
func (m Model) ConcurrencyAtThroughput(x float64) (lo, hi float64, ok bool) {
	nan := math.NaN()
	if !(x > 0) || math.IsInf(x, 0) {
		return nan, nan, false
	}
	if m.Kappa == 0 {
		// x(1 + σ(N−1)) = λN  ⇒  N = x(1−σ)/(λ − xσ).
		d := m.Lambda - x*m.Sigma
		if !(d > 0) {
			return nan, nan, false
		}
		return x * (1 - m.Sigma) / d, math.Inf(1), true
	}
	lo, hi, ok = quadRoots(x*m.Kappa, x*(m.Sigma-m.Kappa)-m.Lambda, x*(1-m.Sigma))
	if !ok || !(hi > 0) {
		return nan, nan, false
	}
	return lo, hi, true
}

// LatencyAtThroughput is the two latencies at which the model has
// throughput x, N/x for each root of ConcurrencyAtThroughput: lo on the
// rising side, hi past the peak (+Inf when κ = 0). Equivalently the roots
// of κx²R² + (σx − κx − λ)R + 1 − σ = 0.
func (m Model) LatencyAtThroughput(x float64) (lo, hi float64, ok bool) {
	nlo, nhi, ok := m.ConcurrencyAtThroughput(x)
	return nlo / x, nhi / x, ok
}

// quadRoots solves ax² + bx + c = 0 for a ≠ 0 without cancellation and
// returns the real roots in increasing order; ok is false when they are
// complex.
func quadRoots(a, b, c float64) (lo, hi float64, ok bool) {
	disc := b*b - 4*a*c
	if !(disc >= 0) {
		return math.NaN(), math.NaN(), false
	}
	q := -(b + math.Copysign(math.Sqrt(disc), b)) / 2
	var r1, r2 float64
	if q == 0 { // b = 0 and c = 0
		r1, r2 = 0, 0
	} else {
		r1, r2 = q/a, c/q
	}
	if r1 > r2 {
		r1, r2 = r2, r1
	}
	return r1, r2, true
}

// String prints the parameters to 7 significant digits.
func (m Model) String() string {
	return fmt.Sprintf("σ=%.7g κ=%.7g λ=%.7g", m.Sigma, m.Kappa, m.Lambda)
}
