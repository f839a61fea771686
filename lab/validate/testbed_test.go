package validate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// TestFitTestbedRecoversContention plays the testbed fit against its own
// model: direct throughputs made by the model with a known σ must give
// that σ back, and the model's points must then match them.
func TestFitTestbedRecoversContention(t *testing.T) {
	skipUnderRace(t)
	cfg := system.Default()
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	truth := &Testbed{Cores: 2, Driver: 40 * time.Microsecond, Server: 50 * time.Microsecond, Latency: 10 * time.Microsecond, Background: 0.2}
	for _, sigma := range []float64{0, 0.08, 0.3} {
		tb := &Testbed{Cores: 2}
		for _, n := range []int{1, 2, 4, 8} {
			x := directTPS(truth, cfg, n, sigma, 0)
			tb.Points = append(tb.Points, TestbedPoint{N: n, TPS: x, Driver: truth.Driver, Server: truth.Server, Background: truth.Background})
		}
		fitTestbed(tb, cfg)
		if math.Abs(tb.Contention-sigma) > 0.01+0.05*sigma {
			t.Errorf("σ %.3f: fitted %.4f", sigma, tb.Contention)
		}
		if d := tb.Latency - truth.Latency; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("σ %.3f: latency %v, want %v", sigma, tb.Latency, truth.Latency)
		}
		for _, p := range tb.Points {
			if math.Abs(p.Model-p.TPS)/p.TPS > 0.02 {
				t.Errorf("σ %.3f, %d connections: model %.0f/s, points %.0f/s", sigma, p.N, p.Model, p.TPS)
			}
		}
	}
}

// skipUnderRace skips a test that only searches the model (fitTestbed over
// many seeded runs, no goroutine, nothing live): the race detector made
// them ten times slower (62 s against 6 s) and can find nothing in them.
// .ci/run runs them plainly; the live tests run the same search under
// -race beside the watchers' goroutines.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("searches the seeded model only; .ci/run runs it without the race detector")
	}
}

// TestFitTestbedThroughRow: a row that measured its CPU per statement
// through the target (larger than the direct loops') still fits σ and the
// latency to the direct points with the direct loops' own costs, and
// keeps the through costs, and the through loop's other work, for its
// run.
func TestFitTestbedThroughRow(t *testing.T) {
	cfg := system.Default()
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	truth := &Testbed{Cores: 2, Driver: 20 * time.Microsecond, Server: 30 * time.Microsecond, Latency: 25 * time.Microsecond}
	const sigma = 0.1
	tb := &Testbed{Cores: 2, ThroughClients: 50, Driver: 35 * time.Microsecond, Server: 45 * time.Microsecond, Pooler: 20 * time.Microsecond,
		ThroughBusy: 0.9, ThroughOther: 0.12}
	for _, n := range []int{1, 2, 4, 8} {
		x := directTPS(truth, cfg, n, sigma, 0)
		tb.Points = append(tb.Points, TestbedPoint{N: n, TPS: x, Driver: truth.Driver, Server: truth.Server})
	}
	fitTestbed(tb, cfg)
	if tb.Background != 0.12 {
		t.Errorf("background %v, want the through loop's other work 0.12 cores (the direct points had none)", tb.Background)
	}
	if math.Abs(tb.Contention-sigma) > 0.015 {
		t.Errorf("σ: fitted %.4f, want %.2f", tb.Contention, sigma)
	}
	if d := tb.Latency - truth.Latency; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("latency %v, want %v", tb.Latency, truth.Latency)
	}
	if tb.Driver != 35*time.Microsecond || tb.Server != 45*time.Microsecond {
		t.Errorf("the run's costs: driver %v, server %v; want the through costs 35µs, 45µs", tb.Driver, tb.Server)
	}
	for _, p := range tb.Points {
		if math.Abs(p.Model-p.TPS)/p.TPS > 0.02 {
			t.Errorf("%d connections: model %.0f/s, points %.0f/s", p.N, p.Model, p.TPS)
		}
	}
}

// TestFitTestbedRecoversSpread plays the spread's fit against its own
// model: round trips made by the model with a known spread of the CPU per
// statement must give that spread back.
func TestFitTestbedRecoversSpread(t *testing.T) {
	skipUnderRace(t)
	cfg := system.Default()
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	for _, spread := range []float64{0, 0.5, 1} {
		truth := &Testbed{Cores: 2, Driver: 30 * time.Microsecond, Server: 50 * time.Microsecond, Latency: 10 * time.Microsecond, Spread: spread}
		tb := &Testbed{Cores: 2}
		for _, n := range []int{1, 2, 4, 8} {
			m := direct(truth, cfg, n, 0, 0)
			tb.Points = append(tb.Points, TestbedPoint{N: n, TPS: m.TPS, Driver: truth.Driver, Server: truth.Server,
				P50: msDur(m.P50Ms), P99: msDur(m.P99Ms)})
		}
		fitTestbed(tb, cfg)
		if math.Abs(tb.Spread-spread) > 0.05+0.1*spread {
			t.Errorf("spread %.2f: fitted %.3f", spread, tb.Spread)
		}
		p := tb.Points[3]
		if math.Abs(float64(p.ModelP99)/float64(p.P99)-1) > 0.05 {
			t.Errorf("spread %.2f: the model's p99 at 8 connections %v, measured %v", spread, p.ModelP99, p.P99)
		}
	}
}

// TestDirectTPSSaturates checks the testbed model's two limits: one
// connection runs driver, server CPU and latency in turn; many share the
// cores left by the background.
func TestDirectTPSSaturates(t *testing.T) {
	cfg := system.Default()
	tb := &Testbed{Cores: 2, Driver: 30 * time.Microsecond, Server: 50 * time.Microsecond, Latency: 20 * time.Microsecond, Background: 0.5}
	if got, want := directTPS(tb, cfg, 1, 0, 0), 1/100e-6; math.Abs(got-want)/want > 0.01 {
		t.Errorf("one connection: %.0f/s, want %.0f/s", got, want)
	}
	if got, want := directTPS(tb, cfg, 16, 0, 0), 1.5/80e-6; math.Abs(got-want)/want > 0.03 {
		t.Errorf("16 connections: %.0f/s, want the cores' %.0f/s", got, want)
	}
}

func TestCurvesAndPeak(t *testing.T) {
	mk := func(clients, pool string, cal, meas float64) Row {
		r := Row{Params: []scenarios.Param{{Key: "workload.clients", Value: clients}, {Key: CurveKey, Value: pool}},
			Model: system.Metrics{TPS: cal, OKTxns: 10}, Calibrated: ModelRun{Metrics: system.Metrics{TPS: cal, OKTxns: 10}}, Measured: Measured{TPS: meas, OKTxns: 10}}
		judge(&r)
		return r
	}
	rep := &Report{Scenario: "s", Target: TargetPgBouncer, Rows: []Row{
		mk("50", "4", 1000, 990), mk("50", "1", 500, 520), mk("50", "2", 960, 1010), mk("50", "8", 980, 1000),
		mk("200", "1", 500, 500), mk("200", "2", 800, 700),
	}}
	lines := rep.Curves()
	if len(lines) != 2 || lines[0].Label != "workload.clients=50" || lines[1].Label != "workload.clients=200" {
		t.Fatalf("lines = %+v", lines)
	}
	var xs []float64
	for _, p := range lines[0].Points {
		xs = append(xs, p.X)
	}
	if len(xs) != 4 || xs[0] != 1 || xs[1] != 2 || xs[2] != 4 || xs[3] != 8 {
		t.Errorf("points not in pool-size order: %v", xs)
	}
	// Calibrated: 1000 highest, 960 within 5 %: peak 2. Measured: 1010
	// highest at 2.
	if l := lines[0]; l.PeakCal != 2 || l.PeakMeas != 2 {
		t.Errorf("peaks = %g, %g; want 2, 2", l.PeakCal, l.PeakMeas)
	}
	if l := lines[1]; l.PeakCal != 2 || l.PeakMeas != 2 {
		t.Errorf("200 clients: peaks = %g, %g; want 2, 2", l.PeakCal, l.PeakMeas)
	}
	var b strings.Builder
	rep.writeCurves(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	if !strings.Contains(b.String(), "Peak pool size: calibrated model 2, measured 2 (the same)") {
		t.Errorf("curve section:\n%s", b.String())
	}
	png := filepath.Join(t.TempDir(), "curve.png")
	if err := rep.WritePlot(png); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v, %v", st, err)
	}
	if err := rep.WritePlot(filepath.Join(t.TempDir(), "curve.svg")); err == nil {
		t.Error("WritePlot accepted an .svg path")
	}
	// Two runs far apart: the interval of their mean stops at zero TPS.
	wide := mk("50", "16", 1000, 1000)
	wide.Repeats = []Measured{{TPS: 100}, {TPS: 1900}}
	for i := range wide.Cells {
		if wide.Cells[i].Metric == "tps" {
			wide.Cells[i].Runs, wide.Cells[i].MeasMean, wide.Cells[i].MeasHalf = 2, 1000, 11400
		}
	}
	if pts := (&Report{Rows: []Row{wide}}).Curves()[0].Points; pts[0].MeasLo != 0 || pts[0].MeasHi != 12400 {
		t.Errorf("two runs 100 and 1900: interval [%v, %v], want [0, 12400]", pts[0].MeasLo, pts[0].MeasHi)
	}
	// A sweep of the pool size alone: one line, no empty heading for it.
	one := &Report{Scenario: "s", Target: TargetProxy, Rows: []Row{rep.Rows[1], rep.Rows[0]}}
	for i := range one.Rows {
		one.Rows[i].Params = one.Rows[i].Params[1:]
	}
	b.Reset()
	one.writeCurves(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	if l := one.Curves(); len(l) != 1 || l[0].Label != "" || strings.Contains(b.String(), "###") || !strings.Contains(b.String(), "| 1 | ") {
		t.Errorf("one line: %+v, section:\n%s", l, b.String())
	}
	if (&Report{Rows: []Row{row(system.Metrics{TPS: 1}, Measured{TPS: 1})}}).Curves() != nil {
		t.Error("a sweep without the pool size has a curve")
	}
}

func TestBracketTimes(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	b := Calibration{QueryMean: ms(4), QueryP99: ms(5), ThinkMean: ms(8), Samples: 10,
		Query: sim.LognormalDist(sim.FromDuration(ms(4)), 0.2), Think: sim.ConstDist(sim.FromDuration(ms(8)))}
	a := Calibration{QueryMean: ms(6), QueryP99: ms(9), ThinkMean: ms(10), Samples: 10}
	c := bracketTimes(b, a)
	if c.QueryMean != ms(5) || c.QueryP99 != ms(9) || c.ThinkMean != ms(9) || c.Samples != 20 {
		t.Errorf("bracketTimes = %v %v %v %d; want 5ms 9ms 9ms 20", c.QueryMean, c.QueryP99, c.ThinkMean, c.Samples)
	}
	if c.Query.MeanValue().Duration() != ms(5) || c.Think.MeanValue().Duration() != ms(9) {
		t.Errorf("distributions' means %v, %v; want 5ms, 9ms", c.Query.MeanValue().Duration(), c.Think.MeanValue().Duration())
	}
}

func TestSpeedFactors(t *testing.T) {
	w := 10 * time.Millisecond
	// Steady ends, 100 a window: the machine ran at one speed.
	var steady []time.Duration
	for i := range 1000 {
		steady = append(steady, time.Duration(i)*w/100)
	}
	for i, f := range speedFactors(steady, 0, 10*w, w) {
		if f != 1 {
			t.Fatalf("steady ends: window %d factor %v, want 1", i, f)
		}
	}
	// Windows alternately at 50 and 150 ends: half and one and a half,
	// less the little that chance could explain.
	var ends []time.Duration
	for k := range 10 {
		n := 50 + 100*(k%2)
		for j := range n {
			ends = append(ends, time.Duration(k)*w+time.Duration(j)*w/time.Duration(n))
		}
	}
	f := speedFactors(ends, 0, 10*w, w)
	if len(f) != 10 {
		t.Fatalf("%d factors, want 10", len(f))
	}
	shrink := math.Sqrt((2500.0 - 100) / 2500)
	for k, x := range f {
		want := 1 + (float64(50+100*(k%2))/100-1)*shrink
		if math.Abs(x-want) > 1e-9 {
			t.Errorf("window %d: factor %v, want %v", k, x, want)
		}
	}
	// Too short to tell, or nothing ran: no factors.
	if f := speedFactors(ends, 0, 4*w, w); f != nil {
		t.Errorf("4 windows: %v, want none", f)
	}
	if f := speedFactors(nil, 0, 10*w, w); f != nil {
		t.Errorf("no ends: %v, want none", f)
	}
}

// TestSpeedTimeline: a closed loop's stall (no statement ends for 3 ms
// among ends 40 µs apart) stops the model's cores for about 3 ms at the
// same moment, and the rest of its window runs at the window's speed
// outside the stall; steady ends give a constant 1, and the order is
// kept.
func TestSpeedTimeline(t *testing.T) {
	gap := 40 * time.Microsecond
	var steady []time.Duration
	for e := time.Duration(0); e < 200*time.Millisecond; e += gap {
		steady = append(steady, e)
	}
	tl := speedTimeline(steady, 0, 200*time.Millisecond)
	if len(tl) != 200 {
		t.Fatalf("%d steps, want 200 (1 ms each over 200 ms)", len(tl))
	}
	for i, f := range tl {
		if f != 1 {
			t.Fatalf("steady ends: step %d factor %v, want 1", i, f)
		}
	}
	// The same with nothing ending from 50 ms to 53 ms.
	var stalled []time.Duration
	for _, e := range steady {
		if e < 50*time.Millisecond || e >= 53*time.Millisecond {
			stalled = append(stalled, e)
		}
	}
	tl = speedTimeline(stalled, 0, 200*time.Millisecond)
	slow := 0
	for i, f := range tl {
		switch {
		case f < 0.5:
			slow++
			if i < 50 || i > 52 {
				t.Errorf("step %d (%v) stalled, want only steps 50-52", i, f)
			}
		case i >= 40 && i < 60 && f < 1:
			t.Errorf("step %d: %v; want the stall's window outside the stall at full speed or more", i, f)
		}
	}
	if slow != 3 {
		t.Errorf("%d steps stalled, want 3: %v", slow, tl[45:60])
	}
	var sum float64
	for _, f := range tl {
		sum += f
	}
	if m := sum / float64(len(tl)); math.Abs(m-1) > 0.02 {
		t.Errorf("mean speed %v, want about 1 (the work the loop did)", m)
	}
	// Ends in bursts, 40 at once every 1.6 ms (a large pool's batches),
	// with a 3 ms gap among them: no stall can be told from a batch's gap.
	var bursts []time.Duration
	for b := time.Duration(0); b < 200*time.Millisecond; b += 1600 * time.Microsecond {
		if b < 50*time.Millisecond || b >= 53*time.Millisecond {
			for range 40 {
				bursts = append(bursts, b)
			}
		}
	}
	for i, f := range speedTimeline(bursts, 0, 200*time.Millisecond) {
		if f < 0.5 {
			t.Errorf("bursty ends: step %d stalled (%v), want none", i, f)
		}
	}
	if f := speedTimeline(nil, 0, 200*time.Millisecond); f != nil {
		t.Errorf("no ends: %v, want none", f)
	}
}

// TestPeakRange: a flat measured top whose runs' intervals overlap does
// not fix its first point; the calibrated peak inside that range is
// said to agree only within the intervals, outside it not at all.
func TestPeakRange(t *testing.T) {
	pt := func(x, cal, meas, half float64) CurvePoint {
		return CurvePoint{X: x, Cal: cal, Meas: meas, MeasLo: meas - half, MeasHi: meas + half}
	}
	// PgBouncer at 200 clients (results/pgbench-select-live, ae0873c,
	// medians with the intervals' half-widths): the medians reach the
	// top's 95 % first at 2, every interval from 2 on reaches it, none
	// lies wholly above it.
	l := CurveLine{Points: []CurvePoint{pt(1, 26487, 21425, 5279), pt(2, 29885, 27016, 4938), pt(4, 31373, 28123, 4043),
		pt(8, 29143, 26221, 1742), pt(16, 31928, 28282, 5679), pt(32, 30018, 27652, 3751)}}
	l.PeakCal = peak(l.Points, func(p CurvePoint) float64 { return p.Cal })
	l.PeakMeas = peak(l.Points, func(p CurvePoint) float64 { return p.Meas })
	l.PeakMeasLo, l.PeakMeasHi = peakRange(l.Points)
	if l.PeakCal != 4 || l.PeakMeas != 2 || l.PeakMeasLo != 2 || l.PeakMeasHi != 32 {
		t.Fatalf("peaks: calibrated %g, measured %g in [%g, %g]; want 4, 2 in [2, 32]", l.PeakCal, l.PeakMeas, l.PeakMeasLo, l.PeakMeasHi)
	}
	if got := l.peakNote(); !strings.Contains(got, "NOT the same by the medians; within the runs' 95 % intervals the measured plateau may start anywhere from 2 to 32, and the calibrated 4 lies there") {
		t.Errorf("note: %s", got)
	}
	// Tight intervals: the plateau surely starts at 4; a calibrated 1
	// is outside.
	l = CurveLine{Points: []CurvePoint{pt(1, 100, 50, 1), pt(2, 90, 80, 1), pt(4, 95, 100, 1), pt(8, 96, 101, 1)}}
	l.PeakCal, l.PeakMeas = 1, peak(l.Points, func(p CurvePoint) float64 { return p.Meas })
	l.PeakMeasLo, l.PeakMeasHi = peakRange(l.Points)
	if l.PeakMeas != 4 || l.PeakMeasLo != 4 || l.PeakMeasHi != 4 || l.peakNote() != "NOT the same" {
		t.Errorf("tight: measured %g in [%g, %g], note %q", l.PeakMeas, l.PeakMeasLo, l.PeakMeasHi, l.peakNote())
	}
	l.PeakCal = 4
	if l.peakNote() != "the same" {
		t.Errorf("the same peak: %q", l.peakNote())
	}
}

// TestTestbedConfigTakesTheWakeCurve: a pooled row's calibrated model
// takes the measured wake-up curve in place of the pooler's constant
// wake-up, and a core's wake-up slows the model down (the woken threads
// wait on idle cores); without a curve the constant stays.
func TestTestbedConfigTakesTheWakeCurve(t *testing.T) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Workload.StmtsPerTxn = 20, 200, 1
	cfg.Pooler.DefaultPoolSize = 2
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	curve := []testbed.WakePoint{{Idle: 40 * sim.Microsecond, Wake: 15 * sim.Microsecond}, {Idle: 130 * sim.Microsecond, Wake: 45 * sim.Microsecond}}
	tb := &Testbed{Cores: 2, ThroughClients: 20, Driver: 20 * time.Microsecond, Server: 40 * time.Microsecond, Pooler: 24 * time.Microsecond, Latency: 40 * time.Microsecond}
	cal := Calibration{Hop: 30 * time.Microsecond, Testbed: tb}
	without := testbedConfig(cfg, cal, tb)
	if machineOf(without).WakeCurve != nil || without.Pooler.Wakeup != sim.FromDuration(22*time.Microsecond) {
		t.Fatalf("without a curve: wake curve %v, pooler wake-up %v; want none and the hop less a message's CPU, 22µs", machineOf(without).WakeCurve, without.Pooler.Wakeup)
	}
	tb.WakeCurve = curve
	with := testbedConfig(cfg, cal, tb)
	if len(machineOf(with).WakeCurve) != 2 {
		t.Fatalf("with a curve: %v, want it in the model", machineOf(with).WakeCurve)
	}
	if err := with.Validate(); err != nil {
		t.Fatalf("the model's config: %v", err)
	}
	// With 40 µs of wake-up per woken thread on an idle core instead of 22
	// for the pooler's thread alone, fewer statements a second.
	tb.WakeCurve = []testbed.WakePoint{{Idle: sim.Microsecond, Wake: 40 * sim.Microsecond}}
	slow, fast := system.Run(testbedConfig(cfg, cal, tb)).Metrics, system.Run(without).Metrics
	if !(slow.TPS < fast.TPS) {
		t.Errorf("a 40 µs wake-up for backends and the pooler: %.0f/s, the pooler's 22 µs alone %.0f/s: want fewer", slow.TPS, fast.TPS)
	}
}

// TestMigrationsReadsTheKernelsCount: this process's threads' moves
// between cores, from /proc/PID/task/TID/sched, where the kernel has it.
func TestMigrationsReadsTheKernelsCount(t *testing.T) {
	n, ok := migrations([]int{os.Getpid()})
	if _, err := os.Stat("/proc/self/sched"); err != nil {
		if ok {
			t.Errorf("no /proc/self/sched, yet migrations said %d, readable", n)
		}
		t.Skip("this kernel has no /proc/PID/sched")
	}
	if !ok || n < 0 {
		t.Fatalf("migrations = %d, %v: want a count", n, ok)
	}
	if _, ok := migrations([]int{1 << 30}); ok {
		t.Error("a process that does not exist: want not readable")
	}
	if v, ok := schedField("se.exec_start    :   12.5\nse.nr_migrations                             :                   17\n", "se.nr_migrations"); !ok || v != 17 {
		t.Errorf("schedField = %d, %v: want 17", v, ok)
	}
}

// TestTestbedConfigKeepsThreadsWhereTheKernelDid: the model's cores out
// of work take queued threads from each other as often as the kernel
// moved the pooler and the servers in the through loop (never if it
// moved none); where the kernel could not say, at every chance.
func TestTestbedConfigKeepsThreadsWhereTheKernelDid(t *testing.T) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Pooler.DefaultPoolSize = 20, 4
	tb := &Testbed{Cores: 2, ThroughClients: 20, ThroughTPS: 20000, Driver: 20 * time.Microsecond, Server: 40 * time.Microsecond, Pooler: 24 * time.Microsecond}
	cal := Calibration{Hop: 30 * time.Microsecond, Testbed: tb}
	for _, c := range []struct {
		moves float64
		ok    bool
		never bool
		every sim.Time
	}{{0.001, true, false, 50 * sim.Millisecond}, {0, true, true, 0}, {0.2, false, false, 0}} {
		tb.Migrations, tb.MigrationsOK = c.moves, c.ok
		cc := testbedConfig(cfg, cal, tb)
		if machineOf(cc).NoIdleBalance != c.never || machineOf(cc).IdleBalanceEvery != c.every {
			t.Errorf("%.4f moves per statement at 20,000/s (readable %v): never %v, every %v; want %v, %v", c.moves, c.ok, machineOf(cc).NoIdleBalance, machineOf(cc).IdleBalanceEvery, c.never, c.every)
		}
		if err := cc.Validate(); err != nil {
			t.Errorf("%.4f moves: %v", c.moves, err)
		}
	}
}

// TestFitBalance: the idle balancing of a row's model, a rate with or
// without the wake-up's look for an idle core, is the one whose model of
// the through loop keeps the cores as busy as the machine was in that
// loop: a machine busier than the model can be takes the busiest of
// them, one idler than it can be the idlest; the fit sets what the row's
// model then runs.
func TestFitBalance(t *testing.T) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Pooler.DefaultPoolSize = 50, 200, 8
	cfg.Server.Cores, cfg.Server.MaxConnections = 2, 48
	mk := func(busy float64) *Testbed {
		return &Testbed{Cores: 2, ThroughClients: 50, ThroughTPS: 20000, ThroughBusy: busy, Driver: 15 * time.Microsecond,
			Server: 40 * time.Microsecond, Pooler: 12 * time.Microsecond, Migrations: 0.0001, MigrationsOK: true}
	}
	// Every choice's model of the loop, as fitBalance runs it.
	lo, hi := math.Inf(1), math.Inf(-1)
	{
		tb := mk(0)
		cal := Calibration{Hop: 30 * time.Microsecond, Connect: time.Millisecond, Testbed: tb}
		c := cfg
		c.Workload.TxnsPerSession = max(50, c.Workload.TxnsPerSession/4)
		for _, ns := range []bool{false, true} {
			for _, b := range balanceSteps {
				tb.Balance, tb.NoScan, tb.balanceSet = b, ns, true
				u := system.Run(testbedConfig(c, cal, tb)).Metrics.CPUUtil
				lo, hi = min(lo, u), max(hi, u)
			}
		}
	}
	var utils []float64
	for _, b := range []float64{1.5, 0.05} {
		tb := mk(b)
		cal := Calibration{Hop: 30 * time.Microsecond, Connect: time.Millisecond, Testbed: tb}
		fitBalance(cfg, cal)
		if !tb.balanceSet {
			t.Fatalf("busy %.2f: no fit", b)
		}
		c := cfg
		c.Workload.TxnsPerSession = max(50, c.Workload.TxnsPerSession/4)
		u := system.Run(testbedConfig(c, cal, tb)).Metrics.CPUUtil
		if want := map[bool]float64{true: hi, false: lo}[b > 1]; u != want {
			t.Errorf("loop's CPUs %.0f %% busy: fit %s, its model of the loop %.4f busy; want the choices' %.4f (they range %.4f-%.4f)", 100*b, balanceText(tb.Balance, tb.NoScan), u, want, lo, hi)
		}
		cc := testbedConfig(cfg, cal, tb)
		if machineOf(cc).NoIdleBalance != (tb.Balance < 0) || machineOf(cc).IdleBalanceEvery != max(0, tb.Balance) || machineOf(cc).NoIdleScan != tb.NoScan {
			t.Errorf("fit %s: the row's model runs never %v, every %v, no scan %v", balanceText(tb.Balance, tb.NoScan), machineOf(cc).NoIdleBalance, machineOf(cc).IdleBalanceEvery, machineOf(cc).NoIdleScan)
		}
		utils = append(utils, system.Run(cc).Metrics.CPUUtil)
	}
	if utils[0] <= utils[1] {
		t.Errorf("the cores' use fitted to a busy loop %.3f, to an idle one %.3f: want the first busier", utils[0], utils[1])
	}
	// A pool of 2: the model without the wake-up's look for an idle core
	// keeps its cores idler than any rate with it; a loop that busy
	// takes it, and the row's model runs it.
	cfg.Pooler.DefaultPoolSize = 2
	tb := mk(0)
	cal := Calibration{Hop: 30 * time.Microsecond, Connect: time.Millisecond, Testbed: tb}
	tb.Balance, tb.NoScan, tb.balanceSet = sim.Millisecond, true, true
	c := cfg
	c.Workload.Clients, c.Workload.TxnsPerSession = tb.ThroughClients, max(50, c.Workload.TxnsPerSession/4)
	noScan := system.Run(testbedConfig(c, cal, tb)).Metrics.CPUUtil
	tb.NoScan = false
	scan := system.Run(testbedConfig(c, cal, tb)).Metrics.CPUUtil
	if !(noScan < scan-0.02) {
		t.Fatalf("pool 2: the model's cores %.3f busy without the look for an idle core, %.3f with it: want idler without", noScan, scan)
	}
	tb.ThroughBusy, tb.balanceSet = noScan, false
	fitBalance(cfg, cal)
	if !tb.NoScan {
		t.Errorf("pool 2, the loop's CPUs %.3f busy (the no-scan model's): fit balance %v with the scan; want no scan", noScan, tb.Balance)
	}
	if cc := testbedConfig(cfg, cal, tb); machineOf(cc).NoIdleScan != tb.NoScan {
		t.Errorf("the fit's no scan %v: the row's model runs %v", tb.NoScan, machineOf(cc).NoIdleScan)
	}
}

// TestTestbedConfigCountsContentionOnce: a pooled row's model runs its
// servers' CPU per statement as measured where the row runs, contention
// in it, so the direct points' σ and κ are not applied again; a direct
// row's model, on one connection's cost, runs them. Here the model
// runs 19,900/s without them, 12,300/s with them.
func TestTestbedConfigCountsContentionOnce(t *testing.T) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Pooler.DefaultPoolSize = 50, 200, 16
	cfg.Server.Cores, cfg.Server.MaxConnections = 2, 48
	tb := &Testbed{Cores: 2, ThroughClients: 50, Driver: 15 * time.Microsecond, Server: 70 * time.Microsecond,
		Pooler: 14 * time.Microsecond, Contention: 0.17, Coherency: 0.001}
	cal := Calibration{Hop: 30 * time.Microsecond, Connect: time.Millisecond, Testbed: tb}
	pooled := testbedConfig(cfg, cal, tb)
	if pooled.Server.Contention != 0 || pooled.Server.Coherency != 0 {
		t.Errorf("pooled row: σ %.3f, κ %.4f; want none (the measured CPU per statement has them)", pooled.Server.Contention, pooled.Server.Coherency)
	}
	// The model's cores then carry the measured CPU: near 2 cores over
	// the 99 µs of a statement, not the σ-slowed half of that.
	if x := system.Run(pooled).Metrics.TPS; x < 14000 {
		t.Errorf("pooled row at 99 µs of CPU per statement on 2 cores: %.0f/s, want the cores' 14,000/s or more", x)
	}
	d := cfg
	d.Pooler.PoolMode = poolmode.Direct
	if dc := testbedConfig(d, cal, tb); dc.Server.Contention != 0.17 || dc.Server.Coherency != 0.001 {
		t.Errorf("direct row: σ %.3f, κ %.4f; want the fitted 0.17, 0.001", dc.Server.Contention, dc.Server.Coherency)
	}
}

// TestTestbedConfigOrdersTheHandOverAsTheTarget: through poolsim's proxy
// the model hands a released server to a waiter before it relays the
// response (the proxy writes the waiter's query first), through PgBouncer
// after; at a pool of one server with many clients the proxy's order
// leaves the server less idle between statements.
func TestTestbedConfigOrdersTheHandOverAsTheTarget(t *testing.T) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Workload.StmtsPerTxn = 20, 200, 1
	cfg.Pooler.PoolMode, cfg.Pooler.DefaultPoolSize = poolmode.Transaction, 1
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	tb := &Testbed{Cores: 2, ThroughClients: 20, Driver: 20 * time.Microsecond, Server: 40 * time.Microsecond, Pooler: 30 * time.Microsecond}
	cal := Calibration{Hop: 30 * time.Microsecond, Testbed: tb}
	bouncer := testbedConfig(cfg, cal, tb)
	tb.AssignFirst = true
	proxy := testbedConfig(cfg, cal, tb)
	if bouncer.Pooler.AssignFirst || !proxy.Pooler.AssignFirst {
		t.Fatalf("assign first: PgBouncer's model %v, the proxy's %v; want false and true", bouncer.Pooler.AssignFirst, proxy.Pooler.AssignFirst)
	}
	if err := proxy.Validate(); err != nil {
		t.Fatalf("the proxy's model's config: %v", err)
	}
	b, p := system.Run(bouncer).Metrics, system.Run(proxy).Metrics
	if !(p.TPS > b.TPS) {
		t.Errorf("pool of one, 20 clients: the proxy's order %.0f/s, PgBouncer's %.0f/s; want more", p.TPS, b.TPS)
	}
}

// TestCalibratedTestbedAveragesReplications: a CPU-bound row's model of
// a run is the mean of modelReplications replications, the diagnostics
// beside the reported metrics included, and it is the same whichever
// replication ends first.
func TestCalibratedTestbedAveragesReplications(t *testing.T) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Workload.StmtsPerTxn = 20, 100, 1
	cfg.Pooler.DefaultPoolSize = 4
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	tb := &Testbed{Cores: 2, ThroughClients: 20, Driver: 20 * time.Microsecond, Server: 40 * time.Microsecond, Pooler: 24 * time.Microsecond, Latency: 40 * time.Microsecond, Spread: 0.5}
	cal := Calibration{Hop: 30 * time.Microsecond, Testbed: tb}
	cc := testbedConfig(cfg, cal, tb)
	var sum struct{ tps, p50, rq float64 }
	var seen []float64
	for i := range modelReplications {
		c := cc
		c.Seed = system.ReplicationSeed(cc.Seed, i)
		m := runModel(c)
		sum.tps, sum.p50, sum.rq = sum.tps+m.TPS, sum.p50+m.P50Ms, sum.rq+m.RunQueueServerUs
		seen = append(seen, m.P50Ms)
	}
	if slices.Min(seen) == slices.Max(seen) {
		t.Fatalf("every replication's p50 %.4f ms: the seeds should draw different CPU times", seen[0])
	}
	n := float64(modelReplications)
	got := calibratedTestbed(cfg, cal)
	if math.Abs(got.TPS-sum.tps/n) > 1e-9*got.TPS || math.Abs(got.P50Ms-sum.p50/n) > 1e-12 || math.Abs(got.RunQueueServerUs-sum.rq/n) > 1e-9 {
		t.Errorf("model of a run: tps %.3f, p50 %.6f ms, servers' run-queue wait %.4f µs; want the replications' means %.3f, %.6f, %.4f",
			got.TPS, got.P50Ms, got.RunQueueServerUs, sum.tps/n, sum.p50/n, sum.rq/n)
	}
	if again := calibratedTestbed(cfg, cal); !reflect.DeepEqual(again, got) {
		t.Errorf("the same run's model twice: %+v then %+v", got, again)
	}
}
