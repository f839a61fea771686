package sim

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Histogram is a compact, read-only copy of a recorder's samples in the
// buckets of its histogram mode: every sample within HistogramError of
// its bucket's midpoint, as a recorder past its exact limit reads it. It
// is what several runs keep of a quantity to read percentiles of all
// their samples together later (MergeHistograms), without keeping the
// samples: the occupied buckets are coded as varints of (gap from the
// previous occupied bucket, count), a few bytes per occupied bucket
// whatever its count, so a histogram takes at most about 2^subBits buckets
// per power of two its values span (a few kB each), and a quantity that
// takes one value, or none, a few bytes. It is a comparable value: equal
// samples give equal histograms (==), and copies share their buckets. The
// zero Histogram counts nothing.
type Histogram struct {
	n, zeros int    // samples, and how many of them are zero
	lo, hi   Time   // the least and greatest sample (n > 0)
	negs     int    // occupied negative buckets: the first negs pairs of code
	code     string // the occupied buckets, negative then positive, each side in ascending order
}

// bucketCount is one occupied bucket.
type bucketCount struct {
	i int
	n uint64
}

// Histogram is a compact copy of s's samples (s is left as it was; its
// exact samples are read, not sorted).
func (s *Samples) Histogram() Histogram {
	if s.n == 0 {
		return Histogram{}
	}
	h := Histogram{n: s.n, zeros: s.zeros, lo: s.lo, hi: s.hi}
	src := s.h
	if src == nil {
		src = &hist{}
		if s.hi > 0 { // room for every bucket up to the greatest sample's
			src.pos = make([]uint64, 0, bucketOf(uint64(s.hi))+1)
		}
		s.each(0, s.nz, src.add)
	}
	var b []byte
	b, h.negs = appendBuckets(b, src.neg)
	b, _ = appendBuckets(b, src.pos)
	h.code = string(b)
	return h
}

// appendBuckets codes the occupied buckets of counts after b, and says
// how many there were.
func appendBuckets(b []byte, counts []uint64) ([]byte, int) {
	prev, k := -1, 0
	for i, n := range counts {
		if n > 0 {
			b = binary.AppendUvarint(b, uint64(i-prev))
			b = binary.AppendUvarint(b, n)
			prev = i
			k++
		}
	}
	return b, k
}

// uvarint is binary.Uvarint of a string: the value and the bytes it took
// (0 or less when s does not start with one).
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// buckets decodes h's occupied buckets, each side in ascending order of
// its index (for the negative side: of the values' magnitude).
func (h *Histogram) buckets() (neg, pos []bucketCount) {
	s := h.code
	// read decodes k pairs, or every pair left for k < 0.
	read := func(k int) []bucketCount {
		if k < 0 {
			k = 0
			for i := 0; i < len(s); i++ {
				if s[i] < 0x80 { // a varint's last byte: two to a pair
					k++
				}
			}
			k /= 2
		}
		out := make([]bucketCount, 0, k)
		prev := -1
		for ; k > 0 && len(s) > 0; k-- {
			gap, w := uvarint(s)
			s = s[w:]
			n, w := uvarint(s)
			s = s[w:]
			prev += int(gap)
			out = append(out, bucketCount{prev, n})
		}
		return out
	}
	neg = read(h.negs)
	return neg, read(-1)
}

// Count is the number of samples h counts.
func (h Histogram) Count() int { return h.n }

// Size is the memory h's buckets take, in bytes (its fixed part aside).
func (h Histogram) Size() int { return len(h.code) }

// Percentile is the nearest-rank p-th percentile of h's samples, read as
// Samples reads it past its exact limit: within HistogramError of a
// sample; 0 with none.
func (h Histogram) Percentile(p float64) Time {
	return MergeHistograms([]Histogram{h}).Percentile(p)
}

// AppendBinary appends h's binary form to b: its counts, extremes and the
// length of its buckets as varints, then the buckets.
func (h Histogram) AppendBinary(b []byte) ([]byte, error) {
	for _, v := range [...]uint64{uint64(h.n), uint64(h.zeros), uint64(h.lo), uint64(h.hi), uint64(h.negs), uint64(len(h.code))} {
		b = binary.AppendUvarint(b, v)
	}
	return append(b, h.code...), nil
}

// SkipHistogram is s past the binary form AppendBinary wrote at its front,
// read from its header alone (ReadHistogram checks the buckets).
func SkipHistogram(s string) (string, error) {
	var size uint64
	for range 6 {
		v, w := uvarint(s)
		if w <= 0 {
			return s, errHistogram
		}
		size, s = v, s[w:]
	}
	if size > uint64(len(s)) {
		return s, errHistogram
	}
	return s[size:], nil
}

// errHistogram is what ReadHistogram says of bytes that are not one.
var errHistogram = errors.New("sim: not a histogram")

// ReadHistogram reads the binary form AppendBinary wrote at the front of
// s, checking that its buckets add up to its count, and returns the rest
// of s. The histogram's buckets share s's memory.
func ReadHistogram(s string) (Histogram, string, error) {
	var head [6]uint64
	for i := range head {
		v, w := uvarint(s)
		if w <= 0 {
			return Histogram{}, s, errHistogram
		}
		head[i], s = v, s[w:]
	}
	if head[5] > uint64(len(s)) || head[0] > math.MaxInt64/2 || head[1] > head[0] {
		return Histogram{}, s, errHistogram
	}
	h := Histogram{n: int(head[0]), zeros: int(head[1]), lo: Time(head[2]), hi: Time(head[3]), negs: int(head[4]), code: s[:head[5]]}
	rest := s[head[5]:]
	pairs, total := 0, uint64(0)
	for c := h.code; len(c) > 0; pairs++ {
		gap, w := uvarint(c)
		if w <= 0 || gap == 0 || gap > 64<<subBits {
			return Histogram{}, s, errHistogram
		}
		n, w2 := uvarint(c[w:])
		if w2 <= 0 || n == 0 {
			return Histogram{}, s, errHistogram
		}
		c = c[w+w2:]
		total += n
	}
	if h.negs > pairs || total != uint64(h.n-h.zeros) || (h.n > 0 && h.lo > h.hi) {
		return Histogram{}, s, fmt.Errorf("%w: %d samples, %d zeros, buckets holding %d", errHistogram, h.n, h.zeros, total)
	}
	if h.n == 0 {
		h = Histogram{}
	}
	return h, rest, nil
}

// MarshalText codes h for a text format (JSON): base64 of its binary form.
func (h Histogram) MarshalText() ([]byte, error) {
	b, _ := h.AppendBinary(nil)
	return base64.RawStdEncoding.AppendEncode(nil, b), nil
}

// UnmarshalText reads what MarshalText wrote.
func (h *Histogram) UnmarshalText(text []byte) error {
	b, err := base64.RawStdEncoding.AppendDecode(nil, text)
	if err != nil {
		return errHistogram
	}
	x, rest, err := ReadHistogram(string(b))
	if err != nil {
		return err
	}
	if rest != "" {
		return errHistogram
	}
	*h = x
	return nil
}

// Merged is the union of several histograms' samples. Besides the
// percentiles of all of them, it reads those of all but one (the
// leave-one-out estimates of a jackknife over independent runs).
type Merged struct {
	parts    []Histogram
	neg, pos [][]bucketCount // each part's occupied buckets, decoded once
	negs     []uint64        // the summed counts by bucket: negative side
	poss     []uint64        // positive side
	n, zeros int
}

// MergeHistograms is the union of hs (kept, not copied: they are
// read-only).
func MergeHistograms(hs []Histogram) *Merged {
	m := &Merged{parts: hs, neg: make([][]bucketCount, len(hs)), pos: make([][]bucketCount, len(hs))}
	for i := range hs {
		h := &hs[i]
		m.n += h.n
		m.zeros += h.zeros
		m.neg[i], m.pos[i] = h.buckets()
		for _, b := range m.neg[i] {
			m.negs = bump(m.negs, b.i, b.n)
		}
		for _, b := range m.pos[i] {
			m.poss = bump(m.poss, b.i, b.n)
		}
	}
	return m
}

// Count is the number of samples of the union.
func (m *Merged) Count() int { return m.n }

// Percentile is the nearest-rank p-th percentile of every sample of the
// union, within HistogramError of one of them; 0 with none.
func (m *Merged) Percentile(p float64) Time {
	v, _ := m.percentile(p, -1)
	return v
}

// PercentileWithout is the p-th percentile of the union's samples without
// those of histogram i (0 when nothing is left).
func (m *Merged) PercentileWithout(i int, p float64) Time {
	m.check(i)
	v, _ := m.percentile(p, i)
	return v
}

// Smooth is Percentile read inside its bucket (spot.smooth) rather than at
// its midpoint: the same value to within a bucket's width, but one that
// moves a little with every sample where the midpoint jumps a bucket at a
// time - what a jackknife needs when leaving one run out of many moves the
// percentile by less than a bucket.
func (m *Merged) Smooth(p float64) float64 {
	_, v := m.percentile(p, -1)
	return v
}

// SmoothWithout is Smooth without histogram i's samples.
func (m *Merged) SmoothWithout(i int, p float64) float64 {
	m.check(i)
	_, v := m.percentile(p, i)
	return v
}

func (m *Merged) check(i int) {
	if i < 0 || i >= len(m.parts) {
		panic("sim: a histogram left out that was not merged")
	}
}

// Mean is the mean of every sample of the union, each read at its
// bucket's midpoint (so within HistogramError of the exact mean); 0 with
// none.
func (m *Merged) Mean() float64 {
	if m.n == 0 {
		return 0
	}
	var sum float64
	for i, c := range m.poss {
		sum += float64(c) * float64(bucketMid(i))
	}
	for i, c := range m.negs {
		sum -= float64(c) * float64(bucketMid(i))
	}
	return sum / float64(m.n)
}

// Variance is the sample variance of every sample of the union (each read
// at its bucket's midpoint); 0 with fewer than two.
func (m *Merged) Variance() float64 {
	if m.n < 2 {
		return 0
	}
	mean := m.Mean()
	ss := float64(m.zeros) * mean * mean
	for i, c := range m.poss {
		d := float64(bucketMid(i)) - mean
		ss += float64(c) * d * d
	}
	for i, c := range m.negs {
		d := -float64(bucketMid(i)) - mean
		ss += float64(c) * d * d
	}
	return ss / float64(m.n-1)
}

// percentile reads the nearest rank of p among the samples of every part
// but skip (−1: none skipped), walking the buckets from the end nearer to
// the rank, and bounds it by the least and greatest sample of those parts
// as Samples does: at its bucket's midpoint, and smoothed (spot.smooth).
func (m *Merged) percentile(p float64, skip int) (Time, float64) {
	n, zeros := m.n, m.zeros
	var sn, sp []bucketCount // the skipped part's buckets
	if skip >= 0 {
		x := &m.parts[skip]
		n -= x.n
		zeros -= x.zeros
		sn, sp = m.neg[skip], m.pos[skip]
	}
	if n == 0 {
		return 0, 0
	}
	lo, hi, first := Time(0), Time(0), true
	for i := range m.parts {
		if x := &m.parts[i]; i != skip && x.n > 0 {
			if first {
				lo, hi, first = x.lo, x.hi, false
			}
			lo, hi = min(lo, x.lo), max(hi, x.hi)
		}
	}
	k := nearestRank(p, n)
	var at spot
	if 2*k <= n {
		at = walkUp(m.negs, m.poss, sn, sp, zeros, uint64(k))
	} else {
		at = walkDown(m.negs, m.poss, sn, sp, zeros, uint64(n-k+1))
	}
	return min(max(at.mid(), lo), hi), min(max(at.smooth(), float64(lo)), float64(hi))
}

// spot is where a rank falls: bucket i of the negative side (neg) or the
// positive side, or zero; pos is its place among the bucket's n samples
// (1-based, from the bucket's low end).
type spot struct {
	i      int
	neg    bool
	zero   bool
	pos, n uint64
}

// mid is the value a spot reads as Samples does: its bucket's midpoint.
func (s spot) mid() Time {
	if s.zero {
		return 0
	}
	if s.neg {
		return -Time(bucketMid(s.i))
	}
	return Time(bucketMid(s.i))
}

// smooth is the spot's value interpolated inside its bucket as if the
// bucket's samples were spread evenly over it: the (pos−½)/n point of its
// width. It moves with every sample added or taken away, where the
// midpoint moves only when the rank leaves the bucket.
func (s spot) smooth() float64 {
	if s.zero {
		return 0
	}
	low, width := bucketBounds(s.i)
	if width == 1 { // the value itself
		if s.neg {
			return -float64(low)
		}
		return float64(low)
	}
	frac := (float64(s.pos) - 0.5) / float64(s.n)
	if s.neg { // the bucket holds −(low+width) .. −low, most negative first
		return -(float64(low) + float64(width)*(1-frac))
	}
	return float64(low) + float64(width)*frac
}

// bucketBounds is bucket i's lower bound and width (1 below 2^subBits).
func bucketBounds(i int) (low, width uint64) {
	if i < 1<<subBits {
		return uint64(i), 1
	}
	shift := i>>subBits - 1
	return uint64(i-shift<<subBits) << shift, uint64(1) << shift
}

// walkUp is where the k-th smallest sample (1-based) falls among the
// counts neg, pos and zeros less the skipped part's sn and sp: the most
// negative first.
func walkUp(neg, pos []uint64, sn, sp []bucketCount, zeros int, k uint64) spot {
	left := k
	j := len(sn) - 1
	for i := len(neg) - 1; i >= 0; i-- {
		c := neg[i]
		if j >= 0 && sn[j].i == i {
			c -= sn[j].n
			j--
		}
		if left <= c {
			return spot{i: i, neg: true, pos: left, n: c}
		}
		left -= c
	}
	if left <= uint64(zeros) {
		return spot{zero: true}
	}
	left -= uint64(zeros)
	j = 0
	for i, c := range pos {
		if j < len(sp) && sp[j].i == i {
			c -= sp[j].n
			j++
		}
		if left <= c {
			return spot{i: i, pos: left, n: c}
		}
		left -= c
	}
	panic("sim: merged histogram rank beyond its count")
}

// walkDown is where the k-th greatest sample (1-based) falls, as walkUp.
func walkDown(neg, pos []uint64, sn, sp []bucketCount, zeros int, k uint64) spot {
	left := k
	j := len(sp) - 1
	for i := len(pos) - 1; i >= 0; i-- {
		c := pos[i]
		if j >= 0 && sp[j].i == i {
			c -= sp[j].n
			j--
		}
		if left <= c {
			return spot{i: i, pos: c - left + 1, n: c}
		}
		left -= c
	}
	if left <= uint64(zeros) {
		return spot{zero: true}
	}
	left -= uint64(zeros)
	j = 0
	for i, c := range neg {
		if j < len(sn) && sn[j].i == i {
			c -= sn[j].n
			j++
		}
		if left <= c {
			return spot{i: i, neg: true, pos: c - left + 1, n: c}
		}
		left -= c
	}
	panic("sim: merged histogram rank beyond its count")
}
