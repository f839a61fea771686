package sim

import "math/bits"

// hist counts nonzero samples in log-linear buckets: every power of two
// is cut into 2^subBits buckets of equal width, and values below 2^subBits
// have a bucket each. A bucket is at most 2^−subBits of its lower bound
// wide, so its midpoint is within HistogramError of every value in it.
// Counts only add, so two histograms of the same recorder subtract (a
// window between two checkpoints) and any two merge, exactly and in any
// order.
type hist struct {
	pos []uint64 // counts of v > 0 by bucketOf(v)
	neg []uint64 // counts of v < 0 by bucketOf(−v)
}

// subBits sets the buckets' width: 512 to a power of two.
const subBits = 9

// HistogramError is the largest relative error of a percentile read from
// a recorder past its exact limit: half a bucket's width over its lower
// bound, 2^−10 (0.098 %).
const HistogramError = 1.0 / (2 << subBits)

// bucketOf is the bucket of v > 0.
func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits
	return shift<<subBits + int(v>>shift)
}

// bucketMid is the value a percentile in bucket i reads: its midpoint
// (the value itself for buckets one nanosecond wide).
func bucketMid(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	shift := i>>subBits - 1
	low := uint64(i-shift<<subBits) << shift
	return low + (uint64(1)<<shift)>>1
}

func (h *hist) add(t Time) {
	if t > 0 {
		h.pos = bump(h.pos, bucketOf(uint64(t)), 1)
	} else {
		h.neg = bump(h.neg, bucketOf(-uint64(t)), 1)
	}
}

// bump adds n to counts[i], growing counts to hold i.
func bump(counts []uint64, i int, n uint64) []uint64 {
	if i >= len(counts) {
		counts = append(counts, make([]uint64, i+1-len(counts))...)
	}
	counts[i] += n
	return counts
}

func (h *hist) clone() *hist {
	return &hist{pos: append([]uint64(nil), h.pos...), neg: append([]uint64(nil), h.neg...)}
}

// merge adds o's counts to h.
func (h *hist) merge(o *hist) {
	for i, n := range o.pos {
		if n > 0 {
			h.pos = bump(h.pos, i, n)
		}
	}
	for i, n := range o.neg {
		if n > 0 {
			h.neg = bump(h.neg, i, n)
		}
	}
}

// minus is h's counts less an earlier snapshot's of the same recorder.
func (h *hist) minus(o *hist) *hist {
	d := h.clone()
	for i, n := range o.pos {
		d.pos[i] -= n
	}
	for i, n := range o.neg {
		d.neg[i] -= n
	}
	return d
}

// rank is the k-th smallest (1-based) of the samples h counts and zeros
// more zeros, read at its bucket's midpoint.
func (h *hist) rank(k, zeros int) Time {
	left := uint64(k)
	for i := len(h.neg) - 1; i >= 0; i-- { // most negative first
		if left <= h.neg[i] {
			return -Time(bucketMid(i))
		}
		left -= h.neg[i]
	}
	if left <= uint64(zeros) {
		return 0
	}
	left -= uint64(zeros)
	for i, n := range h.pos {
		if left <= n {
			return Time(bucketMid(i))
		}
		left -= n
	}
	panic("sim: histogram rank beyond its count")
}
