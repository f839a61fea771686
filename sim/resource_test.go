package sim

import (
	"math"
	"testing"
)

func TestResourceFIFOHandOff(t *testing.T) {
	r := NewResource(0, 2)
	for id, want := range []bool{true, true, false, false} {
		if got := r.Acquire(Time(id), int32(id)); got != want {
			t.Errorf("Acquire(%d) = %v, want %v", id, got, want)
		}
	}
	// At t=10 a unit frees: it goes to the oldest waiter (2), then to 3.
	if next, ok := r.Release(10); !ok || next != 2 {
		t.Errorf("Release = %d, %v; want 2, true", next, ok)
	}
	if next, ok := r.Release(20); !ok || next != 3 {
		t.Errorf("Release = %d, %v; want 3, true", next, ok)
	}
	if _, ok := r.Release(30); ok {
		t.Error("Release with no waiter returned one")
	}
	if r.Busy() != 1 {
		t.Errorf("Busy = %d, want 1", r.Busy())
	}
	r.Release(40)
	// Busy: 2 units over [0,30) but unit 2 from t=1 → area 0·… compute:
	// [0,1):1, [1,30):2, [30,40):1 → 1+58+10 = 69 unit·ns over 40 ns.
	if u, want := r.Utilisation(40), 69.0/40/2; math.Abs(u-want) > 1e-12 {
		t.Errorf("Utilisation = %v, want %v", u, want)
	}
	// Waits: id 2 waited 10-2 = 8, id 3 waited 20-3 = 17.
	L, lambda, W := r.Queue().Little(40)
	if math.Abs(W-12.5e-9) > 1e-18 || math.Abs(L-lambda*W) > 1e-12 {
		t.Errorf("Little: L=%v λ=%v W=%v; want W = 12.5ns and L = λW", L, lambda, W)
	}
}

func TestResourceReleaseIdlePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Release of an idle resource did not panic")
		}
	}()
	NewResource(0, 1).Release(0)
}
