//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	osuser "os/user"
	"syscall"
	"time"

	"github.com/poolsim/poolsim/proxy/pooler"
)

// daemonEnv marks the daemon's own process: its value is the descriptor
// of the pipe on which it tells the parent it serves ("ok") or why not.
const daemonEnv = "POOLSIM_PROXY_DAEMON_READY"

// daemonStartTimeout bounds how long the parent of -d waits for the
// daemon to serve.
const daemonStartTimeout = 60 * time.Second

// daemonize is -d in the parent. Go cannot fork, so the proxy runs itself
// again in a new session (setsid), stdin, stdout and stderr on /dev/null,
// and exits 0 once that process serves, or with its error. As PgBouncer,
// it needs a pidfile (how the daemon is found) and a log file (where its
// log goes).
func daemonize(args []string, cfg pooler.Config, stdout io.Writer) error {
	if cfg.PidFile == "" {
		return usagef("-d: daemon needs pidfile configured")
	}
	if cfg.LogFile == "" {
		return usagef("-d: daemon needs logfile configured (its stderr goes to /dev/null)")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("daemon: %w", err)
	}
	cmd := exec.Command(exe, append([]string{"proxy"}, args...)...)
	cmd.Env = append(os.Environ(), daemonEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w} // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = w.Close()
	_ = devnull.Close()
	if err != nil {
		return fmt.Errorf("daemon: start: %w", err)
	}
	_ = r.SetReadDeadline(time.Now().Add(daemonStartTimeout))
	msg, rerr := io.ReadAll(r)
	if bytes.Equal(msg, []byte("ok\n")) {
		fmt.Fprintf(stdout, "poolsim proxy: daemon running, pid %d\n", cmd.Process.Pid)
		return cmd.Process.Release()
	}
	if rerr != nil { // it neither served nor failed in time
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("daemon: not serving after %v: %w", daemonStartTimeout, rerr)
	}
	werr := cmd.Wait()
	if len(msg) == 0 {
		return fmt.Errorf("daemon: exited before serving: %v", werr)
	}
	return fmt.Errorf("daemon: %s", bytes.TrimSpace(msg))
}

// daemonChild is the daemon's side of -d: the pipe to its parent, or nil
// when this process is not a daemon started by daemonize.
func daemonChild() *os.File {
	if os.Getenv(daemonEnv) != "3" {
		return nil
	}
	_ = os.Unsetenv(daemonEnv) // its own children are not daemons
	return os.NewFile(3, "daemon-ready")
}

// tellParent reports to the parent of -d that the daemon serves (err nil)
// or why it cannot, once.
func tellParent(f *os.File, err error) {
	if f == nil {
		return
	}
	msg := "ok\n"
	if err != nil {
		msg = err.Error() + "\n"
	}
	_, _ = f.WriteString(msg)
	_ = f.Close()
}

// osUserLookup finds an OS user by name or uid.
func osUserLookup(name string) (*osuser.User, error) {
	u, err := osuser.Lookup(name)
	if err != nil {
		if u2, err2 := osuser.LookupId(name); err2 == nil {
			return u2, nil
		}
		return nil, errors.New("no such OS user")
	}
	return u, nil
}

// setIDs makes every thread of the process run as uid and gid (with gid
// its only group).
func setIDs(uid, gid int) error {
	if err := syscall.Setgroups([]int{gid}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}
