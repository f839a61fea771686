package scenarios

import "testing"

// BenchmarkPgbouncerModes is 'poolsim run pgbouncer-modes' without the
// process start and the printing: load the built-in and run its 8 points.
func BenchmarkPgbouncerModes(b *testing.B) {
	for b.Loop() {
		s, err := Builtin("pgbouncer-modes")
		if err != nil {
			b.Fatal(err)
		}
		points, _ := s.Points()
		Run(points, 0)
	}
}
