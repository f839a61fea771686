package childproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ErrUnsupported is returned on platforms without Unix process groups.
var ErrUnsupported = errors.New("childproc: server processes are only supported on Unix")

// Account is the operating-system account a child runs as.
type Account struct {
	// Name is the account name ("" when Switch is false and the name is unknown).
	Name string
	// UID and GID are the numeric ids the child gets when Switch is true.
	UID, GID uint32
	// Switch is true when the Go process is root and children must drop to
	// UID/GID; false when children simply run as the current user.
	Switch bool
}

// ServerAccount returns the account server processes must run as: the
// current user when it is not root, else the "postgres" account.
func ServerAccount() (Account, error) {
	if os.Geteuid() != 0 {
		name := ""
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		return Account{Name: name, UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return Account{}, fmt.Errorf("childproc: running as root, but PostgreSQL and PgBouncer refuse root and the unprivileged account \"postgres\" was not found (create it: useradd --system --user-group postgres, or run as a normal user): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return Account{}, fmt.Errorf("childproc: account postgres: uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return Account{}, fmt.Errorf("childproc: account postgres: gid %q: %w", u.Gid, err)
	}
	return Account{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Switch: true}, nil
}

// Chown gives path (not recursive) to the account when children switch
// accounts; otherwise it does nothing.
func (a Account) Chown(path string) error {
	if !a.Switch {
		return nil
	}
	if err := os.Chown(path, int(a.UID), int(a.GID)); err != nil {
		return fmt.Errorf("childproc: chown %s to %s: %w", path, a.Name, err)
	}
	return nil
}

// Spec describes one child process.
type Spec struct {
	Path string   // executable
	Args []string // arguments, without argv[0]
	Dir  string   // working directory; must be readable by Account
	Env  []string // full environment; nil = Env(nil)
	// Output receives stdout and stderr; nil discards them. Pass an *os.File
	// so the child writes to it directly (no copying goroutine).
	Output *os.File
	// Account is the account to run as (see ServerAccount).
	Account Account
	// DeathSignal is sent to the child when the Go process dies (Linux only);
	// 0 means SIGKILL.
	DeathSignal int
}

// Env returns the current environment without PostgreSQL client and server
// variables (PG*), with the C locale, plus extra entries.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || k == "LANG" || strings.HasPrefix(k, "LC_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LANG=C", "LC_ALL=C")
	return append(env, extra...)
}

func (s Spec) command(ctx context.Context) (*exec.Cmd, error) {
	attr, err := sysProcAttr(s.Account, s.DeathSignal)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, s.Path, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = Env()
	}
	if s.Output != nil {
		cmd.Stdout = s.Output
		cmd.Stderr = s.Output
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}

// Run runs a short-lived child to completion and returns its combined
// output. When ctx ends, the child's whole process group is killed.
func Run(ctx context.Context, s Spec) ([]byte, error) {
	s.Output = nil
	cmd, err := s.command(ctx)
	if err != nil {
		return nil, err
	}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 2 * time.Second
	// Pdeathsig follows the forking thread: keep it for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return out, fmt.Errorf("childproc: run %s: %w (%w)", filepath.Base(s.Path), ctxErr, err)
		}
		return out, fmt.Errorf("childproc: run %s: %w", filepath.Base(s.Path), err)
	}
	return out, nil
}

// Process is a running long-lived child (a server).
type Process struct {
	name string
	pid  int
	done chan struct{}
	err  error // set before done is closed
}

// Start starts a long-lived child. Its waiting goroutine ends when the child
// exits; call Stop to make sure it does.
func Start(s Spec) (*Process, error) {
	cmd, err := s.command(context.Background()) // a server lives until Stop, not a context
	if err != nil {
		return nil, err
	}
	p := &Process{name: filepath.Base(s.Path), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() { // owner: p; ends when the child exits (Stop ensures it does)
		runtime.LockOSThread() // Pdeathsig is bound to this thread
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("childproc: start %s: %w", p.name, err)
	}
	return p, nil
}

// Pid is the child's process id (also its process group id).
func (p *Process) Pid() int { return p.pid }

// Done is closed when the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit status; valid once Done is closed.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StopAndRemove ends a server instance: it stops p as Stop does (p nil:
// none was started) and then removes dir, the instance's folder ("" for
// none), even when the stop failed; it returns both errors joined.
func StopAndRemove(p *Process, sig int, grace time.Duration, dir string) error {
	var errs []error
	if p != nil {
		if err := p.Stop(sig, grace); err != nil {
			errs = append(errs, err)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop sends sig to the child and waits up to grace for it to exit; then it
// kills the child's whole process group with SIGKILL and waits up to 5 s
// more. It is safe to call more than once and from several goroutines.
func (p *Process) Stop(sig int, grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	if err := signal(p.pid, sig); err != nil && !p.Exited() {
		return fmt.Errorf("childproc: stop %s (pid %d): %w", p.name, p.pid, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	// The leader is not reaped yet, so its pid (= the group id) cannot have
	// been reused: killing the group is safe.
	if err := killGroup(p.pid); err != nil && !p.Exited() {
		return fmt.Errorf("childproc: kill %s group (pid %d): %w", p.name, p.pid, err)
	}
	t.Reset(5 * time.Second)
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("childproc: stop %s (pid %d): still running 5s after SIGKILL", p.name, p.pid)
	}
}
