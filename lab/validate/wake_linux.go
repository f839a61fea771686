//go:build linux

package validate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wakeSide is one helper: pinned to its core, on the socket at fd 3,
// rounds times it spins and writes then reads a byte (the timed side,
// which returns the mean round trip after wakeWarm rounds), or reads,
// spins and writes it back. Reads and writes are raw system calls: the
// one thread keeps the process's one P while it blocks, so nothing but
// the core's own wake-up lies between the byte and the spin.
func wakeSide(spec string) (time.Duration, error) {
	f := strings.Split(spec, ",")
	if len(f) != 4 {
		return 0, errors.New("want core,spin,rounds,timed")
	}
	core, err1 := strconv.Atoi(f[0])
	spinFor, err2 := time.ParseDuration(f[1])
	rounds, err3 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2, err3); err != nil || rounds <= wakeWarm {
		return 0, fmt.Errorf("want core,spin,rounds,timed with rounds above %d: %v", wakeWarm, err)
	}
	timed := f[3] == "timed"
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	if err := pinTask(0, core); err != nil {
		return 0, fmt.Errorf("pin to core %d: %w", core, err)
	}
	const fd = 3
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, err
	}
	buf := []byte{0}
	var t0 time.Time
	for i := range rounds {
		if !timed {
			if err := rawByte(unix.SYS_READ, fd, buf); err != nil {
				return 0, err
			}
			spin(spinFor)
			if err := rawByte(unix.SYS_WRITE, fd, buf); err != nil {
				return 0, err
			}
			continue
		}
		if i == wakeWarm {
			t0 = time.Now()
		}
		spin(spinFor)
		if err := rawByte(unix.SYS_WRITE, fd, buf); err != nil {
			return 0, err
		}
		if err := rawByte(unix.SYS_READ, fd, buf); err != nil {
			return 0, err
		}
	}
	if !timed {
		return 0, nil
	}
	return time.Since(t0) / time.Duration(rounds-wakeWarm), nil
}

// rawByte reads or writes one byte (nr SYS_READ or SYS_WRITE) as a raw
// system call, again when a signal interrupts it.
func rawByte(nr uintptr, fd int, buf []byte) error {
	for {
		n, _, e := unix.RawSyscall(nr, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), 1)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		if n != 1 {
			return errors.New("the other side closed")
		}
		return nil
	}
}

// spin keeps the thread busy for d.
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// pingPong runs the two helpers, the timed one on core 0 and the echo on
// core b, spinning work, and returns the timed one's mean round trip.
func pingPong(ctx context.Context, exe string, b int, work time.Duration) (time.Duration, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("measure the wake-up: %w", err)
	}
	fa, fb := os.NewFile(uintptr(fds[0]), "wake-a"), os.NewFile(uintptr(fds[1]), "wake-b")
	defer fa.Close()
	defer fb.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	side := func(core int, timed string, f *os.File) *exec.Cmd {
		c := exec.CommandContext(ctx, exe)
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s,%d,%s", wakeSideEnv, core, work, wakeRounds+wakeWarm, timed))
		c.ExtraFiles = []*os.File{f}
		return c
	}
	echo := side(b, "echo", fb)
	var echoErr, timedErr strings.Builder
	echo.Stderr = &echoErr
	if err := echo.Start(); err != nil {
		return 0, fmt.Errorf("measure the wake-up: %w", err)
	}
	timed := side(0, "timed", fa)
	timed.Stderr = &timedErr
	outb, terr := timed.Output()
	eerr := echo.Wait()
	if err := errors.Join(terr, eerr); err != nil {
		return 0, fmt.Errorf("measure the wake-up on cores 0 and %d: %w: %s", b, err, strings.TrimSpace(timedErr.String()+" "+echoErr.String()))
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(outb)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("measure the wake-up: the helper printed %q, not a round trip", outb)
	}
	return time.Duration(ns), nil
}
