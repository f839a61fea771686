#!/usr/bin/env bash
# A backend's tail: how long PostgreSQL's backend keeps its core after it
# has sent a statement's result, through PgBouncer and through poolsim's
# proxy at pool 1 - the validate.server_tail poolsim validate sets.
#
# Usage: lab/bench/server-tail.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1), a real PgBouncer and
# `poolsim proxy` (both transaction mode, pool size 1), and for each
# target, $ROUNDS times: runs `pgbench -S -n -c $CLIENTS -j 2 -T
# $DURATION` through it and, from 2 s into the run, records the kernel's
# scheduler events on every core for $RECORD seconds (`perf record -e
# sched:sched_switch -e sched:sched_waking -a`). From the recording, for
# the pool's one backend:
#   - tail: from the backend's last wake-up of the pooler's thread (its
#     result written to the socket) to its switch out, asleep - it reads
#     its socket again, finds it empty and waits - in the stretches on a
#     core with one statement (one wake-up of the pooler);
#   - run: that stretch on its core, switch in to switch out: the
#     statement's CPU as the scheduler saw it;
#   - share: tail over run, the median of the stretches';
#   - back to back: the share of the stretches with more than one
#     statement (the next query came before the backend slept).
# The recording costs the machine something: the TPS of each run is
# printed with it. Needs the PostgreSQL server binaries, pgbench,
# pgbouncer, perf (Debian: linux-perf) with the sched tracepoints readable
# (root), python3 and poolsim (in PATH, or POOLSIM); as root, the servers
# run as postgres. Everything it starts is stopped and removed on exit.
#
# Environment: CLIENTS (50), DURATION (seconds per run, 4), RECORD
# (seconds recorded, 0.3), ROUNDS (3), POOLSIM.
set -euo pipefail
CLIENTS=${CLIENTS:-50} DURATION=${DURATION:-4} RECORD=${RECORD:-0.3} ROUNDS=${ROUNDS:-3}
POOLSIM=${POOLSIM:-$(command -v poolsim || true)}
die() { echo "$0: $*" >&2; exit 1; }
[ -n "$POOLSIM" ] && [ -x "$POOLSIM" ] || die "poolsim not found: go build -o /usr/local/bin/poolsim ./cmd/poolsim, or set POOLSIM"
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
command -v python3 >/dev/null || die "python3 not found: it reads perf's events"
[ "${DURATION%.*}" -ge 3 ] 2>/dev/null || die "DURATION=$DURATION: want whole seconds, at least 3"

. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack, start_poolsim_proxy
start_pgbench_stack poolsim-server-tail 1
start_poolsim_proxy 1
echo "# lab/bench/server-tail.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'): PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), poolsim $POOLSIM; pgbench -S -n -c $CLIENTS -j 2 -T $DURATION at pool 1, perf record for $RECORD s from 2 s in; kernel $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# backend: the pid of the one server connection the target holds (after
# a warm-up run opened it): the client backend not among $seen, the
# earlier targets' (PgBouncer keeps its server open).
seen=0
backend() {
  "$psql" -XAt -h 127.0.0.1 -p "$pgport" -U postgres postgres -c \
    "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND pid NOT IN ($seen)"
}

for target in pgbouncer proxy; do
  case $target in
    pgbouncer) port=$bport pooler=$(cat "$tmp/pgbouncer.pid") ;;
    proxy) port=$pport pooler=$proxy_pid ;;
  esac
  "$pgbench" -S -n -c "$CLIENTS" -j 2 -T 1 -h 127.0.0.1 -p "$port" -U postgres postgres >/dev/null 2>&1 || die "$target: warm-up pgbench failed"
  spid=$(backend)
  [ "$(echo "$spid" | wc -l)" = 1 ] && [ -n "$spid" ] || die "$target: want the pool's one server connection, found: $spid"
  seen="$seen,$spid"
  for r in $(seq 1 "$ROUNDS"); do
    "$pgbench" -S -n -c "$CLIENTS" -j 2 -T "$DURATION" -h 127.0.0.1 -p "$port" -U postgres postgres >"$tmp/out" 2>&1 &
    pg=$!
    sleep 2
    perf record -q -e sched:sched_switch -e sched:sched_waking -a -o "$tmp/perf.data" -- sleep "$RECORD" >"$tmp/perf.log" 2>&1 \
      || die "perf record failed: $(tail -n 3 "$tmp/perf.log")"
    wait "$pg" || die "$target: pgbench failed: $(tail -n 3 "$tmp/out")"
    perf script -i "$tmp/perf.data" -F tid,cpu,time,event,trace 2>/dev/null >"$tmp/sched.txt"
    # The pooler's threads: PgBouncer's one, the proxy's Go threads.
    threads=$(ls "/proc/$pooler/task" | tr '\n' ,)
    printf '%-9s run %d: %s TPS; ' "$target" "$r" "$(awk '/^tps/ {printf "%.0f", $3}' "$tmp/out")"
    python3 - "$tmp/sched.txt" "$spid" "$threads" <<'PY'
import re, statistics, sys

path, backend, pooler = sys.argv[1], sys.argv[2], set(sys.argv[3].strip(',').split(','))
head = r'\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:'
switch = re.compile(head + r'sched_switch: prev_comm=.* prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)')
waking = re.compile(head + r'sched_waking: comm=.* pid=(\d+) ')
since, wakes = None, []     # the backend's switch in, its wake-ups of the pooler since
tails, runs, shares, many, one = [], [], [], 0, 0
for line in open(path):
    m = waking.match(line)
    if m:
        if m.group(1) == backend and since is not None and m.group(4) in pooler:
            wakes.append(float(m.group(3)))
        continue
    m = switch.match(line)
    if not m:
        continue
    t = float(m.group(3))
    if m.group(6) == backend:
        since, wakes = t, []
    elif m.group(4) == backend and since is not None:
        if m.group(5).startswith('S') and wakes:  # asleep after its result(s)
            if len(wakes) == 1:
                one += 1
                tails.append(t - wakes[0])
                runs.append(t - since)
                shares.append((t - wakes[0]) / (t - since))
            else:
                many += 1
        since = None
if not tails:
    sys.exit('no stretch of the backend (pid %s) on a core with one wake-up of the pooler recorded' % backend)
us = lambda xs: 1e6 * statistics.median(xs)
print('backend %s: tail %.1f us median (p25 %.1f, p75 %.1f), run %.1f us median, share %.0f %% median, '
      'back to back %.1f %% of %d stretches' % (backend, us(tails), 1e6 * statistics.quantiles(tails, n=4)[0],
      1e6 * statistics.quantiles(tails, n=4)[2], us(runs), 100 * statistics.median(shares), 100 * many / (one + many), one + many))
PY
  done
done
