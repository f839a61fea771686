package validate

import (
	"math"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// inRunRow is a pooled CPU-bound row's config and a calibration whose
// through loop measured the given CPU per statement.
func inRunRow(driver, pooler, server time.Duration) (system.Config, Calibration) {
	cfg := system.Default()
	cfg.Workload.Clients, cfg.Workload.TxnsPerSession, cfg.Workload.StmtsPerTxn = 20, 200, 1
	cfg.Pooler.DefaultPoolSize = 4
	cfg.Server.MaxConnections = 20
	cfg.Server.SuperuserReserved = 0 // every slot serves the clients
	tb := &Testbed{Cores: 2, ThroughClients: 20, ThroughTPS: 20000, Driver: driver, Server: server, Pooler: pooler, Latency: 40 * time.Microsecond}
	return cfg, Calibration{Hop: 30 * time.Microsecond, Testbed: tb}
}

// TestCalibratedRunTakesTheRunsCPU: a pooled CPU-bound row's calibrated
// model runs the CPU per statement read over the run, not the through
// loop's; the same costs give the same model, dearer ones a slower one,
// and without the run's the loop's model stays.
func TestCalibratedRunTakesTheRunsCPU(t *testing.T) {
	cfg, cal := inRunRow(20*time.Microsecond, 24*time.Microsecond, 40*time.Microsecond)
	tb := cal.Testbed
	a := attempt{cal: cal}
	loop := calibratedRun(cfg, a)
	if b := beforeRun(cfg, a); b.TPS != loop.TPS {
		t.Fatalf("no run's CPU: calibrated %.0f/s, from the loop alone %.0f/s: want the same", loop.TPS, b.TPS)
	}
	tb.Run = RunCPU{Driver: tb.Driver, Pooler: tb.Pooler, Server: tb.Server, OK: true}
	if got := calibratedRun(cfg, a).TPS; got != loop.TPS {
		t.Errorf("the run's CPU equal to the loop's: %.0f/s, want the loop's model %.0f/s", got, loop.TPS)
	}
	tb.Run = RunCPU{Driver: 25 * time.Microsecond, Pooler: 30 * time.Microsecond, Server: 50 * time.Microsecond, OK: true}
	dear := calibratedRun(cfg, a)
	if r := dear.TPS / loop.TPS; r > 0.85 || r < 0.7 {
		t.Errorf("every cost 25 %% dearer in the run: %.0f/s against %.0f/s (×%.2f), want about ×0.8", dear.TPS, loop.TPS, r)
	}
	if b := beforeRun(cfg, a); b.TPS != loop.TPS {
		t.Errorf("the model from the loop alone moved with the run's CPU: %.0f/s, want %.0f/s", b.TPS, loop.TPS)
	}
	if tb.Driver != 20*time.Microsecond || tb.Server != 40*time.Microsecond {
		t.Errorf("the testbed's through-loop costs were overwritten: %+v", *tb)
	}
}

// TestArrangementsAtRunCPU: at a pool-1 row through PgBouncer the two
// pinned arrangements' costs are scaled, process by process, so that the
// run's mix of them costs what the run measured: the run's CPU equal to
// that mix leaves both models as they were, a dearer run slows both.
func TestArrangementsAtRunCPU(t *testing.T) {
	cfg, cal := inRunRow(20*time.Microsecond, 24*time.Microsecond, 40*time.Microsecond)
	cfg.Pooler.DefaultPoolSize = 1
	tb := cal.Testbed
	tb.Together = &Arrangement{TPS: 16000, Driver: 20 * time.Microsecond, Pooler: 20 * time.Microsecond, Server: 36 * time.Microsecond}
	tb.Apart = &Arrangement{Apart: true, TPS: 12000, Driver: 20 * time.Microsecond, Pooler: 30 * time.Microsecond, Server: 44 * time.Microsecond}
	modelArrangements(cfg, cal)
	share := 0.5
	a := attempt{cal: cal, x: Measured{Placement: &Placement{Samples: 10, Shared: share}}}
	before := beforeRun(cfg, a)
	// The run's statements: 16000/28000 of them together.
	wt := 16000.0 / 28000
	mix := func(x, y time.Duration) time.Duration { return time.Duration(wt*float64(x) + (1-wt)*float64(y)) }
	tb.Run = RunCPU{Driver: 20 * time.Microsecond, Pooler: mix(20*time.Microsecond, 30*time.Microsecond), Server: mix(36*time.Microsecond, 44*time.Microsecond), OK: true}
	same := calibratedRun(cfg, a)
	if math.Abs(same.TPS/before.TPS-1) > 0.002 {
		t.Errorf("the run's CPU the arrangements' mix: %.0f/s, want the loops' model %.0f/s", same.TPS, before.TPS)
	}
	tb.Run.Server = tb.Run.Server * 13 / 10
	if dear := calibratedRun(cfg, a); !(dear.TPS < 0.95*before.TPS) {
		t.Errorf("the servers 30 %% dearer in the run: %.0f/s, want well below %.0f/s", dear.TPS, before.TPS)
	}
	if tb.Together.Server != 36*time.Microsecond || tb.Apart.Server != 44*time.Microsecond {
		t.Errorf("the arrangements' measured costs were overwritten: %v, %v", tb.Together.Server, tb.Apart.Server)
	}
}

func TestHeldAtPooler(t *testing.T) {
	// The driver's round trip straight to PostgreSQL was 5.4 ms, the
	// pooler saw the statement hold its server 4.8 ms: the model holds it
	// 4.8 ms in the scenario's shape, and the 0.6 ms left over are the
	// client's, 0.3 ms more on each hop - the client's round trip through
	// the pooler stays query + 2 hops as measured. Logins take the loaded
	// time.
	cfg := system.Default()
	cfg.Workload.Query = sim.Dist{Kind: sim.Lognormal, Mean: 3 * sim.Millisecond, Sigma: 0.4}
	cal := Calibration{QueryMean: 5400 * time.Microsecond, Hop: 40 * time.Microsecond, Hold: 4800 * time.Microsecond, ConnectLoaded: 21 * time.Millisecond}
	cfg.Workload.Query = scaleDist(cfg.Workload.Query, 5.4/3) // calibrated() sets the measured query first
	heldAtPooler(&cfg, cal)
	q := cfg.Workload.Query
	if q.Kind != sim.Lognormal || q.Sigma != 0.4 || q.Mean != 4800*sim.Microsecond {
		t.Errorf("query %+v; want the lognormal of σ 0.4 at mean 4.8 ms", q)
	}
	if cfg.Pooler.Hop != 340*sim.Microsecond || cfg.Server.Connect.Mean != 21*sim.Millisecond {
		t.Errorf("hop %v, connect %v; want 340µs and 21ms", cfg.Pooler.Hop, cfg.Server.Connect.Mean)
	}
	before := cfg
	heldAtPooler(&cfg, Calibration{QueryMean: 5 * time.Millisecond, Hop: 40 * time.Microsecond})
	if cfg.Workload.Query != before.Workload.Query || cfg.Pooler.Hop != before.Pooler.Hop {
		t.Errorf("without a hold measured the model changed: %+v", cfg)
	}
}

func TestHeldInRun(t *testing.T) {
	// The run's own hold and login pace replace the loop's; a run with
	// no account of its requests (a direct or CPU-bound row) keeps the
	// calibration as it was.
	a := attempt{cal: Calibration{Hold: 4400 * time.Microsecond, ConnectLoaded: 19 * time.Millisecond, Connect: 12 * time.Millisecond},
		x: Measured{HoldMs: 5.1, HoldQueries: 720, StartsInRun: 17, StartGapMs: 24.5}}
	cal, ok := heldInRun(a)
	if !ok || cal.Hold != 5100*time.Microsecond || cal.ConnectLoaded != 24500*time.Microsecond || cal.Connect != 12*time.Millisecond {
		t.Errorf("held in run: %v, hold %v, loaded connect %v, connect %v; want true, 5.1ms, 24.5ms, 12ms", ok, cal.Hold, cal.ConnectLoaded, cal.Connect)
	}
	a.x.StartsInRun = 1 // one login: no gap measured, the loop's stays
	if cal, _ := heldInRun(a); cal.ConnectLoaded != 19*time.Millisecond {
		t.Errorf("one login in the run: loaded connect %v, want the loop's 19ms", cal.ConnectLoaded)
	}
	a.x.HoldQueries = 0
	if _, ok := heldInRun(a); ok {
		t.Error("a run without the target's account of its requests took the in-run hold")
	}
	a = attempt{x: Measured{HoldMs: 5.1, HoldQueries: 720}}
	if _, ok := heldInRun(a); ok {
		t.Error("a row without a loop through the target took the in-run hold")
	}
}

// TestCalibratedRunTakesTheRunsOtherWork: the run's other work (this
// process's instruments among it) is the calibrated model's background in
// place of the direct points': a tenth of the two cores busy elsewhere
// slows a row the cores limit, and the through loop's testbed keeps its
// own background.
func TestCalibratedRunTakesTheRunsOtherWork(t *testing.T) {
	cfg, cal := inRunRow(20*time.Microsecond, 24*time.Microsecond, 40*time.Microsecond)
	tb := cal.Testbed
	a := attempt{cal: cal}
	tb.Run = RunCPU{Driver: tb.Driver, Pooler: tb.Pooler, Server: tb.Server, OK: true}
	none := calibratedRun(cfg, a)
	tb.Run.Other, tb.Run.OtherOK = 0.2, true
	busy := calibratedRun(cfg, a)
	if r := busy.TPS / none.TPS; r > 0.95 || r < 0.85 {
		t.Errorf("0.2 of 2 cores busy with other work in the run: %.0f/s against %.0f/s (×%.3f), want about ×0.9", busy.TPS, none.TPS, r)
	}
	if tb.Background != 0 {
		t.Errorf("the testbed's background was overwritten: %v", tb.Background)
	}
	tb.Run.OtherOK = false
	if got := calibratedRun(cfg, a).TPS; got != none.TPS {
		t.Errorf("the run's other work not read: %.0f/s, want %.0f/s", got, none.TPS)
	}
}

// TestOtherCores: the machine's busy cores less the test's processes'
// CPU over the window, never below 0 nor above 90 % of the cores.
func TestOtherCores(t *testing.T) {
	for _, c := range []struct {
		busy       float64
		work, wall time.Duration
		want       float64
	}{
		{1.8, 1700 * time.Millisecond, time.Second, 0.1},
		{1.8, 1900 * time.Millisecond, time.Second, 0}, // clocks read apart
		{1.9, 0, time.Second, 1.8},                     // bounded
		{1.0, time.Second, 0, 0},                       // no window
		{1.5, 2400 * time.Millisecond, 2 * time.Second, 0.3},
	} {
		if got := otherCores(c.busy, c.work, c.wall, 2); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("otherCores(%v, %v, %v, 2) = %v, want %v", c.busy, c.work, c.wall, got, c.want)
		}
	}
}
