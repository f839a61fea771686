//go:build unix

package childproc_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sh(t *testing.T, script string) *childproc.Process {
	t.Helper()
	acct := childproc.Account{} // current user: no switch needed for sh
	p, err := childproc.Start(childproc.Spec{Path: "/bin/sh", Args: []string{"-c", script}, Dir: "/", Account: acct})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(int(syscall.SIGKILL), time.Second) })
	return p
}

func TestStopPolite(t *testing.T) {
	p := sh(t, "exec sleep 30")
	if err := p.Stop(int(syscall.SIGTERM), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Error("not exited")
	}
	// SIGTERM ended it, not the SIGKILL that follows the grace period.
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) {
		t.Fatalf("exit status %v, want the child killed by SIGTERM", p.Err())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("exit status %v, want the child killed by SIGTERM", p.Err())
	}
	if err := p.Stop(int(syscall.SIGTERM), time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStopKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The leader ignores SIGTERM and has a child in its group.
	p := sh(t, `trap "" TERM; sleep 30 & echo $! > `+pidFile+`; wait`)
	var child int
	for deadline := time.Now().Add(5 * time.Second); child == 0; {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("no child pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Stop(int(syscall.SIGTERM), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if err := syscall.Kill(child, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group member %d survived Stop", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServerAccount(t *testing.T) {
	a, err := childproc.ServerAccount()
	if os.Geteuid() == 0 {
		if err != nil {
			t.Skipf("root without a postgres account: %v", err)
		}
		if !a.Switch || a.UID == 0 {
			t.Errorf("root: account %+v, want a switch to an unprivileged uid", a)
		}
		return
	}
	if err != nil || a.Switch {
		t.Errorf("non-root: %+v, %v", a, err)
	}
}

// TestStopAndRemove: a server instance ends with its process exited and
// its folder gone; with no process started the folder still goes.
func TestStopAndRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "instance")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := sh(t, "exec sleep 30")
	if err := childproc.StopAndRemove(p, int(syscall.SIGTERM), time.Minute, dir); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Error("process not exited")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance folder after StopAndRemove: %v, want it removed", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := childproc.StopAndRemove(nil, int(syscall.SIGTERM), time.Second, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("instance folder with no process: %v, want it removed", err)
	}
}
