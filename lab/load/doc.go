// Package load is poolsim's load driver: it runs a scenario's workload with
// real PostgreSQL connections (github.com/jackc/pgx/v5/pgconn; the simple
// query protocol, or the extended one for prepared statements) against a
// pooler or a server, and records what the model records — transactions
// completed, refusals, query_wait_timeout disconnections, wall time and
// transaction latencies.
//
// A closed workload starts one goroutine per client. Every client connects
// first; when all connection attempts have ended (a barrier), the clients
// that got in start their sessions together, at the run's time zero, as the
// model's clients do at t = 0. The connection cost is therefore outside the
// measurement, as it is in a model whose server.connect is 0 for the
// clients' own logins. An open workload starts one goroutine per Poisson
// arrival (seeded, so the arrival times repeat); each connects when it
// arrives and runs one session. A workers workload (workload.workers,
// workers.go) connects its workers before time zero as closed clients do,
// then serves the seeded arrivals from an application queue, the
// longest-idle worker taking the next request on its own connection.
//
// A session is workload.txns_per_session transactions of
// workload.stmts_per_txn statements, with workload.think after every
// statement but the session's last. With a request level
// (workload.requests_per_session) it is that many requests of
// workload.txns_per_request transactions - drawn per request from the
// model's own stream, so the live run and the model run the same
// transactions - with workload.app between the statements of a
// transaction and between the transactions of a request, and
// workload.think between requests and, for a closed client, before the
// first. Spec.Hold makes each request hold a WITH HOLD cursor across its
// transactions (hold.go). RunGroups runs several groups of clients (a
// scenario's client classes, each with its own DSN) under one barrier. A transaction of several statements is
// a transaction block when Spec.Blocks is set: BEGIN travels in the first
// statement's Query message and COMMIT in the last one's, so a transaction
// costs exactly stmts_per_txn round trips, as in the model. Statement
// pooling refuses blocks, so the validator runs statement mode without
// them, as the model does.
//
// A prepared-statement workload (Spec.Prepared: workload.statements,
// workload.prepare_threshold) runs its statements with the extended
// protocol instead, as the model's driver does; see PreparedCounts.
//
// A transaction's latency runs from its first statement being sent to its
// last result being received, think time between its statements included.
//
// Ownership: Run starts every goroutine it uses and returns only after all
// of them have ended; every connection and statement is bounded by the
// context and by Spec's timeouts.
package load
