package validate

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTaskDelay(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("123456 7890 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, ok := taskDelay(good); !ok || d != 7890 {
		t.Errorf("taskDelay: %v, %v; want 7890ns, true", d, ok)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("123456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := taskDelay(short); ok {
		t.Error("taskDelay of a one-field file: ok, want not")
	}
	if _, ok := taskDelay(filepath.Join(dir, "missing")); ok {
		t.Error("taskDelay of a missing file: ok, want not")
	}
}

// TestStatusCount reads a count off a /proc status file's line by its
// key, and refuses a missing key, a key that only starts the same, and a
// value that is not a count.
func TestStatusCount(t *testing.T) {
	status := "Name:\tpgbouncer\nvoluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t8431\n"
	if n, ok := statusCount(status, "nonvoluntary_ctxt_switches"); !ok || n != 8431 {
		t.Errorf("nonvoluntary: %d, %v; want 8431, true", n, ok)
	}
	if n, ok := statusCount(status, "voluntary_ctxt_switches"); !ok || n != 1200 {
		t.Errorf("voluntary: %d, %v; want 1200, true", n, ok)
	}
	for _, c := range []struct{ status, key string }{
		{status, "ctxt_switches"},
		{"nonvoluntary_ctxt_switches:\tmany\n", "nonvoluntary_ctxt_switches"},
		{"nonvoluntary_ctxt_switches:\t-3\n", "nonvoluntary_ctxt_switches"},
		{"", "nonvoluntary_ctxt_switches"},
	} {
		if n, ok := statusCount(c.status, c.key); ok {
			t.Errorf("statusCount(%q, %q) = %d, ok; want not ok", c.status, c.key, n)
		}
	}
	// This process's own count is there on Linux.
	if _, err := os.Stat("/proc/self/status"); err == nil {
		if _, ok := involuntary(os.Getpid()); !ok {
			t.Error("involuntary(this process): not read from /proc/PID/status")
		}
	}
	if _, ok := involuntary(-1); ok {
		t.Error("involuntary(-1): ok, want not")
	}
}

// TestDelaySince: a thread read before counts its growth, one not read
// before counts whole, one gone since counts nothing.
func TestDelaySince(t *testing.T) {
	before := map[int]time.Duration{1: 100, 2: 50, 3: 70}
	now := map[int]time.Duration{1: 160, 2: 50, 4: 30}
	if got := delaySince(before, now); got != 90 {
		t.Errorf("delaySince: %v, want 90ns (60 + 0 + 30)", got)
	}
	if got := delaySince(nil, now); got != 240 {
		t.Errorf("delaySince from nothing: %v, want 240ns", got)
	}
}

// TestWatchDelay follows this process's threads while two goroutines
// keep more threads runnable than there are cores for a while: the
// watch reads them, and their waits are not negative.
func TestWatchDelay(t *testing.T) {
	if threadDelays(os.Getpid()) == nil {
		t.Skip("no /proc/PID/task/TID/schedstat here")
	}
	w := watchDelay(context.Background(), os.Getpid())
	stop := time.Now().Add(50 * time.Millisecond)
	done := make(chan struct{})
	for range 4 {
		go func() { // owner: this test; ends at stop
			for time.Now().Before(stop) {
			}
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	d, ok := w.total()
	if !ok || d < 0 {
		t.Errorf("watch of this process: %v, %v; want a reading of at least 0", d, ok)
	}
	if len(w.first) == 0 || len(w.last) < len(w.first) {
		t.Errorf("threads read: first %d, last %d; want above 0, the last at least as many", len(w.first), len(w.last))
	}
	for tid := range w.first {
		if _, ok := w.last[tid]; !ok {
			t.Errorf("thread %d read first and never after", tid)
		}
	}
}
