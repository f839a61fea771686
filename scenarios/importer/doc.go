// Package importer turns what a running system already measures into a
// poolsim scenario, and checks the scenario against those measurements.
//
// Four sources, in any combination (one file each: console.go, pgstat.go,
// logfacts.go with serverlog.go, pgbenchlog.go):
//
//   - PgBouncer's admin console, sampled every interval for a duration
//     (SampleConsole; AnalyzeConsole): SHOW STATS totals give transactions
//     and queries per second, the time a transaction holds its server and
//     the wait for one (PgBouncer counts query and transaction time from
//     the client's request, so both include the wait, which is taken out);
//     SHOW POOLS gives clients, waiting clients and linked servers;
//     SHOW CLIENTS gives client turnover; SHOW CONFIG and SHOW DATABASES
//     the pool settings in force (read through models/poolconf).
//   - PostgreSQL (SamplePG; AnalyzePG): two pg_stat_statements snapshots
//     a duration apart give each statement's calls, mean and standard
//     deviation over the window (from the sums and sums of squares), and
//     pg_settings gives max_connections and the reserved slots.
//   - csvlog or jsonlog files with log_min_duration_statement = 0 and
//     connection logging (AnalyzeLogs): the server's duration of every
//     round trip, transactions (BEGIN ... COMMIT blocks, read from the
//     statement text; a statement outside one is its own), the gaps
//     between round trips, sessions and connection set-up.
//   - pgbench -l logs, per transaction or aggregated (AnalyzePgbench):
//     clients, the transaction rate and pgbench's latency.
//
// Derive combines the facts into scenario values, each with a Setting.From
// saying its source, window and formula; YAML writes them with that as a
// comment above each value. Check simulates the scenario with the observed
// settings (replications, 95 % intervals) and compares it with the
// observed figures (Tolerance 15 %, or an absolute allowance), giving a
// verdict. What the sources show and the model cannot represent yet
// (client classes, several pools, a request level, per-statement kinds)
// is listed in Import.Dropped, and every assumption in Import.Caveats.
//
// Units: times are time.Duration (the console's microseconds and the
// logs' milliseconds converted); rates are per second. Log times have
// millisecond resolution (PostgreSQL writes no finer), so gaps read from
// a log are used as means only.
//
// Guarantees: every network step is bounded (a connect timeout, 10 s per
// statement, ctx for the sampling); parsers never panic on any input
// (fuzzed) and refuse a file in another format naming what it looks like;
// errors wrap ErrUnreachable, ErrRefused, ErrNotConsole,
// ErrNoPgStatStatements, ErrFormat, ErrNoData or ErrBadInput and say what
// to change. Records (ConsoleRecord, PGRecord) are plain JSON, so a
// sampling can be saved and analysed again.
package importer
