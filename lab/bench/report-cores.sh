#!/usr/bin/env bash
# How a CPU-bound curve's throughput misses go with its cores: for each row
# of a `poolsim validate` report (report.md of a testbed scenario such as
# pgbench-select-live), the calibrated model's TPS against the measured,
# and the machine's busy CPUs during the run against the calibrated
# model's busy cores (both from the row's Diagnostics line); then the
# correlation of the TPS error with the model's busy points less the
# machine's over the rows at pools of 2 or more. At a pool of one the
# model counts a core busy while a thread waits for it to wake from idle
# (validate.wake_curve), which the kernel counts idle, so those rows are
# listed but left out of it.
#
# Usage: lab/bench/report-cores.sh REPORT.md...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 REPORT.md..." >&2; exit 2; }
for f in "$@"; do
  [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 1; }
  n=$(grep -c '^Diagnostics' "$f" || true)
  grep -q "the calibrated model's cores" "$f" || { echo "$0: $f has no calibrated model's cores in its Diagnostics (a report of poolsim before 59236a2, or not a testbed scenario)" >&2; exit 1; }
  echo "$f"
  paste -d'|' \
    <(awk -F'|' '/^\| (workload|pooler)\./ && NF > 8 && $5 ~ / \/ .* \/ / {print $2 "|" $5}' "$f" | head -n "$n") \
    <(grep '^Diagnostics' "$f" | sed -E "s/.*CPUs ([0-9]+)% busy.*calibrated model's cores ([0-9]+)%.*/\1|\2/")
done | awk -F'|' '
  NF == 1 { print; next }
  { split($2, t, " / "); e = 100 * (t[2] / t[3] - 1); d = $4 - $3
    printf "  %-48s TPS calibrated %6.0f measured %6.0f %+6.1f %% | CPUs busy: machine %3d %%, model %3d %% (%+d)\n", $1, t[2], t[3], e, $3, $4, d
    if ($1 ~ /pool_size=1( |$)/) next
    n++; se += e; sd += d; see += e * e; sdd += d * d; sed += e * d }
  END { if (n > 2) printf "correlation of the TPS error with the model'"'"'s busy points less the machine'"'"'s, %d rows at pools of 2 or more: %.2f\n", n, (n * sed - se * sd) / sqrt((n * see - se * se) * (n * sdd - sd * sd)) }'
