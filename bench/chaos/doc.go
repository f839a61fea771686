// Package chaos is the fault-injection suite of poolsim's pooling proxy: the
// same attacks and failures run against `poolsim proxy` (the real binary,
// built by the suite) and against a real PgBouncer 1.18 with the same
// settings, in front of one throwaway PostgreSQL, and each is checked by
// what a client can observe.
//
// It is a test package: `go test ./bench/chaos` runs the short version
// (CI runs it, about two minutes on two cores); POOLSIM_CHAOS=full runs the
// long one (thousands of idle clients, a soak of POOLSIM_CHAOS_SOAK,
// default 10m) and POOLSIM_CHAOS_OUT=file.md writes the figures table
// (bench/chaos.sh does both). Scenarios:
//
//   - backend kills under load, with a commit ledger: every commit a client
//     saw acknowledged must be in the table afterwards;
//   - a PostgreSQL crash-restart under load (SIGKILL of one backend makes
//     the postmaster restart all of them), ledger checked;
//   - PostgreSQL down at start, then up; a hung upstream (accepts, never
//     answers);
//   - a client killed (RST) while holding an ACCESS EXCLUSIVE lock inside
//     a transaction: the lock must be free again;
//   - slowloris logins (a byte at a time) while other clients work;
//   - descriptor exhaustion under `ulimit -n 256` with 300 idle
//     connections: the pooler stays up and serves afterwards;
//   - descriptor exhaustion with logged-in clients (fds_test.go): 215 idle
//     clients under `ulimit -n 256` (87 under 128 in the short run), then
//     30 new ones log in and query; and clients until the pooler takes no
//     more, then a query needing a new server and 10 more logins. Every
//     new client must be served or told why, never closed bare, the proxy
//     must serve as many as PgBouncer, and serve at once when descriptors
//     free;
//   - console and client length bombs (headers claiming 1 GiB) under a
//     3 GiB address-space limit: the pooler stays up, RSS under 200 MB;
//   - many idle logged-in clients: memory per client, the proxy's against
//     PgBouncer's, measured the same way in one run, from a fresh process
//     and after a warm-up (RSS before and right after the logins, and in
//     the full run once it has settled);
//   - a soak under load sampling RSS, descriptors, threads and (for the
//     proxy, through --pprof-listen) goroutines.
//
// What it owns: the poolsim binary it builds (or POOLSIM_BIN), the proxy and
// PgBouncer processes it starts (each stopped by the test that started it;
// both die with the test process), one PostgreSQL cluster for the package.
// Everything talks over loopback only. Without PostgreSQL or PgBouncer the
// tests skip, except under CI=true, where that is a failure.
package chaos
