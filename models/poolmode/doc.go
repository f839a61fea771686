// Package poolmode holds the pool-mode rules that the simulator
// (models/system) and the live proxy (proxy/pooler) both follow: when a
// client needs a server connection, when a linked server goes back to the
// pool, and what happens to it when its client goes away. The rules follow
// PgBouncer's source (https://github.com/pgbouncer/pgbouncer: src/client.c
// handle_client_work, src/server.c handle_server_work, src/objects.c
// release_server and disconnect_client); docs/pgbouncer-rules.md §1 sums
// them up.
//
// The package is pure: no I/O, no time, no state. Both users feed it the
// facts they see (the ReadyForQuery status byte, the number of requests
// still unanswered) and act on the Decision it returns, so there is one copy
// of the rules and one table test for it.
//
// It also holds the exact client-visible texts of the pooler's own errors,
// so the model's reports and the proxy's FATAL messages read the same.
package poolmode
