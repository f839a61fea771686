package pooler

import (
	"testing"
	"time"
)

// TestHistogram: an observation lands in the first bucket whose bound it
// does not exceed (a bound is inclusive, as Prometheus' le), larger ones
// only in Count; export is cumulative; observe allocates nothing.
func TestHistogram(t *testing.T) {
	var h hist
	for _, d := range []time.Duration{0, 100 * time.Microsecond, 101 * time.Microsecond, time.Second, time.Minute} {
		h.observe(d.Microseconds())
	}
	e := h.export()
	if e.Count != 5 || e.Sum != time.Minute+time.Second+201*time.Microsecond {
		t.Errorf("count %d, sum %v; want 5, 1m1.000201s", e.Count, e.Sum)
	}
	want := map[time.Duration]uint64{100 * time.Microsecond: 2, 250 * time.Microsecond: 3, 500 * time.Millisecond: 3,
		time.Second: 4, 30 * time.Second: 4}
	for i, b := range HistogramBounds {
		if w, ok := want[b]; ok && e.Buckets[i] != w {
			t.Errorf("bucket le=%v: %d, want %d", b, e.Buckets[i], w)
		}
		if i > 0 && e.Buckets[i] < e.Buckets[i-1] {
			t.Errorf("bucket le=%v: %d below the one before (%d): not cumulative", b, e.Buckets[i], e.Buckets[i-1])
		}
	}
	if n := testing.AllocsPerRun(100, func() { h.observe(1234) }); n != 0 {
		t.Errorf("observe allocates %v times", n)
	}
}
