package system

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/queueing"
	"github.com/poolsim/poolsim/sim"
)

// workersCfg is n workers serving Poisson requests at rate for d, one
// transaction of stmts statements each, through mode with a pool of n, no
// hop, no timeout and a fixed warm-up of a tenth of d.
func workersCfg(mode poolmode.Mode, n int, rate float64, d sim.Time, query sim.Dist, stmts int) Config {
	c := Default()
	c.Workload = Workload{Workers: n, ArrivalRate: rate, Duration: d, TxnsPerSession: 1, StmtsPerTxn: stmts,
		Query: query, TimeWait: 60 * sim.Second, Statements: 1, Warmup: d / 10}
	c.Pooler.PoolMode = mode
	c.Pooler.DefaultPoolSize = n
	c.Pooler.MaxClientConn = 10_000
	c.Pooler.QueryWaitTimeout = 0
	c.Server.MaxConnections = n + 10
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	return c
}

// traced runs c with the workers' takes recorded.
func traced(t *testing.T, c Config) (*model, Metrics) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m, s := simulateWith(c, options{trace: true})
	return m, m.result(s).Metrics
}

// With workers never all busy and a pool that never waits, a request's
// latency is its service exactly: 2 transactions of 2 statements of 10 ms
// with 1 ms of app between statements and between the transactions.
func TestWorkersIdleLatencyIsService(t *testing.T) {
	for _, mode := range []poolmode.Mode{poolmode.Direct, poolmode.Transaction} {
		c := workersCfg(mode, 200, 50, 100*sim.Second, sim.ConstDist(10*sim.Millisecond), 2)
		c.Workload.TxnsPerRequest = sim.ConstInt(2)
		c.Workload.App, c.Workload.AppSet = sim.ConstDist(sim.Millisecond), true
		m := Run(c).Metrics
		const req, txn = 2*(2*10+1) + 1, 2*10 + 1
		if m.ReqP50Ms != req || m.ReqP99Ms != req || m.P50Ms != txn || m.P99Ms != txn {
			t.Errorf("%v: request p50/p99 %v/%v ms, transaction %v/%v; want %v and %v exactly", mode, m.ReqP50Ms, m.ReqP99Ms, m.P50Ms, m.P99Ms, req, txn)
		}
		if m.AppWaitW != 0 || m.AppWaitP99Ms != 0 || m.WaitP99Ms != 0 {
			t.Errorf("%v: app queue W %v, p99 %v ms, pooler wait p99 %v ms; want nothing waiting", mode, m.AppWaitW, m.AppWaitP99Ms, m.WaitP99Ms)
		}
		within(t, "app queue λ (every request passes through it)", m.AppWaitLambda, 50, 0.03)
		within(t, "offered tps", m.OfferedTPS, 100, 1e-12)
		if m.ConnRefused != 0 || m.Sessions != 200 || m.ConnsOpened != 200 {
			t.Errorf("%v: %d refused, %d sessions, %d connections; want 0 and one each for the 200 workers", mode, m.ConnRefused, m.Sessions, m.ConnsOpened)
		}
		checkConservation(t, m)
		if m.UnfinishedTxn != 0 {
			t.Errorf("%v: %d transactions unfinished: the workers finish the queue before they leave", mode, m.UnfinishedTxn)
		}
	}
}

// N workers on a transaction pool of N servers, one exponential statement
// per request, no hop and no app time: the application queue is M/M/N.
// c = 10, λ = 80/s, S = 100 ms: Erlang C gives P(wait) = 0.40918 and
// Wq = 20.459 ms; the wait's p99 is ln(P(wait)/0.01)/(cμ − λ) = 185.58 ms
// (over 8 seeds of this run it ranged 176.5-197.7 ms: a p99 of waits
// that come in busy periods is noisy). It is the very queue an open
// workload of the same arrivals forms at a pool of N servers (TestErlangC):
// the same requests, drawn alike, wait exactly as long.
func TestWorkersErlangC(t *testing.T) {
	const n, lambda, s = 10, 80.0, 0.1
	c := workersCfg(poolmode.Transaction, n, lambda, 10_000*sim.Second, sim.ExpDist(100*sim.Millisecond), 1)
	m := Run(c).Metrics
	pWait, wq, ok := queueing.ErlangC(n, lambda, s)
	if !ok {
		t.Fatal("unstable")
	}
	p99 := math.Log(pWait/0.01) / (n/s - lambda)
	within(t, "application queue's mean wait (s)", m.AppWaitW, wq, 0.03)
	within(t, "application queue's wait p99 (ms)", m.AppWaitP99Ms, 1000*p99, 0.07)
	within(t, "request mean latency (ms)", m.ReqMeanMs, 1000*(wq+s), 0.02)
	within(t, "app_wait_lambda (1/s)", m.AppWaitLambda, lambda, 0.01)
	if l := m.AppWaitLambda * m.AppWaitW; math.Abs(l-m.AppWaitL) > 0.01*m.AppWaitL {
		t.Errorf("Little's law on the application queue: L = %.6g, λW = %.6g", m.AppWaitL, l)
	}
	if m.WaitP99Ms != 0 {
		t.Errorf("pooler wait p99 %v ms: a pool of N servers never makes a worker wait", m.WaitP99Ms)
	}
	checkConservation(t, m)
	o := openPool(lambda, n, sim.ExpDist(100*sim.Millisecond), 10_000*sim.Second)
	o.Workload.WarmupAuto, o.Workload.Warmup = false, c.Workload.Warmup
	p := Run(o).Metrics
	if m.AppWaitW != p.WaitW || m.AppWaitP99Ms != p.WaitP99Ms || m.ReqP99Ms != p.P99Ms {
		t.Errorf("workers' queue: W %v s, p99 %v ms, request p99 %v ms; the pool's queue of the same arrivals: %v, %v, %v - want them equal",
			m.AppWaitW, m.AppWaitP99Ms, m.ReqP99Ms, p.WaitW, p.WaitP99Ms, p.P99Ms)
	}
}

// A session pool smaller than the workers starves exactly workers − pool
// of them: each holds its connection and so, once it has run a
// statement, its server; the rest wait for a server every time they take
// a request and time out. A transaction pool of the same size carries the
// load.
func TestWorkersSessionStarves(t *testing.T) {
	const workers, pool = 12, 8
	const d = 60 * sim.Second
	const timeout = 2 * time.Second
	c := workersCfg(poolmode.Session, workers, 20, d, sim.ConstDist(10*sim.Millisecond), 1)
	c.Pooler.DefaultPoolSize = pool
	c.Pooler.QueryWaitTimeout = timeout
	c.Pooler.TimeoutCheck = 0
	mdl, m := traced(t, c)
	starved := 0
	for u := range mdl.users {
		if mdl.users[u].begun > 0 { // it lost its first connection
			starved++
		}
	}
	if starved != workers-pool {
		t.Errorf("%d workers lost their connection, want exactly %d (workers − pool)", starved, workers-pool)
	}
	// Each starved worker times out once per timeout and the time it
	// takes to be handed its next request (at most a second here).
	lo, hi := int64(workers-pool)*int64(d/sim.Time(timeout+time.Second)), int64(workers-pool)*int64(d/sim.Time(timeout)+1)
	if m.WaitTimeouts < lo || m.WaitTimeouts > hi {
		t.Errorf("%d timeouts, want %d to %d", m.WaitTimeouts, lo, hi)
	}
	if m.FailedReqs != m.WaitTimeouts || m.TimedOutTxns != m.WaitTimeouts {
		t.Errorf("%d failed requests, %d timed-out transactions for %d timeouts: each fails the request it waited for", m.FailedReqs, m.TimedOutTxns, m.WaitTimeouts)
	}
	if m.ServerConns != pool {
		t.Errorf("%d servers at peak, want the pool's %d", m.ServerConns, pool)
	}
	arrivals := int64(len(mdl.taken))
	if got := m.OKReqs + m.FailedReqs; got != arrivals {
		t.Errorf("ok %d + failed %d requests = %d, want every arrival (%d)", m.OKReqs, m.FailedReqs, got, arrivals)
	}
	// The requests served are the share that landed on the workers that
	// hold a server.
	onHolders := int64(0)
	for _, u := range mdl.taken {
		if mdl.users[u].begun == 0 {
			onHolders++
		}
	}
	if m.OKReqs < onHolders || m.OKReqs > onHolders+int64(workers-pool) {
		t.Errorf("%d requests served; %d landed on the %d workers holding a server (the starved ones may finish one each once the holders leave)", m.OKReqs, onHolders, pool)
	}
	checkConservation(t, m)

	c.Pooler.PoolMode = poolmode.Transaction
	x := Run(c).Metrics
	if x.WaitTimeouts != 0 || x.OKReqs != arrivals {
		t.Errorf("transaction pool of %d: %d timeouts, %d of %d requests served; want every one", pool, x.WaitTimeouts, x.OKReqs, arrivals)
	}
	t.Logf("session: %d of %d requests served, %d timeouts; transaction: %d served", m.OKReqs, arrivals, m.WaitTimeouts, x.OKReqs)
}

// The longest-idle worker takes the next request: with a constant
// service, workers finish in the order they started, so the requests go
// round the workers in index order (a last-in, first-out choice would give
// worker 0 nearly every one).
func TestWorkersLongestIdleTakes(t *testing.T) {
	c := workersCfg(poolmode.Direct, 5, 200, 5*sim.Second, sim.ConstDist(3*sim.Millisecond), 2)
	mdl, m := traced(t, c)
	if len(mdl.taken) < 500 {
		t.Fatalf("only %d requests", len(mdl.taken))
	}
	for k, u := range mdl.taken {
		if int(u) != k%5 {
			t.Fatalf("request %d went to worker %d, want %d (round the workers in index order)", k, u, k%5)
		}
	}
	if m.AppWaitW == 0 {
		t.Error("no request waited for a worker: the test needs some to queue (5 workers at 200/s of 6 ms)")
	}
}

// The workers connect at t = 0 in index order through one backend
// start-up at a time (10 ms each); max_connections 3 refuses the fourth.
// They are idle in that order, so the first four requests go to workers
// 0, 1, 2 and 3 (whenever they arrive: a worker done with one goes to the
// tail). The fourth is free without a connection: every request it takes,
// it tries to connect again, is refused, and fails the request.
func TestWorkersConnectInOrderAndReconnect(t *testing.T) {
	c := workersCfg(poolmode.Direct, 4, 20, 10*sim.Second, sim.ConstDist(5*sim.Millisecond), 1)
	c.Server.MaxConnections = 3
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	c.Server.Connect = sim.ConstDist(10 * sim.Millisecond)
	mdl, m := traced(t, c)
	var fourth int64
	for k, u := range mdl.taken {
		if k < 4 && int(u) != k {
			t.Fatalf("request %d went to worker %d, want %d: idle in the order they connected (0, 1, 2, then the refused 3)", k, u, k)
		}
		if u == 3 {
			fourth++
		}
	}
	if share := float64(fourth) / float64(len(mdl.taken)); share < 0.2 || share > 0.3 {
		t.Errorf("worker 3 took %.3f of the requests; taking turns, about a quarter", share)
	}
	if m.FailedReqs != fourth || m.RefusedTxns != fourth || m.ConnRefused != fourth+1 {
		t.Errorf("failed requests %d, refused transactions %d, refusals %d; want %d, %d and %d (worker 3 at t = 0 and at each of its requests)",
			m.FailedReqs, m.RefusedTxns, m.ConnRefused, fourth, fourth, fourth+1)
	}
	if m.Sessions != 4+fourth {
		t.Errorf("%d sessions, want the 4 first attempts and one per request of worker 3 (%d)", m.Sessions, 4+fourth)
	}
	if mdl.users[2].begun != 0 || mdl.users[2].conn >= 0 {
		t.Error("worker 2 should have kept its first connection to the end, and closed it then")
	}
	checkConservation(t, m)
}

// A worker whose connection query_wait_timeout closed opens a new one
// when it takes its next request: a session pool of one server, two
// workers; worker 0 holds the server, so every request worker 1 takes
// times out, and each one after its first needs a new connection. At the
// end worker 0 leaves and releases the server, and a request worker 1
// still waits with is served.
func TestWorkersReconnectAfterTimeout(t *testing.T) {
	c := workersCfg(poolmode.Session, 2, 4, 60*sim.Second, sim.ConstDist(10*sim.Millisecond), 1)
	c.Pooler.DefaultPoolSize = 1
	c.Pooler.QueryWaitTimeout = 700 * time.Millisecond
	c.Pooler.TimeoutCheck = 0
	mdl, m := traced(t, c)
	var by [2]int64
	for _, u := range mdl.taken {
		by[u]++
	}
	if by[1] < 3 {
		t.Fatalf("worker 1 took %d requests; the test needs several", by[1])
	}
	if m.Sessions != 1+by[1] || m.ConnsOpened != m.Sessions {
		t.Errorf("%d sessions, %d connections; want worker 0's one and one per request of worker 1 (%d)", m.Sessions, m.ConnsOpened, 1+by[1])
	}
	if late := by[1] - m.WaitTimeouts; late != 0 && late != 1 {
		t.Errorf("worker 1 took %d requests and %d timed out: all but one waiting at the end must", by[1], m.WaitTimeouts)
	}
	if m.OKReqs != by[0]+by[1]-m.WaitTimeouts {
		t.Errorf("%d requests served, want worker 0's %d and worker 1's %d not timed out", m.OKReqs, by[0], by[1]-m.WaitTimeouts)
	}
	checkConservation(t, m)
}

// Same seed, byte-identical result; every class conserves its
// transactions; a workers class beside an ordinary open class.
func TestWorkersDeterministicAndConserved(t *testing.T) {
	c := workersCfg(poolmode.Session, 30, 150, 20*sim.Second, sim.ExpDist(8*sim.Millisecond), 3)
	c.Workload.TxnsPerRequest, _ = sim.UniformInt(1, 3)
	c.Workload.App, c.Workload.AppSet = sim.ExpDist(sim.Millisecond), true
	c.Workload.WarmupAuto = true
	c.Pooler.QueryWaitTimeout = time.Second
	c.Pooler.Hop = 50 * sim.Microsecond
	web := Class{Name: "web", Workload: c.Workload, Pool: "web"}
	api := c.Workload
	api.Workers, api.ArrivalRate = 0, 40
	api.TxnsPerRequest, api.App, api.AppSet = sim.IntDist{}, sim.Dist{}, false
	c.Classes = []Class{web, {Name: "api", Workload: api, Pool: "api"}}
	c.Pools = []PoolSpec{{Name: "web", Mode: poolmode.Session, ModeSet: true, Size: 20}, {Name: "api", Mode: poolmode.Transaction, ModeSet: true, Size: 5}}
	c.Server.MaxConnections = 40
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	a, b := Run(c), Run(c)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("two runs of one configuration differ")
	}
	checkConservation(t, a.Metrics)
	for _, cl := range a.Classes {
		checkConservation(t, cl.Metrics)
	}
	w := a.Classes[0].Metrics
	if w.WaitTimeouts == 0 || w.OKReqs == 0 {
		t.Errorf("web: %d timeouts, %d requests: 30 workers on a session pool of 20 should starve some and serve the rest", w.WaitTimeouts, w.OKReqs)
	}
	c.Seed = 2
	if d := Run(c); d.Metrics.OKTxns == a.Metrics.OKTxns && d.Metrics.ReqP99Ms == a.Metrics.ReqP99Ms {
		t.Error("another seed gave the same run")
	}
}

// Common random numbers: a request draws the same transactions and
// statement times whichever worker runs it, so the same arrivals offer
// the same work to any number of workers.
func TestWorkersCommonRandomNumbers(t *testing.T) {
	c := workersCfg(poolmode.Transaction, 4, 100, 10*sim.Second, sim.ExpDist(5*sim.Millisecond), 2)
	c.Workload.TxnsPerRequest, _ = sim.UniformInt(1, 4)
	a := Run(c).Metrics
	c.Workload.Workers, c.Pooler.DefaultPoolSize = 40, 40
	b := Run(c).Metrics
	if a.AttemptedTxns != b.AttemptedTxns || a.OKTxns != b.OKTxns {
		t.Errorf("4 workers: %d attempted, %d ok; 40 workers: %d, %d - the same arrivals should bring the same transactions", a.AttemptedTxns, a.OKTxns, b.AttemptedTxns, b.OKTxns)
	}
	if a.ReqP50Ms <= b.ReqP50Ms {
		t.Errorf("request p50 with 4 workers %v ms, with 40 %v: fewer workers should queue", a.ReqP50Ms, b.ReqP50Ms)
	}
}

func TestWorkersInvalid(t *testing.T) {
	base := workersCfg(poolmode.Transaction, 4, 10, sim.Second, sim.ConstDist(sim.Millisecond), 1)
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"closed", func(c *Config) { c.Workload.ArrivalRate, c.Workload.Clients = 0, 5 }, "workload.workers needs workload.arrival_rate"},
		{"requests per session", func(c *Config) { c.Workload.RequestsPerSession = 3 }, "requests_per_session does not apply with workers"},
		{"txns per session", func(c *Config) { c.Workload.TxnsPerSession = 3 }, "txns_per_session does not apply with workers"},
		{"think", func(c *Config) { c.Workload.Think = sim.ExpDist(sim.Millisecond) }, "think does not apply with workers"},
		{"app pool", func(c *Config) { c.AppPool.Mode = QueuePool }, "app_pool.mode queue with workload.workers"},
		{"negative", func(c *Config) { c.Workload.Workers = -1 }, "workers must be from 1 to 1000000"},
		{"closed class beside", func(c *Config) {
			closedW := c.Workload
			closedW.Workers, closedW.ArrivalRate, closedW.Clients = 0, 0, 3
			c.Classes = []Class{{Name: "web", Workload: c.Workload}, {Name: "jobs", Workload: closedW}}
		}, "1 open and 1 closed"},
		{"class app pool", func(c *Config) {
			c.Classes = []Class{{Name: "web", Workload: c.Workload, AppPool: AppPool{Mode: NullPool}}}
		}, "classes.web.app_pool.mode null with classes.web.workload.workers"},
	} {
		c := base.Clone()
		tt.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	if err := base.Validate(); err != nil {
		t.Errorf("the base is valid: %v", err)
	}
}

// --explain for workers: Little's law on the application queue, and
// Erlang C for it - or, for a session pool smaller than the workers, the
// starvation in words.
func TestWorkersExplain(t *testing.T) {
	c := workersCfg(poolmode.Transaction, 10, 80, 2000*sim.Second, sim.ExpDist(100*sim.Millisecond), 1)
	text := explainText(Explain(c, Run(c).Metrics, nil))
	for _, want := range []string{"The application queue (requests waiting for a free worker)", "exactly M/M/N", "Erlang C gives P(wait) = 0.4092"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain lacks %q:\n%s", want, text)
		}
	}
	c = workersCfg(poolmode.Session, 12, 20, 20*sim.Second, sim.ConstDist(10*sim.Millisecond), 1)
	c.Pooler.DefaultPoolSize, c.Pooler.QueryWaitTimeout = 8, 2*time.Second
	if text := explainText(Explain(c, Run(c).Metrics, nil)); !strings.Contains(text, "so 4 workers can never get one") {
		t.Errorf("explain of a starving session pool:\n%s", text)
	}
}

// Workers in every mode, through a fleet, with prepared statements, on a
// CPU server, with the pooler's thread modelled: each run conserves its
// transactions, and the workers leave at the end.
func TestWorkersEverywhere(t *testing.T) {
	for _, mode := range []poolmode.Mode{poolmode.Direct, poolmode.Session, poolmode.Transaction, poolmode.Statement} {
		for _, variant := range []string{"plain", "fleet", "prepared", "cpu", "thread", "connect"} {
			c := workersCfg(mode, 6, 300, 2*sim.Second, sim.ExpDist(2*sim.Millisecond), 3)
			c.Workload.TxnsPerRequest, _ = sim.UniformInt(1, 3)
			c.Pooler.DefaultPoolSize = 4
			c.Pooler.QueryWaitTimeout = 300 * time.Millisecond
			c.Server.MaxConnections = 8
			c.Server.SuperuserReserved = 0 // every slot serves the clients
			switch variant {
			case "fleet":
				c.Pooler.Processes, c.Pooler.MaxClientConn = 2, 4
			case "prepared":
				c.Workload.Statements, c.Workload.PrepareThreshold, c.Workload.Parse = 20, 2, sim.ConstDist(100*sim.Microsecond)
			case "cpu":
				c.Server.Cores, c.Workload.CPU = 2, sim.ExpDist(sim.Millisecond)
			case "thread":
				c.Pooler.CPUPerMsg, c.Pooler.CPUPerAssign = 5*sim.Microsecond, 2*sim.Microsecond
			case "connect":
				c.Server.Connect = sim.ConstDist(5 * sim.Millisecond)
			}
			mdl, m := traced(t, c)
			checkConservation(t, m)
			if m.OKTxns == 0 {
				t.Errorf("%v %s: nothing completed", mode, variant)
			}
			for u := range mdl.users {
				if us := mdl.users[u]; !us.done || us.conn >= 0 {
					t.Errorf("%v %s: worker %d still there at the end (done %v, connection %d)", mode, variant, u, us.done, us.conn)
				}
			}
			if mdl.linked.Value() != 0 || mdl.active != 0 {
				t.Errorf("%v %s: %d servers still linked, %d requests in the system at the end", mode, variant, mdl.linked.Value(), mdl.active)
			}
		}
	}
}
