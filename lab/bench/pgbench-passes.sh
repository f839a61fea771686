#!/usr/bin/env bash
# How pgbench's threads take their clients, through PgBouncer and through
# poolsim's proxy, seen in pgbench's own transaction log: what
# validate.driver_scan models.
#
# Usage: lab/bench/pgbench-passes.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1), a real PgBouncer and
# `poolsim proxy` (both transaction mode, default_pool_size $POOL), opens
# each pool with a one-second run, then $RUNS times, alternating, runs
# `pgbench -S -n -c $CLIENTS -j 2 -t $TXNS -l` (as poolsim validate's
# pgbench driver runs a row) through each, and prints from its log:
#   - TPS, the latency pgbench logged (mean, p50) and its share of the
#     clients' time (the mean latency over the clients' mean cycle,
#     clients / TPS): what pgbench's clock leaves out of its latency;
#   - a thread's passes: pgbench polls, then reads the results its poll
#     found in client order, logging each transaction as it reads its
#     result, so a pass is a run of log lines of one thread with rising
#     client numbers - results per pass, and the gap between a
#     transaction's end and its client's next start (from the next line's
#     end less its latency: mean, p50, p90);
#   - the clients' finish, first and last (ms after the first start), and
#     the first client's transactions per second over the last's: each
#     thread's first clients go first in every pass;
#   - the p50 of the transactions that ended while every client still ran
#     (before the first client's last: the steady window of poolsim's
#     reports) and their share of all, against the whole run's p50: how
#     far the ragged end, fewer clients each with a shorter wait, pulls
#     the median down; and each pgbench thread's mean latency.
# Needs the PostgreSQL server binaries, pgbench, pgbouncer and poolsim (on
# PATH, or POOLSIM); as root, the servers run as postgres. Everything it
# starts is stopped and removed on exit.
#
# SCHED=thread turns the kernel's autogroup off for the script's runs and
# back to what it was at the end (root), as poolsim validate does for a
# CPU-bound run; SCHED=asis (the default) leaves the kernel as it is. With
# autogroup on (most distributions' default) a busy core is shared between
# sessions first: here every PostgreSQL backend and PgBouncer (-d) are
# sessions of their own, pgbench and the proxy share this script's.
#
# Environment: POOL (16), CLIENTS (50), TXNS (600), RUNS (3), POOLSIM,
# SCHED (asis).
set -euo pipefail
POOL=${POOL:-16} CLIENTS=${CLIENTS:-50} TXNS=${TXNS:-600} RUNS=${RUNS:-3} SCHED=${SCHED:-asis}
POOLSIM=${POOLSIM:-$(command -v poolsim || true)}
die() { echo "$0: $*" >&2; exit 1; }
[ -n "$POOLSIM" ] && [ -x "$POOLSIM" ] || die "poolsim not found: go build -o /usr/local/bin/poolsim ./cmd/poolsim, or set POOLSIM"
command -v python3 >/dev/null || die "python3 not found: it reads pgbench's log"
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack, start_poolsim_proxy
sched_mode "$SCHED"
before_cleanup() { autogroup_restore; }
start_pgbench_stack poolsim-passes "$POOL"
autogroup_off
start_poolsim_proxy "$POOL"
for port in "$bport" "$pport"; do
  "$pgbench" -S -n -c "$CLIENTS" -j 2 -T 1 -h 127.0.0.1 -p "$port" -U postgres postgres >/dev/null 2>&1
done
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), poolsim $POOLSIM, kernel $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pgbench -S -n -c $CLIENTS -j 2 -t $TXNS -l, transaction pooling at pool $POOL; kernel.sched_autogroup_enabled $(cat "$ag" 2>/dev/null || echo unknown) (SCHED=$SCHED)"
for r in $(seq "$RUNS"); do
  for target in pgbouncer:$bport proxy:$pport; do
    name=${target%%:*} port=${target##*:}
    rm -f "$tmp"/txn*
    (cd "$tmp" && "$pgbench" -S -n -c "$CLIENTS" -j 2 -t "$TXNS" -l --log-prefix "$tmp/txn" -h 127.0.0.1 -p "$port" -U postgres postgres >"$tmp/out" 2>&1) \
      || { cat "$tmp/out" >&2; die "pgbench failed through $name"; }
    python3 - "$name" "$r" "$CLIENTS" "$tmp"/txn* <<'PY'
import statistics as st, sys
name, run, clients, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
lat, per_pass, gaps = [], [], []
start, fin, count = {}, {}, {}
ends, thr = [], []  # every transaction's (end, latency); each thread's mean latency
for f in files:  # one log per thread, in the order it read the results
    prev, n, last_end, tl = None, 0, {}, []
    for line in open(f):
        p = line.split()
        c, l = int(p[0]), int(p[2])
        end = int(p[4]) * 1_000_000 + int(p[5])
        lat.append(l)
        tl.append(l)
        ends.append((end, l))
        if c in last_end:
            gaps.append(end - l - last_end[c])
        last_end[c] = end
        start[c] = min(start.get(c, end - l), end - l)
        fin[c] = max(fin.get(c, 0), end)
        count[c] = count.get(c, 0) + 1
        if prev is not None and c <= prev:
            per_pass.append(n)
            n = 0
        n, prev = n + 1, c
    per_pass.append(n)
    thr.append(st.mean(tl) / 1e3)
t0 = min(start.values())
wall = (max(fin.values()) - t0) / 1e6
tps = len(lat) / wall
cycle = clients / tps * 1e3  # ms
lat.sort()
gaps.sort()
q = lambda v, x: v[min(len(v) - 1, int(x * len(v)))]
order = sorted(fin, key=fin.get)
rate = lambda c: count[c] / ((fin[c] - start[c]) / 1e6)
first, last = min(fin), max(fin)  # the first thread's first client, the last thread's last
fe = min(fin.values())  # the first client's last transaction's end
win = sorted(l for end, l in ends if end <= fe)
print(f"{name:9} run {run}: {tps:7.0f} TPS; latency mean {st.mean(lat)/1e3:.2f} ms, p50 {q(lat, .5)/1e3:.2f} ms, "
      f"{st.mean(lat)/1e3/cycle*100:.0f} % of the cycle ({cycle:.2f} ms); "
      f"{st.mean(per_pass):.1f} results per pass; end to next start {st.mean(gaps):.0f} us mean, "
      f"p50 {q(gaps, .5)}, p90 {q(gaps, .9)}; finish {(fin[order[0]]-t0)/1e3:.0f}..{(fin[order[-1]]-t0)/1e3:.0f} ms "
      f"(first clients to finish {order[:3]}, last {order[-3:]}); client {first}'s rate over client {last}'s {rate(first)/rate(last):.2f}; "
      f"p50 while every client ran {q(win, .5)/1e3:.2f} ms ({len(win)/len(lat)*100:.0f} % of the transactions); "
      f"mean latency by thread {', '.join(f'{x:.2f}' for x in thr)} ms")
PY
  done
done
