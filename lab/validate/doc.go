// Package validate runs a scenario live and puts the model next to the
// measurement: poolsim validate.
//
// For every point of the scenario's sweep it starts the target — poolsim's
// own proxy in this process, a real pgbouncer with a generated
// configuration, or nothing for direct rows, whose clients connect straight
// to PostgreSQL — runs the workload with the load driver (package
// lab/load), collects the metrics and stops the target. PostgreSQL is a
// throwaway cluster (package lab/pgcluster) with the scenario's
// max_connections and superuser_reserved_connections unless a DSN is given;
// the load connects as a non-superuser role.
//
// The scenario's validate: section is this package's (section.go,
// Decode): how a statement runs live (Live) and, if given, the test
// machine the models run on; the scenarios package keeps it as written and
// a model run ignores it.
//
// A CPU-bound statement (validate.statement: pgbench-select, or sql with
// server.cores) is calibrated as a testbed instead (testbed.go): what
// shares the machine's cores — the backends, the pooler process and this
// process's load driver — each measured from /proc and run by the
// calibrated model on server.cores, on the machine's model of package
// lab/testbed (its Stats, the model's waits in the cores' queues, beside
// the kernel's: ModelRun) — through a pooler, each process's CPU
// per statement read over the run itself (inrun.go; the through loop's
// alone gives the report's model from before the run), and the machine's
// other work over the run as its background, this process's instruments
// among it (instruments.go: each on a thread of its own, counted apart);
// through the in-process proxy with pgbench driving, the pooler is the
// proxy's event loop's thread, kept to one OS thread for the row
// (running.pinLoop), and the rest of this process other work —
// with the latencies' spread measured too (noise.go); a sweep along the
// pool size is reported as a curve (curve.go). Through PgBouncer each such
// run and the calibration's loop through it also sample the core
// PgBouncer's thread and the pool's servers last ran on (placement.go): at
// pool 1 whether they share one is worth tens of per cent of throughput,
// and the reports show it per run. So at pool 1 through PgBouncer the
// calibration also pins the two processes to one core and to two
// (sched_setaffinity, undone before the run) and measures each
// arrangement, and a run's calibrated model is the two arrangements'
// models mixed by the run's own sampled placement (arrangement.go), with an
// idle core's wake-up by its idle time measured first by two helper
// processes, this executable started again (wake.go, RunWakeSide); at
// pool 2, where nothing is pinned, a run whose servers sat on
// PgBouncer's core less or more often than in its loop has the free
// model mixed with the apart or together one by how far it was
// (placed.go). With validate.driver: pgbench
// pgbench itself, a process of its own, drives such a row and its
// calibration (pgbench.go), and its logs are the measurement. Such a run
// turns the kernel's autogroup off for its duration, as root (sched.go,
// package lab/autogroup; Options.KeepAutogroup leaves it): then the
// kernel shares the cores thread by thread, as the calibrated model does,
// not session by session (every backend a session, this process with its
// pgbench, PgBouncer and proxy one); the report says which it was.
//
// Before the rows it calibrates: the cost of opening one PostgreSQL
// connection, the real duration of the scenario's statement and of the
// driver's think time; per row, the hop through the target. The model runs
// twice per row, with the scenario's values and with the measured ones, and
// the report judges the calibrated model against the measurement with fixed
// tolerances (counts exactly; TPS and p50 within 10%, p99 within 25%). The
// live feature probes (package lab/probe) run once per pool mode with a
// pool of two servers and are compared with models/compat.
//
// Units: times in the reports are milliseconds (latencies) and
// microseconds (CPU per statement, hops), throughput in transactions per
// second of the wall; the model's own are int64 nanoseconds (package sim).
//
// Everything Run starts it stops before returning, on error and when ctx is
// cancelled too: targets, the cluster, and every goroutine (the placement
// sampler's included: its stop function waits for it); then it sets the
// kernel's autogroup back.
//
// The package builds everywhere; what needs Linux is in *_linux.go files:
// pinning threads (sched_setaffinity: the arrangements and the wake-up
// ping-pong), /proc reads through open files (placement) and a thread's
// CPU clock. Elsewhere pinning returns an error that says it needs Linux,
// and the readings count as not read.
package validate
