// Package importtest is a live lab for poolsim import's tests and
// fixtures: a throwaway PostgreSQL with pg_stat_statements and a csvlog
// of every statement, real PgBouncers in front of it, and pgbench running
// a custom script through them.
//
// What it owns: nothing beyond a test. Start gives a pgcluster with LogConf
// (the settings import documents for users: pg_stat_statements preloaded
// and created in the poolsim database, a csvlog and a jsonlog of every
// statement with connection lines, log times in UTC); PgBouncer starts one
// in transaction mode; StartPgbench runs pgbench with a Script in the
// background, its per-transaction logs in a folder of the test's.
//
// Guarantees: everything it starts is stopped in t.Cleanup; every wait is
// bounded by a context and polls observable state (SHOW POOLS, SHOW
// STATS), never a fixed sleep. Without PostgreSQL, PgBouncer or pgbench the
// test is skipped, or failed when CI=true.
package importtest
