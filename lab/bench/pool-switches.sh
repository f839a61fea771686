#!/usr/bin/env bash
# How often the kernel takes the core from PgBouncer, and how long the
# cores idle, at small pools: pgbench -S through PgBouncer, per transaction.
#
# Usage: lab/bench/pool-switches.sh
#
# For each pool size in POOLS it starts a throwaway PostgreSQL (pgbench -i
# -s 1) and a real PgBouncer (transaction mode, default_pool_size the
# pool), warms it up (pgbench -T 2, which opens the pool's servers), then
# runs `pgbench -S -n -c $CLIENTS -j 2 -T $DURATION` through it ROUNDS
# times. Each run prints, per transaction pgbench counted:
#   - PgBouncer's context switches from /proc/PID/status: voluntary (it
#     slept in epoll_wait with nothing to do) and involuntary (it was
#     runnable and the kernel gave its core to another thread: a thread it
#     woke, or one woken onto its core) - and its run delay (time runnable
#     but waiting for a core, /proc/PID/schedstat);
#   - the pool's servers' voluntary and involuntary switches and run delay,
#     summed over the servers;
#   - pgbench's threads' switches and run delay from 0.3 s into the run,
#     when its threads exist, to 0.5 s before its end (divided by all its
#     transactions: about 0.8 s of DURATION's worth low);
#   - how idle the machine's cores were over the run (/proc/stat idle and
#     iowait over all).
# PgBouncer is single-threaded: an involuntary switch stops every client's
# relay until it has a core again, while the other core may idle.
# Needs the PostgreSQL server binaries, pgbench and pgbouncer; as root,
# the servers run as postgres. Everything it starts is stopped and removed
# on exit.
#
# SCHED=thread turns the kernel's autogroup off for the runs and back to
# what it was at the end (root), as poolsim validate does for a CPU-bound
# run; SCHED=asis (the default) leaves the kernel as it is.
#
# Environment: POOLS ("2 8"), CLIENTS (50), DURATION (seconds per run, 5),
# ROUNDS (3), SCHED (asis).
set -euo pipefail
POOLS=${POOLS:-2 8} CLIENTS=${CLIENTS:-50} DURATION=${DURATION:-5} ROUNDS=${ROUNDS:-3} SCHED=${SCHED:-asis}
die() { echo "$0: $*" >&2; exit 1; }
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack, sched_mode
sched_mode "$SCHED"
[ "${DURATION%.*}" -ge 2 ] 2>/dev/null || die "DURATION=$DURATION: want whole seconds, 2 or more"
before_cleanup() { autogroup_restore; }

# switches PID: its voluntary and involuntary context switches.
switches() { awk '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2} END {print v + 0, n + 0}' "/proc/$1/status"; }
# delay PID: ns it waited runnable for a core (one thread: the process's).
delay() { awk '{print $2}' "/proc/$1/schedstat"; }
# idle: the cores' idle and iowait jiffies, and all of them.
idle() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
# sum_switches PIDS...: voluntary, involuntary and run delay added up.
sum_switches() {
  local v=0 n=0 d=0 p a b
  for p in "$@"; do
    read -r a b <<<"$(switches "$p")"
    v=$((v + a)) n=$((n + b)) d=$((d + $(delay "$p")))
  done
  echo "$v $n $d"
}
# per TXNS BEFORE AFTER: "voluntary v, involuntary n, run delay d us" per transaction.
per() {
  local v0 n0 d0 v1 n1 d1
  read -r v0 n0 d0 <<<"$2"
  read -r v1 n1 d1 <<<"$3"
  awk -v t="$1" -v v=$((v1 - v0)) -v n=$((n1 - n0)) -v d=$((d1 - d0)) \
    'BEGIN {printf "voluntary %.2f, involuntary %.2f, run delay %.1f us", v / t, n / t, d / t / 1e3}'
}

for pool in $POOLS; do
  (
    start_pgbench_stack poolsim-switches "$pool"
    autogroup_off
    bpid=$(cat "$tmp/pgbouncer.pid")
    "$pgbench" -S -n -c "$CLIENTS" -j 2 -T 2 -h 127.0.0.1 -p "$bport" -U postgres postgres >/dev/null 2>&1
    spids=$("$psql" -XAt -h 127.0.0.1 -p "$pgport" -U postgres postgres -c \
      "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
    [ "$(echo "$spids" | grep -c .)" = "$pool" ] || die "pool $pool: want $pool server connections after the warm-up, found: $(echo $spids)"
    echo "pool $pool: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), pgbench -S -n -c $CLIENTS -j 2 -T $DURATION; kernel $(uname -r), $(nproc) cores, kernel.sched_autogroup_enabled $(cat "$ag" 2>/dev/null || echo unknown) (SCHED=$SCHED), load $(cut -d' ' -f1-3 /proc/loadavg)"
    for r in $(seq 1 "$ROUNDS"); do
      b0=$(sum_switches "$bpid") s0=$(sum_switches $spids) i0=$(idle)
      "$pgbench" -S -n -c "$CLIENTS" -j 2 -T "$DURATION" -h 127.0.0.1 -p "$bport" -U postgres postgres >"$tmp/out" 2>&1 &
      pg=$!
      sleep 0.3
      tids=$(ls "/proc/$pg/task" 2>/dev/null | sed "s|^|$pg/task/|")
      [ -n "$tids" ] || die "pgbench ended within 0.3 s: $(cat "$tmp/out")"
      p0=$(sum_switches $tids)
      sleep "$(awk -v d="$DURATION" 'BEGIN {print d - 0.8}')"
      p1=$(sum_switches $tids) || die "pgbench ended within $((DURATION - 1)) s: $(cat "$tmp/out")"
      wait "$pg" || die "pgbench failed: $(tail -n 3 "$tmp/out")"
      b1=$(sum_switches "$bpid") s1=$(sum_switches $spids) i1=$(idle)
      n=$(awk '/number of transactions actually processed/ {print $NF}' "$tmp/out" | cut -d/ -f1)
      tps=$(awk '/^tps/ {printf "%.0f", $3}' "$tmp/out")
      read -r ia ta <<<"$i0"
      read -r ib tb <<<"$i1"
      echo "pool $pool round $r: $tps TPS; per transaction: PgBouncer $(per "$n" "$b0" "$b1"); servers $(per "$n" "$s0" "$s1"); pgbench (from 0.3 s) $(per "$n" "$p0" "$p1"); cores idle $(awk -v i=$((ib - ia)) -v t=$((tb - ta)) 'BEGIN {printf "%.0f %%", 100 * i / t}')"
    done
  )
done
