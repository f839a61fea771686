package system

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/sim"
)

// busyOpen is a small open system with waits: M/M/3 at ρ = 0.8 for 20 s.
func busyOpen(seed uint64) Config {
	c := openPool(24, 3, sim.ExpDist(100*sim.Millisecond), 20*sim.Second)
	c.Seed = seed
	c.Workload.Warmup = 2 * sim.Second
	return c
}

func reps(c Config, n int) Replicated {
	out := make(Replicated, n)
	for i := range out {
		x := c
		x.Seed = ReplicationSeed(c.Seed, i)
		out[i] = Run(x).Metrics
	}
	return out
}

func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 2*sim.HistogramError*math.Max(math.Abs(a), math.Abs(b))+1e-6
}

// Every metric named as a percentile is one, and a run's distributions
// read back its own percentiles (within the histogram's error): the table
// of which distribution each percentile comes from matches measure.
func TestPercentileFieldsAndTheirDistributions(t *testing.T) {
	for _, f := range Fields() {
		named := strings.Contains(f.Name, "p50") || strings.Contains(f.Name, "p95") || strings.Contains(f.Name, "p99")
		if named != f.Percentile() {
			t.Errorf("%s: Percentile() %v", f.Name, f.Percentile())
		}
	}
	for _, c := range []Config{busyOpen(1), constantClasses()} {
		c.Workload.Think = sim.ExpDist(sim.Millisecond)
		c.Server.Connect = sim.ExpDist(2 * sim.Millisecond)
		m := Run(c).Metrics
		if m.Dists.Empty() {
			t.Fatal("a run without its distributions")
		}
		for _, f := range Fields() {
			if !f.Percentile() {
				continue
			}
			got := ms(m.Dists.hist(f.dist, false).Percentile(f.pct))
			if want := f.Get(&m); !closeTo(got, want) {
				t.Errorf("%s: %v from its distribution, %v measured", f.Name, got, want)
			}
		}
	}
}

// Over replications a percentile is that of every replication's window
// samples together - here checked against the runs' own latency samples
// merged - not the mean of their percentiles; other metrics are means.
func TestStatPoolsPercentiles(t *testing.T) {
	c := busyOpen(3)
	var all sim.Samples
	var rs Replicated
	for i := range 8 {
		x := c
		x.Seed = ReplicationSeed(c.Seed, i)
		r, lat := RunLatencies(x)
		all.Merge(lat)
		rs = append(rs, r.Metrics)
	}
	p99, _ := FieldByName("p99_ms")
	est, half := rs.Stat(p99)
	if want := ms(all.Percentile(99)); !closeTo(est, want) {
		t.Errorf("pooled p99 %v, the merged samples' %v", est, want)
	}
	mean, _, _ := sim.MeanCI(rs.Values(p99))
	if half <= 0 || est == mean {
		t.Errorf("p99 %v ± %v: want a jackknife interval, and not the mean of the runs' p99s (%v)", est, half, mean)
	}
	tps, _ := FieldByName("tps")
	m, h := rs.Stat(tps)
	wm, wh, _ := sim.MeanCI(rs.Values(tps))
	if m != wm || h != wh {
		t.Errorf("tps %v ± %v, want the mean %v ± %v", m, h, wm, wh)
	}
	if got := rs.Mean().P99Ms; got != est {
		t.Errorf("Mean().P99Ms %v, want the pooled %v", got, est)
	}
	if got := rs.RunMean().P99Ms; got != mean {
		t.Errorf("RunMean().P99Ms %v, want the mean of the runs' p99s %v", got, mean)
	}
	// One replication is its own figures; without distributions (read
	// back from a report) a percentile falls back to the mean.
	if e, h := rs[:1].Stat(p99); e != rs[0].P99Ms || h != 0 {
		t.Errorf("one replication: %v ± %v, want its own %v ± 0", e, h, rs[0].P99Ms)
	}
	bare := append(Replicated(nil), rs...)
	for i := range bare {
		bare[i].Dists = Dists{}
	}
	if e, h := bare.Stat(p99); e != mean {
		t.Errorf("without distributions: %v ± %v, want the mean %v", e, h, mean)
	}
}

// Paired differences of a pooled percentile: a configuration against
// itself is 0 ± 0; against a close one run on the same seeds the paired
// interval is narrower than the two intervals apart; k scales b.
func TestPairedPercentile(t *testing.T) {
	a := reps(busyOpen(5), 10)
	bc := busyOpen(5)
	bc.Pooler.DefaultPoolSize, bc.Server.MaxConnections = 4, 4
	b := reps(bc, 10)
	f, _ := FieldByName("wait_p99_ms")
	if d, h := a.Paired(a, f, 1); d != 0 || h != 0 {
		t.Errorf("a against itself: %v ± %v", d, h)
	}
	ea, ha := a.Stat(f)
	eb, hb := b.Stat(f)
	d, h := a.Paired(b, f, 1)
	if !closeTo(d, ea-eb) || h <= 0 || h >= ha+hb {
		t.Errorf("pool 3 − pool 4: %v ± %v; apart %v ± %v and %v ± %v", d, h, ea, ha, eb, hb)
	}
	if d0, h0 := a.Paired(b, f, 0); !closeTo(d0, ea) || !closeTo(h0, ha) {
		t.Errorf("k = 0: %v ± %v, want a's own %v ± %v", d0, h0, ea, ha)
	}
	// A mean keeps PairedCI over a[i] − k·b[i].
	tps, _ := FieldByName("tps")
	xb := b.Values(tps)
	for i := range xb {
		xb[i] *= 0.5
	}
	wm, wh, _ := sim.PairedCI(a.Values(tps), xb)
	if m, h := a.Paired(b, tps, 0.5); m != wm || h != wh {
		t.Errorf("paired tps %v ± %v, want PairedCI's %v ± %v", m, h, wm, wh)
	}
	t.Logf("wait p99: pool 3 %.1f ± %.1f, pool 4 %.1f ± %.1f, paired difference %.1f ± %.1f ms", ea, ha, eb, hb, d, h)
}

// Distributions survive a shard file: text and back, every histogram
// checked; garbage is refused.
func TestDistsText(t *testing.T) {
	m := Run(busyOpen(2)).Metrics
	b, err := json.Marshal(m.Dists)
	if err != nil {
		t.Fatal(err)
	}
	var back Dists
	if err := json.Unmarshal(b, &back); err != nil || back != m.Dists {
		t.Fatalf("round trip: %v, equal %v", err, back == m.Dists)
	}
	for _, bad := range []string{`"AAAA"`, `"!"`, `"Ag"`} {
		var d Dists
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s read as distributions", bad)
		}
	}
}

// The second half of an open run's window is a window of its own: its
// distributions count the samples recorded from the middle on; a closed
// run has none.
func TestLateHalf(t *testing.T) {
	c := busyOpen(4)
	m := Run(c).Metrics
	lat := m.Dists.hist(distLat, false).Count()
	late := m.Dists.hist(distLat, true).Count()
	if late < lat/3 || late > 2*lat/3 {
		t.Errorf("second half holds %d of the window's %d latencies, want about half", late, lat)
	}
	closed := Run(constantClasses()).Metrics
	if closed.Dists.hist(distLat, true).Count() != 0 {
		t.Error("a closed run has a second half")
	}
}
