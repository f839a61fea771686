package sim

import "math"

// Rand is a seeded random stream (xoshiro256**). Every variate is computed
// from Uint64 by the formulas in this file, so a stream gives the same
// numbers on every Go release and platform. It is not safe for concurrent
// use; a model takes one stream per purpose.
type Rand struct{ s [4]uint64 }

// NewRand returns the stream named name of the given seed. Streams with
// different names are independent for practical purposes, so adding a new
// purpose never shifts the numbers an existing one draws.
func NewRand(seed uint64, name string) *Rand {
	r := newRand(seed, name)
	return &r
}

func newRand(seed uint64, name string) Rand {
	h := uint64(14695981039346656037) // FNV-1a of the name
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	x := seed ^ h
	var r Rand
	for i := range r.s {
		x, r.s[i] = splitmix64(x)
	}
	return r
}

func splitmix64(x uint64) (next, out uint64) {
	x += 0x9e3779b97f4a7c15
	z := x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return x, z ^ (z >> 31)
}

func rotl(x uint64, k uint) uint64 { return x<<k | x>>(64-k) }

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	s := &r.s
	out := rotl(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = rotl(s[3], 45)
	return out
}

// Float64 returns a uniform number in [0, 1) with 53 random bits.
func (r *Rand) Float64() float64 { return float64(r.Uint64()>>11) * (1.0 / (1 << 53)) }

// ExpFloat64 returns an exponential variate with mean 1 (inverse CDF).
func (r *Rand) ExpFloat64() float64 { return -math.Log1p(-r.Float64()) }

// NormFloat64 returns a standard normal variate (Box–Muller, one of the
// pair; the other is discarded so every call draws exactly two numbers).
func (r *Rand) NormFloat64() float64 {
	u1 := 1 - r.Float64() // (0, 1]
	u2 := r.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// IntN returns a uniform integer in [0, n) without modulo bias
// (Lemire's multiply-shift with rejection); n must be positive.
func (r *Rand) IntN(n uint64) uint64 {
	for {
		hi, lo := mul64(r.Uint64(), n)
		if lo >= n || lo >= (-n)%n {
			return hi
		}
	}
}

func mul64(a, b uint64) (hi, lo uint64) {
	const mask32 = 1<<32 - 1
	a0, a1 := a&mask32, a>>32
	b0, b1 := b&mask32, b>>32
	w0 := a0 * b0
	t := a1*b0 + w0>>32
	w1 := t&mask32 + a0*b1
	return a1*b1 + t>>32 + w1>>32, a * b
}

// Streams is a family of random streams keyed by position, for common
// random numbers: At(a, b) is the same stream every time it is asked for,
// whatever else the model drew before, so two runs that differ only in
// their configuration give the same entity the same draws at the same
// position (a client's k-th statement its query time, say) and a
// comparison between them is not drowned in noise. Streams at different
// keys, and in families of different names or seeds, are independent for
// practical purposes.
type Streams struct{ base uint64 }

// NewStreams returns the family named name of the given seed.
func NewStreams(seed uint64, name string) Streams {
	r := newRand(seed, name)
	return Streams{base: r.Uint64()}
}

// At is the stream at key (a, b): its state is mixed from the family and
// the key by SplitMix64, so asking for it costs a few multiplications and
// allocates nothing.
func (f Streams) At(a, b uint64) Rand {
	_, x := splitmix64(f.base ^ a)
	_, x = splitmix64(x ^ b*0xd1b54a32d192ed03)
	var r Rand
	for i := range r.s {
		x, r.s[i] = splitmix64(x)
	}
	return r
}
