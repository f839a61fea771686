#!/usr/bin/env bash
# Who takes PgBouncer's core, and where each thread runs: the kernel's
# scheduler events (perf sched) during pgbench -S through PgBouncer.
#
# Usage: lab/bench/pool-perf-sched.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and a real PgBouncer
# (transaction mode, default_pool_size $POOL), warms it up (pgbench -T 2,
# which opens the pool's servers), then runs `pgbench -S -n -c $CLIENTS -j
# 2 -T $DURATION` through it and, from 2 s into that run, records the
# scheduler's events on every core for $RECORD seconds (`perf sched record
# -a`). From the recording it prints:
#   - every time PgBouncer was switched out while it could still run (an
#     involuntary switch), by the thread that took its core - and whether
#     PgBouncer had woken that thread last - with how long PgBouncer
#     waited until it ran again;
#   - how often PgBouncer went to sleep instead (voluntary) and how long it
#     ran each time it had a core;
#   - the busiest threads' time on a core over the recording, and the
#     share of it on each core (from each core's switches: the time from a
#     thread's switch in to its switch out there), and how many times the
#     kernel moved a thread to another core (sched_migrate_task).
# Recording costs the machine something: pgbench's TPS is printed, to set
# beside an unrecorded run (lab/bench/pool-switches.sh).
# Needs the PostgreSQL server binaries, pgbench, pgbouncer, perf (Debian:
# linux-perf) with the sched tracepoints readable (root), and python3; the
# servers run as postgres. Everything it starts is stopped and removed on
# exit.
#
# SCHED=thread turns the kernel's autogroup off for the run and back to
# what it was at the end (root), as poolsim validate does for a CPU-bound
# run; SCHED=asis (the default) leaves the kernel as it is.
#
# Environment: POOL (2), CLIENTS (50), DURATION (seconds, 5), RECORD
# (seconds recorded, 1), SCHED (asis).
set -euo pipefail
POOL=${POOL:-2} CLIENTS=${CLIENTS:-50} DURATION=${DURATION:-5} RECORD=${RECORD:-1} SCHED=${SCHED:-asis}
die() { echo "$0: $*" >&2; exit 1; }
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
command -v python3 >/dev/null || die "python3 not found: it reads perf's events"
[ "${DURATION%.*}" -ge $((RECORD + 3)) ] 2>/dev/null || die "DURATION=$DURATION: want whole seconds, at least RECORD + 3 ($((RECORD + 3)))"
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack, sched_mode
sched_mode "$SCHED"
before_cleanup() { autogroup_restore; }
start_pgbench_stack poolsim-perf-sched "$POOL"
autogroup_off
bpid=$(cat "$tmp/pgbouncer.pid")
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T 2 -h 127.0.0.1 -p "$bport" -U postgres postgres >/dev/null 2>&1
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), pgbench -S -n -c $CLIENTS -j 2 -T $DURATION at pool $POOL; kernel $(uname -r), $(nproc) cores, kernel.sched_autogroup_enabled $(cat "$ag" 2>/dev/null || echo unknown) (SCHED=$SCHED), load $(cut -d' ' -f1-3 /proc/loadavg); PgBouncer pid $bpid; perf sched record -a for ${RECORD} s from 2 s in"
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T "$DURATION" -h 127.0.0.1 -p "$bport" -U postgres postgres >"$tmp/out" 2>&1 &
pg=$!
sleep 2
perf sched record -a -o "$tmp/perf.data" -- sleep "$RECORD" >"$tmp/perf.log" 2>&1 || die "perf sched record failed: $(tail -n 3 "$tmp/perf.log")"
wait "$pg" || die "pgbench failed: $(tail -n 3 "$tmp/out")"
echo "pgbench: $(awk '/^tps/ {printf "%.0f TPS", $3}' "$tmp/out") (the whole run, with the recording)"
perf sched script -i "$tmp/perf.data" -F comm,pid,cpu,time,event,trace 2>/dev/null >"$tmp/sched.txt"
python3 - "$tmp/sched.txt" "$bpid" <<'PY'
import collections, re, statistics, sys

path, bouncer = sys.argv[1], sys.argv[2]
head = r'\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:'
switch = re.compile(head + r'sched_switch: prev_comm=(\S+) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)')
waking = re.compile(head + r'sched_waking: comm=(\S+) pid=(\d+) ')
migrate = re.compile(head + r'sched_migrate_task: comm=(\S+) pid=(\d+) ')

woke = {}                                  # pid -> comm of its last waker
taken = collections.Counter()              # who took PgBouncer's core
waited = collections.defaultdict(list)     # by the same key: PgBouncer's wait, seconds
ran, runs, sleeps = None, [], 0
out = None                                 # (time, key) of PgBouncer's last involuntary switch
cpu = collections.defaultdict(collections.Counter)  # pid -> core -> seconds on it
names, moves = {}, collections.Counter()
on = {}                                    # core -> (pid, since) of the thread switched in there
for line in open(path):
    m = waking.match(line)
    if m:
        woke[m.group(6)] = m.group(1)
        continue
    m = migrate.match(line)
    if m:
        moves[m.group(6)] += 1
        continue
    m = switch.match(line)
    if not m:
        continue
    t, core = float(m.group(4)), int(m.group(3))
    if core in on and on[core][0] == m.group(6):
        cpu[m.group(6)][core] += t - on[core][1]
    names[m.group(6)], names[m.group(9)] = m.group(5), m.group(8)
    on[core] = (m.group(9), t)
    if m.group(6) == bouncer:
        if ran is not None:
            runs.append(t - ran)
            ran = None
        if m.group(7).startswith('R'):
            key = m.group(8) + (' (PgBouncer had woken it)' if woke.get(m.group(9)) == 'pgbouncer' else '')
            taken[key] += 1
            out = (t, key)
        else:
            sleeps += 1
    if m.group(9) == bouncer:
        ran = t
        if out is not None:
            waited[out[1]].append(t - out[0])
            out = None
if not runs:
    sys.exit('no switch of PgBouncer (pid %s) recorded: were the sched tracepoints readable?' % bouncer)
us = lambda xs: '%.1f us mean, %.1f p50' % (1e6 * statistics.mean(xs), 1e6 * statistics.median(xs))
n = sum(taken.values())
print('PgBouncer switched out while it could run: %d times; went to sleep: %d times; ran %s each time it had a core' % (n, sleeps, us(runs)))
for key, k in taken.most_common(8):
    w = waited[key]
    print('  %5.1f %%  %-45s %6d, PgBouncer waited %s' % (100 * k / n, key, k, us(w) if w else '-'))
print('Time on a core over the recording by thread, and its share by core; moves to another core:')
for pid, by in sorted(cpu.items(), key=lambda kv: -sum(kv[1].values()))[:8]:
    if pid == '0':
        continue  # the idle task
    tot = sum(by.values())
    shares = ', '.join('core %d %.0f %%' % (c, 100 * v / tot) for c, v in sorted(by.items()))
    print('  %-16s %7s %7.1f ms  %s; moved %d times' % (names[pid], pid, 1e3 * tot, shares, moves[pid]))
idle = cpu.get('0', {})  # a core whose idle task never ran was busy throughout
print('  idle (the idle task on a core): ' + (', '.join('core %d %.1f ms' % (c, 1e3 * v) for c, v in sorted(idle.items())) or 'none'))
PY
