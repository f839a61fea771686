package sim

import (
	"math"
	"testing"
	"time"
)

func TestFromSeconds(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want Time
	}{
		{0, 0},
		{1, Second},
		{0.001, Millisecond},
		{1e-6, Microsecond},
		{0.1, 100 * Millisecond},
		{1.4e-9, 1},
		{1.5e-9, 2}, // half away from zero
		{2.5e-9, 3},
		{0.4e-9, 0},
		{-0.4e-9, 0},
		{-1.5e-9, -2},
		{-2.6, -2600 * Millisecond},
		{1e-10, 0},
		{9e9, 9e18},
		{9.3e9, math.MaxInt64}, // beyond 292 years
		{1e300, math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
		{-9.3e9, math.MinInt64},
		{-1e300, math.MinInt64},
		{math.Inf(-1), math.MinInt64},
		{float64(math.MaxInt64) / 1e9, math.MaxInt64}, // 2^63 ns rounds up to 2^63: saturates
	} {
		if got := FromSeconds(c.s); got != c.want {
			t.Errorf("FromSeconds(%v) = %d, want %d", c.s, got, c.want)
		}
	}
}

func TestTimeConversions(t *testing.T) {
	d := 1500 * Millisecond
	if d.Seconds() != 1.5 || d.Milliseconds() != 1500 || d.Duration() != 1500*time.Millisecond || d.String() != "1.5s" {
		t.Errorf("conversions of %d: %v %v %v %q", int64(d), d.Seconds(), d.Milliseconds(), d.Duration(), d.String())
	}
	if FromDuration(3*time.Microsecond) != 3*Microsecond {
		t.Error("FromDuration")
	}
	r := NewRand(14, "time")
	// Seconds and back is exact up to 2^50 ns (13 days) and within 1 ns
	// up to 2^53 (104 days), where float64 stops holding every nanosecond.
	for i := 0; i < 100000; i++ {
		x := Time(r.IntN(1 << 50))
		if got := FromSeconds(x.Seconds()); got != x {
			t.Fatalf("FromSeconds(%d.Seconds()) = %d", x, got)
		}
		y := Time(r.IntN(1 << 53))
		if got := FromSeconds(y.Seconds()); got-y > 1 || y-got > 1 {
			t.Fatalf("FromSeconds(%d.Seconds()) = %d", y, got)
		}
	}
}
