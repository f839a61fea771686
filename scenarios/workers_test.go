package scenarios

import (
	"errors"
	"strings"
	"testing"
)

// The workers YAML form: at the top level and in a class, swept, and run.
func TestWorkersYAML(t *testing.T) {
	src := `name: rails
seed: 3
workload:
  workers: 12
  arrival_rate: 200/s
  duration: 5s
  warmup: 500ms
  txns_per_request: {dist: uniform, min: 1, max: 3}
  stmts_per_txn: 2
  app: 1ms
  query: {dist: exp, mean: 3ms}
pooler: {mode: transaction, default_pool_size: 8, max_client_conn: 1000}
sweep:
  workload.workers: [4, 12]
  pooler.mode: [session, transaction]
`
	s, err := Parse([]byte(src), "rails.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 4 || points[0].Config.Workload.Workers != 4 || points[3].Config.Workload.Workers != 12 {
		t.Fatalf("points %d, workers %d .. %d; want 4 points from 4 to 12 workers", len(points), points[0].Config.Workload.Workers, points[len(points)-1].Config.Workload.Workers)
	}
	rows := Run(points, 1)
	for i, r := range rows {
		m := r.Metrics
		if m.Outcomes() != m.AttemptedTxns || m.AttemptedTxns == 0 {
			t.Errorf("row %d: attempted %d, outcomes %d", i, m.AttemptedTxns, m.Outcomes())
		}
		if want := 200 * 2.0; m.OfferedTPS != want {
			t.Errorf("row %d: offered %v tps, want %v (200 requests/s of 2 transactions on average)", i, m.OfferedTPS, want)
		}
	}
	if s12, t12 := rows[2].Metrics, rows[3].Metrics; s12.WaitTimeouts != 0 && s12.OKReqs >= t12.OKReqs {
		t.Errorf("12 workers on a session pool of 8 served %d requests, transaction %d", s12.OKReqs, t12.OKReqs)
	}
	if err := s.Set("workload.workers", "6"); err != nil {
		t.Errorf("--set workload.workers=6: %v", err)
	}

	classes := `name: app
workload: {query: 2ms}
pooler: {max_client_conn: 1000}
classes:
  web:
    pool: web
    workload: {workers: 10, arrival_rate: 100/s, duration: 3s, app: 1ms, txns_per_request: 2}
  api:
    pool: api
    workload: {arrival_rate: 50/s, duration: 3s}
pools:
  web: {mode: transaction, size: 5}
  api: {mode: transaction, size: 3}
sweep:
  classes.web.workload.workers: [5, 10]
`
	s, err = Parse([]byte(classes), "app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, err = s.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 || points[0].Config.Classes[0].Workload.Workers != 5 || points[1].Config.Classes[1].Workload.Workers != 0 {
		t.Fatalf("class sweep: %d points, web workers %d, api workers %d", len(points), points[0].Config.Classes[0].Workload.Workers, points[1].Config.Classes[1].Workload.Workers)
	}
	r := Run(points[:1], 1)[0]
	if len(r.Classes) != 2 || r.Classes[0].Metrics.OKReqs == 0 || r.Classes[1].Metrics.OKReqs == 0 {
		t.Errorf("both classes should serve requests: %+v", r.Classes)
	}
}

func TestWorkersYAMLErrors(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"think", "name: x\nworkload:\n  workers: 4\n  arrival_rate: 5/s\n  duration: 1s\n  think: 1ms\n", "x.yaml:6: workload has both workers and think"},
		{"txns per session", "name: x\nworkload:\n  workers: 4\n  arrival_rate: 5/s\n  duration: 1s\n  txns_per_session: 1\n", "x.yaml:6: workload has both workers and txns_per_session"},
		{"requests per session", "name: x\nworkload:\n  workers: 4\n  requests_per_session: 2\n  arrival_rate: 5/s\n  duration: 1s\n", "x.yaml:4: workload has both workers and requests_per_session"},
		{"clients", "name: x\nworkload:\n  workers: 4\n  clients: 2\n", "x.yaml:4: workload has both workers and clients"},
		{"closed", "name: x\nworkload:\n  workers: 4\n", "workload.workers needs workload.arrival_rate"},
		{"class think", "name: x\nclasses:\n  web:\n    workload: {workers: 4, arrival_rate: 5/s, duration: 1s, think: 2ms}\n", "x.yaml:4: classes.web.workload has both workers and think"},
		{"inherited think", "name: x\nworkload: {think: 2ms}\nclasses:\n  web:\n    workload: {workers: 4, arrival_rate: 5/s, duration: 1s}\n", "classes.web.workload.think does not apply with workers"},
		{"app pool", "name: x\nworkload: {workers: 4, arrival_rate: 5/s, duration: 1s}\napp_pool: {mode: queue}\n", "app_pool.mode queue with workload.workers"},
		{"range", "name: x\nworkload: {workers: 2000000, arrival_rate: 5/s, duration: 1s}\n", "workload.workers: must be from 0"},
	} {
		_, err := Parse([]byte(tt.yaml), "x.yaml")
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
}
