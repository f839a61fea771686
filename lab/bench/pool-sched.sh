#!/usr/bin/env bash
# How the kernel schedules PgBouncer and its servers under pgbench -S:
# per transaction, each process's CPU, its wait in a run queue, its runs
# on a core, its voluntary and involuntary switches and its moves to
# another core - the figures the per-core model's rules rest on.
#
# Usage: lab/bench/pool-sched.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and a real PgBouncer
# (transaction mode, default_pool_size $POOL), opens the pool with a
# two-second run, then runs `pgbench -S -n -c $CLIENTS -j 2 -T $DURATION`
# through it $ROUNDS times. For each run it prints the transactions, the
# machine's busy cores, softirq and steal (/proc/stat), and for PgBouncer
# and each server, per transaction: CPU and run-queue wait
# (/proc/PID/schedstat), runs on a core (schedstat's third field),
# voluntary and involuntary context switches (/proc/PID/status) and moves
# between cores (se.nr_migrations, /proc/PID/sched: a kernel with
# scheduler debugging; "-" without). Needs the PostgreSQL server binaries,
# pgbench and pgbouncer; as root, the servers run as postgres. Everything
# it starts is stopped and removed on exit.
#
# Environment: POOL (8), CLIENTS (50), DURATION (seconds per run, 4),
# ROUNDS (3).
set -euo pipefail
POOL=${POOL:-8} CLIENTS=${CLIENTS:-50} DURATION=${DURATION:-4} ROUNDS=${ROUNDS:-3}
die() { echo "$0: $*" >&2; exit 1; }
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack
start_pgbench_stack poolsim-pool-sched "$POOL"
bpid=$(cat "$tmp/pgbouncer.pid")
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T 2 -h 127.0.0.1 -p "$bport" -U postgres postgres >/dev/null 2>&1
spids=$("$psql" -XAt -h 127.0.0.1 -p "$pgport" -U postgres postgres -c \
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() ORDER BY pid")
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), kernel $(uname -r), $(nproc) cores"
echo "pgbench -S -n -c $CLIENTS -j 2 -T $DURATION through PgBouncer at pool $POOL; PgBouncer pid $bpid, servers $(echo $spids)"

# snap: pid, schedstat's CPU ns, wait ns and runs, voluntary and
# involuntary switches, moves between cores (or -).
snap() {
  for p in $bpid $spids; do
    local m
    m=$(awk '/^se.nr_migrations/ {print $3}' "/proc/$p/sched" 2>/dev/null || true)
    echo "$p $(cat "/proc/$p/schedstat") $(awk '/^voluntary_ctxt_switches/ {v = $2} /^nonvoluntary_ctxt_switches/ {n = $2} END {print v, n}' "/proc/$p/status") ${m:--}"
  done
}
for round in $(seq "$ROUNDS"); do
  s0=$(snap) st0=$(head -n 1 /proc/stat)
  "$pgbench" -S -n -c "$CLIENTS" -j 2 -T "$DURATION" -h 127.0.0.1 -p "$bport" -U postgres postgres >"$tmp/out" 2>&1
  s1=$(snap) st1=$(head -n 1 /proc/stat)
  n=$(awk '/number of transactions actually processed/ {print $NF}' "$tmp/out" | cut -d/ -f1)
  [ -n "$n" ] && [ "$n" -gt 0 ] || { cat "$tmp/out" >&2; die "pgbench ran no transactions"; }
  echo "$st0" "$st1" | awk -v n="$n" -v d="$DURATION" -v r="$round" '{
    for (i = 2; i <= 9; i++) { a[i] = $i; b[i] = $(i + 11) }
    tot = 0; for (i = 2; i <= 9; i++) tot += b[i] - a[i]
    idle = (b[5] - a[5]) + (b[6] - a[6])
    printf "run %d: %d transactions, %.0f/s; busy %.3f cores, softirq %.3f, steal %.3f (load %s)\n", r, n, n / d,
      2 * (1 - idle / tot), 2 * (b[8] - a[8]) / tot, 2 * (b[9] - a[9]) / tot, "'"$(cut -d' ' -f1-3 /proc/loadavg)"'" }'
  paste -d' ' <(echo "$s0") <(echo "$s1") | awk -v n="$n" -v b="$bpid" '{
    who = ($1 == b) ? "pgbouncer" : "server   "
    mig = ($7 == "-" || $14 == "-") ? "-" : sprintf("%.4f", ($14 - $7) / n)
    printf "  %s %s: CPU %5.1f us, run-queue wait %5.1f us, runs %.3f, voluntary %.3f, involuntary %.3f, moves %s per transaction\n",
      who, $1, ($9 - $2) / n / 1000, ($10 - $3) / n / 1000, ($11 - $4) / n, ($12 - $5) / n, ($13 - $6) / n, mig }'
done
