package pooler

import "github.com/jackc/pgx/v5/pgconn"

// sqlstateCannotConnectNow is PostgreSQL's cannot_connect_now (57P03):
// "the database system is starting up" (or "... is not accepting
// connections", "... is in recovery mode", "... is shutting down").
const sqlstateCannotConnectNow = "57P03"

// transientLoginError reports whether PostgreSQL refused a server login
// with an error that says it will accept logins soon (57P03). Such an
// error does not fail the clients waiting for the pool's first server:
// they wait for the next try, server_login_retry later, within
// client_login_timeout, as a refused connection leaves them - PgBouncer
// 1.21's rule (server.c kill_pool_logins_server_error, commit e7619364).
// PgBouncer 1.18 failed them with the error, so a try that reached
// PostgreSQL while it started up closed every client logging in.
func transientLoginError(pe *pgconn.PgError) bool {
	return pe.Code == sqlstateCannotConnectNow
}
