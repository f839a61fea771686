#!/usr/bin/env bash
# Pool 1 through PgBouncer, pinned together and apart: where the time of a
# hand-over goes - from the backend's result to PgBouncer's next query to
# it - and who takes PgBouncer's core while it could run.
#
# Usage: lab/bench/handover.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and a real PgBouncer
# (transaction mode, default_pool_size 1). For each arrangement (together:
# PgBouncer and its server on core 0; apart: PgBouncer on core 0, the
# server on core 1; pgbench is never pinned), $ROUNDS times, it runs
# `pgbench -S -n -c $CLIENTS -j 2 -T $DURATION` and, from 2 s in, records
# the scheduler's events on every core for $RECORD s (`perf record -e
# sched:sched_switch -e sched:sched_waking -a`). From the recording:
#   - cycle: from one wake-up of PgBouncer by the backend (a result sent)
#     to the next, the median - the pool's one server's round;
#   - hand-over: from the backend's wake-up of PgBouncer to PgBouncer's
#     next wake-up of the backend (the next query sent), median and mean;
#     of it, the time PgBouncer was runnable but off its core (preempted,
#     or woken and not yet on), mean;
#   - preempted: PgBouncer's switches out while runnable per statement,
#     and who took the core (pgbench, postgres, other), and for how long
#     (mean, from the switch out to PgBouncer's next switch in);
#   - pgbench's wake-ups by PgBouncer per statement and the share that
#     landed on PgBouncer's core (the core sched_waking's target_cpu
#     names);
#   - the backend: from its wake-up to its switch in, the mean, and the
#     share (and mean) of those where a pgbench thread ran before it.
# Needs the PostgreSQL server binaries, pgbench, pgbouncer, taskset, perf
# (Debian: linux-perf) with the sched tracepoints readable (root) and
# python3; as root, the servers run as postgres. Everything it starts is
# stopped and removed on exit.
#
# Environment: CLIENTS (50), DURATION (seconds per run, 4), RECORD
# (seconds recorded, 0.3), ROUNDS (3), SCHED (thread: autogroup off for
# the runs as poolsim validate does; asis).
set -euo pipefail
CLIENTS=${CLIENTS:-50} DURATION=${DURATION:-4} RECORD=${RECORD:-0.3} ROUNDS=${ROUNDS:-3} SCHED=${SCHED:-thread}
die() { echo "$0: $*" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || die "needs 2 or more cores, this machine has $(nproc)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
command -v python3 >/dev/null || die "python3 not found: it reads perf's events"
[ "${DURATION%.*}" -ge 3 ] 2>/dev/null || die "DURATION=$DURATION: want whole seconds, at least 3"

. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack, sched_mode
sched_mode "$SCHED"
before_cleanup() { autogroup_restore; }
start_pgbench_stack poolsim-handover 1
bpid=$(cat "$tmp/pgbouncer.pid")
autogroup_off

run() { "$pgbench" -S -n -c "$CLIENTS" -j 2 -T "$1" -h 127.0.0.1 -p "$bport" -U postgres postgres; }
run 1 >/dev/null 2>&1 || die "warm-up pgbench failed"
spid=$("$psql" -XAt -h 127.0.0.1 -p "$pgport" -U postgres postgres -c \
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
[ "$(echo "$spid" | wc -l)" = 1 ] && [ -n "$spid" ] || die "want PgBouncer's one server connection, found: $spid"
echo "# lab/bench/handover.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'): PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1); pgbench -S -n -c $CLIENTS -j 2 -T $DURATION at pool 1, perf record for $RECORD s from 2 s in; kernel $(uname -r), $(nproc) cores, autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled)"

for r in $(seq 1 "$ROUNDS"); do
  for a in together apart; do
    case $a in
      together) taskset -pc 0 "$bpid" >/dev/null; taskset -pc 0 "$spid" >/dev/null ;;
      apart) taskset -pc 0 "$bpid" >/dev/null; taskset -pc 1 "$spid" >/dev/null ;;
    esac
    run "$DURATION" >"$tmp/out" 2>&1 &
    pg=$!
    sleep 2
    perf record -q -e sched:sched_switch -e sched:sched_waking -a -o "$tmp/perf.data" -- sleep "$RECORD" >"$tmp/perf.log" 2>&1 \
      || die "perf record failed: $(tail -n 3 "$tmp/perf.log")"
    wait "$pg" || die "pgbench failed: $(tail -n 3 "$tmp/out")"
    perf script -i "$tmp/perf.data" -F tid,cpu,time,event,trace 2>/dev/null >"$tmp/sched.txt"
    printf '%-8s run %d: %s TPS; ' "$a" "$r" "$(awk '/^tps/ {printf "%.0f", $3}' "$tmp/out")"
    python3 - "$tmp/sched.txt" "$spid" "$bpid" <<'PY'
import re, statistics, sys

path, backend, bouncer = sys.argv[1], sys.argv[2], sys.argv[3]
head = r'\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:'
switch = re.compile(head + r'sched_switch: prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)')
waking = re.compile(head + r'sched_waking: comm=(.*) pid=(\d+) prio=\d+ target_cpu=(\d+)')
comm = {}
results, queries = [], []       # backend's wake-ups of PgBouncer; PgBouncer's of the backend
off = []                        # PgBouncer's stretches runnable off its core: (from, to)
pre = []                        # preemptions: (who took the core, how long)
off_since, runnable_since, taker = None, None, None
on_core = None                  # the core PgBouncer runs on now
pg_wakes = pg_on_core = 0
bwoken = None                   # the backend's last wake-up, until it is on a core
bwaits = []                     # the backend's waits from wake-up to its core: (who ran before it, how long)
for line in open(path):
    m = waking.match(line)
    if m:
        waker, t, pid, cpu = m.group(1), float(m.group(3)), m.group(5), int(m.group(6))
        comm[pid] = m.group(4).strip()
        if pid == backend and bwoken is None:
            bwoken = t
        if waker == backend and pid == bouncer:
            results.append(t)
            if runnable_since is None and on_core is None:
                runnable_since = t  # woken: runnable until it is on a core
        elif waker == bouncer and pid == backend:
            queries.append(t)
        elif waker == bouncer and comm[pid].startswith('pgbench'):
            pg_wakes += 1
            if on_core is not None and cpu == on_core:
                pg_on_core += 1
        elif pid == bouncer and runnable_since is None and on_core is None:
            runnable_since = t
        continue
    m = switch.match(line)
    if not m:
        continue
    t, cpu = float(m.group(3)), int(m.group(2))
    prev, state, nxt = m.group(5), m.group(6), m.group(8)
    comm[prev], comm[nxt] = m.group(4).strip(), m.group(7).strip()
    if prev == bouncer:
        on_core = None
        if state.startswith('R'):
            runnable_since, taker = t, comm[nxt]
    if nxt == backend and bwoken is not None:
        bwaits.append((comm[prev], t - bwoken))
        bwoken = None
    if nxt == bouncer:
        on_core = cpu
        if runnable_since is not None:
            off.append((runnable_since, t))
            if taker is not None:
                pre.append((taker, t - runnable_since))
        runnable_since, taker = None, None
if len(results) < 10:
    sys.exit('fewer than 10 results of the backend (pid %s) recorded' % backend)
cycles = [b - a for a, b in zip(results, results[1:])]
# hand-over: each result to the first query after it
hand, offs, qi, oi = [], [], 0, 0
for t in results:
    while qi < len(queries) and queries[qi] < t:
        qi += 1
    if qi == len(queries):
        break
    q = queries[qi]
    hand.append(q - t)
    offs.append(sum(max(0.0, min(b, q) - max(a, t)) for a, b in off if a < q and b > t))
n = len(results)
us = lambda x: 1e6 * x
kinds = {}
for who, d in pre:
    k = 'pgbench' if who.startswith('pgbench') else 'postgres' if who.startswith('postgres') else 'other'
    c, s = kinds.get(k, (0, 0.0))
    kinds[k] = (c + 1, s + d)
took = ', '.join('%s %.2f (%.1f us)' % (k, c / n, us(s / c)) for k, (c, s) in sorted(kinds.items()))
bw = [d for _, d in bwaits]
after_pg = [d for who, d in bwaits if who.startswith('pgbench')]
backend_text = 'backend woken to on its core %.1f us mean, %.0f %% of them after a pgbench thread (%.1f us mean)' % (
    us(statistics.mean(bw)) if bw else 0, 100 * len(after_pg) / max(1, len(bw)), us(statistics.mean(after_pg)) if after_pg else 0)
print('cycle %.1f us; hand-over %.1f us median, %.1f mean, of it off its core %.1f us mean; preempted %.2f a statement: %s; '
      'pgbench woken %.2f a statement, on its core %.0f %%; %s' % (us(statistics.median(cycles)), us(statistics.median(hand)),
      us(statistics.mean(hand)), us(statistics.mean(offs)), len(pre) / n, took or 'none', pg_wakes / n,
      100 * pg_on_core / max(1, pg_wakes), backend_text))
PY
  done
done
