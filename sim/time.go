package sim

import (
	"math"
	"time"
)

// Time is a point in virtual time, or a span of it, in nanoseconds.
type Time int64

// Units of virtual time.
const (
	Nanosecond  Time = 1
	Microsecond Time = 1000
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// FromDuration converts a Go duration to virtual time.
func FromDuration(d time.Duration) Time { return Time(d) }

// FromSeconds converts seconds to virtual time, rounding to the nearest
// nanosecond and saturating at the int64 range.
func FromSeconds(s float64) Time {
	ns := math.Round(s * 1e9)
	switch {
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return Time(ns)
}

// Seconds returns t in seconds.
func (t Time) Seconds() float64 { return float64(t) / 1e9 }

// Milliseconds returns t in milliseconds as a float.
func (t Time) Milliseconds() float64 { return float64(t) / 1e6 }

// Duration returns t as a Go duration.
func (t Time) Duration() time.Duration { return time.Duration(t) }

func (t Time) String() string { return time.Duration(t).String() }
