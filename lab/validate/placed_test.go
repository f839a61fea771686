package validate

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
)

// TestPlacementWeight: a run placed as its loop is the free model alone;
// one with fewer servers on the pooler's core leans to apart, down to all
// apart at none; one with more leans to together, up to all of it.
func TestPlacementWeight(t *testing.T) {
	for _, c := range []struct {
		loop, run, free float64
		aff             testbed.Affinity
	}{
		{0.4, 0.4, 1, testbed.Free},
		{0.4, 0.2, 0.5, testbed.Apart},
		{0.4, 0, 0, testbed.Apart},
		{0.4, 0.7, 0.5, testbed.Together},
		{0.4, 1, 0, testbed.Together},
		{0, 0.3, 0.7, testbed.Together},
		{1, 1, 1, testbed.Free},
		{1, 0.5, 0.5, testbed.Apart},
		{0, 0, 1, testbed.Free},
		{0.4, -0.1, 0, testbed.Apart},
		{0.4, 1.2, 0, testbed.Together},
	} {
		w, aff := placementWeight(c.loop, c.run)
		if math.Abs(w-c.free) > 1e-12 || aff != c.aff {
			t.Errorf("loop %.2f, run %.2f: free weight %.3f %v, want %.3f %v", c.loop, c.run, w, aff, c.free, c.aff)
		}
	}
}

// placedRow is a pool-2 CPU-bound row through PgBouncer whose loop had
// 40 % of its servers on PgBouncer's core.
func placedRow() (system.Config, Calibration) {
	cfg, cal := inRunRow(24*time.Microsecond, 33*time.Microsecond, 47*time.Microsecond)
	cfg.Workload.Clients = 50
	cfg.Pooler.DefaultPoolSize = 2
	cfg.Server.Cores = 2
	cal.Testbed.ThroughPlacement = &Placement{Samples: 90, Shared: 0.4}
	cal.Testbed.Scan = true
	tb := cal.Testbed
	tb.Run = RunCPU{Driver: tb.Driver, Pooler: tb.Pooler, Server: tb.Server, OK: true}
	return cfg, cal
}

// TestPlacedRunMixesByTheRunsPlacement: a pool-2 run through PgBouncer
// placed as its loop gets the free model; one whose servers stayed off
// PgBouncer's core, the apart model; halfway, between the two; a row
// without the run's placement, or at a larger pool, the free model.
func TestPlacedRunMixesByTheRunsPlacement(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two cores or more")
	}
	cfg, cal := placedRow()
	free := calibrated(cfg, cal)
	at := func(share float64) ModelRun {
		return calibratedRun(cfg, attempt{cal: cal, x: Measured{Placement: &Placement{Samples: 90, Shared: share}}})
	}
	if got := at(0.4).TPS; got != free.TPS {
		t.Errorf("run placed as its loop: %.0f/s, want the free model's %.0f/s", got, free.TPS)
	}
	apart := affinityModel(cfg, cal, testbed.Apart).Model
	if apart.TPS == free.TPS {
		t.Fatalf("the apart model equals the free one (%.0f/s): the test shows nothing", free.TPS)
	}
	if got := at(0).TPS; math.Abs(got/apart.TPS-1) > 1e-9 {
		t.Errorf("run with no server on PgBouncer's core: %.0f/s, want the apart model's %.0f/s", got, apart.TPS)
	}
	if got, want := at(0.2).TPS, (free.TPS+apart.TPS)/2; math.Abs(got/want-1) > 1e-9 {
		t.Errorf("run halfway to apart: %.0f/s, want the two models' mean %.0f/s", got, want)
	}
	together := affinityModel(cfg, cal, testbed.Together).Model
	if got := at(1).TPS; math.Abs(got/together.TPS-1) > 1e-9 {
		t.Errorf("run with every server on PgBouncer's core: %.0f/s, want the together model's %.0f/s", got, together.TPS)
	}
	if got := calibratedRun(cfg, attempt{cal: cal}).TPS; got != free.TPS {
		t.Errorf("run without its placement: %.0f/s, want the free model's %.0f/s", got, free.TPS)
	}
	cfg.Pooler.DefaultPoolSize = 8
	if got, want := calibratedRun(cfg, attempt{cal: cal, x: Measured{Placement: &Placement{Samples: 90, Shared: 0}}}).TPS, calibrated(cfg, cal).TPS; got != want {
		t.Errorf("pool 8, run apart: %.0f/s, want the free model's %.0f/s (larger pools are not arrangements)", got, want)
	}
}
