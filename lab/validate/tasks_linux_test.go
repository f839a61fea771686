//go:build linux

package validate

import (
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
)

// TestTasksOfOwnThread checks that a thread of this process other than its
// first counts alone (the proxy's pinned event loop), while the process's
// id still means all of its threads.
func TestTasksOfOwnThread(t *testing.T) {
	tids, stop := make(chan int), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		<-stop
	}()
	tid := <-tids
	defer close(stop)
	if tid == os.Getpid() {
		t.Skip("the locked goroutine got the process's first thread")
	}
	if ts, err := tasks(tid); err != nil || len(ts) != 1 || ts[0] != tid {
		t.Errorf("tasks(%d), a thread of this process: %v, %v; want [%d]", tid, ts, err, tid)
	}
	all, err := tasks(os.Getpid())
	if err != nil || len(all) < 2 || !slices.Contains(all, tid) {
		t.Errorf("tasks(%d), this process: %v, %v; want its threads, %d among them", os.Getpid(), all, err, tid)
	}
	one, ok1 := schedCPU(tid)
	whole, ok2 := schedCPU(os.Getpid())
	if !ok1 || !ok2 || one > whole {
		t.Errorf("schedCPU: the thread %v (%v), the process %v (%v): want the thread's within the process's", one, ok1, whole, ok2)
	}
}
