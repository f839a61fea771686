package poolqueue

import (
	"fmt"
	"strings"
	"testing"
)

// run plays ops on a queue of string clients and servers and returns what
// each op answered, one word per op, so a rule reads as its trace.
//
//	+c@t    Arrive(c, t):   "c=s" (assigned idle s) or "q" (queued)
//	r:s     Release(s):     "s>c" (handed to c) or "idle"
//	-c      Remove(c):      "gone@since" or "absent"
//	x@t     Expire(t):      the expired clients, "c,c" or "none"
//	n       Next():         "c" or "none"
//	L<size> NeedLaunch(size) and, when true, Launch: "launch" or "no"
//	C<size> CanLaunch(size) and, when true, Launch: "launch" or "no"
//	ok      LoginDone:      "done"
//	fail!   LoginFailed(true), fail? LoginFailed(false): "fail" or "keep"
//	k:s     Close(s):       the idle stack after it, "[a b]"
func run(ops string) string {
	var q Queue[string, string]
	var out []string
	for _, op := range strings.Fields(ops) {
		var word string
		switch {
		case op[0] == '+':
			c, t, _ := strings.Cut(op[1:], "@")
			var at int64
			fmt.Sscan(t, &at)
			if s, ok := q.Arrive(c, at); ok {
				word = c + "=" + s
			} else {
				word = "q"
			}
		case strings.HasPrefix(op, "r:"):
			if c, _, ok := q.Release(op[2:]); ok {
				word = op[2:] + ">" + c
			} else {
				word = "idle"
			}
		case op[0] == '-':
			if since, ok := q.Remove(op[1:]); ok {
				word = fmt.Sprintf("gone@%d", since)
			} else {
				word = "absent"
			}
		case op[0] == 'x':
			var before int64
			fmt.Sscan(op[2:], &before)
			var gone []string
			for {
				c, ok := q.Expire(before)
				if !ok {
					break
				}
				gone = append(gone, c)
			}
			word = strings.Join(gone, ",")
			if word == "" {
				word = "none"
			}
		case op == "n":
			word = "none"
			if c, _, ok := q.Next(); ok {
				word = c
			}
		case op[0] == 'L' || op[0] == 'C':
			var size int
			fmt.Sscan(op[1:], &size)
			ok := q.CanLaunch(size)
			if op[0] == 'L' {
				ok = q.NeedLaunch(size)
			}
			word = "no"
			if ok {
				q.Launch()
				word = "launch"
			}
		case op == "ok":
			q.LoginDone()
			word = "done"
		case op == "fail!" || op == "fail?":
			word = "keep"
			if q.LoginFailed(op == "fail!") {
				word = "fail"
			}
		case strings.HasPrefix(op, "k:"):
			q.Close(op[2:])
			word = fmt.Sprint(q.Idle())
		default:
			panic("bad op " + op)
		}
		out = append(out, word)
	}
	return strings.Join(out, " ")
}

func TestRules(t *testing.T) {
	for _, tt := range []struct{ rule, ops, want string }{
		{"waiters are served first come, first served",
			"+a@1 +b@2 +c@3 r:s1 r:s2 r:s3",
			"q q q s1>a s2>b s3>c"},
		{"idle servers are reused last in, first out",
			"r:s1 r:s2 r:s3 +a@1 +b@2 +c@3 +d@4",
			"idle idle idle a=s3 b=s2 c=s1 q"},
		{"a released server goes to the first waiter, else on top of the idle stack",
			"+a@1 r:s1 r:s2 r:s3 +b@2",
			"q s1>a idle idle b=s3"},
		{"an arrival queues behind the waiters; a server is idle only while nobody waits",
			"+a@1 +b@2 r:s1 +c@3 r:s2 r:s3 r:s4 +d@4",
			"q q s1>a q s2>b s3>c idle d=s4"},
		{"nobody waiting, no launch",
			"L5 +a@1 L5",
			"no q launch"},
		{"one login in flight at a time",
			"+a@1 L5 +b@2 L5 ok r:s1 L5",
			"q launch q no done s1>a launch"},
		{"no launch at the pool's size",
			"+a@1 L1 fail? L1 L0",
			"q launch keep launch no"},
		{"no launch while a server is idle",
			"r:s1 C5 +a@1 C5",
			"idle no a=s1 launch"},
		{"CanLaunch needs no waiter",
			"C2 ok C2 C2",
			"launch done launch no"},
		{"a login refused with an error fails the waiters when no server is left",
			"+a@1 L5 fail! n",
			"q launch fail a"},
		{"a login that got no answer fails no one",
			"+a@1 L5 fail? n",
			"q launch keep a"},
		{"a refused login fails no one while the pool has servers",
			"+a@1 L5 ok r:s1 +b@2 L5 fail! n",
			"q launch done s1>a q launch keep b"},
		{"a closed server frees room for a login",
			"+a@1 L1 ok r:s1 +b@2 L1 k:s1 L1",
			"q launch done s1>a q no [] launch"},
		{"closing an idle server takes it off the stack",
			"r:s1 r:s2 r:s3 k:s2 +a@1 +b@2 +c@3",
			"idle idle idle [s1 s3] a=s3 b=s1 q"},
		{"waiters expire in arrival order, strictly before the cut",
			"+a@10 +b@20 +c@30 x@20 x@31 x@99",
			"q q q a b,c none"},
		{"a waiter that leaves keeps the others' order",
			"+a@1 +b@2 +c@3 -b -b r:s1 r:s2 n",
			"q q q gone@2 absent s1>a s2>c none"},
		{"the queue grows past its first ring and wraps",
			"+a@1 +b@2 +c@3 +d@4 +e@5 +f@6 n n +g@7 +h@8 +i@9 +j@10 -h n n n n n n n n",
			"q q q q q q a b q q q q gone@8 c d e f g i j none"},
	} {
		if got := run(tt.ops); got != tt.want {
			t.Errorf("%s:\n  %s\ngot  %s\nwant %s", tt.rule, tt.ops, got, tt.want)
		}
	}
}

func TestOldest(t *testing.T) {
	var q Queue[int32, int32]
	if _, ok := q.Oldest(); ok {
		t.Fatal("Oldest of an empty queue is ok")
	}
	q.Arrive(7, 100)
	q.Arrive(8, 200)
	if since, ok := q.Oldest(); !ok || since != 100 {
		t.Errorf("Oldest = %d, %v; want 100, true", since, ok)
	}
	q.Remove(7)
	if since, _ := q.Oldest(); since != 200 {
		t.Errorf("Oldest after the head left = %d, want 200", since)
	}
}

// TestNoAllocs: once the ring and the stack have grown, the model's hot
// path allocates nothing.
func TestNoAllocs(t *testing.T) {
	var q Queue[int32, int32]
	for i := range int32(64) {
		q.Arrive(i, int64(i))
	}
	for i := range int32(64) {
		q.Release(i)
	}
	for i := range int32(64) {
		q.Release(i)
	}
	allocs := testing.AllocsPerRun(100, func() {
		s, _ := q.Arrive(1, 0)
		q.Arrive(2, 0)
		q.Remove(2)
		q.Release(s)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per cycle, want 0", allocs)
	}
}

// TestRoundRobinAndHead: RoundRobin reuses the idle server released
// longest ago; Head names the oldest waiter without taking it.
func TestRoundRobinAndHead(t *testing.T) {
	var q Queue[string, int]
	for s := 1; s <= 3; s++ {
		q.Launch()
		q.LoginDone()
		q.Release(s)
	}
	if s, ok := q.Arrive("a", 1); !ok || s != 3 {
		t.Fatalf("LIFO: got %d, %v; want 3", s, ok)
	}
	q.RoundRobin = true
	if s, ok := q.Arrive("b", 2); !ok || s != 1 {
		t.Fatalf("round robin: got %d, %v; want 1", s, ok)
	}
	if s, ok := q.Arrive("c", 3); !ok || s != 2 {
		t.Fatalf("round robin: got %d, %v; want 2", s, ok)
	}
	if _, _, ok := q.Head(); ok {
		t.Fatal("Head of an empty queue: ok")
	}
	q.Arrive("d", 4)
	q.Arrive("e", 5)
	if c, since, ok := q.Head(); !ok || c != "d" || since != 4 || q.Waiting() != 2 {
		t.Fatalf("Head = %q, %d, %v with %d waiting; want d, 4, true with 2", c, since, ok, q.Waiting())
	}
}
