// Package proxy is poolsim's PostgreSQL pooling proxy: a PgBouncer-style
// pooler on the wire protocol (github.com/jackc/pgx/v5/pgproto3), so that
// the simulator's predictions can be checked against a real pooler whose
// rules are the model's own (package models/poolmode decides every link and
// release; there is no second copy of the rules here).
//
// # What it does
//
// Clients log in to the proxy, not to PostgreSQL: SSLRequest and
// GSSENCRequest are declined ('N'); authentication is trust or
// SCRAM-SHA-256 against a PgBouncer auth_file; the proxy answers with the
// ParameterStatus messages cached from its pool's first server connection
// (one is opened at a pool's first login), a random BackendKeyData of its
// own and ReadyForQuery. Each (database, user) of a StartupMessage is one
// pool. The upstream URL supplies host, port, password and TLS; the
// database and user always come from the client. Server connections are
// opened with pgconn (so TLS and every PostgreSQL auth method work) and then
// hijacked for raw forwarding.
//
// Pooling follows PgBouncer: a client gets a server at its first message
// that needs one (poolmode.Mode.NeedsServer; Flush with no server is a
// no-op); waiting clients are served first come, first served; idle
// servers are reused last in, first out; a released server goes straight
// to the oldest waiter; a pool has at most one server login in flight and
// at most PoolSize servers, and a database at most MaxDBConnections (idle
// servers of the database's other pools are evicted to make room). Release
// is decided by poolmode.Mode.AfterReady on each ReadyForQuery, after the
// message has been flushed to the client, with the count of requests still
// outstanding (Query, Sync and FunctionCall sent but not answered, plus one
// while extended-protocol messages wait for their Sync). A client that
// leaves is handled by poolmode.Mode.ClientGone: a clean server is reset
// with ServerResetQuery (session mode) or released; a server left inside a
// transaction or mid-query is closed, never reused. Statement mode closes
// the server and sends FATAL 08P01 "transaction blocks not allowed in
// statement pooling mode" when a transaction block starts.
//
// Limits and errors use PgBouncer's texts, as FATAL 08P01 errors after
// which the connection is closed: "no more connections allowed
// (max_client_conn)", "query_wait_timeout". A failed server login with no
// server in the pool hands PostgreSQL's own error (e.g. 53300 sorry, too
// many clients already) to every waiting client. Servers idle longer than
// ServerIdleTimeout are closed (checked three times a second), and servers
// older than ServerLifetime are closed when released.
//
// # Prepared statements
//
// With MaxPreparedStatements > 0, transaction and statement pooling track
// protocol-level named prepared statements as PgBouncer 1.21+ does
// (src/prepare.c; see prepare.go): a client's statement names map to
// proxy-wide statements PGBOUNCER_<id>, one per query text and parameter
// types; Parse, Bind, Describe and Close are rewritten; a server lacking a
// statement gets a Parse first; each server keeps at most
// MaxPreparedStatements, least recently used closed first; a Parse the
// server has, and every Close of a named statement, are answered by the
// proxy. Responses are kept in order under pipelining by a per-server queue
// of expected responses, each forwarded, swallowed or faked. DEALLOCATE ALL
// and DISCARD ALL forget the client's names and the server's statements.
// A client reusing a name it has, or binding one it does not have, is
// disconnected with PgBouncer's FATAL "prepared statement name is already
// in use" or "prepared statement did not exist". Unnamed statements and
// SQL-level PREPARE pass through. With 0 (the default, PgBouncer 1.18's
// behaviour) or in session mode every message passes through untouched.
// Only while tracking do Parse and Bind messages need to be decoded, and a
// waiting client's requests are then not queued with the pool (they are
// rewritten for the server they go to).
//
// A CancelRequest carrying a key the proxy gave out is forwarded, with the
// linked server's real key, over a new upstream connection; the server is
// held back from reuse until the cancel has settled.
//
// The virtual database "pgbouncer" is an admin console (simple query
// protocol) answering SHOW POOLS, SHOW STATS, SHOW CLIENTS, SHOW SERVERS,
// SHOW VERSION and SHOW HELP with PgBouncer's column names in PgBouncer's
// order (prepared_statements in SHOW CLIENTS and SHOW SERVERS, the parse
// and bind counts of SHOW STATS, filled while statements are tracked). Proxy.Waits reports every server assignment's wait (request
// reached the proxy -> server linked) for the validator, in bounded memory.
//
// # Forwarding
//
// Messages are forwarded as bytes: the proxy reads a 5-byte header and
// copies the message from its read buffer into the peer's write buffer;
// only ReadyForQuery is decoded on the server side, and only the type byte
// on the client side (while prepared statements are tracked, also Parse,
// Bind, Describe and Close, and the tags of short CommandCompletes). Buffers are flushed when the reader has no complete
// message left, so a pipeline is written in one go and nobody waits on
// bytes sitting in a buffer. Each client has one goroutine (reading the
// client, writing its server) and each server one (reading the server,
// writing the linked client); there is no goroutine hop per message. A
// client that must wait for a server leaves its complete request with the
// pool (at most 64 KB) and its goroutine goes back to reading the client;
// the goroutine that releases a server links it to the oldest waiter and
// writes that request itself, so a hand-off wakes nobody.
//
// # Ownership and shutdown
//
// Every goroutine is started by the Proxy and counted in one WaitGroup:
// the accept loop, one per connection, one per server connection (its
// reader, which also notices a server that closes while idle), one per
// server login and the janitor. A client's goroutine owns the client's
// connection; a server's goroutine owns reading its connection, and the
// holder of the server (the linked client, or the pool while resetting)
// owns writing to it. Serve returns only after all of them have ended.
// When its context is done Serve stops accepting, closes clients that are
// between transactions, lets the others finish for up to ShutdownTimeout,
// then closes every connection. Start-up and authentication are bounded by
// a 60 s login timeout, server logins by ServerConnectTimeout, forwarded
// cancels by 10 s; everything else ends when its peer closes or shutdown
// closes it.
package proxy
