package validate

import (
	"testing"
	"time"

	"github.com/poolsim/poolsim/proxy/pooler"
)

func TestWaitLogBounded(t *testing.T) {
	l := waitLog{max: 3}
	for i := range 5 {
		l.add(pooler.Wait{At: time.Unix(0, int64(i)), Wait: time.Duration(i), Database: "db", User: "u"})
	}
	got := l.drain()
	if len(got) != 3 || got[0].Wait != 2 || got[2].Wait != 4 || got[1].Database != "db" || got[1].User != "u" || got[2].At != time.Unix(0, 4) {
		t.Errorf("waitLog of 3 after 5 adds = %v, want waits 2,3,4 of db and u", got)
	}
	if got := l.drain(); len(got) != 0 {
		t.Errorf("second drain = %v, want empty", got)
	}
	l.add(pooler.Wait{Wait: 1, Database: "a", User: "u"})
	l.add(pooler.Wait{Wait: 2, Database: "b", User: "u"})
	l.add(pooler.Wait{Wait: 3, Database: "a", User: "u"})
	if got := l.drain(); len(got) != 3 || got[0].Database != "a" || got[1].Database != "b" || got[2].Database != "a" || len(l.keys) != 3 {
		t.Errorf("three adds over two pools = %v (keys %v), want a, b, a, a key each (db from before kept)", got, l.keys)
	}
}

// TestProxyWatchPin: pin asks the loop for a thread of its own and returns
// the one the loop says it took; unpin and measureCPU change what the loop
// is asked at its next turn.
func TestProxyWatchPin(t *testing.T) {
	x := newProxyWatch()
	if m := x.LoopMode(); m != pooler.LoopShared {
		t.Fatalf("a new watch asks for %v, want LoopShared", m)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the loop, turning every millisecond; ends with the test
		defer close(done)
		own := false
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if want := x.LoopMode() != pooler.LoopShared; want != own {
				own = want
				tid := 0
				if own {
					tid = 4242
				}
				x.LoopThread(tid)
			}
		}
	}()
	if tid := x.pin(); tid != 4242 {
		t.Errorf("pin = %d, want the loop's thread 4242", tid)
	}
	x.measureCPU(true)
	if m := x.LoopMode(); m != pooler.LoopTimed {
		t.Errorf("pinned and timed: LoopMode %v, want LoopTimed", m)
	}
	x.LoopCPU(3 * time.Microsecond)
	x.LoopCPU(4 * time.Microsecond)
	if d := x.timedCPU(); d != 7*time.Microsecond {
		t.Errorf("timedCPU = %v after turns of 3 and 4 µs, want 7 µs", d)
	}
	x.measureCPU(false)
	x.unpin()
	if m := x.LoopMode(); m != pooler.LoopShared {
		t.Errorf("unpinned: LoopMode %v, want LoopShared", m)
	}
	close(stop)
	<-done
}
