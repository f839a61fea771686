package scenarios

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

// suggestOn adds a did-you-mean to err (a word not among candidates).
func suggestOn(err error, word string, candidates []string) error {
	if err == nil {
		return nil
	}
	if hint := didYouMean(word, candidates); hint != "" {
		return fmt.Errorf("%w%s", err, hint)
	}
	return err
}

// field is one settable scenario value.
type field struct {
	key string // dotted path, e.g. "workload.clients"
	doc string // what it is and what it accepts
	set func(c *system.Config, n *yaml.Node) error
}

// fields lists every settable key in documentation order.
var fields = []field{
	{"seed", "random seed (non-negative integer)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, math.MaxInt64)
		c.Seed = uint64(v)
		return err
	}},
	{"workload.clients", "closed workload: sessions that all connect at t=0 (1..10000000); setting it makes the workload closed", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 10_000_000)
		c.Workload.Clients, c.Workload.ArrivalRate = int(v), 0
		return err
	}},
	{"workload.arrival_rate", "open workload: Poisson session arrivals (with workers: request arrivals), e.g. 80/s or 4800/min; setting it makes the workload open", func(c *system.Config, n *yaml.Node) error {
		v, err := rateValue(n)
		c.Workload.ArrivalRate, c.Workload.Clients = v, 0
		return err
	}},
	{"workload.duration", "open workload: how long arrivals go on (duration above 0)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Workload.Duration, n)
	}},
	{"workload.workers", "open workload served by a fixed set of application workers (Puma threads, Sidekiq or gunicorn workers), each holding one persistent connection (0..1000000; default 0 = none, each arrival its own session): the workers connect at t=0 as closed clients do; requests arrive at arrival_rate for duration, queue in the application (FIFO) while every worker is busy, and the longest-idle worker takes the next; a request runs txns_per_request transactions with app between its statements and transactions, and its latency runs from its arrival; a connection closed under a worker (query_wait_timeout, refusal) fails its request and the worker reconnects at its next; when arrivals stop the workers finish the queue and disconnect. Not with clients, think, requests_per_session, txns_per_session or an app_pool", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 1_000_000)
		c.Workload.Workers = int(v)
		return err
	}},
	{"workload.txns_per_session", "transactions per client session (1..1000000), each its own request; with requests_per_session use txns_per_request instead", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1_000_000)
		c.Workload.TxnsPerSession = int(v)
		return err
	}},
	{"workload.requests_per_session", "requests per client session (1..1000000): a session runs requests, a request runs transactions (txns_per_request), with app between its statements and transactions and think between requests", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1_000_000)
		c.Workload.RequestsPerSession = int(v)
		return err
	}},
	{"workload.txns_per_request", "transactions per request (needs requests_per_session or workers): a whole number or an integer distribution such as {dist: uniform, min: 1, max: 3} (default 1)", func(c *system.Config, n *yaml.Node) error {
		return intDistInto(&c.Workload.TxnsPerRequest, n, 1, 1_000_000)
	}},
	{"workload.app", "application time between the statements of a transaction and between the transactions of a request (needs requests_per_session or workers): a duration or a distribution (default: workload.think)", func(c *system.Config, n *yaml.Node) error {
		c.Workload.AppSet = true
		return distInto(&c.Workload.App, n)
	}},
	{"workload.stmts_per_txn", "statements per transaction (1..100000)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.Workload.StmtsPerTxn = int(v)
		return err
	}},
	{"workload.query", "server time per statement that is not CPU (I/O, sleep, locks; fixed, not shared): a duration or {dist: const|exp|uniform|lognormal|empirical, ...}", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.Query, n)
	}},
	{"workload.cpu", "server CPU time per statement, on top of workload.query: shared by server.cores (processor sharing, USL contention); a duration or a distribution (default 0)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.CPU, n)
	}},
	{"workload.warmup", "open workload: the start of the run left out of every time average, percentile and rate (the steady window runs from it to the end of arrivals): auto (default: MSER-5 on the transaction latencies) or a duration (0s keeps everything); closed workloads ignore it", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		if s == "auto" {
			c.Workload.WarmupAuto, c.Workload.Warmup = true, 0
			return nil
		}
		c.Workload.WarmupAuto = false
		if err := durationInto(&c.Workload.Warmup, n); err != nil {
			return fmt.Errorf("want auto or a duration such as 10s: %v", err)
		}
		return nil
	}},
	{"workload.time_wait", "how long a connection the client closed lingers in TIME_WAIT (default 60s, Linux)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Workload.TimeWait, n)
	}},
	{"workload.statements", "distinct statement texts the workload runs (1..1048576; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1<<20)
		c.Workload.Statements = int(v)
		return err
	}},
	{"workload.zipf", "popularity skew of the statements: the k-th most used runs in proportion to 1/k^zipf (0 = uniform; 0..10)", func(c *system.Config, n *yaml.Node) error {
		return floatInto(&c.Workload.Zipf, n, 0, 10, "a number from 0 to 10")
	}},
	{"workload.parse", "server time to parse and plan a statement, paid unless the server holds it prepared (CPU on a CPU server; default 0)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.Parse, n)
	}},
	{"workload.prepare_threshold", "executions of a text on a connection before the driver prepares it (JDBC prepareThreshold, 5 by default there); 0 never (default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 1_000_000)
		c.Workload.PrepareThreshold = int(v)
		return err
	}},
	{"workload.stmt_text_size", "size of one statement's text in the pooler's prepared-statement cache, e.g. 2kB (default 2kB)", func(c *system.Config, n *yaml.Node) error {
		v, err := sizeValue(n)
		c.Workload.StmtTextSize = v
		return err
	}},
	{"workload.think", "client time between requests, and before a closed client's first one (without requests_per_session: after each statement but the session's last, as app and think alike): a duration or a distribution", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.Think, n)
	}},
	{"app_pool.mode", "application-side pool: none (each client holds one connection per session), queue (QueuePool/HikariCP: borrow per transaction) or null (NullPool: a new connection per transaction)", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		c.AppPool.Mode, err = system.ParseAppPoolMode(s)
		return suggestOn(err, s, []string{"none", "queue", "null"})
	}},
	{"app_pool.size", "connections the application pool keeps (1..100000; SQLAlchemy's default 5)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.AppPool.Size = int(v)
		return err
	}},
	{"app_pool.max_overflow", "extra connections opened under load and closed when returned to a full pool (0..100000; default 10)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 100_000)
		c.AppPool.MaxOverflow = int(v)
		return err
	}},
	{"app_pool.timeout", "longest wait for an application-pool connection before the transaction fails; 0s waits forever (default 30s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.AppPool.Timeout, n)
	}},
	{"pooler.mode", "direct | session | transaction | statement (PgBouncer's default: session)", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		c.Pooler.PoolMode, err = poolmode.Parse(s)
		return suggestOn(err, s, []string{"direct", "session", "transaction", "statement"})
	}},
	{"pooler.hop", "one-way client<->pooler latency paid by every message each way (duration)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.Hop, n)
	}},
	{"pooler.max_client_conn", "client connections the pooler accepts (1..10000000; PgBouncer's default 100)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 10_000_000)
		c.Pooler.MaxClientConn = int(v)
		return err
	}},
	{"pooler.default_pool_size", "server connections per pool (1..100000; default 20)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.Pooler.DefaultPoolSize = int(v)
		return err
	}},
	{"pooler.max_db_connections", "server connections per database, 0 = unlimited (default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 100_000)
		c.Pooler.MaxDBConnections = int(v)
		return err
	}},
	{"pooler.query_wait_timeout", "longest a client waits for a server before FATAL query_wait_timeout; 0s disables (default 120s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.QueryWaitTimeout, n)
	}},
	{"pooler.timeout_check", "how often the pooler checks query_wait_timeout: PgBouncer's janitor runs every 1/3 s (default 333.333ms), so a waiter goes at the first check after its timeout; 0s at the exact instant", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.TimeoutCheck, n)
	}},
	{"pooler.reset_cost", "server time of server_reset_query (DISCARD ALL) when a session-mode client leaves, before the server is reused (default 0s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.ResetCost, n)
	}},
	{"pooler.max_prepared_statements", "protocol-level prepared statements tracked per server, 0 = off (default 200)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 1_000_000)
		c.Pooler.MaxPreparedStatements = int(v)
		return err
	}},
	{"pooler.cpu_per_msg", "CPU time a pooler process spends relaying one message (each statement is two: request and response); 0 leaves the pooler's CPU out", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.CPUPerMsg, n)
	}},
	{"pooler.conn_overhead", "extra cost per message for each client connection a process serves, as a fraction of cpu_per_msg (0..1; default 0)", func(c *system.Config, n *yaml.Node) error {
		return fractionInto(&c.Pooler.ConnOverhead, n)
	}},
	{"pooler.wakeup", "time a sleeping pooler thread takes to wake for a message (scheduler latency; default 0s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.Wakeup, n)
	}},
	{"pooler.cpu_per_assign", "CPU time a pooler process's thread spends handing a server to a client, queued behind its messages: every assignment, so statement mode pays it per statement (default 0s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.CPUPerAssign, n)
	}},
	{"pooler.assign_first", "a pooler thread hands a released server to a waiting client, forwarding its query, before it relays the response to the client that released it (poolsim's proxy) rather than after (PgBouncer); needs pooler.cpu_per_assign (default false)", func(c *system.Config, n *yaml.Node) error {
		return boolInto(&c.Pooler.AssignFirst, n)
	}},
	{"pooler.processes", "pooler processes behind one port with so_reuseport, each single-threaded with its own pools (1..1024; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1024)
		c.Pooler.Processes = int(v)
		return err
	}},
	{"pooler.budget", "how a fleet's max_client_conn, default_pool_size and max_db_connections apply: per_process (each gets all) or divided (each gets its share)", func(c *system.Config, n *yaml.Node) error {
		return choiceInto(&c.Pooler.Budget, n, []string{"per_process", "divided"}, []system.Budget{system.PerProcess, system.Divided})
	}},
	{"pooler.peering", "processes forward cancel requests that land on the wrong one (PgBouncer 1.19+ peering; default false)", func(c *system.Config, n *yaml.Node) error {
		return boolInto(&c.Pooler.Peering, n)
	}},
	{"pooler.cancels", "cancel requests to simulate across the fleet (0..10000000; default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 10_000_000)
		c.Pooler.Cancels = int(v)
		return err
	}},
	{"server.max_connections", "PostgreSQL max_connections (1..1000000; default 100)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1_000_000)
		c.Server.MaxConnections = int(v)
		return err
	}},
	{"server.superuser_reserved_connections", "PostgreSQL superuser_reserved_connections: slots of max_connections the clients (not superusers) cannot take (0..max_connections-1; default 3, PostgreSQL's)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 999_999)
		c.Server.SuperuserReserved = int(v)
		return err
	}},
	{"server.connect", "cost of starting one backend: a duration or a distribution (default 0s)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Server.Connect, n)
	}},
	{"server.memory_per_conn", "server memory per open backend, e.g. 1.5MB or 1536kB (default 1.5MB, measured in seed 000)", func(c *system.Config, n *yaml.Node) error {
		v, err := sizeValue(n)
		c.Server.MemoryPerConn = v
		return err
	}},
	{"server.cores", "CPU cores shared by running statements' workload.cpu; 0 runs CPU time as a fixed delay (0..4096; default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 4096)
		c.Server.Cores = int(v)
		return err
	}},
	{"server.contention", "USL contention σ: each running statement slows by 1 + σ(n-1) + κn(n-1) with n running (0..1; default 0)", func(c *system.Config, n *yaml.Node) error {
		return fractionInto(&c.Server.Contention, n)
	}},
	{"server.coherency", "USL coherency κ (0..1; default 0)", func(c *system.Config, n *yaml.Node) error {
		return fractionInto(&c.Server.Coherency, n)
	}},
	{"testbed.driver_cpu", "live validation on one machine: the load driver's CPU per statement, run on server.cores before each statement is sent, shared with the statements but not slowed by the USL; a duration or a distribution (default 0: a production what-if)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Testbed.DriverCPU, n)
	}},
	{"testbed.pooler_on_cores", "live validation on one machine: each pooler process's thread runs its messages and assignments on server.cores (one at a time per process; pooler.wakeup is paid only when a core is idle as the thread wakes) instead of a CPU of its own (default false)", func(c *system.Config, n *yaml.Node) error {
		return boolInto(&c.Testbed.PoolerOnCores, n)
	}},
	{"testbed.background", "cores' worth of CPU busy with work outside the test: the test keeps server.cores minus this, a number from 0, below server.cores (default 0)", func(c *system.Config, n *yaml.Node) error {
		return floatInto(&c.Testbed.Background, n, 0, 4096, "a number of cores from 0 to 4096")
	}},
	{"testbed.speed", "live validation on one machine: the cores' speed window by window, as a list of factors of the calibrated speed (each above 0, at most 100; mean about 1); the model plays them in order, one every testbed.speed_period, from a start its seed draws (after the last, the first again), and every job on the cores runs at that factor of its rate (default none: one speed)", func(c *system.Config, n *yaml.Node) error {
		return speedInto(&c.Testbed.Speed, n)
	}},
	{"testbed.speed_period", "how long each of testbed.speed's windows lasts, a duration of at least 100us (default 20ms)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Testbed.SpeedPeriod, n)
	}},
	{"testbed.scheduler", "live validation on one machine: how the jobs share server.cores - shared (processor sharing: the cores one pool, no core idle while a job waits) or per_core (a run queue per core, as Linux has: a job is placed on a core as it starts and waits there, a core out of work idles while the other's queue waits unless a thread there has not run for 0.5 ms, and a thread with more work keeps its core) (default shared)", func(c *system.Config, n *yaml.Node) error {
		return choiceInto(&c.Testbed.Scheduler, n, []string{"shared", "per_core"}, []system.Scheduler{system.Shared, system.PerCore})
	}},
	{"testbed.driver_threads", "live validation on one machine: the load driver's threads; client u's statements are prepared by thread u mod driver_threads, one at a time, the others queued, as pgbench -j runs them (0..4096; default 0: every client its own)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 4096)
		c.Testbed.DriverThreads = int(v)
		return err
	}},
	{"testbed.driver_scan", "live validation on one machine: each driver thread (testbed.driver_threads) works as pgbench's does - it polls, reads the results its poll found in client order, starts the next transaction of the clients whose transaction ended in a second pass, and times each transaction from that start to the reading of its last result; a result that comes during the passes waits for the next poll (default false: each thread takes its clients in the order they became ready)", func(c *system.Config, n *yaml.Node) error {
		return boolInto(&c.Testbed.DriverScan, n)
	}},
	{"testbed.affinity", "live validation on one machine: pin the pooler's thread and the backends to cores as taskset does (testbed.scheduler per_core, testbed.pooler_on_cores): free (the scheduler places them), together (both on core 0) or apart (the pooler on core 0, the backends on the others) - with one server the kernel keeps one of the two arrangements for a run, each at costs of its own (default free)", func(c *system.Config, n *yaml.Node) error {
		return choiceInto(&c.Testbed.Affinity, n, []string{"free", "together", "apart"}, []system.Affinity{system.Free, system.Together, system.Apart})
	}},
	{"testbed.wakeup", "live validation on one machine: how long an idle core takes to wake for a backend woken from another core (testbed.scheduler per_core): the backend waits that long before its statement runs; on its waker's core or a busy one it starts at once, a duration (default 0)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Testbed.Wakeup, n)
	}},
	{"testbed.idle_balance", "live validation on one machine: whether a core that runs out of work takes a thread queued on another that has not run for 0.5 ms, as Linux's balancing on a newly idle core does (testbed.scheduler per_core): true (at every chance), false (never: every queued thread stays on its core) or a duration (at most once per that) - poolsim validate fits it per row so that the model of its through loop keeps the cores as busy as the machine's CPUs were in that loop (default true)", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		c.Testbed.NoIdleBalance, c.Testbed.IdleBalanceEvery = false, 0
		if on, err := strconv.ParseBool(s); err == nil {
			c.Testbed.NoIdleBalance = !on
			return nil
		}
		d, err := durationValue(n)
		if err != nil || d <= 0 {
			return fmt.Errorf("want true, false or a positive duration such as 50ms, got %q", s)
		}
		c.Testbed.IdleBalanceEvery = d
		return nil
	}},
	{"testbed.idle_scan", "live validation on one machine: whether a woken thread whose waker's core and own last core are both busy looks for an idle core (testbed.scheduler per_core): true, or false, as Linux does when its cores are busy (SIS_UTIL), to go to the waker's core if nothing queues there, else its own last core - poolsim validate fits it per row with testbed.idle_balance (default true)", func(c *system.Config, n *yaml.Node) error {
		var on bool
		if err := boolInto(&on, n); err != nil {
			return err
		}
		c.Testbed.NoIdleScan = !on
		return nil
	}},
	{"testbed.wake_curve", "live validation on one machine: an idle core's wake-up by how long it idled, instead of testbed.wakeup and pooler.wakeup (testbed.scheduler per_core): a list of [idle, wake-up] duration pairs, idle rising; a backend or the pooler's thread woken onto an idle core from another waits the curve's wake-up at that core's idle time, linear between the points and flat beyond them (bench/wake-pingpong.sh measures one) (default none)", func(c *system.Config, n *yaml.Node) error {
		return wakeCurveInto(&c.Testbed.WakeCurve, n)
	}},
	{"testbed.server_tail", "live validation on one machine: the share of a pooled statement's CPU its backend runs after it has sent the response, keeping its core, while the pooler relays it (testbed.scheduler per_core); a statement that reaches that server meanwhile runs next on the same core - bench/server-tail.sh measures it, poolsim validate sets it (0..0.5; default 0)", func(c *system.Config, n *yaml.Node) error {
		return floatInto(&c.Testbed.ServerTail, n, 0, 0.5, "a share of the statement's CPU from 0 to 0.5")
	}},
	{"testbed.pooler_preempt", "live validation on one machine: how often per pooled statement a load driver's thread woken by a result takes the pooler's core from it while it runs, the pooler's thread waiting behind it (testbed.scheduler per_core, testbed.pooler_on_cores): Linux's wake-up preemption, PgBouncer's involuntary context switches - bench/handover.sh measures it, poolsim validate sets it for pool 1 through PgBouncer (0..4; default 0)", func(c *system.Config, n *yaml.Node) error {
		return floatInto(&c.Testbed.PoolerPreempt, n, 0, 4, "preemptions per pooled statement from 0 to 4")
	}},
	{"testbed.server_preempt", "live validation on one machine: how often per pooled statement a load driver's thread woken by a result takes a backend's core from it while it runs a statement, the backend waiting behind it (testbed.scheduler per_core): the backends' involuntary context switches - poolsim validate sets it for pool 1 through PgBouncer with the server on a core of its own (0..4; default 0)", func(c *system.Config, n *yaml.Node) error {
		return floatInto(&c.Testbed.ServerPreempt, n, 0, 4, "preemptions per pooled statement from 0 to 4")
	}},
	{"testbed.servers_open", "live validation: servers each pool already has open and idle at time zero, within its pool size and server.max_connections in all - a live pooler keeps the server the first client's login opened (PgBouncer caches its welcome) and those the validator's calibration through it opened, which poolsim validate counts at PostgreSQL right before each run; a direct pool ignores it (0..100000; default 0: every pool starts empty)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 100000)
		c.Testbed.ServersOpen = int(v)
		return err
	}},
	{"live.statement", "how poolsim validate spends workload.query at the real server: sleep (pg_sleep, whole milliseconds), cpu (a CPU-bound statement calibrated on the spot), sql (live.sql) or pgbench-select (pgbench -S's statement against a database pgbench -i initialises; its CPU is measured and the calibrated model runs it on server.cores with the pooler and the load driver)", func(c *system.Config, n *yaml.Node) error {
		names := []string{"sleep", "cpu", "sql", "pgbench-select"}
		return choiceInto(&c.Live.Statement, n, names, names)
	}},
	{"live.scale", "pgbench's scale factor for live.statement: pgbench-select (100,000 accounts each; 1..1000; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1000)
		if err == nil {
			c.Live.Scale = int(v)
		}
		return err
	}},
	{"live.driver", "poolsim validate's load driver: poolsim (its own, in this process; default) or pgbench (pgbench -S itself, a process of its own: live.statement pgbench-select, closed clients with no think; its CPU is the testbed's driver)", func(c *system.Config, n *yaml.Node) error {
		names := []string{"poolsim", "pgbench"}
		return choiceInto(&c.Live.Driver, n, names, names)
	}},
	{"live.sql", "the statement poolsim validate runs with live.statement: sql (the model still uses workload.query; with server.cores the statement is CPU on the cores, calibrated as pgbench-select's is: its CPU measured and run by the calibrated model with the pooler and the load driver)", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		if len(s) > 100_000 {
			return fmt.Errorf("longer than 100000 bytes")
		}
		c.Live.SQL = s
		return nil
	}},
	{"live.with_hold", "classes whose requests poolsim validate runs holding a WITH HOLD cursor across their transactions (DECLARE in the first, FETCH in each later one, CLOSE after the last): a class name, a comma-separated list or a YAML list", func(c *system.Config, n *yaml.Node) error {
		var names []string
		switch n.Kind {
		case yaml.ScalarNode:
			for _, v := range strings.Split(n.Value, ",") {
				if v = strings.TrimSpace(v); v != "" {
					names = append(names, v)
				}
			}
		case yaml.SequenceNode:
			for _, e := range n.Content {
				v, err := scalar(e)
				if err != nil {
					return err
				}
				names = append(names, v)
			}
		default:
			return fmt.Errorf("want a class name or a list of them, got a %s", kindName(n))
		}
		c.Live.WithHold = names
		return nil
	}},
	{"server.connect_concurrency", "backends that can start at once; the rest queue in arrival order (1..100000; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.Server.ConnectConcurrency = int(v)
		return err
	}},
}

func lookup(key string) (field, bool) {
	for _, f := range fields {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

func keysUnder(prefix string) []string {
	var ks []string
	for _, f := range fields {
		if k, ok := strings.CutPrefix(f.key, prefix+"."); ok {
			ks = append(ks, k)
		}
	}
	return ks
}

// Fields describes every settable key, in order, as "key: doc" lines (for
// help texts).
func Fields() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = fmt.Sprintf("%-34s %s", f.key, f.doc)
	}
	return append(out, ClassFields()...)
}

func scalar(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("want a single value, got a %s", kindName(n))
	}
	return n.Value, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}

func intValue(n *yaml.Node, lo, hi int64) (int64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a whole number from %d to %d, got %q", lo, hi, s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("must be from %d to %d, got %d", lo, hi, v)
	}
	return v, nil
}

// maxDuration bounds every duration: a week of virtual time.
const maxDuration = 7 * 24 * time.Hour

func durationValue(n *yaml.Node) (sim.Time, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 300us, 5.48ms or 3s, got %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", s)
	}
	if d > maxDuration {
		return 0, fmt.Errorf("must be at most %s, got %s", maxDuration, s)
	}
	return sim.FromDuration(d), nil
}

func boolInto(dst *bool, n *yaml.Node) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*dst = v
	return nil
}

func durationInto[T ~int64](dst *T, n *yaml.Node) error {
	d, err := durationValue(n)
	if err == nil {
		*dst = T(d)
	}
	return err
}

func rateValue(n *yaml.Node) (float64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	num, unit, _ := strings.Cut(s, "/")
	per := 1.0
	switch unit {
	case "", "s":
	case "ms":
		per = 1e-3
	case "min":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, fmt.Errorf("want a rate such as 80/s or 4800/min, got %q", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a rate such as 80/s or 4800/min, got %q", s)
	}
	v /= per
	if v <= 0 || v > 1e9 {
		return 0, fmt.Errorf("must be above 0 and at most 1e9 per second, got %q", s)
	}
	return v, nil
}

func fractionInto(dst *float64, n *yaml.Node) error {
	return floatInto(dst, n, 0, 1, "a number from 0 to 1")
}

// choiceInto sets *dst to values[i] for the scalar names[i]; any other
// value is an error that lists the names.
func choiceInto[T any](dst *T, n *yaml.Node, names []string, values []T) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	for i, name := range names {
		if s == name {
			*dst = values[i]
			return nil
		}
	}
	want := names[len(names)-1]
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + want
	}
	return fmt.Errorf("want %s, got %q", want, s)
}

// floatInto reads a number from lo to hi; want says what is expected.
func floatInto(dst *float64, n *yaml.Node, lo, hi float64, want string) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= lo && v <= hi) {
		return fmt.Errorf("want %s, got %q", want, s)
	}
	*dst = v
	return nil
}

// speedInto reads testbed.speed: a non-empty list of factors above 0.
func speedInto(dst *[]float64, n *yaml.Node) error {
	items, err := listValue(n, "testbed.speed")
	if err != nil {
		return err
	}
	out := make([]float64, 0, len(items))
	for i, it := range items {
		var v float64
		if err := floatInto(&v, it, math.SmallestNonzeroFloat64, 100, "a speed factor above 0, at most 100"); err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	*dst = out
	return nil
}

// wakeCurveInto reads testbed.wake_curve: a list of [idle, wake-up]
// duration pairs.
func wakeCurveInto(dst *[]system.WakePoint, n *yaml.Node) error {
	items, err := listValue(n, "testbed.wake_curve")
	if err != nil {
		return err
	}
	out := make([]system.WakePoint, 0, len(items))
	for i, it := range items {
		if it.Kind != yaml.SequenceNode || len(it.Content) != 2 {
			return fmt.Errorf("entry %d: want a pair [idle, wake-up] of durations such as [40us, 15us]", i+1)
		}
		var p system.WakePoint
		if err := durationInto(&p.Idle, it.Content[0]); err != nil {
			return fmt.Errorf("entry %d: idle: %w", i+1, err)
		}
		if err := durationInto(&p.Wake, it.Content[1]); err != nil {
			return fmt.Errorf("entry %d: wake-up: %w", i+1, err)
		}
		out = append(out, p)
	}
	*dst = out
	return nil
}

// sizeValue reads a memory size: a number of bytes, or a number with B,
// kB, MB or GB (PostgreSQL's units: 1kB = 1024 bytes).
func sizeValue(n *yaml.Node) (int64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	num, mult := s, 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"kB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*mult > 1<<40 {
		return 0, fmt.Errorf("want a size such as 1.5MB, 1536kB or 0 (at most 1TB), got %q", s)
	}
	return int64(math.Round(v * mult)), nil
}
