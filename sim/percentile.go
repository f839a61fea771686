package sim

import (
	"math"
	"slices"
)

// Samples records durations exactly (8 bytes per sample) and answers
// percentiles by the nearest-rank rule: the p-th percentile of n samples is
// the k-th smallest with k = ceil(p/100 * n), so it is always a recorded
// value and never an interpolation.
type Samples struct {
	v      []Time
	sorted bool
	sum    float64
}

// Add records one sample.
func (s *Samples) Add(t Time) {
	s.v = append(s.v, t)
	s.sorted = false
	s.sum += float64(t)
}

// Count is the number of samples.
func (s *Samples) Count() int { return len(s.v) }

// Mean is the arithmetic mean, 0 with no samples.
func (s *Samples) Mean() Time {
	if len(s.v) == 0 {
		return 0
	}
	return Time(math.Round(s.sum / float64(len(s.v))))
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100);
// 0 when there are no samples. p <= 0 gives the minimum.
func (s *Samples) Percentile(p float64) Time {
	n := len(s.v)
	if n == 0 {
		return 0
	}
	if !s.sorted {
		slices.Sort(s.v)
		s.sorted = true
	}
	// p*n is exact for whole p; the small epsilon keeps a product that
	// floating point lands a hair above a whole number (95*n/100) from
	// moving the rank up by one.
	k := int(math.Ceil(p*float64(n)/100 - 1e-9))
	k = min(max(k, 1), n)
	return s.v[k-1]
}

// Keep drops every sample but those recorded in positions lo..hi−1, in the
// order they were added: a window of a run (after its warm-up, before its
// end). It must come before any Percentile, which sorts the samples.
func (s *Samples) Keep(lo, hi int) {
	if s.sorted && (lo > 0 || hi < len(s.v)) {
		panic("sim: Samples.Keep after the samples were sorted")
	}
	lo, hi = max(lo, 0), min(hi, len(s.v))
	if lo >= hi {
		s.v, s.sum = s.v[:0], 0
		return
	}
	s.v = append(s.v[:0], s.v[lo:hi]...)
	s.sum = 0
	for _, t := range s.v {
		s.sum += float64(t)
	}
}

// Window is a copy of the samples recorded in positions lo..hi−1 (in the
// order they were added), to read a window's percentiles while keeping the
// whole. It must come before any Percentile of s.
func (s *Samples) Window(lo, hi int) Samples {
	if s.sorted && (lo > 0 || hi < len(s.v)) {
		panic("sim: Samples.Window after the samples were sorted")
	}
	lo, hi = max(lo, 0), min(hi, len(s.v))
	var w Samples
	if lo < hi {
		w.v = append([]Time(nil), s.v[lo:hi]...)
		for _, t := range w.v {
			w.sum += float64(t)
		}
	}
	return w
}

// Series is the samples in the order they were added (nil once sorted).
// The caller must not change it.
func (s *Samples) Series() []Time {
	if s.sorted {
		return nil
	}
	return s.v
}

// Max is the largest sample, 0 with none.
func (s *Samples) Max() Time { return s.Percentile(100) }

// BytesPerSample is the memory each recorded sample takes (before slice
// growth slack).
const BytesPerSample = 8
