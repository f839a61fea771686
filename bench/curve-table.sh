#!/usr/bin/env bash
# The table of a CPU-bound curve in docs/validate.md: for each point (clients, pool
# size) of two `poolsim validate` runs of the same scenario, one through
# the proxy and one through PgBouncer (their rows.csv), the calibrated
# model's TPS against the measured median and the calibrated model's TPS,
# p50 and p99 errors as the verdict judges them (with several runs the
# mean of each run's own error, err_calibrated_runs_mean_pct; else the
# medians'); then, per target, at how many points each is inside its
# tolerance (TPS and p50 10 %, p99 25 %), the same counted by the medians'
# error (shown in the reports, not judged), how many rows pass, and each
# line's peak pool size, calibrated and measured, as the report defines it
# (the smallest pool whose TPS is within 5 % of the line's highest; by
# the medians, without the report's look at the runs' intervals).
#
# Usage: bench/curve-table.sh PROXY/rows.csv PGBOUNCER/rows.csv
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PROXY/rows.csv PGBOUNCER/rows.csv" >&2; exit 2; }
for f in "$@"; do [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 1; }; done
exec python3 - "$@" <<'PY'
import csv, sys

def load(path):
    pts, verdict = {}, {}
    for r in csv.DictReader(open(path)):
        pool = r["row"].rsplit("=", 1)[-1]
        key = (int(r["clients"]), int(pool))
        pts.setdefault(key, {})[r["metric"]] = r
        verdict[key] = verdict.get(key, True) and r["pass"] == "true"
    if not pts:
        sys.exit(f"curve-table: {path} has no rows")
    return pts, verdict

def err(r):
    """The judged error: the runs' mean of each run's own, else the medians'."""
    return float(r["err_calibrated_runs_mean_pct"] or r["err_calibrated_pct"])

def med_err(r):
    return float(r["err_calibrated_pct"])

def pct(e):
    return ("%+.1f %%" % e).replace("-", "\u2212")

def cell(p):
    t = p["tps"]
    return "%.0f / %.0f (%s)" % (float(t["calibrated"]), float(t["measured"]), pct(err(t))), \
        pct(err(p["p50_ms"])), pct(err(p["p99_ms"]))

(px, pxv), (pb, pbv) = load(sys.argv[1]), load(sys.argv[2])
if sorted(px) != sorted(pb):
    sys.exit("curve-table: the two files have different points")
print("| clients | pool | TPS calibrated / proxy, medians (error) | p50 error | p99 error | TPS calibrated / PgBouncer, medians (error) | p50 error | p99 error |")
print("|---|---|---|---|---|---|---|---|")
for k in sorted(px):
    print("| %d | %d | %s | %s | %s | %s | %s | %s |" % (k + cell(px[k]) + cell(pb[k])))
for name, pts, v in (("proxy", px, pxv), ("PgBouncer", pb, pbv)):
    n = len(pts)
    inside = lambda e: [sum(abs(e(p[m])) <= tol for p in pts.values()) for m, tol in (("tps", 10), ("p50_ms", 10), ("p99_ms", 25))]
    (tps, p50, p99), (mt, m50, m99) = inside(err), inside(med_err)
    peaks = []
    for c in sorted({k[0] for k in pts}):
        line = sorted(k[1] for k in pts if k[0] == c)
        def peak(col):
            tp = {s: float(pts[(c, s)]["tps"][col]) for s in line}
            top = max(tp.values())
            return next(s for s in line if tp[s] >= 0.95 * top)
        m, r = peak("calibrated"), peak("measured")
        peaks.append(f"{c} clients {m} / {r}" + ("" if m == r else " (not the same)"))
    print(f"{name}: TPS within 10 % at {tps} of {n} points, p50 within 10 % at {p50}, p99 within 25 % at {p99} (by the medians' error: {mt}, {m50}, {m99}); {sum(v.values())} of {n} rows pass; peak pool size calibrated / measured: {', '.join(peaks)}")
PY
