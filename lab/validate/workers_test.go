package validate

import (
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/system"
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
	throughBoth(t, workersScenario, "workers.yaml", 3*time.Minute, func(t *testing.T, rep *Report) {
		if len(rep.Rows) != 2 {
			t.Fatalf("%d rows, want 2", len(rep.Rows))
		}
		countsPass(t, rep.Rows[0], "ok_txns", "conn_refused", "ok_reqs")
		r := rep.Rows[1]
		if r.Model.WaitTimeouts != 2 {
			t.Errorf("%s: the model has %d timeouts, want the 2 workers beyond the pool once each", r.Title(), r.Model.WaitTimeouts)
		}
		countsPass(t, r, "ok_txns", "conn_refused", "ok_reqs", "wait_timeouts")
	})
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
