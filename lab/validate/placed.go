package validate

import (
	"runtime"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
)

// A pool of two servers through PgBouncer is arranged too, though less
// firmly than a pool of one (arrangement.go): the kernel may keep both
// servers off PgBouncer's core for most of a run, or put one or both
// with it, and a run differs from its through loop right before it by
// where they ran. In the committed pgbench -S curves (idle-scan/,
// hand-over/: 18 runs at pool 2) the calibrated model's TPS error rose
// with the run's share of servers on PgBouncer's core less the loop's
// (correlation 0.49, 0.2 points of error per point of share): a run at
// 5 % against its loop's 36 % was 10.6 % faster than the model fitted to
// the loop. The free model's placement (its idle balancing fitted to the
// loop's busy cores, fitBalance) is the loop's arrangement; a run whose
// servers sat on PgBouncer's core less often than the loop's was that
// much nearer the apart arrangement (PgBouncer's thread on one core, the
// servers on the others: system.Apart), and more often, nearer the
// together one (system.Together). So such a run's calibrated model mixes
// the free model with the pinned one it leaned to, by the run's own
// sampled placement (a kernel counter, as the pool-1 mix takes): at the
// loop's share the free model alone, at none all apart, at all of it all
// together, linear between - each at the run's CPU per statement, with
// the run's transactions drawn from each in proportion to time × rate
// (mixArrangements). Larger pools are not arrangements: their servers
// spread over the cores, and a share a few points off the loop's is
// balance, not a different machine (pinning all of them to one core
// would need more than the core).

// mixesPlacement reports whether a run's calibrated model mixes the free
// model with a pinned one by its placement (placedRun): a CPU-bound
// pooled row at a pool of two servers up to the cores whose through loop
// and run both sampled where the servers ran - through PgBouncer, whose
// one thread the sampler follows (through the proxy nothing is sampled).
func mixesPlacement(c system.Config, tb *Testbed, run *Placement) bool {
	n := c.Pooler.DefaultPoolSize
	// A testbed tb is a CPU-bound row's: wakesCores but for the statement.
	return pooledOnCores(c) && n >= 2 && n <= runtime.NumCPU() &&
		tb != nil && tb.ThroughPlacement != nil && tb.ThroughPlacement.Samples > 0 && run != nil && run.Samples > 0
}

// placementWeight is how a run at share runShare of its servers on the
// pooler's core mixes its models, its loop at loopShare: the weight of
// the free model against the pinned one (apart below the loop's share,
// together above), 1 where the run was placed as the loop or the loop
// sat at the end the run leans to.
func placementWeight(loopShare, runShare float64) (free float64, aff testbed.Affinity) {
	loopShare, runShare = min(1, max(0, loopShare)), min(1, max(0, runShare))
	switch {
	case runShare < loopShare:
		return runShare / loopShare, testbed.Apart
	case runShare > loopShare && loopShare < 1:
		return (1 - runShare) / (1 - loopShare), testbed.Together
	}
	return 1, testbed.Free
}

// placedRun is a run's calibrated model mixed by its placement: cal is
// the row's calibration with the run's CPU per statement.
func placedRun(cfg system.Config, cal Calibration, loopShare, runShare float64) ModelRun {
	w, aff := placementWeight(loopShare, runShare)
	if aff == testbed.Free {
		return calibrated(cfg, cal)
	}
	free, pinned := affinityModel(cfg, cal, testbed.Free), affinityModel(cfg, cal, aff)
	// mixArrangements weighs its first model by the share of time given.
	return mixArrangements(free, pinned, w)
}

// affinityModel is the row's calibrated model with the pooler's thread
// and the servers placed by aff (pin), its latencies kept for mixing.
func affinityModel(cfg system.Config, cal Calibration, aff testbed.Affinity) *Arrangement {
	cc := testbedConfig(cfg, cal, cal.Testbed)
	pin(&cc, cal.Testbed, aff)
	a := &Arrangement{Apart: aff == testbed.Apart}
	a.Model, a.lat = runForMix(cc)
	return a
}
