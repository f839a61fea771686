package sim

import (
	"math"
	"sync"
)

// Output analysis: what a study of several runs concludes from them.
// Independent replications give independent observations of a metric; the
// Student t distribution turns their mean and spread into a confidence
// interval. MSER-5 finds where the initial transient of one run ends.

// Confidence is the level of every interval here.
const Confidence = 0.95

// TQuantile is the two-sided 95 % quantile of Student's t with df degrees
// of freedom (12.706 for 1, 2.262 for 9, 1.96 in the limit); +Inf for df < 1.
func TQuantile(df int) float64 {
	if df < 1 {
		return math.Inf(1)
	}
	tqMu.Lock()
	defer tqMu.Unlock()
	if q, ok := tqCache[df]; ok {
		return q
	}
	q := tQuantile(df)
	tqCache[df] = q
	return q
}

var (
	tqMu    sync.Mutex
	tqCache = map[int]float64{}
)

func tQuantile(df int) float64 {
	// P(|T| > t) = I_x(ν/2, 1/2) with x = ν/(ν+t²) falls as t grows:
	// bisect for 1 − Confidence.
	nu := float64(df)
	lo, hi := 0.0, 1000.0
	for range 200 {
		mid := (lo + hi) / 2
		if betaInc(nu/2, 0.5, nu/(nu+mid*mid)) > 1-Confidence {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// betaInc is the regularized incomplete beta function I_x(a, b), by its
// continued fraction (modified Lentz), on the side where it converges fast.
func betaInc(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log1p(-x))
	if x > (a+1)/(a+b+2) {
		return 1 - front*betaCF(b, a, 1-x)/b
	}
	return front * betaCF(a, b, x) / a
}

func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m < 300; m++ {
		fm := float64(m)
		for _, num := range [2]float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)),
		} {
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < 1e-15 {
			break
		}
	}
	return h
}

// MeanCI is the mean of xs and the half-width of its 95 % confidence
// interval (Student t with len(xs)−1 degrees of freedom). One observation
// has no interval: its half-width is 0 and ok is false; so is it for none.
func MeanCI(xs []float64) (mean, half float64, ok bool) {
	n := len(xs)
	if n == 0 {
		return 0, 0, false
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean = sum / float64(n)
	if n == 1 {
		return mean, 0, false
	}
	var ss float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	sd := math.Sqrt(ss / float64(n-1))
	return mean, TQuantile(n-1) * sd / math.Sqrt(float64(n)), true
}

// PairedCI is the mean of the differences a[i] − b[i] and its 95 %
// half-width: the comparison of two configurations run on the same
// replications (common random numbers), where each pair shares its random
// draws and the noise they share cancels. a and b must have equal lengths.
func PairedCI(a, b []float64) (mean, half float64, ok bool) {
	if len(a) != len(b) {
		panic("sim: PairedCI of unequal lengths")
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return MeanCI(d)
}

// JackknifeCI is the 95 % half-width of an estimate computed from n ≥ 2
// independent groups of observations (runs), given its leave-one-out
// values: leaveOut[i] is the same estimate computed without group i. It
// is the delete-a-group jackknife: variance (n−1)/n · Σ (θ₍₋ᵢ₎ − θ̄)²,
// and Student t with n−1 degrees of freedom. For a smooth estimate (a
// mean) it is exactly MeanCI's half-width. A percentile is not smooth in
// single observations, and the jackknife deleting one observation at a
// time fails for it; deleting a whole group of d observations is
// consistent once d grows faster than √N of the N in all (Shao and Wu
// 1989), which a run of many samples is. ok is false with fewer than two
// groups.
func JackknifeCI(leaveOut []float64) (half float64, ok bool) {
	n := len(leaveOut)
	if n < 2 {
		return 0, false
	}
	var sum float64
	for _, x := range leaveOut {
		sum += x
	}
	mean := sum / float64(n)
	var ss float64
	for _, x := range leaveOut {
		d := x - mean
		ss += d * d
	}
	return TQuantile(n-1) * math.Sqrt(ss*float64(n-1)/float64(n)), true
}

// Differs reports whether a paired difference with this mean and
// half-width is real at 95 %: its interval excludes zero.
func Differs(mean, half float64) bool { return math.Abs(mean) > half }

// MSERBatch is the batch size of MSER-5.
const MSERBatch = 5

// MSER5 finds the end of a series' initial transient by the Marginal
// Standard Error Rule on batch means of five (White 1997; Franklin and
// White 2008): it averages the series in consecutive batches of five
// (a last partial batch is dropped), and returns the number of
// observations d to delete from the front, a multiple of five, that
// minimises
//
//	MSER(k) = Σ_{i>k} (Z_i − Z̄_k)² / (m − k)²
//
// over k batches deleted, k ≤ m/2 for m batches (a truncation beyond half
// the run leaves too little to trust). atLimit reports that the minimum
// fell in the last tenth of that allowed range: the run may be too short
// to reach steady state, and its figures lean on the transient.
// Series shorter than two batches are not truncated.
func MSER5(xs []float64) (d int, atLimit bool) {
	m := len(xs) / MSERBatch
	if m < 2 {
		return 0, false
	}
	z := make([]float64, m)
	for i := range z {
		var s float64
		for _, x := range xs[i*MSERBatch : (i+1)*MSERBatch] {
			s += x
		}
		z[i] = s / MSERBatch
	}
	// Suffix sums give every candidate's statistic in one pass from the
	// back: for the batches k..m−1, Σ(Z−Z̄)² = Σ Z² − (Σ Z)²/n.
	limit := m / 2
	var sum, sumSq float64
	stat := make([]float64, m)
	for k := m - 1; k >= 0; k-- {
		sum += z[k]
		sumSq += z[k] * z[k]
		n := float64(m - k)
		ss := max(sumSq-sum*sum/n, 0)
		stat[k] = ss / (n * n)
	}
	best := 0
	for k := 1; k <= limit; k++ {
		if stat[k] < stat[best] {
			best = k
		}
	}
	return best * MSERBatch, limit >= 10 && best > limit-limit/10
}
