#!/usr/bin/env bash
# Pool 1 through PgBouncer, three ways: is its throughput set by where the
# kernel puts PgBouncer and its one server?
#
# Usage: lab/bench/pool1-arrangements.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and a real PgBouncer
# (transaction mode, default_pool_size 1), then runs `pgbench -S -n -c
# $CLIENTS -j 2 -T $DURATION` through it in rounds of three runs:
#   free     - no affinity, as the kernel places them; every 20 ms the
#              script reads the core PgBouncer and the server last ran on
#              (/proc/PID/stat field 39) and prints the share of samples
#              on one core;
#   together - PgBouncer and the server pinned to core 0 (taskset);
#   apart    - PgBouncer on core 0, the server on core 1.
# pgbench is never pinned. It prints every run with each process's CPU
# per transaction (PgBouncer's and the server's from /proc/PID/schedstat,
# pgbench's from bash's times), then the median TPS of each arrangement. Needs 2 or more cores, the PostgreSQL server binaries,
# pgbench, pgbouncer and taskset; as root, the servers run as postgres.
# Everything it starts is stopped and removed on exit.
#
# Environment: CLIENTS (50), DURATION (seconds per run, 5), ROUNDS (3).
set -euo pipefail
CLIENTS=${CLIENTS:-50} DURATION=${DURATION:-5} ROUNDS=${ROUNDS:-3}
die() { echo "$0: $*" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || die "needs 2 or more cores, this machine has $(nproc)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"

. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack
start_pgbench_stack poolsim-pool1 1
bpid=$(cat "$tmp/pgbouncer.pid")

# run: one pgbench run; its output in $tmp/out, and in $tmp/times the CPU
# time pgbench used (bash's times: the subshell's children, user and system).
run() {
  ( "$pgbench" -S -n -c "$CLIENTS" -j 2 -T "$DURATION" -h 127.0.0.1 -p "$bport" -U postgres postgres >"$tmp/out" 2>&1; times >"$tmp/times" )
}
tps() { awk '/^tps/ {printf "%.0f", $3}' "$tmp/out"; }
txns() { awk '/number of transactions actually processed/ {print $NF}' "$tmp/out" | cut -d/ -f1; }
# seconds of CPU in a `times` line such as "0m1.234s 0m0.567s"
pgbench_cpu() { tail -n 1 "$tmp/times" | awk '{t = 0; for (i = 1; i <= 2; i++) {split($i, a, /[ms]/); t += a[1] * 60 + a[2]}; print t}'; }
oncpu() { awk '{print $1}' "/proc/$1/schedstat"; } # ns on a CPU, all of the process's time (one thread)
core() { awk '{sub(/.*\) /, ""); print $37}' "/proc/$1/stat" 2>/dev/null; }

# A first run opens PgBouncer's one server connection, which then stays.
run >/dev/null
spid=$("$psql" -XAt -h 127.0.0.1 -p "$pgport" -U postgres postgres -c \
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
[ "$(echo "$spid" | wc -l)" = 1 ] && [ -n "$spid" ] || die "want PgBouncer's one server connection, found: $spid"
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), pgbench -S -c $CLIENTS -j 2 -T $DURATION, pool 1; PgBouncer pid $bpid, its server pid $spid"

declare -A all
for r in $(seq 1 "$ROUNDS"); do
  for a in free together apart; do
    case $a in
      free) taskset -pc 0-$(($(nproc) - 1)) "$bpid" >/dev/null; taskset -pc 0-$(($(nproc) - 1)) "$spid" >/dev/null ;;
      together) taskset -pc 0 "$bpid" >/dev/null; taskset -pc 0 "$spid" >/dev/null ;;
      apart) taskset -pc 0 "$bpid" >/dev/null; taskset -pc 1 "$spid" >/dev/null ;;
    esac
    extra=
    b0=$(oncpu "$bpid") s0=$(oncpu "$spid")
    if [ $a = free ]; then
      run &
      job=$!
      same=0 n=0
      while kill -0 "$job" 2>/dev/null; do
        b=$(core "$bpid") s=$(core "$spid")
        if [ -n "$b" ] && [ -n "$s" ]; then
          n=$((n + 1))
          [ "$b" = "$s" ] && same=$((same + 1))
        fi
        sleep 0.02
      done
      wait "$job"
      extra="; on one core in $same of $n samples"
    else
      run
    fi
    b1=$(oncpu "$bpid") s1=$(oncpu "$spid")
    tps=$(tps) n=$(txns)
    cpu=$(awk -v b=$((b1 - b0)) -v s=$((s1 - s0)) -v p="$(pgbench_cpu)" -v n="$n" \
      'BEGIN {printf "CPU per transaction: PgBouncer %.1f us, server %.1f us, pgbench %.1f us", b / n / 1e3, s / n / 1e3, p / n * 1e6}')
    all[$a]+="$tps "
    echo "round $r $a: $tps TPS ($cpu$extra)"
  done
done
taskset -pc 0-$(($(nproc) - 1)) "$bpid" >/dev/null
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for a in free together apart; do
  echo "median $a: $(echo "${all[$a]}" | median) TPS (runs: ${all[$a]% })"
done
