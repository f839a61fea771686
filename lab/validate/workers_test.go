package validate

import (
	"context"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// workersScenario is a few-second workers scenario: 4 workers at 20
// requests/s through a pool of 2, in transaction and in session mode. In
// session mode the 2 workers beyond the pool time out once each (their
// first request, at 2 s; their second waits until the holders leave when
// arrivals stop, at 3 s).
const workersScenario = `
name: workers-test
seed: 2
workload:
  workers: 4
  arrival_rate: 20/s
  duration: 3s
  txns_per_request: {dist: uniform, min: 1, max: 2}
  stmts_per_txn: 2
  query: 2ms
  app: 1ms
pooler:
  hop: 50us
  max_client_conn: 100
  default_pool_size: 2
  query_wait_timeout: 2s
  max_prepared_statements: 0
server:
  max_connections: 8
  superuser_reserved_connections: 0 # every slot serves the workers and the calibration, as in the live built-ins
validate:
  statement: sleep
sweep:
  pooler.mode: [transaction, session]
`

// TestWorkersLive validates the workers scenario against both targets:
// the counts - transactions, requests, refusals and the session pool's
// two timeouts - equal the model's, and no worker failed otherwise.
func TestWorkersLive(t *testing.T) {
	needPostgres(t)
	sc, err := scenarios.Parse([]byte(workersScenario), "workers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{TargetProxy, TargetPgBouncer} {
		t.Run(target, func(t *testing.T) {
			if target == TargetPgBouncer {
				needBouncer(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Options{Scenario: sc, Target: target, Quick: true, Command: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != 2 {
				t.Fatalf("%d rows, want 2", len(rep.Rows))
			}
			for i, r := range rep.Rows {
				if r.Measured.Failed != 0 {
					t.Errorf("%s: %d failures: %v", r.Title(), r.Measured.Failed, r.Measured.Errors)
				}
				cells := map[string]Cell{}
				for _, c := range r.Cells {
					cells[c.Metric] = c
				}
				counts := []string{"ok_txns", "conn_refused", "ok_reqs"}
				if i == 1 {
					counts = append(counts, "wait_timeouts")
					if r.Model.WaitTimeouts != 2 {
						t.Errorf("%s: the model has %d timeouts, want the 2 workers beyond the pool once each", r.Title(), r.Model.WaitTimeouts)
					}
				}
				for _, m := range counts {
					c, ok := cells[m]
					if !ok {
						t.Errorf("%s: no %s cell", r.Title(), m)
						continue
					}
					if !c.Pass {
						t.Errorf("%s: %s model %v, measured %v: %s", r.Title(), m, c.Model, c.Measured, c.Why)
					}
				}
			}
		})
	}
}

// TestCalibratedPauses: with requests and workload.app the calibration
// times the app pause (as the loop's think) and the model gets it as its
// app, the think the same overshoot; otherwise the think as measured.
func TestCalibratedPauses(t *testing.T) {
	c := system.Default()
	c.Workload = system.Workload{Workers: 3, ArrivalRate: 5, Duration: sim.Second, TxnsPerSession: 1, StmtsPerTxn: 2,
		App: sim.ConstDist(2 * sim.Millisecond), AppSet: true}
	if !appCalibrated(c) || appAsThink(c).Workload.Think != c.Workload.App || arrivalStream(c) != "arrivals" {
		t.Fatalf("a workers workload with app: calibrate its app pause, run the model's arrivals")
	}
	cal := Calibration{App: true, Think: sim.ConstDist(2100 * sim.Microsecond), ThinkMean: 2100 * time.Microsecond, ThinkNominal: 2 * time.Millisecond}
	w := c.Workload
	calibratedPauses(&w, cal)
	if w.App.Mean != 2100*sim.Microsecond || w.Think.MeanValue() != 0 {
		t.Errorf("app %v, think %v; want the measured 2.1ms and no think", w.App, w.Think)
	}
	w = system.Workload{Clients: 2, TxnsPerSession: 1, StmtsPerTxn: 1, Think: sim.ConstDist(sim.Millisecond)}
	calibratedPauses(&w, Calibration{Think: sim.ConstDist(1200 * sim.Microsecond)})
	if w.Think.Mean != 1200*sim.Microsecond || appCalibrated(system.Config{Workload: w}) || arrivalStream(system.Config{Workload: w}) != "" {
		t.Errorf("a closed workload: think %v, want the measured 1.2ms; its own arrivals none", w.Think)
	}
}
