#!/usr/bin/env bash
# Benchmark poolsim's pooling proxy against a real PgBouncer, side by side.
#
# Usage: bench/proxy-vs-pgbouncer.sh [-M simple|extended]
#
# Starts a throwaway PostgreSQL (initdb into a temporary folder, a free
# loopback port, max_connections 100, fsync off), loads `pgbench -i -s 10`,
# starts a real PgBouncer (transaction mode, default_pool_size 20,
# max_client_conn 200) and `poolsim proxy` with the same settings, then runs
# `pgbench -S -c 50 -j 2 -T $DURATION -n` through each, interleaved
# (pgbouncer, proxy, proxy, pgbouncer, pgbouncer, ...), and prints every
# round, the median TPS and average latency per target, the ratio of the
# medians proxy/pgbouncer, and each round's ratio with their geometric mean.
# Everything it starts is stopped and removed on exit.
#
# With PERF=1 each run also counts the pooler's own CPU time per
# transaction (all its threads) and prints, after the medians, each
# target's median CPU per transaction and the proxy/pgbouncer ratio, beside
# TPS, with the ratios of the rounds' pairs. With perf (and root, or
# perf_event_paranoid <= -1) the counts come from perf stat, with context
# switches and system calls per transaction (every one, and reads, writes,
# epoll and io_uring_enter apart); without it, from the utime and stime of
# /proc/PID/stat (10 ms ticks), and the output says which (PERF=proc uses
# /proc even where perf works).
#
# Environment: DURATION (seconds per run, default 20), ROUNDS (default 3),
# PROXY_ARGS (extra flags for poolsim proxy, e.g. "--threads 1"),
# CLIENTS (50), JOBS (2), SCALE (10), TARGETS ("pgbouncer proxy"; set
# TARGETS=pgbouncer to measure PgBouncer alone).
# Needs: Go, the PostgreSQL server binaries (initdb, pg_ctl, pgbench) and
# pgbouncer (Debian: apt-get install postgresql pgbouncer). As root, the
# servers run as the postgres account.
set -euo pipefail

MODE=simple
while getopts "M:h" opt; do
  case $opt in
    M) MODE=$OPTARG ;;
    h) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "usage: $0 [-M simple|extended]" >&2; exit 2 ;;
  esac
done
case $MODE in simple|extended) ;; *) echo "$0: -M $MODE: expected simple or extended" >&2; exit 2 ;; esac
DURATION=${DURATION:-20} ROUNDS=${ROUNDS:-3} PERF=${PERF:-} CLIENTS=${CLIENTS:-50} JOBS=${JOBS:-2} SCALE=${SCALE:-10}
TARGETS=${TARGETS:-pgbouncer proxy}
for t in $TARGETS; do
  case $t in pgbouncer|proxy) ;; *) echo "$0: TARGETS: unknown target $t (pgbouncer, proxy)" >&2; exit 2 ;; esac
done
want() { [[ " $TARGETS " == *" $1 "* ]]; }

die() { echo "$0: $*" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)

# --- find the binaries -------------------------------------------------------
bindir=
if p=$(command -v postgres 2>/dev/null); then
  d=$(dirname "$(readlink -f "$p")")
  [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && bindir=$d
fi
if [ -z "$bindir" ]; then
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$d" ] && [ -x "$d/initdb" ] && bindir=$d
fi
[ -n "$bindir" ] || die "no PostgreSQL server binaries (postgres, initdb, pg_ctl) in \$PATH or /usr/lib/postgresql/*/bin; install them: apt-get install postgresql"
pgbench=$bindir/pgbench
[ -x "$pgbench" ] || pgbench=$(command -v pgbench) || die "pgbench not found"
if want pgbouncer; then
  bouncer=$(command -v pgbouncer 2>/dev/null || true)
  [ -n "$bouncer" ] || { [ -x /usr/sbin/pgbouncer ] && bouncer=/usr/sbin/pgbouncer; } || die "pgbouncer not found; install it: apt-get install pgbouncer"
fi

. "$root/bench/throwaway.sh" # free_port, as_pg, make_tmp, wait_port, start_postgres, start_pgbouncer

# --- temporary folder and cleanup ---------------------------------------------
make_tmp poolsim-bench
proxy_pid=
before_cleanup() { [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null; }

# --- poolsim ------------------------------------------------------------------
if want proxy; then
  echo "building poolsim ..."
  (cd "$root" && go build -o "$tmp/poolsim" ./cmd/poolsim) || die "go build ./cmd/poolsim failed"
  if ! "$tmp/poolsim" proxy --help >/dev/null 2>&1; then
    die "'poolsim proxy' is not available in this build (the subcommand does not exist yet); run with TARGETS=pgbouncer to measure PgBouncer alone"
  fi
fi

# --- PostgreSQL ---------------------------------------------------------------
start_postgres -c max_connections=100 -c synchronous_commit=off -c full_page_writes=off
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$pgport"
echo "pgbench -i -s $SCALE ..."
"$pgbench" -i -q -s "$SCALE" -h 127.0.0.1 -p "$pgport" -U postgres postgres >"$tmp/pgbench-init.log" 2>&1 \
  || { tail -n 20 "$tmp/pgbench-init.log" >&2; die "pgbench -i failed"; }

# --- PgBouncer ----------------------------------------------------------------
if want pgbouncer; then
  start_pgbouncer 20 200
  echo "$("$bouncer" --version | head -n 1) on 127.0.0.1:$bport"
fi

# --- poolsim proxy ------------------------------------------------------------
if want proxy; then
  pport=$(free_port)
  # PgBouncer runs as a daemon (-d), in a session of its own; the proxy gets
  # the same, or with the kernel's autogroup scheduling (on by default) it
  # would share one CPU-time group with pgbench, be preempted more and lose
  # about 5 % of its TPS for a reason that has nothing to do with it.
  detach=
  command -v setsid >/dev/null 2>&1 && detach=setsid
  $detach "$tmp/poolsim" proxy --listen "127.0.0.1:$pport" --upstream "postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable" \
    --mode transaction --pool-size 20 --max-client-conn 200 ${PROXY_ARGS:-} >"$tmp/proxy.log" 2>&1 &
  proxy_pid=$!
  wait_port "$pport" "poolsim proxy" "$tmp/proxy.log"
  echo "poolsim proxy on 127.0.0.1:$pport"
fi

# --- rounds -------------------------------------------------------------------
port_of() { case $1 in pgbouncer) echo "$bport" ;; proxy) echo "$pport" ;; esac; }
pid_of() { case $1 in pgbouncer) cat "$tmp/pgbouncer.pid" ;; proxy) echo "$proxy_pid" ;; esac; }
perf_events=task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_write,syscalls:sys_enter_sendto,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_io_uring_enter
cpu_source=
if [ -n "$PERF" ]; then
  if [ "$PERF" = proc ]; then
    cpu_source="/proc/PID/stat utime+stime (PERF=proc)"
  elif ! command -v perf >/dev/null 2>&1; then
    cpu_source="/proc/PID/stat utime+stime (perf not found; Debian: apt-get install linux-perf)"
  elif ! perf stat -e "$perf_events" -- true >/dev/null 2>&1; then
    cpu_source="/proc/PID/stat utime+stime (perf stat cannot count $perf_events: run as root, or lower kernel.perf_event_paranoid)"
  else
    cpu_source=perf
  fi
  echo "pooler CPU per transaction from: $cpu_source"
fi
perf_line() { # perf_line FILE TPS: the pooler's counts per transaction; the last field is cpu us
  awk -F, -v tps="$2" -v d="$DURATION" '
    {v = $1 + 0; e = $3}
    e == "task-clock" {cpu = v}
    e == "context-switches" {cs = v}
    e == "raw_syscalls:sys_enter" {all = v}
    e ~ /sys_enter_(read|recvfrom)$/ {rd += v}
    e ~ /sys_enter_(write|sendto)$/ {wr += v}
    e ~ /sys_enter_epoll_p?wait$/ {ew += v}
    e ~ /sys_enter_epoll_ctl$/ {ec += v}
    e ~ /sys_enter_io_uring_enter$/ {ur += v}
    END {n = tps * d; printf "       pooler per txn: cpu %.1f us, context switches %.2f, system calls %.2f (reads %.2f, writes %.2f, epoll_wait %.2f, epoll_ctl %.2f, io_uring_enter %.2f)\t%.3f\n",
      cpu * 1000 / n, cs / n, all / n, rd / n, wr / n, ew / n, ec / n, ur / n, cpu * 1000 / n}' "$1"
}
proc_ticks() { # proc_ticks PID: utime+stime of every thread, in clock ticks
  awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
results=$tmp/results.tsv
: >"$results"
echo "pgbench -S -c $CLIENTS -j $JOBS -T $DURATION -n -M $MODE, $ROUNDS round(s) per target"
printf '%-6s %-10s %12s %14s\n' round target tps latency_ms
for r in $(seq 1 "$ROUNDS"); do
  order=$TARGETS
  # ABBA: every other round starts with the other target, so a drift in the
  # machine's speed does not always favour the same one.
  [ $((r % 2)) = 0 ] && order=$(echo "$TARGETS" | awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "")}')
  for t in $order; do
    out=$tmp/run-$r-$t.log
    if [ "$cpu_source" = perf ]; then
      perf stat -x, -e "$perf_events" -p "$(pid_of "$t")" -o "$tmp/perf-$r-$t.csv" -- sleep "$DURATION" &
      perf_pid=$!
    fi
    [ -n "$PERF" ] && ticks0=$(proc_ticks "$(pid_of "$t")")
    if ! "$pgbench" -S -c "$CLIENTS" -j "$JOBS" -T "$DURATION" -n -M "$MODE" \
      -h 127.0.0.1 -p "$(port_of "$t")" -U postgres postgres >"$out" 2>&1; then
      tail -n 20 "$out" >&2
      die "pgbench through $t failed (round $r)"
    fi
    [ "$cpu_source" = perf ] && wait "$perf_pid"
    [ -n "$PERF" ] && ticks1=$(proc_ticks "$(pid_of "$t")")
    tps=$(awk '/^tps = / {print $3; exit}' "$out")
    lat=$(awk '/^latency average = / {print $4; exit}' "$out")
    [ -n "$tps" ] && [ -n "$lat" ] || { cat "$out" >&2; die "could not parse pgbench output ($t, round $r)"; }
    printf '%-6s %-10s %12.1f %14.3f\n' "$r" "$t" "$tps" "$lat"
    cpu=
    if [ -n "$PERF" ]; then
      # pgbench's -T window and the two reads of /proc are a few ms apart:
      # the ticks cover the run, including its connection set-up.
      proc_cpu=$(awk -v a="$ticks0" -v b="$ticks1" -v hz="$hz" -v tps="$tps" -v d="$DURATION" 'BEGIN {printf "%.3f", (b - a) / hz * 1e6 / (tps * d)}')
    fi
    if [ "$cpu_source" = perf ]; then
      line=$(perf_line "$tmp/perf-$r-$t.csv" "$tps")
      # /proc counts every thread the process ever had: a check that perf
      # missed none (threads started after it attached, say).
      printf '%s; cpu from /proc/PID/stat %.1f us\n' "${line%$'\t'*}" "$proc_cpu"
      cpu=${line##*$'\t'}
    elif [ -n "$PERF" ]; then
      cpu=$proc_cpu
      printf '       pooler per txn: cpu %.1f us (/proc/PID/stat)\n' "$cpu"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$t" "$tps" "$lat" "$r" "$cpu" >>"$results"
  done
done

median() { # median TARGET COLUMN
  awk -F'\t' -v t="$1" -v c="$2" '$1 == t {print $c}' "$results" | sort -g |
    awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
echo
if [ -n "$PERF" ]; then
  printf '%-10s %12s %14s %18s\n' target median_tps median_lat_ms median_cpu_us_txn
  for t in $TARGETS; do
    printf '%-10s %12.1f %14.3f %18.2f\n' "$t" "$(median "$t" 2)" "$(median "$t" 3)" "$(median "$t" 5)"
  done
else
  printf '%-10s %12s %14s\n' target median_tps median_lat_ms
  for t in $TARGETS; do
    printf '%-10s %12.1f %14.3f\n' "$t" "$(median "$t" 2)" "$(median "$t" 3)"
  done
fi
paired() { # paired COLUMN WHAT: the rounds' proxy/pgbouncer ratios and their geometric mean
  awk -F'\t' -v c="$1" -v what="$2" '$1 == "proxy" {p[$4] = $c} $1 == "pgbouncer" {g[$4] = $c}
    END {s = 0; n = 0; line = ""
      for (r in p) if ((r in g) && p[r] > 0 && g[r] > 0) {s += log(p[r] / g[r]); n++}
      for (r = 1; r <= n; r++) line = line sprintf(" %.3f", p[r] / g[r])
      printf "paired %s ratios (proxy/pgbouncer, by round):%s; geometric mean %.3f\n", what, line, exp(s / n)}' "$results"
}
if want pgbouncer && want proxy; then
  awk -v a="$(median proxy 2)" -v b="$(median pgbouncer 2)" -v c="$(median proxy 3)" -v d="$(median pgbouncer 3)" \
    'BEGIN {printf "proxy/pgbouncer: tps %.3f, latency %.3f", a / b, c / d}'
  if [ -n "$PERF" ]; then
    awk -v a="$(median proxy 5)" -v b="$(median pgbouncer 5)" 'BEGIN {printf ", cpu per transaction %.3f", a / b}'
  fi
  echo
  # The same round's two runs are minutes apart at most: their ratio is
  # less moved by the machine's drift than the medians are.
  paired 2 tps
  [ -n "$PERF" ] && paired 5 "cpu per transaction"
fi
true
