package sim

import (
	"math"
	"slices"
	"testing"
)

func TestLevelHandCase(t *testing.T) {
	l := NewLevel(2 * Second)
	l.Set(3*Second, 4)  // 0 over [2,3)
	l.Add(5*Second, -1) // 4 over [3,5)  -> 8
	l.Set(5*Second, 6)  // 3 for no time
	l.Set(8*Second, 1)  // 6 over [5,8)  -> 18
	// 1 over [8,12) -> 4; total 30 over 10 s
	if got := l.Area(12 * Second); got != 30 {
		t.Errorf("Area = %v, want 30", got)
	}
	if got := l.Mean(12 * Second); got != 3 {
		t.Errorf("Mean = %v, want 3", got)
	}
	if got := l.Mean(8 * Second); got != 26.0/6 {
		t.Errorf("Mean(8s) = %v, want %v", got, 26.0/6)
	}
	if l.Max() != 6 || l.Value() != 1 {
		t.Errorf("Max %d Value %d, want 6 1", l.Max(), l.Value())
	}
	if got := l.Mean(2 * Second); got != 0 {
		t.Errorf("Mean at start = %v, want 0", got)
	}
	if got := l.Mean(Second); got != 0 {
		t.Errorf("Mean before start = %v, want 0", got)
	}
	// Sub-second steps in nanoseconds.
	m := NewLevel(0)
	m.Set(1, 1)
	m.Set(3, 0)
	if got, want := m.Mean(4), 0.5; got != want {
		t.Errorf("ns Mean = %v, want %v", got, want)
	}
	if msg := panicMessage(func() { l.Set(7*Second, 0) }); msg == "" {
		t.Error("Level.Set backwards did not panic")
	}
}

// fifoIDs pops everything and returns the ids in order.
func fifoIDs(q *FIFO, now Time) []int32 {
	var ids []int32
	for {
		id, _, ok := q.Pop(now)
		if !ok {
			return ids
		}
		ids = append(ids, id)
	}
}

func TestFIFOHandCase(t *testing.T) {
	q := NewFIFO(0)
	for i := int32(1); i <= 5; i++ {
		q.Push(Time(i-1)*Second, i) // 1@0 2@1 3@2 4@3 5@4
	}
	check := func(what string, w Time, ok bool, want Time) {
		t.Helper()
		if !ok || w != want {
			t.Errorf("%s: waited %v ok %v, want %v", what, w, ok, want)
		}
	}
	w, ok := q.Remove(5*Second, 1) // head
	check("remove head", w, ok, 5*Second)
	w, ok = q.Remove(6*Second, 3) // middle
	check("remove middle", w, ok, 4*Second)
	w, ok = q.Remove(7*Second, 5) // tail
	check("remove tail", w, ok, 3*Second)
	if _, ok := q.Remove(7*Second, 5); ok {
		t.Error("removed an id twice")
	}
	if q.Len() != 2 {
		t.Fatalf("Len %d, want 2", q.Len())
	}
	id, w, ok := q.Pop(8 * Second)
	if id != 2 {
		t.Errorf("popped %d, want 2", id)
	}
	check("pop 2", w, ok, 7*Second)
	id, w, ok = q.Pop(10 * Second)
	if id != 4 {
		t.Errorf("popped %d, want 4", id)
	}
	check("pop 4", w, ok, 7*Second)
	if _, _, ok := q.Pop(10 * Second); ok {
		t.Error("Pop on empty queue reported an entry")
	}
	// Length 1,2,3,4,5,4,3,2 for a second each, then 1 for 2 s: area 26;
	// waits 5+4+3+7+7 = 26 over 5 departures.
	L, lambda, W := q.Little(10 * Second)
	if L != 2.6 || lambda != 0.5 || W != 5.2 {
		t.Errorf("Little = %v %v %v, want 2.6 0.5 5.2", L, lambda, W)
	}
	if L != lambda*W {
		t.Errorf("L %v != λW %v", L, lambda*W)
	}
	if q.MaxLen() != 5 {
		t.Errorf("MaxLen %d, want 5", q.MaxLen())
	}
	// Idle time after the last departure dilutes L and λ alike.
	L, lambda, W = q.Little(20 * Second)
	if L != 1.3 || lambda != 0.25 || W != 5.2 {
		t.Errorf("Little(20s) = %v %v %v, want 1.3 0.25 5.2", L, lambda, W)
	}
	if L, lambda, W := NewFIFO(Second).Little(Second); L != 0 || lambda != 0 || W != 0 {
		t.Errorf("empty span Little = %v %v %v", L, lambda, W)
	}
}

// TestFIFORingWrap drives the ring across its end and grows it while
// wrapped, removing from the middle of a wrapped queue.
func TestFIFORingWrap(t *testing.T) {
	q := NewFIFO(0)
	for i := int32(0); i < 8; i++ {
		q.Push(0, i)
	}
	if len(q.buf) != 8 {
		t.Fatalf("initial capacity %d, want 8", len(q.buf))
	}
	for i := int32(0); i < 5; i++ {
		if id, _, _ := q.Pop(1); id != i {
			t.Fatalf("pop %d, want %d", id, i)
		}
	}
	for i := int32(8); i < 13; i++ { // 5 6 7 | 8 9 10 11 12 wraps to the front
		q.Push(2, i)
	}
	if len(q.buf) != 8 || q.head != 5 {
		t.Fatalf("cap %d head %d, want 8 5 (wrapped)", len(q.buf), q.head)
	}
	// Remove across the seam: 7 sits at the end of the buffer, 9 at the start.
	if w, ok := q.Remove(3, 9); !ok || w != 1 {
		t.Fatalf("remove 9: %v %v", w, ok)
	}
	if w, ok := q.Remove(3, 7); !ok || w != 3 {
		t.Fatalf("remove 7: %v %v", w, ok)
	}
	// Fill up and grow while wrapped.
	for i := int32(13); i < 20; i++ {
		q.Push(4, i)
	}
	if len(q.buf) != 16 {
		t.Fatalf("capacity after growth %d, want 16", len(q.buf))
	}
	want := []int32{5, 6, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	if got := fifoIDs(q, 5); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestFIFORandom checks FIFO against a slice model over a long random run
// of pushes, pops and removals, then Little's law on the drained queue.
func TestFIFORandom(t *testing.T) {
	r := NewRand(4, "fifo")
	type entry struct {
		id    int32
		since Time
	}
	q := NewFIFO(Second)
	var model []entry
	now := Second
	next := int32(0)
	var departures int64
	var waitSum Time
	var maxLen int
	for step := 0; step < 200000; step++ {
		now += Time(r.IntN(uint64(Millisecond)))
		switch op := r.IntN(10); {
		case op < 5 || len(model) == 0: // grows on average
			if len(model) > 300 {
				break
			}
			q.Push(now, next)
			model = append(model, entry{next, now})
			next++
			maxLen = max(maxLen, len(model))
		case op < 8:
			id, w, ok := q.Pop(now)
			if !ok || id != model[0].id || w != now-model[0].since {
				t.Fatalf("step %d: Pop = %d %v %v, want %d %v", step, id, w, ok, model[0].id, now-model[0].since)
			}
			departures++
			waitSum += w
			model = model[1:]
		default:
			// Mostly near the head, sometimes anywhere, sometimes absent.
			var i int
			switch r.IntN(3) {
			case 0:
				i = 0
			case 1:
				i = int(r.IntN(uint64(len(model))))
			default:
				if _, ok := q.Remove(now, next+1000); ok {
					t.Fatalf("step %d: removed an absent id", step)
				}
				continue
			}
			e := model[i]
			w, ok := q.Remove(now, e.id)
			if !ok || w != now-e.since {
				t.Fatalf("step %d: Remove(%d) = %v %v, want %v", step, e.id, w, ok, now-e.since)
			}
			departures++
			waitSum += w
			model = slices.Delete(model, i, i+1)
		}
		if q.Len() != len(model) {
			t.Fatalf("step %d: Len %d, model %d", step, q.Len(), len(model))
		}
	}
	for len(model) > 0 {
		now += Microsecond
		id, w, _ := q.Pop(now)
		if id != model[0].id || w != now-model[0].since {
			t.Fatalf("drain: %d %v, want %d", id, w, model[0].id)
		}
		departures++
		waitSum += w
		model = model[1:]
	}
	end := now + Second
	L, lambda, W := q.Little(end)
	span := (end - Second).Seconds()
	if wantW := waitSum.Seconds() / float64(departures); math.Abs(W-wantW) > 1e-12*wantW {
		t.Errorf("W = %v, want %v", W, wantW)
	}
	if wantLambda := float64(departures) / span; lambda != wantLambda {
		t.Errorf("λ = %v, want %v", lambda, wantLambda)
	}
	if rel := math.Abs(L-lambda*W) / L; rel > 1e-9 {
		t.Errorf("Little: L = %v, λW = %v (rel %.3g)", L, lambda*W, rel)
	}
	if q.MaxLen() != int64(maxLen) {
		t.Errorf("MaxLen %d, want %d", q.MaxLen(), maxLen)
	}
	t.Logf("%d departures, L=%.6g λ=%.6g W=%.6g max %d", departures, L, lambda, W, maxLen)
}
