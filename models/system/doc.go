// Package system simulates clients, a PgBouncer-style pooler and a
// PostgreSQL server on the sim engine, and measures what a capacity planner
// asks about: throughput, transaction latency, the wait for a server
// connection, refusals and timeouts.
//
// What it models (docs/scenarios.md, "Semantics in one paragraph"; the PgBouncer
// behaviour behind it, with its sources, is docs/pgbouncer-rules.md):
//
//   - workload: a closed workload of Clients sessions that all try to
//     connect at t=0 in index order, or an open workload of Poisson session
//     arrivals at ArrivalRate for Duration; each session runs
//     TxnsPerSession transactions of StmtsPerTxn statements, with Think
//     after every statement but the session's last; or an open workload
//     of Poisson requests served by Workers persistent application
//     connections (Puma threads, Sidekiq workers), queued in the
//     application while every worker is busy (workers.go);
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
// The server's CPU: with Server.Cores, the backends' statements and
// start-ups share the cores by processor sharing (ps.go), each slowed by
// the USL factor of those running. That is the model's only built-in;
// Config.Machine plugs another machine in through the CPU port
// (machine.go: Machine, CPU, Clients and the Host they call back) - a
// live validation's test machine, with its load driver and its
// scheduler's run queues, is lab/testbed's. Pooler.CPUPerAssign is the
// pooler thread's work to hand a server to a client, queued like a
// message, on whichever CPU the thread runs.
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
// Result, bit for bit (a Machine's parts are held to the same) — and
// starts no goroutines. Transactions are
// conserved: attempted = ok + refused + timed out + unfinished, counted
// independently.
package system
