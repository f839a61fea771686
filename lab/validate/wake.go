package validate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// An idle core's wake-up grows with how long it has idled: a virtual
// machine's guest polls a while before it halts its vCPU, and a halted
// vCPU waits for the host to run it again. The pinned arrangements'
// models take it from a ping-pong of two helper processes pinned to cores
// 0 and 1 (as lab/bench/wake-pingpong.c does): each spins a while before it
// answers, so the other core idles for a known time before the byte
// wakes it. The same on one core is a context switch; the difference per
// hand-off is the wake-up. The helpers are this executable run again
// (RunWakeSide): a ping-pong between threads of the validator's own
// process would measure the Go scheduler's hand-offs too.

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

// measureWakeCurve is the idle core's wake-up by its idle time on cores
// 0 and 1: for each spin, (round trip on two cores − round trip on one) / 2
// after (round trip on two cores − spin) of idle, each round trip the
// median of wakeTries ping-pongs (quick: wakeQuick's spins, one
// ping-pong each). Points whose idle does not rise past the previous one
// are dropped.
//
// The tries are passes over all the spins, one after another, not
// repeats of one spin: a virtual machine's host now and then stalls its
// vCPUs for seconds (docs/validate.md), and a stall must not fill a
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
