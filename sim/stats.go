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

// FIFO is a first-come, first-served wait queue of entity IDs that measures
// itself: its length is a Level (L), and each departure records how long it
// waited (W), so Little's law L = λW can be checked from independent
// accounts. Entries may leave from the head (served) or be removed from
// anywhere (abandoned); both count as departures.
type FIFO struct {
	buf        []fifoEntry
	head, n    int
	length     Level
	departures int64
	waitSum    Time
}

type fifoEntry struct {
	id    int32
	since Time
}

// NewFIFO returns an empty queue whose statistics start at time start.
func NewFIFO(start Time) *FIFO { return &FIFO{length: NewLevel(start)} }

// Len is the number waiting.
func (q *FIFO) Len() int { return q.n }

// Push appends id at time now.
func (q *FIFO) Push(now Time, id int32) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = fifoEntry{id, now}
	q.n++
	q.length.Set(now, int64(q.n))
}

func (q *FIFO) grow() {
	nb := make([]fifoEntry, max(8, 2*len(q.buf)))
	for i := 0; i < q.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

// Pop removes the oldest entry at time now and returns it with its wait.
func (q *FIFO) Pop(now Time) (id int32, waited Time, ok bool) {
	if q.n == 0 {
		return 0, 0, false
	}
	e := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return e.id, q.depart(now, e), true
}

// Remove takes id out of the queue wherever it stands (a waiter that gave
// up) and returns its wait. It scans from the head, where abandoners with a
// common timeout always are, so it is cheap in that case.
func (q *FIFO) Remove(now Time, id int32) (waited Time, ok bool) {
	for i := 0; i < q.n; i++ {
		k := (q.head + i) % len(q.buf)
		if q.buf[k].id != id {
			continue
		}
		e := q.buf[k]
		for j := i; j > 0; j-- { // close the gap towards the head
			q.buf[(q.head+j)%len(q.buf)] = q.buf[(q.head+j-1)%len(q.buf)]
		}
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		return q.depart(now, e), true
	}
	return 0, false
}

func (q *FIFO) depart(now Time, e fifoEntry) Time {
	q.length.Set(now, int64(q.n))
	q.departures++
	w := now - e.since
	q.waitSum += w
	return w
}

// Little is the queue's Little's-law triple over [start, end]: the time
// average of its length L, its departure rate λ per second, and the mean
// wait W in seconds of the entries that departed.
func (q *FIFO) Little(end Time) (L, lambda, W float64) {
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
func (q *FIFO) MaxLen() int64 { return q.length.Max() }
