// Package autogroup reads, and for a validation run turns off, the Linux
// kernel's autogroup (kernel.sched_autogroup_enabled), so that the
// testbed's threads share the cores one by one, as poolsim's calibrated
// model shares them.
//
// Why: with autogroup on (the default of most distributions), a busy core
// is shared between sessions (setsid) first, each an equal share, and only
// then between a session's threads. Every PostgreSQL backend calls setsid,
// so each is a session of its own, while poolsim validate, the pgbench and
// PgBouncer it starts and its in-process proxy are one session: on a busy
// core their threads together get what one backend gets. Measured through
// the proxy at 200 clients and pool 16 (lab/bench/pgbench-passes.sh with
// SCHED=asis and SCHED=thread, 2026-12-03 11:00 UTC), pgbench's threads
// found 22-28 results a poll with autogroup on and 11-12 with it off, and
// logged 83-91 % of its clients' cycle as latency against 93-95 % - the
// rest its passes held up waiting for a core, which a model that shares
// the cores thread by thread does not have.
//
// What it owns: the sysctl's value while at least one [Off] holds it; the
// last [Restore] writes back what the first Off found. Off and Restore
// count, so concurrent runs in one process share one change; two
// processes do not coordinate (the first to finish turns it back on).
//
// Guarantees: it changes a machine-wide kernel setting, for the time a run
// holds it, and only as root; elsewhere Off returns an error wrapping
// [ErrUnavailable] and the caller goes on with the kernel as it is. A
// process killed while holding it leaves autogroup off: `sysctl
// kernel.sched_autogroup_enabled=1` turns it back on.
package autogroup
