package scenarios

import (
	"testing"

	"github.com/poolsim/poolsim/models/system"
)

func runBuiltin(t *testing.T, name string) []Row {
	t.Helper()
	s, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	return Run(points, 0)
}

func param(r Row, key string) string {
	for _, p := range r.Params {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

// TestPoolSweepHasTheSeed000Shape checks the seed-000 curve: throughput
// peaks at a small pool (10 for the point lookup, 5 for the heavy
// aggregate) and is lower at 150 (seed: -15% and -39%); past the peak the
// acquire p99 falls while the total p50 rises, and the server-side CPU
// queueing grows.
func TestPoolSweepHasTheSeed000Shape(t *testing.T) {
	rows := runBuiltin(t, "pool-sweep")
	tests := []struct {
		variant  string
		peak     string
		dropLo   float64 // X(150)/X(peak) - 1, bounds
		dropHi   float64
		seedPeak float64
	}{
		{"point-lookup", "10", -0.20, -0.10, 3250.7},
		{"heavy-aggregate", "5", -0.45, -0.33, 1801.5},
	}
	for _, tt := range tests {
		var best Row
		byPool := map[string]Row{}
		for _, r := range rows {
			if param(r, VariantKey) != tt.variant {
				continue
			}
			byPool[param(r, "app_pool.size")] = r
			if r.Metrics.TPS > best.Metrics.TPS {
				best = r
			}
		}
		if got := param(best, "app_pool.size"); got != tt.peak {
			t.Errorf("%s: throughput peaks at pool %s, the seed at %s", tt.variant, got, tt.peak)
		}
		if x := best.Metrics.TPS; x < 0.95*tt.seedPeak || x > 1.05*tt.seedPeak {
			t.Errorf("%s: peak %.0f tps, the seed %.1f (want within 5%%)", tt.variant, x, tt.seedPeak)
		}
		last := byPool["150"].Metrics
		drop := last.TPS/best.Metrics.TPS - 1
		if drop < tt.dropLo || drop > tt.dropHi {
			t.Errorf("%s: X(150) is %+.0f%% of the peak, want from %.0f%% to %.0f%%", tt.variant, 100*drop, 100*tt.dropLo, 100*tt.dropHi)
		}
		peak := best.Metrics
		if !(last.AppWaitP99Ms < peak.AppWaitP99Ms && last.P50Ms > peak.P50Ms && last.DecCPUQueueP99Ms > 5*peak.DecCPUQueueP99Ms) {
			t.Errorf("%s: from the peak to 150, acquire p99 %.1f -> %.1f ms (want falling), p50 %.1f -> %.1f ms (want rising), CPU queue p99 %.1f -> %.1f ms (want growing)",
				tt.variant, peak.AppWaitP99Ms, last.AppWaitP99Ms, peak.P50Ms, last.P50Ms, peak.DecCPUQueueP99Ms, last.DecCPUQueueP99Ms)
		}
	}
}

// TestPoolExhaustionMatchesSeed003: 45 succeed and 5 fail with the pool of
// 3; with no pool all 50 succeed at 1 s plus the connection cost.
func TestPoolExhaustionMatchesSeed003(t *testing.T) {
	for _, r := range runBuiltin(t, "pool-exhaustion") {
		m := r.Metrics
		switch param(r, "app_pool.mode") {
		case "queue":
			if m.OKTxns != 45 || m.AppTimeouts != 5 {
				t.Errorf("queue pool: %d ok, %d pool exhausted; the seed measured 45 and 5", m.OKTxns, m.AppTimeouts)
			}
		case "null":
			if m.OKTxns != 50 || m.MeanMs < 1000 || m.MeanMs > 1080 || m.TimeWaitEnd != 50 {
				t.Errorf("null pool: %d ok, mean %.0f ms, %d in TIME_WAIT; the seed measured 50 at 1.04 s", m.OKTxns, m.MeanMs, m.TimeWaitEnd)
			}
		}
	}
}

// TestNoPoolMatchesSeed003: pool 1,250 req/s vs no pool 714 req/s, and one
// socket in TIME_WAIT per request without a pool (the seed saw 503).
func TestNoPoolMatchesSeed003(t *testing.T) {
	for _, r := range runBuiltin(t, "no-pool") {
		m := r.Metrics
		want := map[string]float64{"queue": 1250, "null": 714}[param(r, "app_pool.mode")]
		if m.TPS < 0.95*want || m.TPS > 1.05*want {
			t.Errorf("%s: %.0f req/s, the seed %.0f (want within 5%%)", param(r, "app_pool.mode"), m.TPS, want)
		}
		if param(r, "app_pool.mode") == "null" && m.TimeWaitEnd != 500 {
			t.Errorf("null pool: %d sockets in TIME_WAIT after 500 requests, want 500", m.TimeWaitEnd)
		}
	}
}

// TestReuseportFleetHasTheSeed002Shape: the single process saturates near
// 86.6k and sags to 76.9k; the fleet of 16 reaches about 4x; at 8 clients
// the single process is faster; cancels land on the wrong process 15 times
// in 16 without peering.
func TestReuseportFleetHasTheSeed002Shape(t *testing.T) {
	tps := map[string]float64{}
	for _, r := range runBuiltin(t, "reuseport-fleet") {
		key := param(r, "workload.clients") + "/" + param(r, "pooler.processes")
		tps[key] = r.Metrics.TPS
		lost := float64(r.Metrics.CancelsLost) / 1000
		if p := param(r, "pooler.processes"); p == "1" && lost != 0 || p == "16" && (lost < 0.9 || lost > 0.97) {
			t.Errorf("%s: %.3f of cancels lost, want 0 for one process and about 15/16 for 16", key, lost)
		}
	}
	within := func(key string, want, tol float64) {
		if got := tps[key]; got < want*(1-tol) || got > want*(1+tol) {
			t.Errorf("%s: %.0f tps, the seed %.0f (tolerance %.0f%%)", key, got, want, 100*tol)
		}
	}
	within("64/1", 86570, 0.03)
	within("256/1", 76893, 0.03)
	within("256/16", 336469, 0.05)
	within("128/16", 320547, 0.05)
	if tps["256/1"] >= tps["64/1"] {
		t.Errorf("single process: %.0f tps at 256 clients, not below %.0f at 64 (no sag)", tps["256/1"], tps["64/1"])
	}
	if r := tps["256/16"] / tps["256/1"]; r < 3.5 || r > 5 {
		t.Errorf("fleet / single at 256 clients = %.2f, the seed about 4.4", r)
	}
	if tps["8/1"] <= tps["8/16"] {
		t.Errorf("at 8 clients the single process (%.0f) should beat the fleet (%.0f)", tps["8/1"], tps["8/16"])
	}
}

// TestFleetBudgets: without divided budgets the fleet's pools add up past
// max_connections, which the run reports, and PostgreSQL refuses logins.
func TestFleetBudgets(t *testing.T) {
	s, err := Builtin("reuseport-fleet")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"pooler.budget", "per_process"}, {"workload.clients", "256"}, {"pooler.processes", "16"}, {"workload.txns_per_session", "50"}, {"server.max_connections", "100"}, {"server.superuser_reserved_connections", "0"}} {
		if err := s.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	points, _ := s.Points()
	m := Run(points, 1)[0].Metrics
	if m.ServerBudget != 16*100 || m.BudgetOver != 16*100-100 || m.LoginsRefused == 0 || m.ServerConns != 100 {
		t.Errorf("per-process budgets: server budget %d, over by %d, %d logins refused, %d server connections; want 1600, 1500, some, 100",
			m.ServerBudget, m.BudgetOver, m.LoginsRefused, m.ServerConns)
	}
	if sum := m.Outcomes(); sum != m.AttemptedTxns {
		t.Errorf("conservation: %d != %d", sum, m.AttemptedTxns)
	}
	if err := s.Set("pooler.peering", "true"); err != nil {
		t.Fatal(err)
	}
	points, _ = s.Points()
	if m := Run(points, 1)[0].Metrics; m.CancelsLost != 0 || m.CancelsForwarded < 900 {
		t.Errorf("with peering: %d lost, %d forwarded; want 0 and about 15/16 of 1000", m.CancelsLost, m.CancelsForwarded)
	}
}

// TestPreparedStatements: the cache's hit rate collapses when it is
// smaller than the working set and the throughput gain when it fits ties
// to seed 000 (22% less time a statement, so up to 1/0.78 = 1.28x on a
// CPU-bound server); without the cache, prepared statements fail.
func TestPreparedStatements(t *testing.T) {
	m := map[string]system.Metrics{}
	for _, r := range runBuiltin(t, "prepared-statements") {
		m[param(r, VariantKey)] = r.Metrics
	}
	base, small, fits := m["parse-every-time"], m["cache-10"], m["cache-200"]
	if small.PreparedHitRate > 0.5 || fits.PreparedHitRate < 0.9 {
		t.Errorf("hit rate: cache of 10 %.2f (want below 0.5), cache of 200 %.2f (want above 0.9)", small.PreparedHitRate, fits.PreparedHitRate)
	}
	if gain := fits.TPS / base.TPS; gain < 1.18 || gain > 1.30 {
		t.Errorf("cache of 200 vs parsing every time: %.3fx throughput, want 1.18-1.30x (seed 000: 22%% less per statement)", gain)
	}
	if fits.ServerParsesPerS > 0.1*base.ServerParsesPerS {
		t.Errorf("server parses: %.0f/s with the cache vs %.0f/s without; want a tenth or less", fits.ServerParsesPerS, base.ServerParsesPerS)
	}
	if nc := m["jdbc-default-no-cache"]; nc.PreparedErrorTxns == 0 || nc.Outcomes() != nc.AttemptedTxns {
		t.Errorf("no cache: %d transactions failed on a missing prepared statement (want some), outcomes %d of %d", nc.PreparedErrorTxns, nc.Outcomes(), nc.AttemptedTxns)
	}
	if j := m["jdbc-default-cache-200"]; j.ServerParsesPerS < 5*fits.ServerParsesPerS {
		t.Errorf("prepareThreshold=5: %.0f parses/s vs %.0f with threshold 1; want many more (each connection parses 4 times first)", j.ServerParsesPerS, fits.ServerParsesPerS)
	}
}
