package scenarios

import (
	"testing"

	"github.com/poolsim/poolsim/models/system"
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
		"name: x\nworkload:\n  clients: 1e3\n",
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
			small := !w.Open() && w.Clients*w.TxnsPerSession*w.StmtsPerTxn <= 2000
			if small {
				system.Run(p.Config)
			}
		}
	})
}
