package plot

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden SVGs in testdata/")

// poolRows is a pool-size sweep of two modes with replications: latency
// falls by decades to a floor, throughput rises to the offered load, the
// smallest pools time clients out.
func poolRows() []scenarios.Row {
	var out []scenarios.Row
	for _, mode := range []string{"session", "transaction"} {
		for i, n := range []int{1, 2, 5, 10, 20, 50} {
			var reps system.Replicated
			for r := range 3 {
				k := 1 + float64(r)/20
				m := system.Metrics{
					OKTxns: 1000, TPSSteady: min(500, 120*float64(n)) * k, P50Ms: 5 + 2000/float64(n*n)*k,
					P99Ms: 20 + 8000/float64(n*n)*k, WaitP99Ms: 4000 / float64(n*n) * k,
					ServerBusy: min(0.9, 4/float64(n)), ServerLinked: min(1, 6/float64(n)),
				}
				if i == 0 {
					m.WaitTimeouts = int64(10 + r)
				}
				if mode == "session" {
					m.P99Ms *= 1.2
				}
				reps = append(reps, m)
			}
			c := system.Default()
			c.Pooler.PoolMode, _ = poolmode.Parse(mode)
			out = append(out, scenarios.Row{
				Params: []scenarios.Param{{Key: "pooler.default_pool_size", Value: strconv.Itoa(n)}, {Key: "pooler.mode", Value: mode}},
				Config: c, Result: system.Result{Metrics: reps.Mean()}, Reps: reps,
			})
		}
	}
	return out
}

// appRows is a client sweep with an application pool, one run each.
func appRows() []scenarios.Row {
	var out []scenarios.Row
	for _, clients := range []int{10, 50, 200} {
		c := system.Default()
		c.AppPool.Mode = system.QueuePool
		c.Workload.Clients = clients
		m := system.Metrics{OKTxns: 100, TPSSteady: float64(clients) * 3, P50Ms: 2, P99Ms: float64(clients) / 10,
			DecAppWaitP99Ms: float64(clients) / 20, DecCPUQueueP99Ms: float64(clients) / 40, AppTimeouts: int64(clients / 100)}
		out = append(out, scenarios.Row{Params: []scenarios.Param{{Key: "workload.clients", Value: strconv.Itoa(clients)}},
			Config: c, Result: system.Result{Metrics: m}, Reps: system.Replicated{m}})
	}
	return out
}

// One golden SVG per kind of plot: a pool-size sweep with replications
// (bands), an SLO line and the configuration chosen; a client sweep with
// an application pool; the same pool-size sweep drawn as advise draws it
// (its title names the answer).
func TestPlotGolden(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Input
	}{
		{"pool-size-slo", Input{Title: "pool sweep", Rows: poolRows(), SLOP99Ms: 50, Chosen: FirstMeeting(poolRows(), 50), ChosenLabel: "first to meet the SLO"}},
		{"clients-app-pool", Input{Title: "clients", Rows: appRows()}},
		{"advise", Input{Title: "poolsim advise x (seed 1): transaction, pool 10", Rows: poolRows(), SLOP99Ms: 50, Chosen: []int{9},
			LogKeys: map[string]bool{"pooler.default_pool_size": true}}},
	} {
		c, err := Draw(tt.in, true)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := c.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", tt.name+".svg")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test ./scenarios/plot -update writes it; look at it first)", err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s differs from %s: look at both (go test ./scenarios/plot -run Golden -update rewrites it)", tt.name, golden)
		}
	}
	// The pool sweep rings the smallest pool of each mode that meets the
	// SLO without timeouts: 5 for transaction (p99 340 ms at 2), 5 for
	// session too.
	if got := FirstMeeting(poolRows(), 400); len(got) != 2 {
		t.Errorf("FirstMeeting = %v, want one row per mode", got)
	}
}
