package sim

import (
	"math"
	"math/bits"
	"slices"
)

// Samples records durations and answers percentiles by the nearest-rank
// rule: the p-th percentile of n samples is the k-th smallest with
// k = ceil(p/100 * n).
//
// Memory is bounded. A recorder keeps its first ExactLimit samples exactly
// (8 bytes each; zeros only counted), and every percentile is then a
// recorded value. Past the limit it moves them into a histogram of
// log-linear buckets (hist) and counts every later sample there: its
// memory then depends on the range of the values, not on how many there
// are (about 4.6 kB per power of two they span), and a percentile reads
// its bucket's midpoint, within HistogramError (0.098 %) of the exact
// value. Count and Mean stay exact in both modes. The result is
// deterministic, and two recorders merge (Merge) in either mode.
//
// A run measures windows of its samples (after a warm-up, up to a
// moment): Checkpoint marks a position, and Keep or Window cut between two
// of them, in either mode.
type Samples struct {
	limit int // samples kept exactly; 0 means ExactLimit

	n      int     // samples recorded
	zeros  int     // of which zero: counted, not stored
	sum    float64 // their sum in the order added
	lo, hi Time    // the least and greatest sample (n > 0)

	// Exact mode (h == nil): the nonzero samples in the order added, in
	// chunks and cur; or, once a percentile was asked, in flat, partly
	// ordered by the selections that answered (fixed: the positions that
	// hold their rank's value, everything before them no greater and
	// everything after no less), and the order added is gone.
	chunks [][]Time
	cur    []Time
	nz     int // nonzero samples (in either mode)
	flat   []Time
	fixed  []int
	negs   int // negative samples in flat, once counted (-1 until then)

	h   *hist        // histogram mode
	cps []checkpoint // positions marked by Checkpoint, in order
}

// ExactLimit is how many samples a recorder keeps exactly before its
// histogram takes over: 8 MB of samples at most.
const ExactLimit = 1_000_000

// BytesPerSample is the memory each nonzero sample takes below the exact
// limit.
const BytesPerSample = 8

// checkpoint is a recorder's accounts at a position: enough to cut a
// window there in either mode.
type checkpoint struct {
	n, nz int
	sum   float64
	h     *hist // a copy, in histogram mode
}

// Chunks of exact samples grow from 16 to 64 Ki samples: small recorders
// stay small, and a large one never copies what it holds.
const (
	firstChunk = 16
	maxChunk   = 64 << 10
)

// SetExactLimit sets how many samples s keeps exactly (at least 1; the
// default is ExactLimit). A recorder already past it moves to its
// histogram at its next nonzero sample.
func (s *Samples) SetExactLimit(n int) {
	if n < 1 {
		panic("sim: exact limit below 1")
	}
	s.limit = n
}

func (s *Samples) exactLimit() int {
	if s.limit > 0 {
		return s.limit
	}
	return ExactLimit
}

// Add records one sample.
func (s *Samples) Add(t Time) {
	s.n++
	s.sum += float64(t)
	if s.n == 1 {
		s.lo, s.hi = t, t
	} else {
		s.lo, s.hi = min(s.lo, t), max(s.hi, t)
	}
	if t == 0 {
		s.zeros++
		return
	}
	s.nz++
	if s.h != nil {
		s.h.add(t)
		return
	}
	switch {
	case s.flat != nil:
		s.flat = append(s.flat, t)
		s.fixed, s.negs = s.fixed[:0], -1
	case len(s.cur) < cap(s.cur):
		s.cur = append(s.cur, t)
	default:
		s.newChunk(t)
	}
	if s.n > s.exactLimit() {
		s.toHist()
	}
}

func (s *Samples) newChunk(t Time) {
	size := firstChunk
	if s.cur != nil {
		s.chunks = append(s.chunks, s.cur)
		size = max(firstChunk, min(2*cap(s.cur), maxChunk))
	}
	s.cur = make([]Time, 1, size)
	s.cur[0] = t
}

// spans calls f on the runs of nonzero samples a..b−1 (counted among the
// nonzero ones, in the order added), chunk by chunk.
func (s *Samples) spans(a, b int, f func([]Time)) {
	if s.flat != nil {
		f(s.flat[a:b])
		return
	}
	at := 0
	for i := 0; i <= len(s.chunks) && at < b; i++ {
		c := s.cur
		if i < len(s.chunks) {
			c = s.chunks[i]
		}
		lo, hi := min(max(a-at, 0), len(c)), min(b-at, len(c))
		if lo < hi {
			f(c[lo:hi])
		}
		at += len(c)
	}
}

// each calls f on the nonzero samples a..b−1.
func (s *Samples) each(a, b int, f func(Time)) {
	s.spans(a, b, func(ts []Time) {
		for _, t := range ts {
			f(t)
		}
	})
}

// nonzero is a copy of the nonzero samples a..b−1.
func (s *Samples) nonzero(a, b int) []Time {
	out := make([]Time, 0, b-a)
	s.spans(a, b, func(ts []Time) { out = append(out, ts...) })
	return out
}

// toHist moves the exact samples into a histogram, with a copy of it at
// every checkpoint.
func (s *Samples) toHist() {
	h := &hist{}
	at := 0
	for i := range s.cps {
		cp := &s.cps[i]
		s.each(at, cp.nz, h.add)
		at = cp.nz
		cp.h = h.clone()
	}
	s.each(at, s.nz, h.add)
	s.h = h
	s.chunks, s.cur, s.flat, s.fixed = nil, nil, nil, nil
}

// Exact reports whether s still holds every sample exactly.
func (s *Samples) Exact() bool { return s.h == nil }

// Count is the number of samples.
func (s *Samples) Count() int { return s.n }

// Mean is the arithmetic mean, 0 with no samples.
func (s *Samples) Mean() Time {
	if s.n == 0 {
		return 0
	}
	return Time(math.Round(s.sum / float64(s.n)))
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100);
// 0 when there are no samples. p <= 0 gives the minimum. Below the exact
// limit it is a recorded sample; past it, within HistogramError of one.
func (s *Samples) Percentile(p float64) Time {
	n := s.n
	if n == 0 {
		return 0
	}
	k := nearestRank(p, n)
	if s.h != nil {
		// The least and greatest samples bound every bucket's midpoint.
		return min(max(s.h.rank(k, s.zeros), s.lo), s.hi)
	}
	s.flatten()
	if s.negs < 0 {
		s.negs = 0
		for _, t := range s.flat {
			if t < 0 {
				s.negs++
			}
		}
	}
	switch i := k - 1; { // the negative samples come first, then the zeros
	case i < s.negs:
		return s.nth(i)
	case i < s.negs+s.zeros:
		return 0
	default:
		return s.nth(i - s.zeros)
	}
}

// nearestRank is the rank (1-based) of the p-th percentile of n > 0
// samples: ceil(p/100·n), from 1 to n. p·n is exact for whole p; the
// small epsilon keeps a product that floating point lands a hair above a
// whole number (95·n/100) from moving the rank up by one.
func nearestRank(p float64, n int) int {
	k := int(math.Ceil(p*float64(n)/100 - 1e-9))
	return min(max(k, 1), n)
}

// nth is the i-th smallest (0-based) nonzero sample, found by selection in
// the stretch of flat between the positions already fixed around i.
func (s *Samples) nth(i int) Time {
	j, found := slices.BinarySearch(s.fixed, i)
	if !found {
		lo, hi := 0, len(s.flat)
		if j > 0 {
			lo = s.fixed[j-1] + 1
		}
		if j < len(s.fixed) {
			hi = s.fixed[j]
		}
		selectNth(s.flat[lo:hi], i-lo)
		s.fixed = slices.Insert(s.fixed, j, i)
	}
	return s.flat[i]
}

// selectNth moves the k-th smallest of v to v[k], the smaller ones before
// it and the greater after (introselect: three-way partitions around a
// median of three, a sort when they do not shrink v fast enough).
func selectNth(v []Time, k int) {
	budget := 2 * bits.Len(uint(len(v)))
	for len(v) > 16 {
		if budget == 0 {
			slices.Sort(v)
			return
		}
		budget--
		a, b, c := v[0], v[len(v)/2], v[len(v)-1]
		p := max(min(a, b), min(max(a, b), c))
		lt, i, gt := 0, 0, len(v)
		for i < gt {
			switch x := v[i]; {
			case x < p:
				v[lt], v[i] = x, v[lt]
				lt++
				i++
			case x > p:
				gt--
				v[i], v[gt] = v[gt], x
			default:
				i++
			}
		}
		switch {
		case k < lt:
			v = v[:lt]
		case k >= gt:
			v, k = v[gt:], k-gt
		default:
			return // v[k] == p, in its place
		}
	}
	slices.Sort(v)
}

// flatten gathers the exact samples into flat; the order they were added
// in is gone.
func (s *Samples) flatten() {
	if s.flat == nil {
		switch {
		case len(s.chunks) > 0:
			s.flat = s.nonzero(0, s.nz)
		case s.cur != nil:
			s.flat = s.cur // one chunk: ordered where it is
		default:
			s.flat = []Time{}
		}
		s.chunks, s.cur = nil, nil
		s.fixed, s.negs = nil, -1
	}
}

// Max is the largest sample, 0 with none.
func (s *Samples) Max() Time { return s.Percentile(100) }

// Checkpoint marks the current position, for Keep and Window to cut at,
// and returns it (the number of samples so far).
func (s *Samples) Checkpoint() int {
	if k := len(s.cps); k > 0 && s.cps[k-1].n == s.n {
		return s.n
	}
	cp := checkpoint{n: s.n, nz: s.nz, sum: s.sum}
	if s.h != nil {
		cp.h = s.h.clone()
	}
	if s.cps == nil {
		s.cps = make([]checkpoint, 0, 4) // a run's window takes three or four
	}
	s.cps = append(s.cps, cp)
	return s.n
}

// at is the checkpoint at position pos: 0, the current position, or one
// that Checkpoint marked. Exact samples without zeros need none.
func (s *Samples) at(pos int) checkpoint {
	switch {
	case pos <= 0:
		return checkpoint{h: &hist{}}
	case pos >= s.n:
		return checkpoint{n: s.n, nz: s.nz, sum: s.sum, h: s.h}
	}
	for _, cp := range s.cps {
		if cp.n == pos {
			return cp
		}
	}
	if s.h == nil && s.zeros == 0 {
		return checkpoint{n: pos, nz: pos, sum: math.NaN()}
	}
	panic("sim: Samples cut at a position that is not a checkpoint")
}

// window is the samples in positions lo..hi−1.
func (s *Samples) window(lo, hi int) Samples {
	lo, hi = max(lo, 0), min(hi, s.n)
	w := Samples{limit: s.limit, lo: s.lo, hi: s.hi}
	if lo >= hi {
		return w
	}
	if s.flat != nil && (lo > 0 || hi < s.n) {
		panic("sim: Samples cut after a percentile was read")
	}
	a, b := s.at(lo), s.at(hi)
	w.n = hi - lo
	w.zeros = w.n - (b.nz - a.nz)
	if s.h != nil {
		w.h = b.h.minus(a.h)
		w.sum = b.sum - a.sum // rounding aside, the window's sum
		if lo == 0 {
			w.sum = b.sum
		}
		return w
	}
	w.nz = b.nz - a.nz
	w.cur = s.nonzero(a.nz, b.nz)
	for _, t := range w.cur {
		w.sum += float64(t)
	}
	return w
}

// Keep drops every sample but those recorded in positions lo..hi−1, in the
// order they were added: a window of a run (after its warm-up, before its
// end). lo and hi must be 0, Count or checkpoints, and the cut must come
// before any Percentile. The checkpoints are gone afterwards.
func (s *Samples) Keep(lo, hi int) {
	*s = s.window(lo, hi)
}

// Window is a copy of the samples recorded in positions lo..hi−1 (in the
// order they were added), to read a window's percentiles while keeping the
// whole; lo and hi as for Keep.
func (s *Samples) Window(lo, hi int) Samples { return s.window(lo, hi) }

// Merge adds o's samples to s: as if they were added after s's own, while
// both are exact and together within s's limit; otherwise s's histogram
// takes them. s's checkpoints are gone afterwards.
func (s *Samples) Merge(o *Samples) {
	if o.n == 0 {
		return
	}
	if s.n == 0 {
		s.lo, s.hi = o.lo, o.hi
	} else {
		s.lo, s.hi = min(s.lo, o.lo), max(s.hi, o.hi)
	}
	s.cps = nil
	exact := s.h == nil && o.h == nil && s.n+o.n <= s.exactLimit()
	if !exact && s.h == nil {
		s.toHist()
	}
	switch {
	case exact:
		more := o.nonzero(0, o.nz)
		if s.flat != nil {
			s.flat = append(s.flat, more...)
			s.fixed, s.negs = s.fixed[:0], -1
		} else if len(more) > 0 {
			if s.cur != nil {
				s.chunks = append(s.chunks, s.cur)
			}
			s.cur = more
		}
	case o.h != nil:
		s.h.merge(o.h)
	default:
		o.each(0, o.nz, s.h.add)
	}
	s.n += o.n
	s.nz += o.nz
	s.zeros += o.zeros
	s.sum += o.sum
}
