#!/usr/bin/env bash
# The calibrated model's TPS error split in two, for reports that predate
# the "Where the TPS error comes from" section: the model against the
# through loop it was calibrated on (the Testbed table's "through the
# target" rate) and that loop against the run (the measured median), with
# the mean and standard deviation over the rows.
#
# Usage: lab/bench/error-split.sh DIR...   (each a poolsim validate --out folder
# of a CPU-bound scenario: report.md and rows.csv)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 DIR..." >&2; exit 2; }
for d in "$@"; do
  python3 - "$d" <<'PY'
import csv, re, statistics, sys
d = sys.argv[1]
cal, meas = {}, {}
for r in csv.DictReader(open(d + "/rows.csv")):
    if r["metric"] == "tps" and r["calibrated"] and r["measured"]:
        cal[r["row"]], meas[r["row"]] = float(r["calibrated"]), float(r["measured"])
loop, hdr = {}, None
for line in open(d + "/report.md"):
    cells = [c.strip() for c in line.split("|")]
    if line.startswith("| row | direct"):
        hdr = cells
        continue
    if hdr and line.startswith("| ") and len(cells) == len(hdr) and cells[1] in cal:
        i = next(j for j, h in enumerate(hdr) if h.startswith("through the target"))
        m = re.match(r"(\d+) → (\d+)", cells[i])
        if m:
            loop[cells[1]] = float(m.group(2))
a = [100 * (cal[k] / loop[k] - 1) for k in loop]
b = [100 * (loop[k] / meas[k] - 1) for k in loop]
if not a:
    sys.exit(f"{d}: no rows with a through loop")
print(f"{d}: {len(a)} rows; model vs loop mean {statistics.mean(a):+.1f} %, sd {statistics.pstdev(a):.1f}; "
      f"loop vs run mean {statistics.mean(b):+.1f} %, sd {statistics.pstdev(b):.1f}")
PY
done
