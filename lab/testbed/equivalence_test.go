package testbed

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/system"
)

var update = flag.Bool("update", false, "rewrite testdata/equivalence's goldens with this machine's results")

// equivalenceCase is a case of testdata/equivalence: a system and the
// machine it runs on.
type equivalenceCase struct {
	Config  system.Config `json:"config"`
	Machine Machine       `json:"machine"`
}

// equivalenceResult is a case's golden: the run's Result (its JSON) and
// the machine's stats of it.
type equivalenceResult struct {
	Result system.Result `json:"result"`
	Diag   Stats         `json:"diag"`
}

// TestEquivalence holds the machine to the runs the model made before the
// scheduler moved out of models/system behind its CPU port (de68268,
// Config.Testbed): each case of testdata/equivalence - the shared and the
// per-core scheduler, pinning, wake-ups and their curve, the backends'
// tail, preemption, the driver's threads and scan, the pooler on the
// cores, a speed timeline, a background, start-ups and long jobs on the
// cores, open and multi-class workloads - must give the golden's Result
// and stats byte for byte. The goldens are that model's output; -update
// rewrites them, for a reviewed change of the machine's model only.
func TestEquivalence(t *testing.T) {
	files, err := filepath.Glob("testdata/equivalence/*.config.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".config.json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c equivalenceCase
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			cfg := c.Config
			cfg.Machine = c.Machine
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r := system.Run(cfg)
			got, err := json.MarshalIndent(equivalenceResult{r, StatsOf(r)}, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".config.json") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the run differs from its golden (go test -run TestEquivalence -update rewrites it):\n%s", name, firstDiff(got, want))
			}
		})
	}
}

// firstDiff is the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "got  " + g[i] + "\nwant " + w[i]
		}
	}
	return fmt.Sprintf("%d lines, the golden %d", len(g), len(w))
}
