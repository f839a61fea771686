// Package childproc runs the server processes that poolsim's live tests
// start — a PostgreSQL postmaster, a PgBouncer — so that they cannot outlive
// the Go process that started them.
//
// It owns three guarantees, shared by lab/pgcluster and lab/pgbouncer:
//
//   - Unprivileged account. PostgreSQL and PgBouncer refuse to run as root.
//     When the Go process is root, children run as the "postgres" account
//     (the one the Debian packages create); otherwise they run as the current
//     user. [ServerAccount] resolves it; [Account.Chown] hands a folder over.
//   - Process group. Every child is the leader of its own process group
//     (Setpgid), so a stop can kill the leader and everything it forked.
//   - Parent death. On Linux every child gets Pdeathsig: when the Go process
//     dies (a crashed or killed test binary), the kernel sends the child the
//     configured signal. Pdeathsig is tied to the OS thread that forked the
//     child, not to the process, so [Start] forks from a goroutine locked to
//     its thread and keeps that thread locked until the child has exited.
//     On other Unix systems there is no Pdeathsig; a crashed parent can leave
//     the child behind there.
//
// Ownership: [Start] starts exactly one goroutine per child. It waits for the
// child and ends when the child exits; [Process.Stop] makes the child exit
// (the requested signal, then SIGKILL to the whole group after a grace
// period), so after Stop returns the goroutine has ended. Output goes straight
// to *os.File descriptors, so no copying goroutines exist.
//
// It also holds what the two launchers share around a child (launch.go):
// [FreePort] for a loopback port, [Process.WaitReady] to poll a started
// server until it answers (or exits, or the context ends), [LastLines] for
// the end of a log shown when a server will not start, and
// [CompareVersions] and [VersionAtLeast] for the installed binaries'
// version numbers.
//
// Durations are time.Duration; there are no other units.
package childproc
