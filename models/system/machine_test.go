package system

import (
	"reflect"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Tests of the CPU port (machine.go): the model's side of it, with small
// machines of the tests' own. lab/testbed tests its machine on it.

// machineFunc is a Machine made of its Start.
type machineFunc func(h *Host) Parts

func (f machineFunc) Check(Config, func(string, ...any)) {}
func (f machineFunc) Describe(Config) string             { return "a test's machine" }
func (f machineFunc) Random(Config) bool                 { return false }
func (f machineFunc) Start(h *Host) Parts                { return f(h) }

// opens is a machine that only has every pool start with n servers open.
func opens(n int) Machine {
	return machineFunc(func(h *Host) Parts {
		h.OpenServers(n)
		return Parts{}
	})
}

// TestMachineProcessorSharing: the built-in processor sharing run as a
// machine's CPU, through the port, is the run without a machine, bit for
// bit: the port's plans, hand-backs and levels are the built-in's.
func TestMachineProcessorSharing(t *testing.T) {
	viaPort := machineFunc(func(h *Host) Parts {
		v := &ps{}
		v.init(h, h.Server())
		return Parts{CPU: v}
	})
	pooled := closed(poolmode.Transaction, 40, 30, 3, 50*sim.Microsecond, 100*sim.Microsecond)
	pooled.Workload.CPU = sim.ExpDist(200 * sim.Microsecond)
	pooled.Workload.Think = sim.ExpDist(300 * sim.Microsecond)
	pooled.Server.Cores, pooled.Server.Contention, pooled.Server.Coherency = 2, 0.05, 0.001
	pooled.Server.Connect = sim.ExpDist(2 * sim.Millisecond)
	pooled.Pooler.DefaultPoolSize = 6
	direct := pooled
	direct.Pooler.PoolMode = poolmode.Direct
	direct.Server.ConnectConcurrency = 3
	open := openPool(2000, 8, sim.ExpDist(sim.Millisecond), 2*sim.Second)
	open.Workload.CPU = sim.ExpDist(500 * sim.Microsecond)
	open.Workload.WarmupAuto = true
	open.Server.Cores = 4
	for name, c := range map[string]Config{"pooled": pooled, "direct": direct, "open": open} {
		want := Run(c)
		c.Machine = viaPort
		if got := Run(c); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: processor sharing through the port differs:\n%+v\nwant\n%+v", name, got.Metrics, want.Metrics)
		}
	}
}

// queueCPU is a test machine's CPU: every job runs for its work as soon
// as it comes, on a core of its own, but a pooled statement's result goes
// at three quarters of its work (the backend runs on after it); the
// clients' own work runs on one thread, a job at a time. It keeps the
// statements' servers it saw.
type queueCPU struct {
	h        *Host
	jobs     []queued
	seq      int
	lv       [2]sim.Level // jobs in their CPU phase; the same (its cores are never short)
	cores    int
	drv      sim.Time // the client thread's job
	drvFree  sim.Time // when the client thread is next free
	stmtSrv  map[int32]int
	receives int
}

// queued is a job and when it ends; a client's (client >= 0) was asked
// for at asked, and is a read or a send.
type queued struct {
	end    sim.Time
	seq    int
	job    Job
	client int32
	asked  sim.Time
	read   bool
}

func newQueueCPU(h *Host, drv sim.Time) *queueCPU {
	return &queueCPU{h: h, lv: [2]sim.Level{sim.NewLevel(0), sim.NewLevel(0)}, cores: h.Server().Cores, drv: drv, stmtSrv: map[int32]int{}}
}

func (q *queueCPU) add(x queued) {
	q.seq++
	x.seq = q.seq
	q.jobs = append(q.jobs, x)
	q.count()
	q.plan()
}

func (q *queueCPU) count() {
	q.lv[0].Set(q.h.Now(), int64(len(q.jobs)))
	q.lv[1].Set(q.h.Now(), int64(len(q.jobs)))
}

func (q *queueCPU) plan() {
	if len(q.jobs) == 0 {
		q.h.Unplan()
		return
	}
	first := q.jobs[0].end
	for _, x := range q.jobs {
		first = min(first, x.end)
	}
	q.h.Plan(first - q.h.Now())
}

func (q *queueCPU) Run(j Job) sim.Time {
	reply := j.Work
	if j.Kind == JobStatement {
		q.stmtSrv[j.Server]++
		if j.Server >= 0 {
			reply = j.Work * 3 / 4
		}
	}
	q.add(queued{end: q.h.Now() + reply, job: j, client: -1})
	return reply
}

func (q *queueCPU) Tick() {
	now := q.h.Now()
	var due, kept []queued
	for _, x := range q.jobs {
		if x.end <= now {
			due = append(due, x)
		} else {
			kept = append(kept, x)
		}
	}
	q.jobs = kept
	q.count()
	q.plan()
	for _, x := range due {
		if x.client < 0 {
			q.h.Finished(x.job)
			continue
		}
		waited := now - x.asked - q.drv
		if x.read {
			q.receives++
			q.h.Receive(x.client, q.drv, waited)
		} else {
			q.h.Send(x.client, q.drv, waited)
		}
	}
}

func (q *queueCPU) PoolerWakeup(w sim.Time) sim.Time { return w / 2 }
func (q *queueCPU) Levels() []*sim.Level             { return []*sim.Level{&q.lv[0], &q.lv[1]} }
func (q *queueCPU) Measure(level func(int) float64) (util, backendJobs float64) {
	return level(1) / float64(q.cores), level(0)
}

// client queues a client's job on the client thread; one that starts at
// once a transaction's first statement restarts its clock.
func (q *queueCPU) client(u int32, read bool) {
	now := q.h.Now()
	start := max(now, q.drvFree)
	if !read && start == now && q.h.Position(u).Stmt == 0 {
		q.h.Restart(u)
	}
	q.drvFree = start + q.drv
	q.add(queued{end: q.drvFree, client: u, asked: now, read: read})
}

// queueClients is the client-side work: every statement's send, and the
// read of a transaction's last result.
type queueClients struct{ q *queueCPU }

func (c queueClients) Send(u int32) bool {
	c.q.client(u, false)
	return true
}

func (c queueClients) Read(u int32) bool {
	p := c.q.h.Position(u)
	if p.Stmt+1 != p.Stmts && !p.Failed {
		return false
	}
	c.q.client(u, true)
	return true
}

func (c queueClients) Completed(int32, sim.Time) {}

// queueMachine runs everything on a queueCPU, the pooler's thread too,
// with client work of drv per send and per last read.
func queueMachine(drv sim.Time, last **queueCPU) Machine {
	return machineFunc(func(h *Host) Parts {
		q := newQueueCPU(h, drv)
		*last = q
		return Parts{CPU: q, Pooler: true, Clients: queueClients{q}, Report: func() any { return q.receives }}
	})
}

// TestMachinePartsAddUp: with a machine's CPU, client-side work, the
// pooler's thread on the CPU and results that go before a statement's
// work is done, every transaction's parts still add up to its latency,
// the transactions are conserved, the run is deterministic, and the
// machine's report is the result's.
func TestMachinePartsAddUp(t *testing.T) {
	for _, app := range []AppPoolMode{NoAppPool, QueuePool} {
		for _, mode := range poolmode.Modes {
			c := closed(mode, 40, 4, 3, 0, 0)
			c.Workload.Query = sim.ExpDist(200 * sim.Microsecond)
			c.Workload.CPU = sim.ExpDist(300 * sim.Microsecond)
			c.Workload.Think = sim.ExpDist(500 * sim.Microsecond)
			c.Pooler.Hop = 30 * sim.Microsecond
			c.Pooler.DefaultPoolSize = 6
			c.Server.Cores = 2
			c.Server.MaxConnections = 30
			c.Server.SuperuserReserved = 0 // every slot serves the clients
			c.Server.Connect = sim.ExpDist(2 * sim.Millisecond)
			c.AppPool = AppPool{Mode: app, Size: 8, MaxOverflow: 2, Timeout: 5 * sim.Millisecond}
			c.Pooler.Processes = 2
			c.Pooler.CPUPerMsg = 5 * sim.Microsecond
			c.Pooler.CPUPerAssign = 3 * sim.Microsecond
			c.Pooler.Wakeup = 20 * sim.Microsecond
			var q *queueCPU
			c.Machine = queueMachine(40*sim.Microsecond, &q)
			m, s := simulate(c)
			if m.results.partsOff != 0 {
				t.Errorf("app pool %v, %v: %d of %d transactions' parts do not add up to their latency", app, mode, m.results.partsOff, m.results.m.OKTxns)
			}
			r := m.result(s)
			checkConservation(t, r.Metrics)
			if r.Metrics.OKTxns == 0 || r.Machine != q.receives || q.receives == 0 {
				t.Errorf("app pool %v, %v: %d transactions, the machine's report %v (%d reads)", app, mode, r.Metrics.OKTxns, r.Machine, q.receives)
			}
			if again := Run(c); !reflect.DeepEqual(again.Metrics, r.Metrics) {
				t.Errorf("app pool %v, %v: two runs differ", app, mode)
			}
		}
	}
}

// TestMachineJobsNameTheServer: a pooled statement's job names the
// pooler's server whose backend runs it, whichever client sent it; a
// direct connection's names none.
func TestMachineJobsNameTheServer(t *testing.T) {
	for _, tc := range []struct {
		mode poolmode.Mode
		want map[int32]int
	}{
		{poolmode.Transaction, map[int32]int{0: 50 * 20}},
		{poolmode.Direct, map[int32]int{-1: 50 * 20}},
	} {
		c := closed(tc.mode, 50, 20, 1, 0, 0)
		c.Workload.CPU = sim.ConstDist(20 * sim.Microsecond)
		c.Pooler.DefaultPoolSize = 1
		c.Server.Cores = 2
		var q *queueCPU
		c.Machine = queueMachine(0, &q)
		if m := Run(c).Metrics; m.OKTxns != 50*20 {
			t.Fatalf("%v: %d transactions, want %d", tc.mode, m.OKTxns, 50*20)
		}
		if !reflect.DeepEqual(q.stmtSrv, tc.want) {
			t.Errorf("%v at pool 1: statements per server %v, want %v", tc.mode, q.stmtSrv, tc.want)
		}
	}
}
