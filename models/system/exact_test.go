package system

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// runLimit runs c (its warm-up resolved) with every recorder keeping
// limit samples exactly (0: the default).
func runLimit(t *testing.T, c Config, limit int) (Result, *model) {
	t.Helper()
	c, atLimit, err := Resolved(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	m, s := simulateWith(c, options{exactLimit: limit})
	r := m.result(s)
	if atLimit {
		r.Metrics.WarmupAtLimit = 1
	}
	return r, m
}

// TestPercentilesPastExactLimit runs systems whose samples fit the exact
// limit both ways: exactly, and with recorders that switch to their
// histograms after 300 samples. Every percentile must be within
// sim.HistogramError of the exact one, every mean within a nanosecond
// (a window's sum is a difference past the limit), every other figure
// the same.
func TestPercentilesPastExactLimit(t *testing.T) {
	closed := speedConfig()
	closed.Workload.TxnsPerSession = 40
	closed.Workload.Query = sim.ExpDist(300 * sim.Microsecond)
	closed.Workload.Think = sim.ExpDist(800 * sim.Microsecond)

	open := openPool(80, 10, sim.ExpDist(100*sim.Millisecond), 120*sim.Second)
	open.Workload.WarmupAuto = true

	classes := Default()
	classes.Pooler.PoolMode = poolmode.Transaction
	classes.Pooler.Hop = 50 * sim.Microsecond
	classes.Classes = []Class{
		{Name: "web", Workload: Workload{ArrivalRate: 200, Duration: 30 * sim.Second, TxnsPerSession: 2, StmtsPerTxn: 3,
			Query: sim.ExpDist(2 * sim.Millisecond), Think: sim.ExpDist(sim.Millisecond), TimeWait: 60 * sim.Second}},
		{Name: "report", Workload: Workload{ArrivalRate: 5, Duration: 30 * sim.Second, TxnsPerSession: 1, StmtsPerTxn: 2,
			Query: sim.ExpDist(40 * sim.Millisecond), TimeWait: 60 * sim.Second}},
	}
	if err := classes.Validate(); err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]Config{"closed": closed, "open": open, "classes": classes} {
		t.Run(name, func(t *testing.T) {
			exact, me := runLimit(t, c, 0)
			approx, ma := runLimit(t, c, 300)
			if !me.results.lat.Exact() || ma.results.lat.Exact() {
				t.Fatalf("exact run's latency recorder exact %v, limited run's %v", me.results.lat.Exact(), ma.results.lat.Exact())
			}
			if exact.Metrics.OKTxns < 3000 {
				t.Fatalf("only %d transactions: too few to pass a limit of 300 by far", exact.Metrics.OKTxns)
			}
			compareApprox(t, "", &exact.Metrics, &approx.Metrics)
			if len(exact.Classes) != len(approx.Classes) {
				t.Fatalf("%d and %d classes", len(exact.Classes), len(approx.Classes))
			}
			for i := range exact.Classes {
				compareApprox(t, exact.Classes[i].Name+": ", &exact.Classes[i].Metrics, &approx.Classes[i].Metrics)
			}
		})
	}
}

func compareApprox(t *testing.T, prefix string, exact, approx *Metrics) {
	t.Helper()
	percentiles := 0
	for _, f := range Fields() {
		e, a := f.Get(exact), f.Get(approx)
		switch {
		case strings.Contains(f.Name, "p50") || strings.Contains(f.Name, "p95") || strings.Contains(f.Name, "p99"):
			if e != 0 {
				percentiles++
			}
			if math.Abs(a-e) > sim.HistogramError*math.Abs(e) {
				t.Errorf("%s%s = %v past the limit, exact %v: off %.4f%%", prefix, f.Name, a, e, 100*math.Abs(a-e)/math.Abs(e))
			}
		case strings.Contains(f.Name, "mean_ms"):
			if math.Abs(a-e) > 1e-6 {
				t.Errorf("%s%s = %v past the limit, exact %v", prefix, f.Name, a, e)
			}
		case a != e:
			t.Errorf("%s%s = %v past the limit, exact %v: should not change", prefix, f.Name, a, e)
		}
	}
	if percentiles < 8 {
		t.Errorf("%sonly %d nonzero percentiles compared", prefix, percentiles)
	}
}

// TestAssumptionExactLimit: a run that may pass the exact limit says so in
// its assumptions, with the declared error; one that cannot says nothing
// (its output is as it always was).
func TestAssumptionExactLimit(t *testing.T) {
	has := func(c Config) string {
		for _, a := range Assumptions(c) {
			if strings.HasPrefix(a, "percentiles are exact up to") {
				return a
			}
		}
		return ""
	}
	small := speedConfig() // 600,000 statements
	if a := has(small); a != "" {
		t.Errorf("a run of 600,000 statements declares %q", a)
	}
	big := speedConfig()
	big.Workload.TxnsPerSession = 5000
	a := has(big)
	for _, want := range []string{"1,000,000", "6,000,000", "0.098%"} {
		if !strings.Contains(a, want) {
			t.Errorf("assumption %q does not say %s", a, want)
		}
	}
	if grouped(-1234567) != "-1,234,567" || grouped(999) != "999" || grouped(int64(1000)) != "1,000" {
		t.Errorf("grouped: %s %s %s", grouped(-1234567), grouped(999), grouped(int64(1000)))
	}
}
