// Package advise answers "which pool mode, and how big a pool?" for every
// pool of a scenario at once, under one server budget, from simulations
// instead of rules of thumb. It is pure: Advise asks a caller-supplied
// Runner for batches of configurations' replications and decides from
// them; it starts no goroutine and reads no clock.
//
// What it owns:
//
//   - the budget (Budget): max_connections less
//     superuser_reserved_connections less a headroom (Headroom); a pooled
//     mode spends its pool size at every pooler process, direct one server
//     connection per client connection;
//   - the objective (Objective): the fewest server connections summed over
//     the pools, or the best latency inside the budget;
//   - each class's bars (bars.go): nothing refused, timed out or
//     unfinished; its load carried against its own throughput with servers
//     to spare; its p99 latency within its SLO and its p99 wait within its
//     maximum, or without either within P99Slack of its mode's spare; its
//     minimum throughput;
//   - the search (search.go, combine.go): every allowed mode of every pool
//     on a logarithmic grid, the smallest qualifying size refined by
//     bisection to the exact smallest, the other pools meanwhile at
//     servers to spare; the objective's combination inside the budget,
//     checked as a whole run with the scenario's max_connections, and the
//     pools whose classes miss a bar there searched again (MaxRounds);
//     classes and pools in name order, so the file's order does not
//     matter;
//   - the change that frees a pool (changes.go): for each feature that
//     keeps a pool off transaction pooling, the change of the application
//     that frees it, what transaction pooling would then take, and
//     --assume's answer for the changed application;
//   - the deployable artefact (ini.go): the answer as a pgbouncer.ini;
//   - the classic rules of thumb beside the answer (classic.go).
//
// Units: durations are time.Duration (bars) or milliseconds (figures,
// as system.Metrics has them); throughput in transactions per second;
// spend and budget in server connections.
//
// Guarantees: the same Request and the same Runner results give the same
// Advice, whatever the order of classes and pools in the scenario; every
// evaluated configuration is in Advice.Evaluated, also when the Runner
// is interrupted (Advice.Incomplete).
package advise
