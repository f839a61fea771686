package pooler

import "time"

// Observer watches a serving proxy for a caller that measures it: poolsim's
// validator, which sets the proxy's waits and its event loop's CPU beside
// its model. Config.Observer is nil by default; then the proxy calls
// nothing and records nothing, and the forward path pays one nil check per
// server assignment and per turn of the event loop.
//
// The proxy calls every method on its event loop's goroutine, between the
// loop's events: each must return quickly and must not call the proxy.
type Observer interface {
	// Assigned is told of every server linked to a client's request.
	Assigned(Wait)
	// LoopMode is asked at the start of every turn of the event loop
	// what the loop's OS thread should be from that turn on.
	LoopMode() LoopMode
	// LoopThread is told the id of the OS thread the loop keeps for its
	// own when it takes one (a LoopMode other than LoopShared), and 0
	// when it gives it back. Until then the thread's counters
	// (/proc/self/task/TID) are the loop's alone.
	LoopThread(tid int)
	// LoopCPU is told each LoopTimed turn's CPU time on the loop's thread,
	// from epoll_wait's return to the turn's end: the relaying and
	// assigning, without logins, the console and Go's runtime, which run
	// on other threads.
	LoopCPU(time.Duration)
}

// Wait is one server assignment: how long a client's request waited from
// reaching the proxy to being linked to a server (zero when a server was
// idle).
type Wait struct {
	At       time.Time     // when the server was linked
	Wait     time.Duration // request reached the proxy -> server linked
	Database string
	User     string
}

// LoopMode is what an Observer asks of the event loop's OS thread.
type LoopMode uint8

const (
	// LoopShared: the loop runs on whatever thread Go's scheduler gives
	// it, as it does without an Observer.
	LoopShared LoopMode = iota
	// LoopOwnThread: the loop keeps an OS thread of its own
	// (runtime.LockOSThread) and runs as it did otherwise, on that one
	// thread.
	LoopOwnThread
	// LoopTimed: LoopOwnThread, and each turn's CPU time on the thread
	// (getrusage(RUSAGE_THREAD), two system calls a turn) goes to
	// Observer.LoopCPU.
	LoopTimed
)
