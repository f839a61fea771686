#!/usr/bin/env bash
# Where pgbench's latency tail comes from through PgBouncer on this
# machine: the machine's stalls, seen in pgbench's own transaction log.
#
# Usage: lab/bench/stalls.sh
#
# Starts a throwaway PostgreSQL (pgbench -i -s 1) and a real PgBouncer
# (transaction mode, default_pool_size $POOL), opens the pool with a
# one-second run, then $RUNS times runs `pgbench -S -n -c $CLIENTS -j 2
# -t $TXNS -l` (as poolsim validate's pgbench driver runs a row) and
# prints from its log: TPS, latency p50 / p99 / max; how many of the
# transactions at or above the p99 there are and in how many 10 ms windows
# they ended (a tail from stalls that stop every client at once ends in
# few windows); the gaps between consecutive transaction ends (p50, p99,
# how many over 0.5 ms and their total); and the stalls by poolsim
# validate's rule (speedTimeline in lab/validate/noise.go: a gap of more
# than 0.5 ms and 4 times the p99 gap, looked for only where that p99 is
# at most 1 ms), their count and share of the run; and how the ends per
# 20 ms window correlate with the next window's (a slow stretch outlasts a
# window). Needs the PostgreSQL
# server binaries, pgbench and pgbouncer; as root, the servers run as
# postgres. Everything it starts is stopped and removed on exit.
#
# Environment: POOL (2), CLIENTS (50), TXNS (600), RUNS (3).
set -euo pipefail
POOL=${POOL:-2} CLIENTS=${CLIENTS:-50} TXNS=${TXNS:-600} RUNS=${RUNS:-3}
die() { echo "$0: $*" >&2; exit 1; }
. "$(dirname "$0")/../../bench/throwaway.sh" # start_pgbench_stack
start_pgbench_stack poolsim-stalls "$POOL"
"$pgbench" -S -n -c "$CLIENTS" -j 2 -T 1 -h 127.0.0.1 -p "$bport" -U postgres postgres >/dev/null 2>&1
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'), $("$bouncer" --version | head -n 1), kernel $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "through PgBouncer at pool $POOL, $CLIENTS clients (-j 2), $TXNS transactions per client"
for r in $(seq "$RUNS"); do
  rm -f "$tmp"/txn*
  (cd "$tmp" && "$pgbench" -S -n -c "$CLIENTS" -j 2 -t "$TXNS" -l --log-prefix "$tmp/txn" -h 127.0.0.1 -p "$bport" -U postgres postgres >"$tmp/out" 2>&1) \
    || { cat "$tmp/out" >&2; die "pgbench failed"; }
  # end (µs since the epoch) and latency (µs) of every transaction, by end
  cat "$tmp"/txn* | awk '{printf "%.0f %d\n", $5 * 1000000 + $6, $3}' | sort -n >"$tmp/ends"
  sort -n -k2 "$tmp/ends" | awk '{print $2}' >"$tmp/lats"
  awk 'NR > 1 {printf "%.0f\n", $1 - prev} {prev = $1}' "$tmp/ends" | sort -n >"$tmp/gaps"
  n=$(wc -l <"$tmp/lats") ng=$(wc -l <"$tmp/gaps")
  q() { sed -n "$(( ($2 * $3) / 100 + 1 ))p" "$1"; } # q FILE N PERCENT: nearest rank
  p50=$(q "$tmp/lats" "$n" 50) p99=$(q "$tmp/lats" "$n" 99) max=$(tail -n 1 "$tmp/lats")
  g50=$(q "$tmp/gaps" "$ng" 50) g99=$(q "$tmp/gaps" "$ng" 99)
  awk -v r="$r" -v n="$n" -v p50="$p50" -v p99="$p99" -v max="$max" -v g50="$g50" -v g99="$g99" '
    NR == 1 { first = $1 - $2 }
    { last = $1; if ($2 >= p99) { hi++; w[int(($1 - first) / 10000)] = 1 }
      c[int(($1 - first) / 20000)]++
      if (NR > 1) { g = $1 - prev; if (g > 500) { big++; bigt += g }
        lim = (4 * g99 > 500) ? 4 * g99 : 500
        if (g99 <= 1000 && g > lim) { st++; stt += g - g50 } }
      prev = $1 }
    END {
      T = (last - first) / 1e6; nw = 0; for (k in w) nw++
      # lag-1 autocorrelation of the ends per whole 20 ms window
      k = int((last - first) / 20000); m = 0; for (i = 0; i < k; i++) m += c[i]; m /= k
      v = 0; cv = 0; for (i = 0; i < k; i++) { v += (c[i] - m) ^ 2; if (i + 1 < k) cv += (c[i] - m) * (c[i + 1] - m) }
      ac = (v > 0) ? cv / v : 0
      printf "run %d: %.0f tps; latency p50 / p99 / max %.2f / %.2f / %.2f ms; %d transactions >= p99 ended in %d of %d 10 ms windows\n", r, n / T, p50 / 1e3, p99 / 1e3, max / 1e3, hi, nw, int(T * 100)
      printf "  gaps between ends: p50 %d us, p99 %d us; %d over 0.5 ms, %.1f ms in all; stalls by the rule: %d, %.1f ms, %.2f %% of %.2f s\n", g50, g99, big, bigt / 1e3, st, stt / 1e3, 100 * stt / 1e3 / (T * 1e3), T
      printf "  ends per 20 ms window: mean %.0f, correlation with the next window %.2f (%d windows)\n", m, ac, k
    }' "$tmp/ends"
done
