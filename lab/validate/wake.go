package validate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// An idle core's wake-up grows with how long it has idled: a virtual
// machine's guest polls a while before it halts its vCPU, and a halted
// vCPU waits for the host to run it again. The pinned arrangements'
// models take it from a ping-pong of two helper processes pinned to cores
// 0 and 1 (as bench/wake-pingpong.c does): each spins a while before it
// answers, so the other core idles for a known time before the byte
// wakes it. The same on one core is a context switch; the difference per
// hand-off is the wake-up. The helpers are this executable run again
// (RunWakeSide): a ping-pong between threads of the validator's own
// process measured the Go scheduler's hand-offs too (162 µs of idle for a
// 5-µs spin, where C measures about 33).

// wakeSideEnv carries a helper's side of the ping-pong: "core,spin,rounds,timed".
const wakeSideEnv = "POOLSIM_WAKE_SIDE"

// wakeWorks are the spins of the ping-pong, one curve point each.
var wakeWorks = []time.Duration{5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 40 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond}

// wakeRounds is each ping-pong's timed round trips, after wakeWarm;
// wakeTries how many ping-pongs a round trip is the median of.
const wakeRounds, wakeWarm, wakeTries = 1000, 200, 3

// wakeQuick are the spins with --quick, each round trip one ping-pong:
// three points in a second or two instead of six in about eight.
var wakeQuick = []time.Duration{5 * time.Microsecond, 20 * time.Microsecond, 100 * time.Microsecond}

// RunWakeSide runs one side of the wake-up ping-pong and exits when the
// process was started as one (wakeSideEnv set); otherwise it returns at
// once. Call it first thing in main (and in TestMain of tests that
// validate through PgBouncer at pool 1).
func RunWakeSide() {
	spec, ok := os.LookupEnv(wakeSideEnv)
	if !ok {
		return
	}
	rt, err := wakeSide(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wake-up side %q: %v\n", spec, err)
		os.Exit(1)
	}
	fmt.Println(rt.Nanoseconds())
	os.Exit(0)
}

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

// measureWakeCurve is the idle core's wake-up by its idle time on cores
// 0 and 1: for each spin, (round trip on two cores − round trip on one) / 2
// after (round trip on two cores − spin) of idle, each round trip the
// median of wakeTries ping-pongs (quick: wakeQuick's spins, one
// ping-pong each). Points whose idle does not rise past the previous one
// are dropped.
//
// The tries are passes over all the spins, one after another, not
// repeats of one spin: the host now and then stalls the vCPUs for
// seconds (a 5-µs spin's round trip took 939 µs, its median of three
// repeats in a row, at the start of a validation on 2026-12-02, while the
// through loops a minute later ran as usual) and a stall must not fill a
// spin's every try - above all the first spin's, whose idle no later
// point then rises past.
func measureWakeCurve(ctx context.Context, quick bool) ([]testbed.WakePoint, error) {
	if runtime.NumCPU() < 2 {
		return nil, errors.New("measure the wake-up: needs 2 cores")
	}
	if _, ok := os.LookupEnv(wakeSideEnv); ok {
		// An executable that does not call RunWakeSide first (a test
		// binary without it) is running as a helper: no helpers of its own.
		return nil, errors.New("measure the wake-up: this process is a helper already")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("measure the wake-up: %w", err)
	}
	works, tries := wakeWorks, wakeTries
	if quick {
		works, tries = wakeQuick, 1
	}
	// rts[i][b] are spin i's round trips with the echo on core b, one per
	// pass.
	rts := make([][2][]float64, len(works))
	for range tries {
		for i, w := range works {
			for b := range 2 {
				d, err := pingPong(ctx, exe, b, w)
				if err != nil {
					return nil, err
				}
				rts[i][b] = append(rts[i][b], float64(d))
			}
		}
	}
	var out []testbed.WakePoint
	for i, w := range works {
		one, two := time.Duration(median(rts[i][0])), time.Duration(median(rts[i][1]))
		p := testbed.WakePoint{Idle: sim.FromDuration(two - w), Wake: sim.FromDuration(max(0, (two-one)/2))}
		if len(out) == 0 || p.Idle > out[len(out)-1].Idle {
			out = append(out, p)
		}
	}
	return out, nil
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

// wakeCurveText is the curve for a report: "9.0 µs after 33.0 µs idle, ...".
func wakeCurveText(c []testbed.WakePoint) string {
	var xs []string
	for _, p := range c {
		xs = append(xs, fmt.Sprintf("%s after %s idle", us(p.Wake.Duration()), us(p.Idle.Duration())))
	}
	return strings.Join(xs, ", ")
}

// measureWake measures the wake-up curve before anything of the
// validation starts, while the machine is quiet (right after a loop,
// PostgreSQL's and pgbench's leftover work doubled it), when a point is
// a CPU-bound pooled row (wakesCores). A failure is said and leaves the
// calibrated models on the pooler's constant wake-up; only a cancelled
// ctx is an error.
func (l *lab) measureWake(ctx context.Context, points []scenarios.Point) error {
	if !slices.ContainsFunc(points, func(p scenarios.Point) bool { return wakesCores(l.live, p.Config) }) {
		return nil
	}
	l.phase("measuring the cores' wake-up")
	c, err := measureWakeCurve(ctx, l.o.Quick)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		l.logf("validate: %v: the calibrated models take the pooler's constant wake-up (the pool-1 arrangements' backends too)", err)
		return nil
	}
	l.wakeCurve = c
	l.logf("validate: an idle core's wake-up: %s", wakeCurveText(c))
	return nil
}
