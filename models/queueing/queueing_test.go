package queueing

import (
	"math"
	"testing"
)

// Vectors from docs/queueing-oracles.md.
func close(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.10g, want %.10g", what, got, want)
	}
}

func TestErlang(t *testing.T) {
	close(t, "B(5,3)", ErlangB(5, 3), 0.1100543478, 1e-9)
	close(t, "B(100,80)", ErlangB(100, 80), 0.003992028605, 1e-9)
	p, wq, ok := ErlangC(4, 0.35, 10)
	if !ok {
		t.Error("ErlangC refused a stable queue (A = 3.5 < c = 4)")
	}
	close(t, "PDQ bank P(wait)", p, 0.737861094, 1e-8)
	close(t, "PDQ bank Wq", wq, 14.75722188, 1e-8)
	if p, wq, ok = ErlangC(10, 80, 0.1); !ok {
		t.Error("ErlangC refused a stable queue (A = 8 < c = 10)")
	}
	close(t, "pool P(wait)", p, 0.4091801508, 1e-9)
	close(t, "pool Wq", wq, 0.02045900754, 1e-9)
	if _, _, ok = ErlangC(2, 3, 1); ok {
		t.Error("ErlangC accepted an unstable queue")
	}
}

func TestMMcD(t *testing.T) {
	for _, tt := range []struct {
		c                    int
		lambda, s, tau, p, w float64
	}{
		{10, 80, 0.1, 0.05, 0.034227588, 0.0063640911},
		{4, 0.35, 10, 30, 0.024043582, 7.8113165},
		{10, 120, 0.1, 0.1, 0.17742357, 0.061220829},
	} {
		p, w := MMcD(tt.c, tt.lambda, tt.s, tt.tau)
		close(t, "P(timeout)", p, tt.p, 1e-7)
		close(t, "served wait", w, tt.w, 1e-6)
	}
	// τ → ∞ is Erlang C.
	p, _ := MMcD(10, 80, 0.1, 1e6)
	close(t, "P(timeout) with no timeout", p, 0, 1e-12)
}

func TestPKAndMVA(t *testing.T) {
	wq, _ := PollaczekKhinchine(0.8, 1, 0)
	close(t, "M/D/1 Wq", wq, 2, 1e-12)
	wq, _ = PollaczekKhinchine(0.5, 1, 4)
	close(t, "M/G/1 Wq", wq, 2.5, 1e-12)
	x, r := MVA(6, 20, []float64{2})
	close(t, "MVA X(6)", x, 0.2577425482, 1e-9)
	close(t, "MVA R(6)", r, 3.279043537, 1e-9)
	x, r = MVA(10, 1, []float64{0.2, 0.1})
	close(t, "MVA two centres X(10)", x, 4.776223707, 1e-9)
	close(t, "MVA two centres R(10)", r, 1.093704276, 1e-9)
	xm, knee := Bounds(3, 1, 0.3, 0.2)
	close(t, "bound", xm, 3/1.3, 1e-12)
	close(t, "knee", knee, 6.5, 1e-12)
}
