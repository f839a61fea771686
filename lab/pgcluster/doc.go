// Package pgcluster runs a throwaway PostgreSQL cluster from the installed
// server binaries, for the proxy's integration tests and for
// `poolsim validate` when no --dsn is given.
//
// What it owns: one temporary folder per cluster (os.MkdirTemp; it holds the
// data directory, the Unix socket and postgres.log) and one postmaster
// process. [Start] runs initdb (C locale, UTF8, --no-sync), writes the
// settings below, starts `postgres -D` directly (not through pg_ctl, so the
// postmaster is our own child and we control its process group and parent
// death signal), waits until it accepts connections, and creates the
// non-superuser role poolsim (LOGIN, password 'poolsim') and the database
// poolsim owned by it. [Cluster.Stop] shuts it down and removes the folder.
//
// Settings written to postgresql.conf: listen_addresses = '127.0.0.1' (the
// port is a free loopback port, passed as -p), unix_socket_directories = the
// temporary folder, max_connections (Options.MaxConnections, default 100),
// superuser_reserved_connections (see [Options]), fsync, synchronous_commit
// and full_page_writes off (durability is pointless for a throwaway cluster),
// then Options.ExtraConf sorted by key. pg_hba.conf: trust for the postgres
// superuser and local sockets; Options.Auth for every other role on
// 127.0.0.1.
//
// Guarantees:
//   - Every blocking step is bounded: by ctx and by Options.StartTimeout
//     (default 3 min) for Start, by fixed timeouts (10 s, then SIGKILL) for Stop.
//   - The postmaster cannot outlive the Go process: it leads its own process
//     group, Stop sends SIGQUIT (what `pg_ctl stop -m immediate` sends), then
//     SIGKILL to the whole group after 10 s; and on Linux the kernel sends it
//     SIGQUIT (Pdeathsig) if the Go process dies first — a crashed test binary
//     leaves at most the temporary folder behind, and a later Start removes
//     such folders once they are 15 minutes old and no live postmaster owns
//     them. See package childproc.
//   - When Start returns, every connection slot is free: the backends of its
//     own set-up connections have exited. PostgreSQL frees a slot only when
//     the backend process ends, a moment after the client closes; use
//     [Cluster.WaitBackendsExit] when a test counts slots.
//   - Stop is idempotent and safe from any goroutine (a signal handler's,
//     t.Cleanup, TestMain); it does not depend on any context.
//   - When the Go process is root, initdb and postgres run as the "postgres"
//     account (they refuse root); the temporary folder is handed to it.
//
// Units: durations are time.Duration; connection counts are plain ints.
//
// Tests that need a cluster should use package pgclustertest, which skips
// when PostgreSQL is missing and fails instead when CI=true.
package pgcluster
