// Package sim is a small, goroutine-free discrete-event simulation engine.
//
// It owns four things and knows nothing of what is simulated:
//
//   - a virtual clock: Time is int64 nanoseconds, never wall time;
//   - an event queue ordered by (time, sequence), so events at the same
//     instant run in the order they were scheduled and a run is
//     reproducible bit for bit: a typed 4-ary heap, in front of which a
//     FIFO lane per event kind holds the events that come in time order
//     (a constant delay, a timeout), so the heap holds little more than
//     the lanes' heads (lane.go);
//   - statistics: a FIFO wait queue (whose accounts, QueueStats, also
//     measure a queue kept elsewhere) and a time-weighted level whose
//     averages are integrated over virtual time (so L in Little's law is
//     measured, not derived), and a percentile recorder in bounded memory:
//     exact up to ExactLimit samples, then a mergeable log-linear histogram
//     whose percentiles are within HistogramError (0.098 %) of the exact
//     ones;
//   - seeded random streams, one per purpose, whose variates are computed
//     from Uint64 by our own formulas so they cannot change across Go
//     releases, and the distributions drawn from them: durations (Dist:
//     constant, exponential, uniform, lognormal by mean or median with p99
//     or σ, and empirical tables of samples or histogram buckets, drawn by
//     inverting the distribution function with one Float64) and counts
//     (IntDist: constant, uniform, empirical).
//
// A model is a Handler: the engine pops the earliest Event and calls
// Handle; the handler schedules further events with At or After. Events
// carry a kind and two integers and no pointers, so scheduling allocates
// nothing once the heap has grown. Scheduling an event in the past is a
// programming error and panics.
//
// Guarantees: the same events scheduled in the same order produce the same
// sequence of Handle calls, on any machine. Nothing here starts a
// goroutine, reads the clock or uses a global random source.
package sim
