package validate

import (
	"context"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// flat is a latency grid of one value.
func flat(v float64) []float64 {
	x := make([]float64, latGrid)
	for i := range x {
		x[i] = v
	}
	return x
}

func TestMixArrangements(t *testing.T) {
	tog := &Arrangement{Model: ModelRun{Metrics: system.Metrics{OKTxns: 30000, TPS: 22000, TPSSteady: 22100, MeanMs: 2.2, P50Ms: 2.2, P99Ms: 2.2}}, lat: flat(2.2)}
	apart := &Arrangement{Apart: true, Model: ModelRun{Metrics: system.Metrics{OKTxns: 30000, TPS: 13000, TPSSteady: 13100, MeanMs: 3.8, P50Ms: 3.8, P99Ms: 3.8}}, lat: flat(3.8)}
	for _, c := range []struct {
		share, tps, p50, p99 float64
	}{
		{1, 22000, 2.2, 2.2}, {0, 13000, 3.8, 3.8}, {1.5, 22000, 2.2, 2.2}, {-1, 13000, 3.8, 3.8},
		// A quarter of the time together: 36 % of the transactions, so
		// the median is apart's.
		{0.25, 15250, 3.8, 3.8},
		// Three quarters: 84 % of them, the median together's, the p99
		// apart's.
		{0.75, 19750, 2.2, 3.8},
	} {
		m := mixArrangements(tog, apart, c.share)
		if math.Abs(m.TPS-c.tps) > 1e-6 || m.P50Ms != c.p50 || m.P99Ms != c.p99 {
			t.Errorf("share %v: tps %v p50 %v p99 %v, want %v, %v and %v", c.share, m.TPS, m.P50Ms, m.P99Ms, c.tps, c.p50, c.p99)
		}
		if want := 1000 * 30000 / m.TPS; math.Abs(m.WallMs-want) > 1e-6 {
			t.Errorf("share %v: wall %v ms, want the transactions at the mixed rate, %v", c.share, m.WallMs, want)
		}
		// Little's law: the mean latency of a closed loop is its clients
		// over its rate, here 50 clients.
		if c.share == 0.75 {
			wt := 0.75 * 22000 / c.tps
			if want := wt*2.2 + (1-wt)*3.8; math.Abs(m.MeanMs-want) > 1e-9 {
				t.Errorf("share 0.75: mean %v ms, want the transactions' weights, %v", m.MeanMs, want)
			}
		}
	}
}

func TestMixQuantileOfTwoSpreads(t *testing.T) {
	// Uniform grids on [0,1) and [1,2), weighted equally: the mixture is
	// uniform on [0,2), its median 1 and its 90th percentile 1.8.
	x, y := make([]float64, latGrid), make([]float64, latGrid)
	for i := range x {
		x[i] = (float64(i) + 0.5) / latGrid
		y[i] = 1 + x[i]
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 1}, {0.9, 1.8}, {0.25, 0.5}} {
		if got := mixQuantile(x, y, 0.5, c.q, 0, 0); math.Abs(got-c.want) > 2.0/latGrid {
			t.Errorf("q %v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := mixQuantile(nil, nil, 0.25, 0.5, 2, 6); got != 5 {
		t.Errorf("without grids: %v, want the quantiles weighted, 5", got)
	}
}

func TestCalibratedRunMixesByTheRunsPlacement(t *testing.T) {
	tb := &Testbed{Together: &Arrangement{Model: ModelRun{Metrics: system.Metrics{TPS: 20000}}}, Apart: &Arrangement{Apart: true, Model: ModelRun{Metrics: system.Metrics{TPS: 10000}}}}
	a := attempt{cal: Calibration{Testbed: tb}, x: Measured{Placement: &Placement{Samples: 10, Shared: 0.75}}}
	if got := calibratedRun(system.Config{}, a).TPS; got != 17500 {
		t.Errorf("a run 75 %% together: model %v/s, want 17500", got)
	}
}

func TestCombineArrangement(t *testing.T) {
	xs := []*Arrangement{
		{TPS: 20000, Pooler: 20 * time.Microsecond, Placement: &Placement{Samples: 100, Shared: 1}, Model: ModelRun{Metrics: system.Metrics{TPS: 19000}}},
		{TPS: 22000, Pooler: 24 * time.Microsecond, Placement: &Placement{Samples: 120, Shared: 0.98}, Model: ModelRun{Metrics: system.Metrics{TPS: 21000}}},
		{TPS: 23000, Pooler: 22 * time.Microsecond, Placement: &Placement{Samples: 110, Shared: 1}, Model: ModelRun{Metrics: system.Metrics{TPS: 23000}}},
	}
	c := combineArrangement(xs)
	if c.TPS != 22000 || c.Pooler != 22*time.Microsecond || c.Model.TPS != 21000 || c.Placement.Shared != 1 || c.Placement.Samples != 330 {
		t.Errorf("combined %+v, placement %+v: want the medians and the samples summed", c, c.Placement)
	}
	if combineArrangement([]*Arrangement{xs[0], nil}) != nil {
		t.Error("a run without the arrangement: want none shown")
	}
}

// allowedList is a process's Cpus_allowed_list from /proc/PID/status.
func allowedList(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in /proc/%d/status", pid)
	return ""
}

func TestPinProcessAndRestore(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("pins to core 1: needs Linux and 2 cores")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	before := allowedList(t, pid)
	restore, err := saveAffinity(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := pinProcess(pid, 1); err != nil {
		t.Fatal(err)
	}
	if got := allowedList(t, pid); got != "1" {
		t.Errorf("pinned to core 1: Cpus_allowed_list %q", got)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got := allowedList(t, pid); got != before {
		t.Errorf("restored: Cpus_allowed_list %q, want %q as before", got, before)
	}
	if err := pinProcess(1<<30, 0); err == nil {
		t.Error("pinning a process that does not exist: no error")
	}
}

func TestMeasureWakeCurve(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.NumCPU() < 2 {
		t.Skip("pins helper processes to cores 0 and 1: needs Linux and 2 cores")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := measureWakeCurve(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("an idle core's wake-up: %s", wakeCurveText(c))
	if len(c) < 2 {
		t.Fatalf("curve %v: want a point per spin whose idle rises", c)
	}
	for i, p := range c {
		// The other core idles at least the spin before the byte wakes it.
		if p.Idle < sim.FromDuration(wakeWorks[0]) || p.Wake < 0 || (i > 0 && p.Idle <= c[i-1].Idle) {
			t.Errorf("point %d %+v of %v: want idle times rising from the least spin, wake-ups not negative", i, p, c)
		}
	}
	cfg := system.Default()
	cfg.Server.Cores = 2
	cfg.Machine = testbed.Machine{Scheduler: testbed.PerCore, WakeCurve: c}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the measured curve is not a valid validate.wake_curve: %v", err)
	}
}

func TestWakeSideRefusesABadSpec(t *testing.T) {
	for _, spec := range []string{"", "0,5us,1000", "x,5us,1000,timed", "0,5us,10,timed"} {
		if _, err := wakeSide(spec); err == nil {
			t.Errorf("wakeSide(%q): no error", spec)
		}
	}
}
