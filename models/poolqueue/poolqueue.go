package poolqueue

// Queue is one pool's waiting clients (C) and idle servers (S). The zero
// value is an empty pool with no server.
type Queue[C, S comparable] struct {
	// Waiters, oldest first: a ring of len(buf) slots from head.
	buf     []waiter[C]
	head, n int

	idle    []S  // idle servers; the top (most recently used) is the end
	servers int  // servers open or logging in
	login   bool // a server login is in flight

	// RoundRobin reuses the idle server released longest ago instead of
	// the most recent one (PgBouncer's server_round_robin), spreading
	// the load over every server.
	RoundRobin bool
}

type waiter[C any] struct {
	c     C
	since int64
}

// Waiting is the number of clients waiting.
func (q *Queue[C, S]) Waiting() int { return q.n }

// Oldest is when the client that has waited longest arrived; ok is false
// when nobody waits.
func (q *Queue[C, S]) Oldest() (since int64, ok bool) {
	if q.n == 0 {
		return 0, false
	}
	return q.buf[q.head].since, true
}

// Head is the client that has waited longest, with its arrival time; ok
// is false when nobody waits. It stays in the queue.
func (q *Queue[C, S]) Head() (c C, since int64, ok bool) {
	if q.n == 0 {
		return c, 0, false
	}
	w := q.buf[q.head]
	return w.c, w.since, true
}

// Arrive is client c needing a server at now: it gets the most recently
// used idle server when nobody waits ahead of it (ok), and otherwise
// queues behind the others.
func (q *Queue[C, S]) Arrive(c C, now int64) (s S, ok bool) {
	if q.n == 0 && len(q.idle) > 0 && q.RoundRobin {
		s = q.idle[0]
		copy(q.idle, q.idle[1:])
		var zero S
		q.idle[len(q.idle)-1] = zero
		q.idle = q.idle[:len(q.idle)-1]
		return s, true
	}
	if q.n == 0 && len(q.idle) > 0 {
		s = q.idle[len(q.idle)-1]
		var zero S
		q.idle[len(q.idle)-1] = zero // drop the reference (pointer handles)
		q.idle = q.idle[:len(q.idle)-1]
		return s, true
	}
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = waiter[C]{c, now}
	q.n++
	return s, false
}

func (q *Queue[C, S]) grow() {
	nb := make([]waiter[C], max(8, 2*len(q.buf)))
	for i := 0; i < q.n; i++ {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

// Next takes the client that has waited longest off the queue and returns
// it with its arrival time; ok is false when nobody waits. It is how the
// waiters are failed (a failed login, a shutdown).
func (q *Queue[C, S]) Next() (c C, since int64, ok bool) {
	if q.n == 0 {
		return c, 0, false
	}
	w := q.buf[q.head]
	q.buf[q.head] = waiter[C]{}
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return w.c, w.since, true
}

// Expire takes the client that has waited longest off the queue if it
// arrived before before (query_wait_timeout: before is now less the
// timeout); called until ok is false, it expires the waiters in arrival
// order.
func (q *Queue[C, S]) Expire(before int64) (c C, ok bool) {
	if q.n == 0 || q.buf[q.head].since >= before {
		return c, false
	}
	c, _, ok = q.Next()
	return c, ok
}

// Remove takes waiting client c off the queue wherever it stands (it left,
// or its own timer ran out) and returns its arrival time; ok is false if c
// was not waiting. It scans from the head, where those whose wait timed
// out stand.
func (q *Queue[C, S]) Remove(c C) (since int64, ok bool) {
	for i := 0; i < q.n; i++ {
		k := (q.head + i) % len(q.buf)
		if q.buf[k].c != c {
			continue
		}
		since = q.buf[k].since
		for j := i; j > 0; j-- { // close the gap towards the head
			q.buf[(q.head+j)%len(q.buf)] = q.buf[(q.head+j-1)%len(q.buf)]
		}
		q.buf[q.head] = waiter[C]{}
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		return since, true
	}
	return 0, false
}

// Release is server s free again (its client let go of it, or its login
// completed): it goes to the client that has waited longest, returned with
// its arrival time (handed), or else to the top of the idle stack.
func (q *Queue[C, S]) Release(s S) (c C, since int64, handed bool) {
	if c, since, ok := q.Next(); ok {
		return c, since, true
	}
	q.idle = append(q.idle, s)
	return c, 0, false
}

// Idle is the idle stack, least recently used first. It is the queue's
// own: read it, do not change it.
func (q *Queue[C, S]) Idle() []S { return q.idle }

// Close counts server s closed, taking it off the idle stack if it is
// there. The stack is searched from the top.
func (q *Queue[C, S]) Close(s S) {
	for i := len(q.idle) - 1; i >= 0; i-- {
		if q.idle[i] == s {
			copy(q.idle[i:], q.idle[i+1:])
			var zero S
			q.idle[len(q.idle)-1] = zero
			q.idle = q.idle[:len(q.idle)-1]
			break
		}
	}
	q.servers--
}

// Servers is the number of servers open or logging in.
func (q *Queue[C, S]) Servers() int { return q.servers }

// LoggingIn reports whether a server login is in flight.
func (q *Queue[C, S]) LoggingIn() bool { return q.login }

// CanLaunch reports whether the pool may start a server login: none is in
// flight, no server is idle and the pool has fewer than size servers.
// Whether anyone needs the server is the caller's question; NeedLaunch
// asks it for the waiters.
func (q *Queue[C, S]) CanLaunch(size int) bool {
	return !q.login && len(q.idle) == 0 && q.servers < size
}

// BelowMin reports whether the pool may start a server login to reach min
// servers (PgBouncer's min_pool_size, which its janitor tops up whether or
// not anyone waits): none is in flight and it has fewer than min.
func (q *Queue[C, S]) BelowMin(min int) bool { return !q.login && q.servers < min }

// NeedLaunch reports whether a client waits and the pool may start a
// server login for it (CanLaunch). The caller then checks its own budgets
// before calling Launch.
func (q *Queue[C, S]) NeedLaunch(size int) bool { return q.n > 0 && q.CanLaunch(size) }

// Launch counts a server login started: it is in flight and counts as one
// of the pool's servers until LoginDone or LoginFailed.
func (q *Queue[C, S]) Launch() {
	q.login = true
	q.servers++
}

// LoginDone is the login in flight completing; the caller then releases
// the new server (Release), so that it goes to the oldest waiter.
func (q *Queue[C, S]) LoginDone() { q.login = false }

// LoginFailed is the login in flight failing, answered telling whether
// PostgreSQL answered it with an error (as opposed to a refused or
// timed-out connection). It reports whether the waiting clients must fail
// with that error: answered, and the pool has no server left to serve
// them. The caller then takes them off with Next. The model follows this;
// the proxy (proxy/pooler, loginFailed) follows PgBouncer 1.18 further:
// only before the pool's first successful login (its welcome) does a
// refused login fail anyone, and then only the clients logging in, while
// queued clients wait for the retry server_login_retry later - which the
// model, having no server_login_retry, cannot do yet.
func (q *Queue[C, S]) LoginFailed(answered bool) (failWaiters bool) {
	q.login = false
	q.servers--
	return answered && q.servers == 0
}
