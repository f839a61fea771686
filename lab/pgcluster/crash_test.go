//go:build unix

package pgcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// TestCrashedParentLeavesNoPostmaster runs a child test process that starts
// a cluster and is then killed with SIGKILL, without Stop: the postmaster
// must go away on its own (Pdeathsig).
func TestCrashedParentLeavesNoPostmaster(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	if os.Getenv("PGCLUSTER_CRASH_CHILD") == "1" {
		crashChild()
		return
	}
	if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNoPostgres) {
		if pgclustertest.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	// A guard against a hang, not a time limit: on a busy machine initdb
	// alone can take half a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashedParentLeavesNoPostmaster$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGCLUSTER_CRASH_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "postmaster %d %s", &pid, &dir); n == 2 {
			break
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child did not report a postmaster")
	}
	defer os.RemoveAll(dir) // the crash leaves the folder behind; that is documented
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		// The postmaster is our grandchild, reparented to init or a
		// subreaper; it may linger as a zombie if that is us.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("postmaster %d still alive 10s after its parent was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func crashChild() {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{MaxConnections: 5})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Printf("postmaster %d %s\n", c.Pid(), c.Dir())
	time.Sleep(time.Minute) // killed by the parent test
}
