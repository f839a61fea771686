#!/usr/bin/env bash
# How well a calibration loop right before a run foretells the run's
# throughput on this machine: the noise a CPU-bound validation row's
# verdict carries whatever the model.
#
# Usage: lab/bench/loop-noise.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and a real PgBouncer
# (transaction mode, default_pool_size $POOL), opens the pool with a
# two-second run, then $CYCLES times: a loop (`pgbench -S -n -c $CLIENTS
# -j 2 -T $LOOP`) and at once a run (the same with `-t $TXNS`: each client
# $TXNS transactions, as poolsim validate's pgbench driver runs a row),
# and a last loop after the last run. It prints each loop's and run's
# transactions per second over its whole wall (connections included), the
# machine's busy cores and steal over it (/proc/stat) and the busy CPU per
# transaction; then the variation of both over all loops and runs, and
# each run's error against the loop before it, against the mean of the
# loops before and after (a bracket), and against the loop before at the
# run's own busy CPU per transaction (the loop's rate × its CPU per
# transaction / the run's): mean and root mean square, in percent. Needs the PostgreSQL server binaries, pgbench and pgbouncer;
# as root, the servers run as postgres. Everything it starts is stopped
# and removed on exit.
#
# Environment: POOL (8), CLIENTS (50), LOOP (seconds, 3), TXNS (600),
# CYCLES (10).
set -euo pipefail
POOL=${POOL:-8} CLIENTS=${CLIENTS:-50} LOOP=${LOOP:-3} TXNS=${TXNS:-600} CYCLES=${CYCLES:-10}
die() { echo "$0: $*" >&2; exit 1; }
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack
start_pgbench_stack poolsim-loop-noise "$POOL"
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T 2 -h 127.0.0.1 -p "$bport" -U postgres postgres >/dev/null 2>&1
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), kernel $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "through PgBouncer at pool $POOL, $CLIENTS clients: loops of ${LOOP}s (-T), runs of $TXNS transactions per client (-t)"

# bench KIND ARGS...: one pgbench through PgBouncer; prints KIND, its tps,
# the machine's busy cores and steal over its wall (/proc/stat) and the
# busy CPU per transaction in microseconds (busy cores over tps).
bench() {
  local kind=$1
  shift
  local st0 st1 t0 t1
  st0=$(head -n 1 /proc/stat) t0=$(date +%s%N)
  "$pgbench" -S -n -c "$CLIENTS" -j 2 "$@" -h 127.0.0.1 -p "$bport" -U postgres postgres >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; die "pgbench failed"; }
  st1=$(head -n 1 /proc/stat) t1=$(date +%s%N)
  local n
  n=$(awk '/number of transactions actually processed/ {print $NF}' "$tmp/out" | cut -d/ -f1)
  [ -n "$n" ] && [ "$n" -gt 0 ] || { cat "$tmp/out" >&2; die "pgbench ran no transactions"; }
  # Transactions over the whole wall, connections included, as the busy
  # cores are: pgbench's own tps leaves the connections' start out.
  echo "$st0 $st1" | awk -v k="$kind" -v n="$n" -v w="$(( (t1 - t0) / 1000 ))" -v hz="$(getconf CLK_TCK)" '{
    tot = 0; for (i = 2; i <= 9; i++) tot += $(i + 11) - $i
    idle = ($(16) - $5) + ($(17) - $6)
    busy = (tot - idle) / hz / (w / 1e6); steal = ($(20) - $9) / hz / (w / 1e6); tps = n / (w / 1e6)
    printf "%s %.0f busy %.3f steal %.3f cpu/txn %.1f\n", k, tps, busy, steal, 1e6 * busy / tps
  }'
}
for _ in $(seq "$CYCLES"); do
  bench loop -T "$LOOP"
  bench run -t "$TXNS"
done | tee "$tmp/series"
bench loop -T "$LOOP" | tee -a "$tmp/series"
awk '{k[NR] = $1; v[NR] = $2; c[NR] = $8}
END {
  for (i = 1; i <= NR; i++) { cm += c[i]; cs += c[i] * c[i]; tm += v[i]; ts += v[i] * v[i] }
  cm /= NR; tm /= NR
  printf "over all %d loops and runs: tps mean %.0f, coefficient of variation %.1f %%; busy CPU per transaction mean %.1f us, coefficient of variation %.1f %%\n", NR, tm, 100 * sqrt(ts / NR - tm * tm) / tm, cm, 100 * sqrt(cs / NR - cm * cm) / cm
  for (i = 2; i < NR; i += 2) {
    r = v[i]; e3 = 100 * (v[i-1] * c[i-1] / c[i] - r) / r
    m3 += e3; s3 += e3 * e3
  }
  for (i = 2; i < NR; i += 2) {
    r = v[i]; e1 = 100 * (v[i-1] - r) / r; e2 = 100 * ((v[i-1] + v[i+1]) / 2 - r) / r
    m1 += e1; s1 += e1 * e1; m2 += e2; s2 += e2 * e2; n++
  }
  printf "loop before vs run: mean %+.1f %%, rms %.1f %%; mean of the loops before and after vs run: mean %+.1f %%, rms %.1f %%; the loop before at the busy CPU per transaction of the run vs run: mean %+.1f %%, rms %.1f %% (%d runs)\n", m1 / n, sqrt(s1 / n), m2 / n, sqrt(s2 / n), m3 / n, sqrt(s3 / n), n
}' "$tmp/series"
