// Package pooler is poolsim's PostgreSQL pooling proxy: a PgBouncer-style
// pooler on the wire protocol (github.com/jackc/pgx/v5/pgproto3), so that
// the simulator's predictions can be checked against a real pooler whose
// rules are the model's own (package models/poolmode decides every link and
// release; there is no second copy of the rules here).
//
// # What it does
//
// Clients log in to the proxy, not to PostgreSQL: an SSLRequest is
// accepted or declined as ClientTLSSSLMode (PgBouncer's
// client_tls_sslmode) says, and require and above refuse a plain login
// with FATAL "SSL required" (clienttls.go); GSSENCRequest is declined
// ('N'); authentication is PgBouncer's trust, any, plain, md5,
// scram-sha-256, cert, hba or peer against a PgBouncer auth_file that may
// mix plain, md5 and SCRAM secrets (auth.go, authfile.go, hba.go, peer.go),
// with auth_user/auth_query/auth_dbname for users not in it
// (authquery.go); an unknown user's login looks like a real one's - a mock
// SCRAM verifier salted from the name and a per-process nonce, as
// PostgreSQL's scram_mock_salt, kept verifiers for plain passwords, and the
// md5/plain mock rules (scrammock.go); a start-up packet asking for
// protocol 3.1+ or carrying _pq_. options is answered with
// NegotiateProtocolVersion as PostgreSQL does (negotiate.go); a client that
// hangs up while its login waits for the pool's first server is closed at
// its EOF (hangup.go), so nothing is tried for it, and a server login
// refused with 57P03 (starting up, shutting down) fails no client logging
// in (startingup.go, PgBouncer 1.21's rule);
// the proxy answers with the ParameterStatus messages cached from its
// pool's first server connection (one is opened at a pool's first login),
// a random BackendKeyData of its own and ReadyForQuery. Each (database,
// user) of a StartupMessage is one pool. Config.Databases (pgbouncer.ini's
// [databases], package models/poolconf) says where each database name
// leads and may override pool size and mode per database, Config.Users per
// user; the upstream URL serves every other name, supplying host, port,
// password and TLS, with the database and user from the client. Server
// connections are opened with pgconn (so TLS and every PostgreSQL auth
// method work) and then hijacked for raw forwarding.
//
// Settings can change while the proxy serves (Reload, reload.go: SIGHUP in
// poolsim proxy); Pause and Resume (pause.go) hold every client that needs
// a server, as PgBouncer's PAUSE does; Shutdown is safe or immediate.
//
// Pooling follows PgBouncer: a client gets a server at its first message
// that needs one (poolmode.Mode.NeedsServer; Flush with no server is a
// no-op); by the queueing rules of models/poolqueue, which the model
// follows too, waiting clients are served first come, first served; idle
// servers are reused last in, first out; a released server goes straight
// to the oldest waiter; a pool has at most one server login in flight and
// at most PoolSize servers, and a database at most MaxDBConnections (idle
// servers of the database's other pools are evicted to make room). Release
// is decided by poolmode.Mode.AfterReady on each ReadyForQuery, once the
// message is queued for the client, with the count of requests still
// outstanding (Query, Sync and FunctionCall sent but not answered, plus one
// while extended-protocol messages wait for their Sync). A client that
// leaves is handled by poolmode.Mode.ClientGone: a clean server is reset
// with ServerResetQuery (session mode) or released; a server left inside a
// transaction or mid-query is closed, never reused. Statement mode closes
// the server and sends FATAL 08P01 "transaction blocks not allowed in
// statement pooling mode" when a transaction block starts, and, as
// PgBouncer, nothing of the server's reply to BEGIN before it.
//
// Five session settings follow their client as PgBouncer's varcache makes
// them (varcache.go): client_encoding, DateStyle, TimeZone,
// standard_conforming_strings and application_name. A client's values are
// those of its StartupMessage (else the pool's first server's), updated by
// the ParameterStatus its own SETs bring back; the login's ParameterStatus
// messages show them; when a client is linked to a server whose values
// differ, a SET goes first and its replies are swallowed (a failing SET
// ends the client with the server's error). Other SETs stay with the server,
// as in PgBouncer. Every other run-time parameter of the StartupMessage
// (options=-c name=value included) is applied the same way, with
// set_config and RESET when the client is linked (startup.go), where
// PgBouncer 1.18 refuses it.
//
// Limits and errors use PgBouncer's texts, as FATAL 08P01 errors after
// which the connection is closed: "no more connections allowed
// (max_client_conn)", "query_wait_timeout", "client_login_timeout". Every
// client connection counts against max_client_conn from the moment it is
// accepted (the check runs when the start-up packet names the database, the
// console exempt), and one that has not logged in within
// ClientLoginTimeout is closed. Server logins follow PgBouncer 1.18 as
// measured side by side: a client logging in while PostgreSQL is down or
// hung waits (one server login per ServerLoginRetry, each bounded by
// ServerConnectTimeout) and gets "client_login_timeout (server down)" when
// ClientLoginTimeout fires; a login PostgreSQL refuses with an error (e.g.
// "sorry, too many clients already") before the pool's first login
// succeeded hands its message, as FATAL 08P01, to every client logging in;
// after that (PostgreSQL restarting) it fails no one: waiting clients stay
// queued for the next login, ServerLoginRetry later; while the pool has no
// server a
// logged-in client that needs one is refused at once with "server login
// has been failing, try again later (server_login_retry)". No client ever
// sees the upstream's address or a Go error: the detail, naming
// server_connect_timeout when it fired, goes to the log. Servers idle
// longer than ServerIdleTimeout are closed (checked three times a second),
// servers older than ServerLifetime are closed when released, and a
// database whose pools have had no client and no server for
// AutodbIdleTimeout is dropped with its pools (every pool is auto-created,
// as with PgBouncer's "* =" entry).
//
// # Under attack (admission.go)
//
// Accept errors (out of descriptors, ENOBUFS, ...) are logged at most once a
// second ("accept() failed: Too many open files", PgBouncer's words) and
// the accept loop backs off (5 ms doubling to 1 s, cut short when a
// descriptor frees) and goes on. At Serve the proxy logs PgBouncer's
// "kernel file descriptor limit: ... max expected fd use: N" (a WARNING
// when N passes the limit) and keeps four /dev/null descriptors in reserve
// (fdreserve.go): out of descriptors, a spare makes room for a server
// connection, for handing a client to the loop, and for a connection
// waiting in the backlog, which the console may take and any other login
// waits on until a descriptor frees (for up to a second from the start of
// the exhaustion), then is served or gets "no more connections allowed
// (file descriptor limit)" - never a close without a word. Every message
// length is checked before anything is allocated for it: a start-up
// packet against PostgreSQL's 10,000 bytes and any other message against
// MaxPacketSize (max_packet_size; "bad packet header: '<hex>'"), and a
// console message must fit in PktBuf (pkt_buf, 4096; "incomplete pkt"), as
// in PgBouncer.
// The upstream connection string is parsed by pgconn, which fills what it
// leaves out from PG* variables as libpq does, except PGCONNECT_TIMEOUT,
// PGOPTIONS, PGTZ and PGAPPNAME, which apply only when the string sets
// them (upstream.go).
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
// Only while tracking do Parse and Bind messages need to be decoded.
//
// A CancelRequest carrying a key the proxy gave out is forwarded, with the
// linked server's real key, over a new upstream connection; the server is
// held back from reuse until the cancel has settled. With peer_id set
// (PgBouncer 1.19's peering, peering.go), every cancel key carries the peer
// id in its first two bytes and a time-to-live in the two low bits of its
// last byte; a CancelRequest naming another peer is forwarded to that
// peer's [peers] address with the TTL one less, at most pool_size at a
// time per peer, and SHOW PEERS / SHOW PEER_POOLS show the peers and the
// requests in flight. SHOW STATE is 1.19's too.
//
// The virtual database "pgbouncer" is PgBouncer 1.18's admin console
// (console.go, console_show.go, console_cmds.go, console_config.go), for
// the users of AdminUsers and StatsUsers (anyone else gets FATAL "not
// allowed"; a stats user gets ERROR "admin access needed" for admin
// commands and SHOW FDS, decided by requireAdmin): simple query protocol
// only (a Parse, Bind or Execute gets PgBouncer's
// non-fatal "extended query protocol not supported by admin console", then
// FATAL "bad packet"), commands parsed by PgBouncer's grammar, unknown ones
// answered "invalid command '<query>', use SHOW HELP;". Every SHOW view of
// 1.18 - HELP, CONFIG, DATABASES, POOLS, CLIENTS, SERVERS, USERS, VERSION,
// FDS, SOCKETS, ACTIVE_SOCKETS, LISTS, MEM, DNS_HOSTS, DNS_ZONES, STATS,
// STATS_TOTALS, STATS_AVERAGES, TOTALS - has exactly 1.18's columns, order
// and types, with NULL where 1.18 sends NULL (checked against a real
// PgBouncer 1.18 by TestConsoleMatchesPgBouncer). PAUSE, RESUME, SUSPEND,
// RELOAD (Config.Source), RECONNECT, KILL, DISABLE, ENABLE, WAIT_CLOSE,
// SET and SHUTDOWN behave as 1.18's, with its checks and texts; PAUSE,
// WAIT_CLOSE and SUSPEND answer when done. SHOW STATS averages over
// stats_period as PgBouncer does. What the proxy has and PgBouncer 1.18
// lacks (the prepared-statement counts, per-pool counters) is in
// Proxy.Stats, not in the console's tables.
// The proxy has no DNS cache
// (SHOW DNS_* are empty) and no slab allocator (SHOW MEM counts its
// objects).
// An Observer (Config.Observer, nil by default) is told every server
// assignment's wait (request reached the proxy -> server linked) and may
// have the event loop keep an OS thread of its own and time its turns: the
// validator's view of the proxy. Proxy.Stats also carries, per pool, histograms of those waits and of transaction and
// request times (HistogramBounds), whose bucket counts the loop keeps with
// a few comparisons per event; Proxy.Show returns any SHOW view's rows.
// Package proxy/metrics serves both to Prometheus.
//
// # Listeners, logins, the server side
//
// Serve accepts on every listener it is given (Listen opens them: each
// listen_addr and the Unix socket unix_socket_dir/.s.PGSQL.<port>,
// listen.go); over the Unix socket user "pgbouncer" gets the console
// without a password from a process of the proxy's own uid (peer.go,
// PgBouncer's admin_pre_login). Server logins without a password in their
// entry answer PostgreSQL with the client's auth_file or auth_query secret
// (md5 from the hash, SCRAM with the keys the client proved), the exchange
// run by the proxy on pgconn's connection (serverauth.go). server_tls_*
// is set on each pool's pgconn config; a change marks the servers made
// under the old settings to close (servertls.go). Pool maintenance -
// min_pool_size, the reserve pool, server_lifetime of idle servers,
// server_check_query, server_fast_close, round robin, shrinking - runs
// from the janitor's tick and from a client's arrival (shaping.go);
// connect_query runs on each new server. The tick also applies
// query_timeout ("query timeout", or "query_timeout" while waiting for a
// server), idle_transaction_timeout ("idle transaction timeout") and
// client_idle_timeout (janitor.go). A client's start-up settings are
// tried on a server before its login completes; a refusal fails the login
// with PostgreSQL's FATAL (startup_check.go). Log lines name their
// connection and use PgBouncer's words (logline.go): "closing because:
// REASON (age=Ns)", "new connection to server (from ADDR)".
//
// # Online restart
//
// StartTakeover and Proxy.ServeTakeover are pgbouncer -R (takeover.go,
// takeover_adopt.go): SUSPEND and SHOW FDS over the old process's
// Unix-socket console, descriptors in SCM_RIGHTS, the listeners, clients
// and servers rebuilt suspended, then SHUTDOWN of the old process and
// RESUME of this one's loop; RESUME to the old process on any failure
// before SHUTDOWN. The old side (takeover_old.go): SHOW FDS passes
// descriptors to a Unix-socket console connection of the proxy's own uid
// (TLS sockets skipped, as PgBouncer 1.18), SHUTDOWN after it forgets them
// without writing, and SUSPEND stops accepting and the janitor.
//
// # Forwarding: one event loop
//
// The data plane is one goroutine, the loop (loop_linux.go), that owns
// every logged-in client and every server connection, as PgBouncer's single
// libevent loop does. Each socket's descriptor is taken out of Go's network
// poller and registered once in an edge-triggered epoll set for input and
// output; reads and writes are non-blocking. A read that returns less than
// the space offered means the socket is drained, so a pgbench -S
// transaction needs two reads and two writes, no epoll_ctl, and a share of
// one epoll_wait per batch of events. Where the kernel allows io_uring
// (package uring; Config.PlainIO turns it off) the reads of one batch go
// to the kernel in one system call, right after epoll_wait, and its writes
// in one more when the batch settles; with a socket of its own a read or
// write is a raw system call, as it is everywhere with PlainIO and where
// uring.New refuses (the proxy logs which path it took at start). A system
// call costs about a microsecond of CPU on the machines poolsim was
// measured on, more than the proxy's own work on a message: batched, a
// pgbench -S transaction costs well under one (bench/proxy-vs-pgbouncer.sh
// with PERF=1 counts them). While busy the loop waits at most 5 ms in
// epoll_wait and yields to Go's scheduler every 8 ms, so that Go's monitor
// thread neither preempts it with a signal nor wakes up every 20 us
// (loop_linux.go, paceRuntime).
//
// Messages are forwarded as bytes: the loop reads the 5-byte header and
// copies the message from the source's read buffer to the peer's output;
// only ReadyForQuery is decoded on the server side, and only the type byte
// on the client side (while prepared statements are tracked, also Parse,
// Bind, Describe and Close, and the tags of short CommandCompletes).
// Output is written once the loop has handled every event one epoll_wait
// returned: a pipeline goes out in one write, and replies to several
// clients leave together, so a client program with many connections wakes
// once for them (against writing after each event this saved about 0.2
// context switches per pgbench -S transaction machine-wide). A message larger than the buffer (16 KB)
// streams through; a connection whose output holds 64 KB or more stops
// its source from being read until a write drains it, so a slow client
// holds back only its own server. A socket borrows a read buffer from the
// loop's free list only while it holds unhandled bytes, and an output
// buffer only while bytes wait to be written, so idle connections cost no
// buffer: an idle logged-in client is a 504-byte struct and a map entry
// (about 1 KB of RSS each, against PgBouncer's 0.8 to 0.9; bench/chaos
// measures both). A client that must wait for a server
// stops being read, its request left in its buffer; the release that
// hands it a server sends that request in the same turn of the loop,
// before the reply to the releasing client is written, so the server
// gets its next query while its backend is still awake.
//
// # Ownership and shutdown
//
// An idle client holds no buffer: the loop lends read and output buffers
// while bytes wait and drops free buffers unused for 10 s; its record is
// 320 bytes (TestIdleClientSize), its tracked settings and local address
// shared copies (Proxy.internVars, localaddr.go), its statistics counted in
// its pool; free heap past 256 KB goes back to the system (memory.go).
//
// Every goroutine is started by the Proxy and counted in one WaitGroup:
// the loop, one accept loop per listener, the one that gives free heap back to the
// operating system (memory.go), one per connection while it logs in (and
// for the console, while it lasts), one per server login and one per
// forwarded cancel (two more per TLS connection, client or server, which
// the loop reaches through a socket pair). Pools, logged-in clients and servers belong to
// the loop; the other goroutines hand it work (Proxy.loop.post and call)
// and never touch that state themselves, so it needs no locks. The loop also
// runs query_wait_timeout (exactly, from its epoll timeout) and, three
// times a second, server_idle_timeout and pending logins. Serve returns
// only after all goroutines have ended. When its context is done Serve
// stops accepting, closes clients that are between transactions, lets the
// others finish (for up to ShutdownTimeout when it is not 0, PgBouncer's
// safe shutdown having no bound), then closes every connection and
// stops the loop. Start-up and authentication are bounded by
// ClientLoginTimeout, server logins by ServerConnectTimeout, forwarded cancels by 10 s;
// everything else ends when its peer closes or shutdown closes it.
//
// The loop needs Linux (epoll); elsewhere Serve fails with an error that
// says so.
package pooler
