package scenarios

import (
	"bytes"
	"testing"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds arbitrary text to the loader: it must return a scenario
// or an error, never panic, and every scenario it accepts must have valid
// points. Small accepted scenarios are also simulated.
func FuzzParse(f *testing.F) {
	for _, b := range Builtins() {
		data, _ := BuiltinYAML(b.Name)
		f.Add(data)
	}
	for _, s := range []string{
		"name: x\nworkload: {clients: 3, query: {dist: lognormal, mean: 1ms, sigma: 0.5}}\n",
		"name: x\nworkload: {arrival_rate: 5/s, duration: 2s}\npooler: {mode: statement, query_wait_timeout: 1ms}\n",
		"name: x\nworkload: {clients: 2}\nsweep: {pooler.mode: [direct, session], server.connect: [1ms, {dist: exp, mean: 1ms}]}\n",
		"name: &a x\nworkload: *a\n",
		"name: x\nworkload: {clients: 2, query: {dist: lognormal, p50: 2ms, p99: 25ms}, think: {dist: empirical, samples: [1ms, 3ms]}}\n",
		"name: x\nworkload: {clients: 2, query: {dist: empirical, buckets: [[1ms, 3], [4ms, 1]]}}\n",
		"name: x\nworkload: {clients: 2, query: {dist: empirical, file: missing.csv}}\n",
		"name: x\nworkload:\n  clients: 1e3\n",
		"name: x\nworkload: {workers: 3, arrival_rate: 20/s, duration: 2s, txns_per_request: {dist: uniform, min: 1, max: 2}, app: 1ms}\npooler: {mode: session, default_pool_size: 2, query_wait_timeout: 300ms}\n",
		"name: x\nworkload: {query: 1ms}\nclasses:\n  web: {workload: {workers: 2, arrival_rate: 5/s, duration: 1s}}\n  api: {workload: {arrival_rate: 5/s, duration: 1s}}\nsweep: {classes.web.workload.workers: [0, 1, 4]}\n",
		"", "---", "name: [", "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		points, err := s.Points()
		if err != nil {
			t.Fatalf("Parse accepted a scenario whose points fail: %v", err)
		}
		for _, p := range points {
			if err := p.Config.Validate(); err != nil {
				t.Fatalf("accepted an invalid point: %v", err)
			}
			w := p.Config.Workload
			small := !w.Open() && w.Clients*w.TxnsPerSession*w.StmtsPerTxn <= 2000 ||
				w.Persistent() && w.Workers <= 1000 && w.ArrivalRate*w.Duration.Seconds()*w.MeanTxnsPerSession()*float64(w.StmtsPerTxn) <= 2000
			if small {
				system.Run(p.Config)
			}
		}
	})
}

// FuzzDist feeds arbitrary YAML to the duration and integer distribution
// readers: an error or a distribution, never a panic, and an accepted
// distribution draws values in range.
func FuzzDist(f *testing.F) {
	for _, s := range []string{
		"3ms", "{dist: lognormal, p50: 2ms, p99: 25ms}", "{dist: lognormal, mean: 1ms, sigma: 5}",
		"{dist: empirical, samples: [1ms, 2ms, 0]}", "{dist: empirical, samples: [1, 2], unit: us}",
		"{dist: empirical, buckets: [[1ms, 5], [2ms, 0], [+Inf, 0]], min: 100us}",
		"{dist: empirical, buckets: [[1, 5], [2, 9]], unit: s, cumulative: true}",
		"{dist: uniform, min: 1, max: 3}", "{dist: empirical, values: [1, 2], weights: [0.5, 2]}",
		"{dist: empirical, samples: [1, 1, 7]}", "{dist: empirical, file: /dev/zero}", "[", "{dist: [x]}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var doc yaml.Node
		if yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) != 1 {
			return
		}
		n := doc.Content[0]
		r := sim.NewRand(1, "fuzz")
		var d sim.Dist
		if distInto(&d, n) == nil {
			for i := 0; i < 20; i++ {
				if x := d.Sample(r); x < 0 {
					t.Fatalf("%v drew %v", d, x)
				}
			}
			_ = d.String()
		}
		var id sim.IntDist
		if intDistInto(&id, n, 1, 1000) == nil {
			for i := 0; i < 20; i++ {
				if x := id.Sample(r); x < 1 || x > 1000 {
					t.Fatalf("%v drew %v, outside 1..1000", id, x)
				}
			}
			_ = id.String()
		}
	})
}

// FuzzParseColumns feeds arbitrary bytes to the data-file reader: rows of
// one or two fields, or an error; never a panic.
func FuzzParseColumns(f *testing.F) {
	for _, s := range []string{"1ms\n2ms\n", "le,count\n1,5\n+Inf,5\n", "# c\n\n1;2\n3\t4\n", "a\n", "1,2,3\n", "x\n1\n1,2\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, where, err := parseColumns(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		if len(rows) == 0 || len(rows) != len(where) {
			t.Fatalf("%d rows, %d places", len(rows), len(where))
		}
		for _, r := range rows {
			if len(r) != len(rows[0]) || len(r) < 1 || len(r) > 2 {
				t.Fatalf("row %q among rows of %d fields", r, len(rows[0]))
			}
		}
	})
}
