// Package system simulates clients, a PgBouncer-style pooler and a
// PostgreSQL server on the sim engine, and measures what a capacity planner
// asks about: throughput, transaction latency, the wait for a server
// connection, refusals and timeouts.
//
// What it models (the README's "Semantics in one paragraph"; the PgBouncer
// behaviour behind it, with its sources, is docs/pgbouncer-rules.md):
//
//   - workload: a closed workload of Clients sessions that all try to
//     connect at t=0 in index order, or an open workload of Poisson session
//     arrivals at ArrivalRate for Duration; each session runs
//     TxnsPerSession transactions of StmtsPerTxn statements, with Think
//     after every statement but the session's last;
//   - pooler: the four modes, with the assign/release rule read from
//     models/poolmode and the queueing rules from models/poolqueue (the
//     same code the live proxy runs): lazy assignment, FIFO waiters, LIFO
//     idle servers, hand-off on release, one server login at a time,
//     max_client_conn, default_pool_size, max_db_connections and
//     query_wait_timeout; statement mode runs a transaction's statements as
//     autocommit statements;
//   - server: max_connections slots and backend start-up costing Connect,
//     at most ConnectConcurrency at once, the rest queued in arrival order.
//
// The testbed (Config.Testbed, testbed.go) is what shares the server's
// cores in a live validation, where PostgreSQL, the pooler and the load
// driver run on one machine; it is zero for a production what-if. The
// driver's CPU per statement (a job per client, before the statement is
// sent; with DriverThreads, one job at a time per thread; with
// DriverScan, as pgbench's threads take their clients: a pass in client
// order over the results a poll found, the next transactions started in a
// pass of their own and timed from there) and, with
// PoolerOnCores, each pooler thread's work (one job at a time per
// process) run on Server.Cores beside the backends' statements and
// start-ups: processor sharing (Scheduler Shared) gives each of the n
// jobs running min(1, (Cores − Background)/n) of a core; per-core run
// queues (PerCore, runqueue.go) place each job on one core, where it runs
// alone (at min(1, (Cores − Background)/busy cores) of it), and let a core idle beside
// the other's queue of threads that ran within the last 0.5 ms, as
// Linux does; Testbed.Affinity pins the pooler's thread and the backends
// to cores as taskset does, and Testbed.Wakeup makes a backend woken onto
// an idle core from another wait for that core first (Testbed.WakeCurve:
// a backend or the pooler's thread, the longer the longer it idled). With
// per-core queues a pooled statement's backend is its server's process,
// whichever client sent it, and Testbed.ServerTail lets it send the
// response before the last share of its CPU, keeping its core for that
// tail, where a statement that reaches it meanwhile runs next;
// Testbed.PoolerPreempt and ServerPreempt let a driver's thread woken by
// a result take the core of the pooler's thread or of a backend at a
// measured rate per statement (Linux's wake-up preemption), spent as a
// credit, not drawn: no random stream. Only the backends' jobs are slowed further by the USL
// factor of the backend jobs running (per core: in their CPU phase). The
// jobs level and cpu_jobs_L count the backends' jobs alone; with a
// testbed cpu_util is the cores' utilisation by all the test's jobs and
// the background together. Testbed.Speed makes the cores' speed vary
// window by window (every job at once): a list of factors played in order,
// one every SpeedPeriod, from a start drawn by its own seeded stream.
// Pooler.CPUPerAssign is the thread's work to
// hand a server to a client, queued like a message, testbed or not.
//
// Studies: a run keeps the distributions its percentiles were read from
// (Metrics.Dists, compact histograms), so a study of replications
// (Replicated, replicate.go) reports a percentile of all their samples
// together with a jackknife interval, and a mean with Student t's;
// Stochastic finds randomness in every class and distribution; the
// automatic warm-up (warmup.go) is MSER-5 on pilot runs and at least the
// pools' fill, and a study checks after its first batch that the start-up
// is out of its figures (CorrelationTime, StartupBias).
//
// Units: durations are sim.Time (int64 nanoseconds); reported times are in
// milliseconds (fields ending _ms) or seconds (wait_W); rates per second.
//
// Guarantees: Run is deterministic — the same Config gives the same
// Result, bit for bit — and starts no goroutines. Transactions are
// conserved: attempted = ok + refused + timed out + unfinished, counted
// independently.
package system
