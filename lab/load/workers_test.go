package load

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/proxy/pooler"
	"github.com/poolsim/poolsim/sim"
)

// arrivalsOf counts the arrivals of w on the model's stream name.
func arrivalsOf(w system.Workload, seed uint64, name string) int64 {
	n, _ := arrivalsAndTail(w, seed, name)
	return n
}

// arrivalsAndTail is arrivalsOf and the quiet time from the last arrival
// to the end of arrivals (the workload's duration).
func arrivalsAndTail(w system.Workload, seed uint64, name string) (int64, time.Duration) {
	r := sim.NewRand(seed, name)
	var n int64
	last := time.Duration(0)
	for at := time.Duration(0); ; n++ {
		at += sim.FromSeconds(r.ExpFloat64() / w.ArrivalRate).Duration()
		if at >= w.Duration.Duration() {
			return n, w.Duration.Duration() - last
		}
		last = at
	}
}

// TestWorkersFollowTheModel: three workers straight to PostgreSQL run the
// model's arrivals and the model's draw of transactions per request, on
// one connection each, with the app pauses inside the requests.
func TestWorkersFollowTheModel(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 10, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := system.Default()
	cfg.Seed = 5
	cfg.Pooler.PoolMode = poolmode.Direct
	cfg.Workload = system.Workload{Workers: 3, ArrivalRate: 60, Duration: 600 * sim.Millisecond, TxnsPerSession: 1, StmtsPerTxn: 2,
		Query: sim.ConstDist(sim.Millisecond), App: sim.ConstDist(sim.Millisecond), AppSet: true, Statements: 1}
	cfg.Workload.TxnsPerRequest, _ = sim.UniformInt(1, 3)
	model := system.Run(cfg).Metrics
	res, err := Run(ctx, Spec{DSN: c.UserDSN(), Workload: cfg.Workload, Seed: cfg.Seed, Blocks: true,
		Statement: Statement{Kind: KindSleep}, ArrivalStream: "arrivals"})
	if err != nil {
		t.Fatal(err)
	}
	if res.OKReqs != model.OKReqs || res.OKTxns != model.OKTxns || res.FailedReqs != 0 || res.Failed != 0 || model.OKReqs != arrivalsOf(cfg.Workload, 5, "arrivals") {
		t.Fatalf("live: %d requests, %d transactions, %d failed (%v); model: %d, %d; want the model's, every arrival served",
			res.OKReqs, res.OKTxns, res.FailedReqs, res.Errors, model.OKReqs, model.OKTxns)
	}
	if res.Sessions != 3 || res.Clients != 3 {
		t.Errorf("%d sessions of %d workers, want one connection each of 3", res.Sessions, res.Clients)
	}
	// App between a transaction's two statements and between a
	// request's transactions.
	if want := 2*res.OKTxns - res.OKReqs; int64(res.App.Count()) != want || res.Think.Count() != 0 {
		t.Errorf("%d app pauses, %d thinks; want %d and none", res.App.Count(), res.Think.Count(), want)
	}
	if res.ReqLatency.Count() != int(res.OKReqs) || res.ReqLatency.Percentile(50) < res.Latency.Percentile(50) {
		t.Errorf("%d request latencies, p50 %v (transactions' %v): one per request, from its arrival", res.ReqLatency.Count(), res.ReqLatency.Percentile(50), res.Latency.Percentile(50))
	}
}

// TestWorkersRefusedReconnect: two max_connections slots for three
// workers. The one refused before time zero is free without a
// connection; it tries to connect for every request it takes, is refused
// and fails the request, while the two others keep theirs until arrivals
// are over (the workload's duration, which the seed puts well after the
// last arrival, so the refused worker's last attempt is over before a slot
// frees).
func TestWorkersRefusedReconnect(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 2, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := system.Workload{Workers: 3, ArrivalRate: 40, Duration: sim.Second, TxnsPerSession: 1, StmtsPerTxn: 1,
		Query: sim.ConstDist(sim.Millisecond)}
	res, err := Run(ctx, Spec{DSN: c.UserDSN(), Workload: w, Seed: 1879, Statement: Statement{Kind: KindSleep}, ArrivalStream: "arrivals"})
	if err != nil {
		t.Fatal(err)
	}
	arrivals, tail := arrivalsAndTail(w, 1879, "arrivals")
	if tail < 200*time.Millisecond {
		t.Fatalf("the seed leaves %v after the last arrival; the test wants a quiet end", tail)
	}
	if res.OKReqs+res.FailedReqs != arrivals || res.FailedReqs == 0 || res.Refused != res.FailedReqs+1 || res.Failed != 0 {
		t.Errorf("%d ok + %d failed requests of %d arrivals, %d refusals, %d other failures (%v); want every arrival, the refused worker's requests failed, one refusal more (before time zero)",
			res.OKReqs, res.FailedReqs, arrivals, res.Refused, res.Failed, res.Errors)
	}
	if res.Sessions != 2 {
		t.Errorf("%d connections ran statements, want the 2 that got in", res.Sessions)
	}
}

// startSessionProxy serves poolsim's proxy in session mode with a pool of
// one and a 400 ms query_wait_timeout.
func startSessionProxy(t *testing.T, c *pgcluster.Cluster) string {
	t.Helper()
	cfg := pooler.DefaultConfig()
	cfg.Upstream = c.UserDSN()
	cfg.PoolMode = poolmode.Session
	cfg.DefaultPoolSize = 1
	cfg.QueryWaitTimeout = 400 * time.Millisecond
	cfg.ShutdownTimeout = time.Second
	px, err := pooler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- px.Serve(ctx, ln) }() // owner: the test's cleanup
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", pgcluster.UserName, pgcluster.UserPassword, px.Addr(), pgcluster.UserDatabase)
}

// TestWorkersSessionPoolStarves: two workers on a session pool of one
// server. The first to run a statement keeps the server; every request
// the other takes waits for it and is disconnected by query_wait_timeout,
// and it connects again for its next one. At the end the holder leaves
// and a request still waiting is served.
func TestWorkersSessionPoolStarves(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 10, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := startSessionProxy(t, c)
	w := system.Workload{Workers: 2, ArrivalRate: 10, Duration: 2 * sim.Second, TxnsPerSession: 1, StmtsPerTxn: 1,
		Query: sim.ConstDist(sim.Millisecond)}
	res, err := Run(ctx, Spec{DSN: dsn, Workload: w, Seed: 4, Statement: Statement{Kind: KindSleep}, ArrivalStream: "arrivals"})
	if err != nil {
		t.Fatal(err)
	}
	arrivals := arrivalsOf(w, 4, "arrivals")
	if res.WaitTimeouts < 2 || res.FailedReqs != res.WaitTimeouts || res.OKReqs+res.FailedReqs != arrivals || res.Failed != 0 {
		t.Errorf("%d timeouts, %d failed and %d ok requests of %d arrivals, %d other failures (%v); want at least 2 timeouts, one failed request each, every arrival accounted",
			res.WaitTimeouts, res.FailedReqs, res.OKReqs, arrivals, res.Failed, res.Errors)
	}
	// The starved worker's connections: one per request it took (each
	// timed out but maybe the last), each sending its statement.
	if res.Sessions < 1+res.WaitTimeouts || res.Sessions > 2+res.WaitTimeouts {
		t.Errorf("%d connections ran statements for %d timeouts: want the holder's one and one per starved request", res.Sessions, res.WaitTimeouts)
	}
}

// TestWorkersEndWithContext: a run cancelled in the middle returns its
// error with every worker ended (goleak checks the goroutines).
func TestWorkersEndWithContext(t *testing.T) {
	c := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 10, SuperuserReservedConnections: pgcluster.ReserveNone})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := system.Workload{Workers: 4, ArrivalRate: 200, Duration: 30 * sim.Second, TxnsPerSession: 1, StmtsPerTxn: 1,
		Query: sim.ConstDist(5 * sim.Millisecond)}
	started := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	go func() { // owner: this test; ends a moment after the run starts
		<-started
		time.Sleep(300 * time.Millisecond)
		stop()
	}()
	res, err := Run(runCtx, Spec{DSN: c.UserDSN(), Workload: w, Seed: 1, Statement: Statement{Kind: KindSleep}, Started: func() { close(started) }})
	if err == nil {
		t.Fatal("a cancelled run returned no error")
	}
	if res == nil || res.OKReqs == 0 {
		t.Errorf("the run's result before the cancel: %+v", res)
	}
}
