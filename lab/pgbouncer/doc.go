// Package pgbouncer runs a real PgBouncer next to poolsim's own proxy, for
// side-by-side tests, `poolsim validate --target pgbouncer` and benchmarks.
//
// What it owns: one temporary folder per instance (pgbouncer.ini, the
// auth_file users.txt, the Unix socket and pgbouncer.log, which receives
// PgBouncer's log on stderr) and one pgbouncer process, run in the
// foreground (no -d) so it stays our child. [Start] writes the files, starts
// pgbouncer and waits until its TCP port accepts; [PgBouncer.Stop] stops it
// and removes the folder.
//
// The [databases] section has a single fallback entry `* = host=H port=P`
// (plus dbname=, user= and password= when Config says so), so every client
// database name maps to the same-named upstream database; the admin console
// is the database "pgbouncer" (use the simple query protocol there, e.g.
// pgx.QueryExecModeSimpleProtocol).
//
// Guarantees:
//   - Every blocking step is bounded: by ctx and Config.StartTimeout
//     (default 30 s) for Start; Stop sends the immediate-shutdown signal
//     (SIGTERM before 1.23, SIGQUIT from 1.23), then SIGKILL after 3 s.
//   - PgBouncer refuses to run as root: when the Go process is root it runs
//     as the "postgres" account. It leads its own process group and, on
//     Linux, gets SIGKILL from the kernel if the Go process dies
//     (see package pgcluster/childproc).
//   - Stop is idempotent and safe from any goroutine.
//
// Units: Config durations are time.Duration and are written to
// pgbouncer.ini in seconds; counts are plain ints. Zero values mean
// "PgBouncer's default" (the setting is not written), so a zero Config is a
// stock PgBouncer in front of the given upstream.
//
// Tests that need PgBouncer skip when it is missing, but fail with CI=true.
package pgbouncer
