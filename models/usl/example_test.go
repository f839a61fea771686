package usl_test

import (
	"fmt"

	"github.com/poolsim/poolsim/models/usl"
)

func Example() {
	// Throughput measured at seven concurrencies (codahale/usl's example).
	points := []usl.Point{{1, 65}, {18, 996}, {36, 1652}, {72, 1853}, {108, 1829}, {144, 1775}, {216, 1702}}
	m, st, err := usl.Fit(points)
	if err != nil {
		panic(err)
	}
	fmt.Printf("σ = %.4g, κ = %.4g, λ = %.4g, R² = %.3f\n", m.Sigma, m.Kappa, m.Lambda, st.R2)
	n, x := m.Peak()
	fmt.Printf("peak: %.1f/s at N = %.1f; best whole N = %g\n", x, n, m.BestN())
	fmt.Printf("X(100) = %.2f/s, R(100) = %.1f ms\n", m.X(100), 1000*m.R(100))
	lo, hi, _ := m.LatencyAtThroughput(1500)
	fmt.Printf("1500/s is reached at R = %.1f ms and again at R = %.1f ms\n", 1000*lo, 1000*hi)
	// Output:
	// σ = 0.02773, κ = 0.0001043, λ = 89.99, R² = 0.990
	// peak: 1883.8/s at N = 96.5; best whole N = 97
	// X(100) = 1883.28/s, R(100) = 53.1 ms
	// 1500/s is reached at R = 22.5 ms and again at R = 184.3 ms
}
