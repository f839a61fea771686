// Package poolqueue holds the queueing rules of one pool of server
// connections that the simulator (models/system) and the live proxy
// (proxy/pooler) both follow, as PgBouncer does them (src/objects.c
// find_server, release_server, launch_new_connection; src/janitor.c
// pool_client_maint for query_wait_timeout):
//
//   - waiting clients are served first come, first served: a released or
//     newly logged-in server goes to the client that has waited longest;
//   - idle servers are reused last in, first out: the most recently used
//     one first;
//   - a client that arrives while others wait queues behind them, even if
//     a server is idle; so an idle server exists only while nobody waits;
//   - at most one server login is in flight per pool, and a login is
//     started only when a client waits, no server is idle, none is logging
//     in and the pool is below its size;
//   - when a login fails after PostgreSQL answered with an error and the
//     pool is left with no server, every waiting client fails with that
//     error; a login that failed without an answer fails no one;
//   - waiters past query_wait_timeout leave in arrival order.
//
// A Queue holds the waiting clients, the idle servers, the count of
// servers open or logging in and the login in flight, and returns
// decisions; the caller acts on them (assigns, opens, closes, fails). What
// the two users do differently stays with them:
//
//   - the budgets that may also hold a login back (max_db_connections,
//     max_user_connections): the model divides them among a fleet's
//     processes and evicts the newest idle server of another pool, the
//     proxy counts them across the process and evicts the oldest;
//   - what stops a pool's logins after a refusal: the model marks the pool
//     full until an eviction (PostgreSQL's max_connections), the proxy
//     retries after server_login_retry and meanwhile refuses new clients of
//     a pool with no server at once (check_fast_fail), unless the pool's
//     database is paused;
//   - who else needs a login: the proxy also launches one for clients
//     logging in before the pool has seen any server (CanLaunch without a
//     waiter);
//   - when a timed-out waiter is noticed: the model sets one timer per
//     waiter on the janitor's ticks and takes it off with Remove (all
//     waiters share one timeout, so they leave in arrival order too), the
//     proxy's janitor calls Expire on each tick;
//   - the wait queue's statistics: the model counts every change in a
//     sim.QueueStats beside its Queue.
//
// When a client arrives here and when a server is released are pool-mode
// rules, shared already in models/poolmode, not queueing rules:
// Mode.NeedsServer says whether a message needs a server (every message
// the model simulates is a statement, which always does, so the model
// has no call to make), and Mode.AfterReady takes the requests still
// outstanding (Query, Sync and FunctionCall the server has not answered).
// The count itself stays in the proxy's client: the model sends one
// statement at a time and waits for its answer, so its count is always 0
// and it passes 0.
//
// The package is pure: no I/O, no goroutines, no clock. Times are int64
// nanoseconds on the caller's clock (virtual time in the model, Unix
// nanoseconds in the proxy); the queue only compares them and hands them
// back. Queue is generic over the client and server handles, so the model
// uses int32 ids and the proxy pointers; no operation allocates except
// when the waiter queue or the idle stack grows past its largest size so
// far.
package poolqueue
