package usl

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// MinPoints is the fewest points Fit accepts, as in codahale/usl: three
// parameters need a few points on each side of the curvature.
const MinPoints = 6

// ErrBadData is wrapped by every error Fit returns for input it cannot fit
// (too few points, a value that is not positive and finite, too few
// distinct concurrencies), as opposed to a fit that did not converge.
var ErrBadData = errors.New("bad data")

// dataError is an ErrBadData with its own message.
type dataError struct{ msg string }

func (e dataError) Error() string { return "usl: " + e.msg }
func (e dataError) Unwrap() error { return ErrBadData }

func badData(format string, a ...any) error { return dataError{fmt.Sprintf(format, a...)} }

// Stats describes a fit.
type Stats struct {
	SSE    float64 // Σ (X_i − X(N_i))², in the data's throughput unit squared
	R2     float64 // 1 − SSE/Σ(X_i − mean X)²; NaN when every X_i is equal
	Points int     // points used (all of them)
}

// Fit estimates σ, κ and λ by nonlinear least squares: it minimises
// Σ (X_i − X(N_i))² with σ, κ ≥ 0. It needs at least MinPoints points,
// each with N and X positive and finite, at three or more distinct N.
//
// The minimisation is Levenberg–Marquardt, as in codahale/usl, with the
// analytic Jacobian and gonum/mat for the linear algebra, in variables
// scaled to order one; σ and κ are kept non-negative by projection, so a
// parameter the data do not support comes out exactly 0. It starts from
// codahale's guess (σ = 0.1, κ = 0.01, λ = max X_i/N_i) and from Gunther's
// linearised fit, and keeps the better result.
func Fit(points []Point) (Model, Stats, error) {
	if err := check(points); err != nil {
		return Model{}, Stats{}, err
	}
	p := newProblem(points)
	var (
		best    Model
		bestSSE = math.Inf(1)
		lastErr error
	)
	for _, start := range []Model{
		{Sigma: 0.1, Kappa: 0.01, Lambda: p.lambda0},
		linearStart(points, p.lambda0),
	} {
		m, err := p.minimize(start)
		if err == nil && !(m.Lambda > 0) {
			err = fmt.Errorf("the fit ended at λ = %g, not a throughput", m.Lambda)
		}
		if err != nil {
			lastErr = err
			continue
		}
		if sse := sse(m, points); sse < bestSSE {
			best, bestSSE = m, sse
		}
	}
	if math.IsInf(bestSSE, 1) {
		return Model{}, Stats{}, fmt.Errorf("usl: the fit did not converge: %v", lastErr)
	}
	return best, stats(best, points), nil
}

func check(points []Point) error {
	if len(points) < MinPoints {
		return badData("need at least %d points, got %d", MinPoints, len(points))
	}
	distinct := map[float64]bool{}
	for i, pt := range points {
		if !(pt.N > 0) || math.IsInf(pt.N, 0) {
			return badData("point %d: concurrency must be positive and finite, got %v", i+1, pt.N)
		}
		if !(pt.X > 0) || math.IsInf(pt.X, 0) {
			return badData("point %d: throughput must be positive and finite, got %v", i+1, pt.X)
		}
		distinct[pt.N] = true
	}
	if len(distinct) < 3 {
		return badData("need at least 3 distinct concurrencies to fit 3 parameters, got %d", len(distinct))
	}
	return nil
}

func sse(m Model, points []Point) float64 {
	var s float64
	for _, pt := range points {
		d := m.X(pt.N) - pt.X
		s += d * d
	}
	return s
}

func stats(m Model, points []Point) Stats {
	var mean float64
	for _, pt := range points {
		mean += pt.X
	}
	mean /= float64(len(points))
	var sst float64
	for _, pt := range points {
		sst += (pt.X - mean) * (pt.X - mean)
	}
	s := sse(m, points)
	r2 := math.NaN()
	if sst > 0 {
		r2 = 1 - s/sst
	}
	return Stats{SSE: s, R2: r2, Points: len(points)}
}

// linearStart is Gunther's two-parameter fit (§2.7, method 2), used only
// as a second starting point: with λ fixed, y = N·λ/X − 1 = κx² + (σ+κ)x
// for x = N − 1, fitted without an intercept. λ is X at the smallest N
// scaled to N = 1, or λ0 if that is not usable.
func linearStart(points []Point, lambda0 float64) Model {
	minPt := points[0]
	for _, pt := range points {
		if pt.N < minPt.N {
			minPt = pt
		}
	}
	lambda := lambda0
	if minPt.N == 1 {
		lambda = minPt.X
	}
	// Normal equations for y = a x² + b x.
	var s4, s3, s2, yx2, yx float64
	for _, pt := range points {
		x := pt.N - 1
		y := pt.N*lambda/pt.X - 1
		s4 += x * x * x * x
		s3 += x * x * x
		s2 += x * x
		yx2 += y * x * x
		yx += y * x
	}
	det := s4*s2 - s3*s3
	a, b := 0.0, 0.0
	if det != 0 && !math.IsNaN(det) && !math.IsInf(det, 0) {
		a = (yx2*s2 - yx*s3) / det
		b = (s4*yx - s3*yx2) / det
	}
	m := Model{Sigma: b - a, Kappa: a, Lambda: lambda}
	// Keep the start inside the feasible region and away from the s = 0 and
	// k = 0 lines, where the gradient in s or k vanishes.
	if !(m.Sigma > 1e-4) || m.Sigma > 1 {
		m.Sigma = 1e-4
	}
	if !(m.Kappa > 1e-8) || m.Kappa > 1 {
		m.Kappa = 1e-8
	}
	return m
}

// problem is the least-squares problem in scaled variables
//
//	u = (σ, κ·nScale², λ/λ0),
//
// with residuals r_i = (X(N_i) − X_i)/xScale, so that the variables, the
// Jacobian and the objective are of order one whatever the units of the
// data. Linear scaling keeps the bounds σ, κ ≥ 0 as u0, u1 ≥ 0.
type problem struct {
	points  []Point
	nScale  float64 // max N_i
	xScale  float64 // max X_i
	lambda0 float64 // max X_i/N_i
}

func newProblem(points []Point) *problem {
	p := &problem{points: points}
	for _, pt := range points {
		p.nScale = math.Max(p.nScale, pt.N)
		p.xScale = math.Max(p.xScale, pt.X)
		p.lambda0 = math.Max(p.lambda0, pt.X/pt.N)
	}
	return p
}

func (p *problem) model(u []float64) Model {
	return Model{Sigma: u[0], Kappa: u[1] / (p.nScale * p.nScale), Lambda: u[2] * p.lambda0}
}

func (p *problem) vars(m Model) []float64 {
	return []float64{m.Sigma, m.Kappa * p.nScale * p.nScale, m.Lambda / p.lambda0}
}

// residuals fills r and, if jac is non-nil, the Jacobian ∂r_i/∂u_j, and
// returns ½Σr_i². With D = 1 + σ(N−1) + κN(N−1) (§2.7):
//
//	∂X/∂σ = −λN(N−1)/D², ∂X/∂κ = −λN²(N−1)/D², ∂X/∂λ = N/D,
//
// times the scale factors (1, 1/nScale², λ0)/xScale.
func (p *problem) residuals(u []float64, r []float64, jac *mat.Dense) float64 {
	m := p.model(u)
	var f float64
	for i, pt := range p.points {
		n := pt.N
		d := m.denom(n)
		if !(d > 0) {
			// Outside the model: with σ > 1 a concurrency below 1 makes
			// the denominator 0 or negative, and a negative λ would then
			// "fit" a point there. Such a step is refused.
			return math.Inf(1)
		}
		r[i] = (m.Lambda*n/d - pt.X) / p.xScale
		f += r[i] * r[i]
		if jac != nil {
			d2 := d * d
			jac.Set(i, 0, -m.Lambda*n*(n-1)/d2/p.xScale)
			jac.Set(i, 1, -m.Lambda*n*n*(n-1)/d2/(p.nScale*p.nScale)/p.xScale)
			jac.Set(i, 2, n/d*p.lambda0/p.xScale)
		}
	}
	return f / 2
}

// project puts u back into the bounds σ, κ, λ ≥ 0. The rest of the
// feasible region (1 + σ(N−1) + κN(N−1) > 0 at every point, which only
// concurrencies below 1 can break) is kept by refusing steps that leave it
// (residuals returns +Inf there).
func project(u []float64) {
	u[0] = math.Max(u[0], 0)
	u[1] = math.Max(u[1], 0)
	u[2] = math.Max(u[2], 0)
}

// minimize runs projected Levenberg–Marquardt (Marquardt's diagonal
// scaling, Nielsen's damping update) from start. It returns an error if
// it meets a non-finite value or does not converge in maxIter iterations.
func (p *problem) minimize(start Model) (Model, error) {
	const (
		maxIter = 500
		stepTol = 1e-13 // relative step that counts as converged
		gradTol = 1e-13 // projected gradient that counts as converged
	)
	np := len(p.points)
	u := p.vars(start)
	project(u)
	r := make([]float64, np)
	jac := mat.NewDense(np, 3, nil)
	f := p.residuals(u, r, jac)
	if !finite(f) {
		return Model{}, fmt.Errorf("the starting point %v gives a non-finite residual", start)
	}
	var (
		a    mat.SymDense
		g    mat.VecDense
		lhs  = mat.NewSymDense(3, nil)
		step mat.VecDense
		rhs  = mat.NewVecDense(3, nil)
		chol mat.Cholesky
		rv   = mat.NewVecDense(np, r)
		un   = make([]float64, 3)
		rn   = make([]float64, np)
		jn   = mat.NewDense(np, 3, nil)
		mu   float64
		nu   = 2.0
	)
	a.SymOuterK(1, jac.T()) // JᵀJ
	g.MulVec(jac.T(), rv)   // Jᵀr
	for i := 0; i < 3; i++ {
		mu = math.Max(mu, a.At(i, i))
	}
	mu *= 1e-3
	for iter := 0; iter < maxIter; iter++ {
		if pg := projectedGradient(u, &g); pg <= gradTol {
			return p.model(u), nil
		}
		// Solve (JᵀJ + μ·diag(JᵀJ)) δ = −Jᵀr, with a floor on the diagonal
		// so that a column the data do not inform still gets damped.
		var dmax float64
		for i := 0; i < 3; i++ {
			dmax = math.Max(dmax, a.At(i, i))
		}
		lhs.CopySym(&a)
		rhs.CopyVec(&g)
		for i := 0; i < 3; i++ {
			lhs.SetSym(i, i, a.At(i, i)+mu*math.Max(a.At(i, i), 1e-12*dmax+1e-300))
		}
		// A bound parameter that the gradient pushes further out stays
		// where it is (a projected Newton step): leaving it in the system
		// would bend the step of the others.
		for i := 0; i < 3; i++ {
			if u[i] == 0 && g.AtVec(i) > 0 {
				for j := 0; j < 3; j++ {
					if j != i {
						lhs.SetSym(i, j, 0)
					}
				}
				lhs.SetSym(i, i, 1)
				rhs.SetVec(i, 0)
			}
		}
		if !chol.Factorize(lhs) {
			mu *= nu
			nu *= 2
			if !finite(mu) {
				return Model{}, errors.New("the damped normal equations stayed singular")
			}
			continue
		}
		if err := chol.SolveVecTo(&step, rhs); err != nil && !finite(mat.Norm(&step, math.Inf(1))) {
			return Model{}, fmt.Errorf("solving for the step: %v", err)
		}
		for i := 0; i < 3; i++ {
			un[i] = u[i] - step.AtVec(i)
		}
		project(un)
		// The step actually taken, after projection, and the decrease the
		// linear model predicts for it: −(gᵀδ + ½δᵀJᵀJδ).
		var dn, un0, pred float64
		var d [3]float64
		for i := 0; i < 3; i++ {
			d[i] = un[i] - u[i]
			dn = math.Max(dn, math.Abs(d[i]))
			un0 = math.Max(un0, math.Abs(u[i]))
			pred -= g.AtVec(i) * d[i]
		}
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				pred -= 0.5 * d[i] * a.At(i, j) * d[j]
			}
		}
		if dn <= stepTol*(un0+stepTol) {
			return p.model(u), nil
		}
		fn := p.residuals(un, rn, jn)
		if finite(fn) && fn < f && pred > 0 {
			rho := (f - fn) / pred
			copy(u, un)
			copy(r, rn)
			jac.Copy(jn)
			f = fn
			a.SymOuterK(1, jac.T())
			g.MulVec(jac.T(), rv)
			mu *= math.Max(1.0/3, 1-math.Pow(2*rho-1, 3))
			nu = 2
			continue
		}
		mu *= nu
		nu *= 2
		if !finite(mu) || mu > 1e300 {
			// No step, however short, lowers the sum of squares: u is a
			// minimum to within rounding.
			return p.model(u), nil
		}
	}
	return Model{}, fmt.Errorf("no convergence in %d iterations (at %v)", maxIter, p.model(u))
}

// projectedGradient is the largest component of the gradient g that
// points into the feasible region: components pushing σ, κ or λ below 0
// at the bound do not count.
func projectedGradient(u []float64, g *mat.VecDense) float64 {
	var m float64
	for i := 0; i < 3; i++ {
		gi := g.AtVec(i)
		if u[i] == 0 && gi > 0 {
			continue
		}
		if math.IsNaN(gi) {
			return math.Inf(1)
		}
		m = math.Max(m, math.Abs(gi))
	}
	return m
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
