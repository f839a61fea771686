package scenarios

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

func node(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return doc.Content[0]
}

func TestDistForms(t *testing.T) {
	ln99, _ := sim.LognormalP99(2*sim.Millisecond, 20*sim.Millisecond)
	lnMed, _ := sim.LognormalMedianP99(2*sim.Millisecond, 25*sim.Millisecond)
	for _, c := range []struct {
		in   string
		want sim.Dist
	}{
		{"3ms", sim.ConstDist(3 * sim.Millisecond)},
		{"{dist: exp, mean: 1ms}", sim.ExpDist(sim.Millisecond)},
		{"{dist: uniform, min: 1ms, max: 2ms}", sim.UniformDist(sim.Millisecond, 2*sim.Millisecond)},
		{"{dist: lognormal, mean: 2ms, p99: 20ms}", ln99},
		{"{dist: lognormal, mean: 2ms, sigma: 0.5}", sim.LognormalDist(2*sim.Millisecond, 0.5)},
		{"{dist: lognormal, p50: 2ms, p99: 25ms}", lnMed},
		{"{dist: lognormal, p50: 2ms, sigma: 1}", sim.LognormalMedianSigma(2*sim.Millisecond, 1)},
	} {
		var got sim.Dist
		if err := distInto(&got, node(t, c.in)); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestEmpiricalForms(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	samples := write("samples.txt", "# pg_sleep times\nduration\n1ms\n2ms\n3ms\n6ms\n")
	bare := write("bare.csv", "1\n2\n3\n6\n")
	hist := write("hist.csv", "le,count\n1,50\n2,30\n10,20\n")
	prom := write("prom.tsv", "1ms\t50\n2ms\t80\n10ms\t100\n+Inf\t100\n")
	for _, c := range []struct {
		in             string
		mean, p50, p99 sim.Time
	}{
		{"{dist: empirical, samples: [1ms, 2ms, 3ms, 6ms]}", 3 * sim.Millisecond, 2 * sim.Millisecond, 6 * sim.Millisecond},
		{"{dist: empirical, samples: [1, 2, 3, 6], unit: ms}", 3 * sim.Millisecond, 2 * sim.Millisecond, 6 * sim.Millisecond},
		{"{dist: empirical, file: " + samples + "}", 3 * sim.Millisecond, 2 * sim.Millisecond, 6 * sim.Millisecond},
		{"{dist: empirical, file: " + bare + ", unit: ms}", 3 * sim.Millisecond, 2 * sim.Millisecond, 6 * sim.Millisecond},
		// 50 in (0,1], 30 in (1,2], 20 in (2,10]: mean .25+.45+1.2 = 1.9ms.
		{"{dist: empirical, buckets: [[1ms, 50], [2ms, 30], [10ms, 20]]}", 1900 * sim.Microsecond, sim.Millisecond, 9600 * sim.Microsecond},
		{"{dist: empirical, file: " + hist + ", unit: ms}", 1900 * sim.Microsecond, sim.Millisecond, 9600 * sim.Microsecond},
		{"{dist: empirical, file: " + prom + ", cumulative: true}", 1900 * sim.Microsecond, sim.Millisecond, 9600 * sim.Microsecond},
		// A lower bound moves the first bucket: 50 in (0.5,1].
		{"{dist: empirical, buckets: [[1ms, 50], [2ms, 30], [10ms, 20]], min: 500us}", 2025 * sim.Microsecond, sim.Millisecond, 9600 * sim.Microsecond},
	} {
		var d sim.Dist
		if err := distInto(&d, node(t, c.in)); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if d.Kind != sim.Empirical || d.MeanValue() != c.mean || d.Quantile(0.5) != c.p50 || d.Quantile(0.99) != c.p99 {
			t.Errorf("%s = %v (mean %v), want mean %v p50 %v p99 %v", c.in, d, d.MeanValue(), c.mean, c.p50, c.p99)
		}
	}
}

func TestDistErrors(t *testing.T) {
	dir := t.TempDir()
	three := filepath.Join(dir, "three.csv")
	os.WriteFile(three, []byte("1ms,2,3\n"), 0o644)
	empty := filepath.Join(dir, "empty.csv")
	os.WriteFile(empty, []byte("# nothing\n"), 0o644)
	for _, c := range []struct{ in, want string }{
		{"{dist: lognormal, p50: 5ms, p99: 2ms}", "p99 (2ms) must be above p50 (5ms)"},
		{"{dist: lognormal, p50: 5ms, p99: 5ms}", "must be above p50"},
		{"{dist: lognormal, mean: 5ms, p50: 4ms}", "one of mean or p50 and one of p99 or sigma"},
		{"{dist: lognormal, p99: 5ms, sigma: 1}", "one of mean or p50"},
		{"{dist: lognormal, mean: 5ms, p95: 9ms}", `unknown key "p95" in a distribution: want dist, mean, p50, p99, sigma, min, max, samples, buckets, file, unit or cumulative`},
		{"{dist: exp, p50: 5ms}", `"p50" does not apply to dist exp`},
		{"{dist: normal, mean: 1ms}", "want const, exp, uniform, lognormal or empirical"},
		{"{dist: empirical}", "exactly one of samples, buckets, file"},
		{"{dist: empirical, samples: [1ms], buckets: [[1ms, 1]]}", "exactly one of samples, buckets, file"},
		{"{dist: empirical, samples: []}", "samples must be a non-empty list"},
		{"{dist: empirical, samples: [1.5]}", `"1.5" has no unit`},
		{"{dist: empirical, samples: [-1ms]}", "must not be negative"},
		{"{dist: empirical, samples: [1ms], unit: h}", "unit: want ns, us, ms or s"},
		{"{dist: empirical, samples: [1ms], min: 1ms}", "min applies to buckets"},
		{"{dist: empirical, buckets: [[1ms, 5], [1ms, 5]]}", "must be above the previous bucket's 1ms"},
		{"{dist: empirical, buckets: [[1ms, 5], [+Inf, 3]]}", "has no upper bound (+Inf) and holds 3 values"},
		{"{dist: empirical, buckets: [[1ms, 5], [2ms, 3]], cumulative: true}", "cumulative count 3 is below the previous bucket's 5"},
		{"{dist: empirical, buckets: [[1ms, 0.5]]}", "whole number of values"},
		{"{dist: empirical, buckets: [1ms, 5]}", "want a pair [upper bound, count]"},
		{"{dist: empirical, buckets: [[1ms, 0]]}", "every bucket count is 0"},
		{"{dist: empirical, file: " + three + "}", "3 columns"},
		{"{dist: empirical, file: " + empty + "}", "no values"},
		{"{dist: empirical, file: " + filepath.Join(dir, "missing.csv") + "}", "no such file"},
		{"{dist: empirical, file: " + dir + "}", "not a regular file"},
	} {
		var d sim.Dist
		err := distInto(&d, node(t, c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.in, err, c.want)
		}
	}
}

func TestEmpiricalFileRelativeToScenario(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "data", "times.csv"), []byte("2ms\n4ms\n"), 0o644)
	scen := filepath.Join(dir, "app.yaml")
	os.WriteFile(scen, []byte("name: app\nworkload:\n  clients: 2\n  query: {dist: empirical, file: data/times.csv}\n"), 0o644)
	// From another working directory, the path is still the scenario's.
	t.Chdir(t.TempDir())
	s, err := Load(scen)
	if err != nil {
		t.Fatal(err)
	}
	if q := s.Base.Workload.Query; q.Kind != sim.Empirical || q.MeanValue() != 3*sim.Millisecond {
		t.Errorf("query = %v", q)
	}
	// --set reads paths relative to the working directory.
	if err := s.Set("workload.think", "{dist: empirical, file: data/times.csv}"); err == nil {
		t.Error("--set found data/times.csv relative to the scenario, want relative to the working directory")
	}
	if err := s.Set("workload.think", "{dist: empirical, file: "+filepath.Join(dir, "data", "times.csv")+"}"); err != nil {
		t.Error(err)
	}
	// A built-in scenario has no folder.
	_, err = Parse([]byte("name: b\nworkload: {query: {dist: empirical, file: x.csv}}\n"), "builtin:b")
	if err == nil || !strings.Contains(err.Error(), "built-in scenario cannot read files") {
		t.Errorf("built-in with file: %v", err)
	}
}

func TestIntDistForms(t *testing.T) {
	dir := t.TempDir()
	pmf := filepath.Join(dir, "txns.csv")
	os.WriteFile(pmf, []byte("txns,requests\n1,60\n2,30\n3,10\n"), 0o644)
	for _, c := range []struct {
		in   string
		mean float64
		p1   float64 // probability of 1
	}{
		{"2", 2, 0},
		{"{dist: const, value: 1}", 1, 1},
		{"{dist: uniform, min: 1, max: 3}", 2, 1. / 3},
		{"{dist: empirical, samples: [1, 1, 2, 4]}", 2, .5},
		{"{dist: empirical, values: [1, 2, 3], weights: [60, 30, 10]}", 1.5, .6},
		{"{dist: empirical, file: " + pmf + "}", 1.5, .6},
	} {
		var d sim.IntDist
		if err := intDistInto(&d, node(t, c.in), 1, 100); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if math.Abs(d.MeanValue()-c.mean) > 1e-12 || math.Abs(d.Prob(1)-c.p1) > 1e-12 {
			t.Errorf("%s = %v: mean %v P(1) %v, want %v, %v", c.in, d, d.MeanValue(), d.Prob(1), c.mean, c.p1)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"0", "from 1 to 100"},
		{"{dist: uniform, min: 3, max: 1}", "max (1) is below min (3)"},
		{"{dist: uniform, min: 0, max: 3}", "min: must be from 1 to 100"},
		{"{dist: empirical, samples: [1, 200]}", "must be from 1 to 100, got 200"},
		{"{dist: empirical, values: [1, 2], weights: [1]}", "2 values but 1 weights"},
		{"{dist: empirical, values: [1, 2]}", "values and weights go together"},
		{"{dist: empirical, samples: [1.5]}", "whole number"},
		{"{dist: poisson, mean: 2}", "unknown key \"mean\" in an integer distribution: want dist, value, min, max, samples, values, weights or file"},
		{"{dist: poisson}", "want const, uniform or empirical"},
		{"[1, 2]", "want a whole number or a mapping"},
	} {
		var d sim.IntDist
		err := intDistInto(&d, node(t, c.in), 1, 100)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.in, err, c.want)
		}
	}
}

// TestLognormalPercentilesInAScenario runs a one-server scenario whose
// statements are {dist: lognormal, p50: 2ms, p99: 25ms}: with one client
// and no think, every transaction is one statement, so the simulated
// latency percentiles are the asked ones.
func TestLognormalPercentilesInAScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("200000 simulated transactions")
	}
	s, err := Parse([]byte(`
name: lognormal-p50
workload:
  clients: 1
  txns_per_session: 200000
  query: {dist: lognormal, p50: 2ms, p99: 25ms}
pooler: {mode: direct}
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	points, _ := s.Points()
	m := Run(points, 0)[0].Metrics
	for _, c := range []struct{ got, want float64 }{{m.P50Ms, 2}, {m.P99Ms, 25}} {
		if math.Abs(c.got-c.want)/c.want > 0.03 {
			t.Errorf("simulated percentile %.3f ms, asked %.0f ms", c.got, c.want)
		}
	}
}
