#!/usr/bin/env bash
# Whether poolsim's proxy works as one thread or several at once: the
# kernel's scheduler events (perf sched) during pgbench -S through
# `poolsim proxy`. The calibrated model runs the proxy's CPU as one
# thread's, one message at a time, as it runs PgBouncer's; the Go runtime
# could run its goroutines on every core.
#
# Usage: lab/bench/proxy-threads.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and `poolsim proxy`
# (transaction mode, pool size $POOL), warms it up (pgbench -T 2, which
# opens the pool's servers), then runs `pgbench -S -n -c $CLIENTS -j 2 -T
# 5` through it and, from 2 s into that run, records the scheduler's
# events on every core for a second (`perf sched record -a`). From each
# core's switches it prints how much of the second none, one and two or
# more of the proxy's threads were on a core, the proxy's CPU in cores,
# and the share of that CPU run beside another of its threads. Recording
# costs the machine something: pgbench's TPS is printed.
# Needs the PostgreSQL server binaries, pgbench, pgbouncer (the throwaway
# stack starts one), perf (Debian: linux-perf), python3 and poolsim (on
# PATH, or POOLSIM); root for perf's tracepoints and for SCHED=thread.
# Everything it starts is stopped and removed on exit.
#
# SCHED=thread turns the kernel's autogroup off for the run and back to
# what it was at the end, as poolsim validate does for a CPU-bound run;
# SCHED=asis (the default) leaves the kernel as it is.
#
# Environment: POOL (1), CLIENTS (50), POOLSIM, SCHED (asis).
set -euo pipefail
POOL=${POOL:-1} CLIENTS=${CLIENTS:-50} SCHED=${SCHED:-asis}
POOLSIM=${POOLSIM:-$(command -v poolsim || true)}
die() { echo "$0: $*" >&2; exit 1; }
[ -n "$POOLSIM" ] && [ -x "$POOLSIM" ] || die "poolsim not found: go build -o /usr/local/bin/poolsim ./cmd/poolsim, or set POOLSIM"
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
command -v python3 >/dev/null || die "python3 not found: it reads perf's events"
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack, start_poolsim_proxy, sched_mode
sched_mode "$SCHED"
before_cleanup() { autogroup_restore; }
start_pgbench_stack poolsim-proxy-threads "$POOL"
autogroup_off
start_poolsim_proxy "$POOL"
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T 2 -h 127.0.0.1 -p "$pport" -U postgres postgres >/dev/null 2>&1
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T 5 -h 127.0.0.1 -p "$pport" -U postgres postgres >"$tmp/out" 2>&1 &
pg=$!
sleep 2
tids=$(ls "/proc/$proxy_pid/task" | tr '\n' ' ')
perf sched record -a -o "$tmp/perf.data" -- sleep 1 >"$tmp/perf.log" 2>&1 || die "perf sched record failed: $(tail -n 3 "$tmp/perf.log")"
wait "$pg" || die "pgbench failed: $(tail -n 3 "$tmp/out")"
echo "pgbench -S -n -c $CLIENTS -j 2 through poolsim proxy at pool $POOL: $(awk '/^tps/ {printf "%.0f TPS", $3}' "$tmp/out") (the whole run, with the recording); kernel $(uname -r), $(nproc) cores, autogroup $(cat "$ag" 2>/dev/null || echo unknown) (SCHED=$SCHED); the proxy's threads: $(echo $tids | wc -w)"
perf sched script -i "$tmp/perf.data" -F comm,pid,cpu,time,event,trace 2>/dev/null >"$tmp/sched.txt"
python3 - "$tmp/sched.txt" "$tids" <<'PY'
import collections, re, sys

path, tids = sys.argv[1], set(sys.argv[2].split())
switch = re.compile(r'\s*\S+\s+\d+\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch: .* ==> next_comm=\S+ next_pid=(\d+)')
events = []
for line in open(path):
    m = switch.match(line)
    if m:
        events.append((float(m.group(2)), int(m.group(1)), m.group(3) in tids))
events.sort()
on, last, at = {}, None, collections.Counter()  # core -> a proxy thread on it; seconds by how many were
for t, core, proxy in events:
    if last is not None:
        at[min(2, sum(on.values()))] += t - last
    on[core], last = proxy, t
total = sum(at.values())
if not total:
    sys.exit('no switches recorded: were the sched tracepoints readable?')
print("the proxy's threads on a core at once: none %.1f %%, one %.1f %%, two or more %.1f %% of %.3f s" % tuple([100 * at[k] / total for k in (0, 1, 2)] + [total]))
cpu = at[1] + 2 * at[2]
print("the proxy's CPU %.3f cores; the share of it run beside another of its threads %.1f %%" % (cpu / total, 100 * 2 * at[2] / cpu if cpu else 0))
PY
