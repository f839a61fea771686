package validate

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// Waits for a core. A CPU-bound pooled row's Diagnostics set, beside the
// calibrated model's (system.Metrics.RunQueue*), how long the run's
// processes waited in the kernel's run queues, per statement: the pool's
// servers, the pooler (PgBouncer, or this process through the in-process
// proxy) and pgbench, from the second field of each thread's
// /proc/PID/task/TID/schedstat (run delay: time runnable but not
// running). The model's latency is its processes' CPU, their waits for a
// core and their waits for each other; where its throughput is right and
// its latencies' shape is not, these say which wait it has too much or
// too little of.

// RunDelay is the run's waits for a core per statement, if OK: the pool's
// servers', the pooler's and the driver's. Through the in-process proxy
// with poolsim's own driver this process is both, and Pooler is 0 with
// Driver the two together (SelfBoth).
type RunDelay struct {
	Server, Pooler, Driver time.Duration
	SelfBoth               bool
	OK                     bool
	// PoolerPreempts is how often PgBouncer's process was taken off its
	// core while it could still run, per statement, if PreemptsOK: its
	// involuntary context switches (/proc/PID/status
	// nonvoluntary_ctxt_switches). A thread PgBouncer wakes while no core
	// is idle lands on PgBouncer's own core and may run first; PgBouncer's
	// one thread, every client's relay, then waits behind it. The
	// calibrated model's pooler is preempted so only in a pool-1 row's
	// apart arrangement, at its pinned loop's rate (Arrangement.Preempts;
	// elsewhere a thread that keeps its core runs its batch), though
	// PgBouncer is preempted at larger pools too (docs/validate.md).
	PoolerPreempts float64
	PreemptsOK     bool
}

// involuntary is process pid's involuntary context switches (its
// /proc/PID/status nonvoluntary_ctxt_switches: its main thread's, which
// is PgBouncer's only one).
func involuntary(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	return statusCount(string(b), "nonvoluntary_ctxt_switches")
}

// statusCount is the count on the line "key:" of a /proc status file.
func statusCount(status, key string) (int64, bool) {
	for line := range strings.Lines(status) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

// taskDelay is one task's run delay from its schedstat file.
func taskDelay(path string) (time.Duration, bool) { return schedstatField(path, 1) }

// threadDelays is every thread of pid's run delay, by thread id; nil
// when they cannot be read.
func threadDelays(pid int) map[int]time.Duration {
	ts, err := tasks(pid)
	if err != nil {
		return nil
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	out := make(map[int]time.Duration, len(ts))
	for _, t := range ts {
		if d, ok := taskDelay(dir + strconv.Itoa(t) + "/schedstat"); ok {
			out[t] = d
		}
	}
	return out
}

// delaySince is the threads' run delay since before: a thread not read
// before counts whole.
func delaySince(before, now map[int]time.Duration) time.Duration {
	var sum time.Duration
	for t, d := range now {
		sum += d - before[t]
	}
	return max(0, sum)
}

// delayWatch follows a short-lived process's threads' run delay: pgbench's
// threads exit as their clients finish, taking their counters with them,
// so it reads them every delayEvery and keeps each thread's last reading,
// and the first of those it found at its first (a thread found later
// began after the watch: its whole delay counts).
type delayWatch struct {
	stop, done  chan struct{}
	first, last map[int]time.Duration
}

// delayEvery is how often a delayWatch reads: a thread's delay between
// its last reading and its exit is lost, at most this much time's worth
// (a per cent or so of a run's); reading more often costs this process
// CPU on the cores the run shares - the model's other work, and a
// disturbance of the run it measures (docs/validate.md).
const delayEvery = 20 * time.Millisecond

// watchDelay starts following pid's threads; total stops and sums them.
func watchDelay(ctx context.Context, pid int) *delayWatch {
	w := &delayWatch{stop: make(chan struct{}), done: make(chan struct{}), first: map[int]time.Duration{}, last: map[int]time.Duration{}}
	go func() { // owner: the watch; ends at total or with ctx
		defer close(w.done)
		in := startInstrument()
		defer in.stop()
		tick := time.NewTicker(delayEvery)
		defer tick.Stop()
		for start := true; ; start = false {
			for t, d := range threadDelays(pid) {
				if start {
					w.first[t] = d
				}
				w.last[t] = d
			}
			in.charge()
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// total stops the watch (call it once) and sums the threads' run delay
// between their first and last readings (0 and false if none was read).
func (w *delayWatch) total() (time.Duration, bool) {
	close(w.stop)
	<-w.done
	if len(w.last) == 0 {
		return 0, false
	}
	return delaySince(w.first, w.last), true
}
