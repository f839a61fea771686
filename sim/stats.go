package sim

import "fmt"

// Level is a quantity that changes at instants and holds between them
// (busy servers, open connections). It integrates itself over virtual time
// so its time average is measured exactly, event by event.
type Level struct {
	value int64
	max   int64
	start Time
	last  Time
	area  float64 // ∫ value dt in value·nanoseconds, up to last
}

// NewLevel starts a level at value 0 at time start.
func NewLevel(start Time) Level { return Level{start: start, last: start} }

// Set changes the value at time now (now must not go backwards).
func (l *Level) Set(now Time, v int64) {
	if now < l.last {
		panic(fmt.Sprintf("sim: level set at %v, before its last change at %v", now, l.last))
	}
	l.area += float64(l.value) * float64(now-l.last)
	l.last = now
	l.value = v
	if v > l.max {
		l.max = v
	}
}

// Add changes the value by delta at time now.
func (l *Level) Add(now Time, delta int64) { l.Set(now, l.value+delta) }

// Value is the current value.
func (l *Level) Value() int64 { return l.value }

// Max is the largest value held.
func (l *Level) Max() int64 { return l.max }

// Area is ∫ value dt from the start to end, in value·seconds.
func (l *Level) Area(end Time) float64 {
	a := l.area
	if end > l.last {
		a += float64(l.value) * float64(end-l.last)
	}
	return a / 1e9
}

// Mean is the time average of the value from the start to end.
func (l *Level) Mean(end Time) float64 {
	if end <= l.start {
		return 0
	}
	return l.Area(end) / (end - l.start).Seconds()
}

// QueueStats are a wait queue's accounts, kept apart from its entries so
// that a queue stored elsewhere (a pool's shared waiter queue) measures
// itself exactly as a FIFO does: its length is a Level (L), and each
// departure records how long it waited (W), so Little's law L = λW can be
// checked from independent accounts.
type QueueStats struct {
	n          int
	length     Level
	departures int64
	waitSum    Time
}

// NewQueueStats returns the accounts of an empty queue starting at time
// start.
func NewQueueStats(start Time) QueueStats { return QueueStats{length: NewLevel(start)} }

// Arrive counts an entry joining the queue at time now.
func (q *QueueStats) Arrive(now Time) {
	q.n++
	q.length.Set(now, int64(q.n))
}

// Depart counts an entry leaving the queue at time now after waiting
// waited, served or not.
func (q *QueueStats) Depart(now, waited Time) {
	q.n--
	q.length.Set(now, int64(q.n))
	q.departures++
	q.waitSum += waited
}

// Little is the queue's Little's-law triple over [start, end]: the time
// average of its length L, its departure rate λ per second, and the mean
// wait W in seconds of the entries that departed.
func (q *QueueStats) Little(end Time) (L, lambda, W float64) {
	span := (end - q.length.start).Seconds()
	if span <= 0 {
		return 0, 0, 0
	}
	L = q.length.Mean(end)
	lambda = float64(q.departures) / span
	if q.departures > 0 {
		W = q.waitSum.Seconds() / float64(q.departures)
	}
	return L, lambda, W
}

// MaxLen is the longest the queue has been.
func (q *QueueStats) MaxLen() int64 { return q.length.Max() }

// Len is the number waiting now.
func (q *QueueStats) Len() int { return q.n }

// FIFO is a first-come, first-served wait queue of entity IDs that measures
// itself (QueueStats). Entries may leave from the head (served) or be
// removed from anywhere (abandoned); both count as departures.
type FIFO struct {
	buf   []fifoEntry
	head  int
	stats QueueStats
}

type fifoEntry struct {
	id    int32
	since Time
}

// NewFIFO returns an empty queue whose statistics start at time start.
func NewFIFO(start Time) *FIFO { return &FIFO{stats: NewQueueStats(start)} }

// Len is the number waiting.
func (q *FIFO) Len() int { return q.stats.n }

// Push appends id at time now.
func (q *FIFO) Push(now Time, id int32) {
	if q.stats.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.stats.n)%len(q.buf)] = fifoEntry{id, now}
	q.stats.Arrive(now)
}

func (q *FIFO) grow() {
	nb := make([]fifoEntry, max(8, 2*len(q.buf)))
	for i := 0; i < q.stats.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

// HeadSince is when the oldest entry joined (0 for an empty queue).
func (q *FIFO) HeadSince() Time {
	if q.stats.n == 0 {
		return 0
	}
	return q.buf[q.head].since
}

// Pop removes the oldest entry at time now and returns it with its wait.
func (q *FIFO) Pop(now Time) (id int32, waited Time, ok bool) {
	if q.stats.n == 0 {
		return 0, 0, false
	}
	e := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	return e.id, q.depart(now, e), true
}

// Remove takes id out of the queue wherever it stands (a waiter that gave
// up) and returns its wait. It scans from the head, where abandoners with a
// common timeout always are, so it is cheap in that case.
func (q *FIFO) Remove(now Time, id int32) (waited Time, ok bool) {
	for i := 0; i < q.stats.n; i++ {
		k := (q.head + i) % len(q.buf)
		if q.buf[k].id != id {
			continue
		}
		e := q.buf[k]
		for j := i; j > 0; j-- { // close the gap towards the head
			q.buf[(q.head+j)%len(q.buf)] = q.buf[(q.head+j-1)%len(q.buf)]
		}
		q.head = (q.head + 1) % len(q.buf)
		return q.depart(now, e), true
	}
	return 0, false
}

func (q *FIFO) depart(now Time, e fifoEntry) Time {
	w := now - e.since
	q.stats.Depart(now, w)
	return w
}

// Stats are the queue's accounts.
func (q *FIFO) Stats() *QueueStats { return &q.stats }

// Little is the queue's Little's-law triple over [start, end]
// (QueueStats.Little).
func (q *FIFO) Little(end Time) (L, lambda, W float64) { return q.stats.Little(end) }

// MaxLen is the longest the queue has been.
func (q *FIFO) MaxLen() int64 { return q.stats.MaxLen() }

// Mark is a level's account at one instant: the time and the integral up
// to it. Two marks give the level's time average between them, so a model
// can measure a window (a steady state after a warm-up) without stopping.
type Mark struct {
	At   Time
	Area float64 // ∫ value dt from the level's start to At, in value·nanoseconds
}

// Mark is the level's account at now (now must not be before its last
// change).
func (l *Level) Mark(now Time) Mark {
	a := l.area
	if now > l.last {
		a += float64(l.value) * float64(now-l.last)
	}
	return Mark{At: now, Area: a}
}

// Between is the time average of a level between two of its marks, 0 for
// an empty window.
func Between(from, to Mark) float64 {
	if to.At <= from.At {
		return 0
	}
	// The same operations as Mean, so a window from a level's start gives
	// its Mean to the last bit.
	return (to.Area - from.Area) / 1e9 / (to.At - from.At).Seconds()
}

// QueueMark is a queue's accounts at one instant.
type QueueMark struct {
	Length     Mark
	Departures int64
	WaitSum    Time
}

// Mark is the queue's accounts at now.
func (q *QueueStats) Mark(now Time) QueueMark {
	return QueueMark{Length: q.length.Mark(now), Departures: q.departures, WaitSum: q.waitSum}
}

// Mark is the queue's accounts at now.
func (q *FIFO) Mark(now Time) QueueMark { return q.stats.Mark(now) }

// LittleBetween is the queue's Little's-law triple over the window between
// two marks: the time-average length, the departures per second and their
// mean wait in seconds. Little's law holds for it up to the waiters in the
// queue at the window's two ends.
func LittleBetween(from, to QueueMark) (L, lambda, W float64) {
	span := (to.Length.At - from.Length.At).Seconds()
	if span <= 0 {
		return 0, 0, 0
	}
	L = Between(from.Length, to.Length)
	deps := to.Departures - from.Departures
	lambda = float64(deps) / span
	if deps > 0 {
		W = (to.WaitSum - from.WaitSum).Seconds() / float64(deps)
	}
	return L, lambda, W
}
