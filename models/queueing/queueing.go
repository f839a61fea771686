// Package queueing holds the closed-form queueing results poolsim checks
// itself against and teaches with (docs/queueing-oracles.md, with the
// published source of each): Erlang B and C, M/M/c with a deterministic patience (M/M/c+D),
// Pollaczek–Khinchine for M/G/1, and single-class MVA with its asymptotic
// bounds. Rates are per second and times in seconds; functions are pure.
package queueing

import "math"

// ErlangB is the blocking probability of c servers offered a Erlangs
// with no waiting room, by the stable recursion.
func ErlangB(c int, a float64) float64 {
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return b
}

// ErlangC is M/M/c's probability of waiting and mean wait in queue for
// arrival rate lambda and mean service time s. ok is false when the queue
// is unstable (λs >= c).
func ErlangC(c int, lambda, s float64) (pWait, wq float64, ok bool) {
	a := lambda * s
	if c < 1 || a >= float64(c) {
		return 1, math.Inf(1), false
	}
	b := ErlangB(c, a)
	rho := a / float64(c)
	pWait = b / (1 - rho*(1-b))
	return pWait, pWait * s / (float64(c) - a), true
}

// MMcD is M/M/c with every waiting customer leaving after waiting tau
// (a deterministic patience, such as query_wait_timeout): the probability
// of timing out and the mean wait of those served. It holds in overload too.
func MMcD(c int, lambda, s, tau float64) (pTimeout, servedWait float64) {
	mu := 1 / s
	a := lambda / mu
	theta := float64(c)*mu - lambda
	q := lambda
	for k := 1; k <= c-1; k++ {
		q *= a / float64(k)
	}
	var sum float64
	term := 1.0
	for n := 0; n < c; n++ {
		if n > 0 {
			term *= a / float64(n)
		}
		sum += term
	}
	var waitMass, waitMean float64
	if math.Abs(theta) < 1e-12 {
		waitMass = tau
		waitMean = tau * tau / 2
	} else {
		e := math.Exp(-theta * tau)
		waitMass = (1 - e) / theta
		waitMean = (1 - e*(1+theta*tau)) / (theta * theta)
	}
	tail := math.Exp(-theta*tau) / (float64(c) * mu)
	p0 := 1 / (sum + q*waitMass + q*tail)
	pTimeout = p0 * q * tail
	return pTimeout, p0 * q * waitMean / (1 - pTimeout)
}

// PollaczekKhinchine is M/G/1's mean wait in queue for arrival rate
// lambda, mean service s and squared coefficient of variation scv.
func PollaczekKhinchine(lambda, s, scv float64) (wq float64, ok bool) {
	rho := lambda * s
	if rho >= 1 {
		return math.Inf(1), false
	}
	return rho * (1 + scv) / (2 * (1 - rho)) * s, true
}

// MVA is exact single-class mean-value analysis of n customers with think
// time z over queueing centres with demands d: throughput and response time.
func MVA(n int, z float64, d []float64) (x, r float64) {
	q := make([]float64, len(d))
	for k := 1; k <= n; k++ {
		r = 0
		rk := make([]float64, len(d))
		for i, di := range d {
			rk[i] = di * (1 + q[i])
			r += rk[i]
		}
		x = float64(k) / (z + r)
		for i := range d {
			q[i] = x * rk[i]
		}
	}
	return x, r
}

// Bounds are the closed system's asymptotic bounds: n users with think z,
// total demand d and bottleneck demand dmax (all per transaction).
// Throughput is at most min(n/(d+z), 1/dmax); the knee n* = (d+z)/dmax is
// where the two meet.
func Bounds(n int, z, d, dmax float64) (xMax, knee float64) {
	return math.Min(float64(n)/(d+z), 1/dmax), (d + z) / dmax
}
